package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
)

// The streaming run of overlap infer (bench.InferStream says what it
// measures); its table is bench.InferStreamResult.WriteTable.

// executeInferStream runs overlap infer --in on the machine that the
// flags choose (bench.InferStream).
func executeInferStream(ctx context.Context, o *inferOptions, m *model.Model, stdout, stderr io.Writer) (*bench.InferStreamResult, error) {
	if o.in != "-" {
		st, err := os.Stat(o.in)
		if err != nil {
			return nil, usageError{fmt.Errorf("--in: %v", err)}
		}
		if st.Mode().IsRegular() {
			if _, err = m.CheckInputBytes(st.Size()); err != nil {
				return nil, usageError{fmt.Errorf("--in %s: %s", o.in, strings.TrimPrefix(err.Error(), "model: "))}
			}
		}
	}
	chunk := 0
	if len(o.chunks) == 1 {
		chunk = o.chunks[0]
	}
	if _, err := m.Config(chunk); err != nil {
		return nil, usageError{fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))}
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	opts := bench.InferStreamOptions{Input: o.in, Output: o.out, Stdin: stdin, Stdout: stdout, ChunkRows: chunk, Precision: o.precision,
		Bound: o.bound, Verify: o.verify, Ordinals: e.ordinals}
	if prog.on {
		opts.Progress = prog.line
	}
	res, err := bench.InferStream(ctx, e.backends, k, m, opts)
	var po *bench.PartialOutput
	switch err = benchError(err); {
	case err == nil:
		res.Verified = flagWords(res.Verified)
		return res, nil
	case errors.Is(err, bench.ErrNoRows):
		return nil, usageError{fmt.Errorf("--in %s: %v", o.in, err)}
	case errors.As(err, &po):
		return nil, fmt.Errorf("%w (%s holds the first %d bytes of the correct output, %d rows)", po.Err, o.out, po.Bytes, po.Bytes/int64(4*m.Out()))
	}
	return nil, streamError(err)
}

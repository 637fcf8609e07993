package main

import (
	"context"
	"io"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
)

// The in-memory run of overlap infer (bench.InferInMemory says what it
// measures); its table is bench.InferResult.WriteTable.

// executeInfer runs overlap infer --rows in memory on the machine that
// the flags choose (bench.InferInMemory).
func executeInfer(ctx context.Context, o *inferOptions, m *model.Model, stderr io.Writer) (*bench.InferResult, error) {
	if err := checkInferRows(o, m); err != nil {
		return nil, err
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	res, err := bench.InferInMemory(ctx, e.backends, k, m, inferRunOptions(o, prog))
	if err != nil {
		return nil, benchError(err)
	}
	labelInferResult(o, e, res)
	return res, nil
}

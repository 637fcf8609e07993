package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
)

// overlap infer --reference: bench.InferReference runs the PyTorch twin,
// then ours over its rows, and compares every value; with --sim the twin
// runs on the CPU (a smoke test) and ours on the simulator. One table
// shows both (bench.InferReferenceResult.WriteTable).

// executeInferReference runs overlap infer --reference on the machine
// that the flags choose (bench.InferReference). A result with values
// outside the tolerance comes with an error, so that it is printed and
// the command fails.
func executeInferReference(ctx context.Context, o *inferOptions, m *model.Model, stderr io.Writer) (*bench.InferReferenceResult, error) {
	if o.referenceDir != "" {
		if err := os.MkdirAll(o.referenceDir, 0o755); err != nil {
			return nil, usageError{fmt.Errorf("--reference-dir: %v", err)}
		}
	}
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
	res, err := bench.InferReference(ctx, e.backends, k, m, bench.InferReferenceOptions{InferOptions: inferRunOptions(o, prog),
		Python: o.python, ModelFile: o.model, Dir: o.referenceDir, TwinOnCPU: o.run.sim})
	if res != nil {
		labelInferResult(o, e, res.Ours)
	}
	return res, benchError(err)
}

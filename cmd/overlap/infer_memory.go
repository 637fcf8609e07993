package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
)

// The in-memory run of overlap infer (bench.InferInMemory says what it
// measures), and with --reference beside the PyTorch twin:
// bench.InferReference runs the twin, then ours over its rows, and
// compares every value; with --sim the twin runs on the CPU (a smoke
// test) and ours on the simulator. Their tables are bench's
// (InferResult.WriteTable, InferReferenceResult.WriteTable: one table
// shows both sides).

// executeInferMemory runs overlap infer --rows in memory on the machine
// that the flags choose: bench.InferInMemory, or with --reference
// bench.InferReference, whose result with values outside the tolerance
// comes with an error, so that it is printed and the command fails.
func executeInferMemory(ctx context.Context, o *inferOptions, m *model.Model, stderr io.Writer) (*bench.InferResult, *bench.InferReferenceResult, error) {
	if o.referenceDir != "" {
		if err := os.MkdirAll(o.referenceDir, 0o755); err != nil {
			return nil, nil, usageError{fmt.Errorf("--reference-dir: %v", err)}
		}
	}
	if err := checkInferRows(o, m); err != nil {
		return nil, nil, err
	}
	e, k, err := inferEnv(o, m)
	if err != nil {
		return nil, nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	opts := bench.InferOptions{Rows: o.rows, Chunks: o.chunks, Repeat: o.repeat, Precision: o.precision, NoBaseline: o.noBaseline,
		TimingOnly: o.timingOnly, Verify: o.verify, Progress: prog.line}
	if !o.run.sim {
		opts.Warm = defaultWarm
	}
	if !o.reference {
		res, err := bench.InferInMemory(ctx, e.backends, k, m, opts)
		if err != nil {
			return nil, nil, benchError(err)
		}
		labelInferResult(o, e, res)
		return res, nil, nil
	}
	dir := o.referenceDir
	if dir == "" {
		// The twin's folder is made here rather than by bench, so that the
		// grace exit of a stopped command removes it too (atGraceExit).
		tmp, err := os.MkdirTemp("", "overlap-infer-reference-")
		if err != nil {
			return nil, nil, err
		}
		defer atGraceExit(func() { os.RemoveAll(tmp) })()
		dir = tmp
	}
	ref, err := bench.InferReference(ctx, e.backends, k, m, bench.InferReferenceOptions{InferOptions: opts,
		Python: o.python, ModelFile: o.model, Dir: dir, TwinOnCPU: o.run.sim})
	if ref != nil && o.referenceDir == "" {
		ref.Dir = "" // removed: no files are kept
	}
	if ref != nil {
		labelInferResult(o, e, ref.Ours)
	}
	return nil, ref, benchError(err)
}

// checkInferRows checks an in-memory run's --rows and --chunk against
// the host's memory, the model and the simulator, before any machine is
// opened.
func checkInferRows(o *inferOptions, m *model.Model) error {
	rows := o.rows
	need := int64(rows) * int64(m.In()+m.Out()) * 4
	if o.run.sim && !o.noBaseline {
		need *= 2 // the baseline's simulated device arrays
	}
	if avail, ok := availableMemory(); ok && need > avail && !o.timingOnly {
		return usageError{fmt.Errorf("--rows %d: the rows in and out need %s of host memory, more than the %s available; use fewer --rows", rows, humanBytes(need), humanBytes(avail))}
	}
	chunks := o.chunks
	if len(chunks) == 0 && o.run.sim {
		chunks = []int{m.ChunkRowsFor(rows, len(o.run.devices))} // bench's default on as many simulated devices
	}
	for _, c := range chunks {
		if _, err := m.Config(c); err != nil {
			return usageError{fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))}
		}
		if n := (int64(rows) + int64(c) - 1) / int64(c); o.run.sim && n > bench.MaxSimChunks {
			return usageError{fmt.Errorf("--chunk %d cuts --rows %d into %d chunks; the simulator takes at most %d: use a larger --chunk", c, rows, n, bench.MaxSimChunks)}
		}
	}
	return nil
}

// labelInferResult fills in what bench leaves to its caller: the
// simulator's profile, and the flags' words for the options'.
func labelInferResult(o *inferOptions, e *env, r *bench.InferResult) {
	if e.sim != nil {
		r.Profile = profileLabel(&o.run, e.sim.Profile())
	}
	r.Input, r.Verified = flagWords(r.Input), flagWords(r.Verified)
}

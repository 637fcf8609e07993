package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/model"
)

// overlap infer --reference: the PyTorch twin (bench/reference/mlp_torch.py,
// embedded, run as python3 - with the script on its standard input) on
// the same model file first, which writes its input rows and its output;
// then our in-memory run over the same rows at each --chunk; then every
// value of our output compared with PyTorch's (model.Compare), and one
// table of both. With --sim the twin runs on the CPU (--device cpu, a
// smoke test whose times mean nothing) and ours on the simulator.

// torchResult is what the twin writes with --json (bench.TorchResult).
type (
	torchResult  = bench.TorchResult
	torchVariant = bench.TorchVariant
)

// inferReferenceResult is overlap infer --reference's result, as JSON.
type inferReferenceResult struct {
	PyTorch *torchResult `json:"pytorch"`
	Ours    *inferResult `json:"ours"`
	// SpeedVsPyTorch is PyTorch's fastest whole pipeline's median time
	// over our fastest chunk size's: above 1, ours is faster.
	SpeedVsPyTorch float64 `json:"speed_vs_pytorch_best"`
	// OursOfBound is our stage bound over our median time; PyTorchOfBound
	// its bound (its stages alone, H2D and D2H at once included) over its
	// best median.
	OursOfBound    float64             `json:"ours_of_bound"`
	PyTorchOfBound float64             `json:"pytorch_of_bound"`
	Comparison     referenceComparison `json:"comparison"`
	// Dir holds the twin's files when --reference-dir kept them.
	Dir string `json:"files_dir,omitempty"`
}

// referenceComparison is every value of our output against PyTorch's.
type referenceComparison struct {
	Against  string             `json:"against"`
	Values   int64              `json:"values"`
	Outside  int64              `json:"outside"`
	MaxAbs   float64            `json:"max_abs"`
	MaxRatio float64            `json:"max_ratio"`
	First    []model.Difference `json:"first,omitempty"`
	// Tolerance says how each value's tolerance is bounded.
	Tolerance string `json:"tolerance"`
}

// executeInferReference runs the twin, then ours on its input, and
// compares. A result with values outside the tolerance comes with an
// error, so that it is printed and the command fails.
func executeInferReference(ctx context.Context, o *inferOptions, m *model.Model, stderr io.Writer) (*inferReferenceResult, error) {
	dir := o.referenceDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "overlap-infer-reference-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, usageError{fmt.Errorf("--reference-dir: %v", err)}
	}
	chunks := o.chunks
	if len(chunks) == 0 {
		chunks = []int{defaultInferChunk(o, m, o.rows)}
	}
	for _, c := range chunks {
		if _, err := m.Config(c); err != nil {
			return nil, usageError{fmt.Errorf("--chunk: %s", strings.TrimPrefix(err.Error(), "model: "))}
		}
	}
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	prog.say("running the PyTorch twin…")
	tr, err := bench.RunTorchTwin(ctx, m, bench.TorchOptions{Python: o.python, ModelFile: o.model, Rows: o.rows, Precision: o.precision,
		ChunkRows: chunks, Passes: o.repeat, Dir: dir, CPU: o.run.sim})
	prog.done()
	if err != nil {
		return nil, benchError(err)
	}
	ours := *o
	ours.chunks, ours.inputFile = chunks, tr.Files.Input
	run, err := executeInfer(ctx, &ours, m, stderr)
	if err != nil {
		return nil, err
	}
	res := &inferReferenceResult{PyTorch: tr, Ours: run.inferResult, OursOfBound: run.Efficiency}
	if o.referenceDir != "" {
		res.Dir = dir
	}
	if ms := run.Modes[len(run.Modes)-1].Ms; ms > 0 {
		res.SpeedVsPyTorch = tr.Best.MedianMs / ms
	}
	if tr.Best.MedianMs > 0 {
		res.PyTorchOfBound = tr.BoundMs / tr.Best.MedianMs
	}
	theirs := model.FP32
	if tr.AllowTF32 {
		theirs = model.TF32
	}
	cmp, err := bench.CompareWithFile(ctx, m, run.X, run.Y, tr.Files.Output, model.CompareOptions{A: o.precision, B: theirs})
	if err != nil {
		return nil, fmt.Errorf("comparing with PyTorch's output: %w", benchError(err))
	}
	res.Comparison = referenceComparison{Against: tr.Files.Output, Values: cmp.Values, Outside: cmp.Outside, MaxAbs: cmp.MaxAbs, MaxRatio: cmp.MaxRatio,
		First: cmp.First, Tolerance: model.CompareTolerance(o.precision, theirs)}
	if cmp.Outside > 0 {
		first := cmp.First[0]
		return res, fmt.Errorf("%d of %d output values differ from PyTorch's (%s) beyond the tolerance; the first at row %d, column %d: ours %g, PyTorch's %g, tolerance %.3g",
			cmp.Outside, cmp.Values, tr.Files.Output, first.Row, first.Col, first.A, first.B, first.Tol)
	}
	return res, nil
}

func printInferReference(w io.Writer, r *inferReferenceResult) {
	t, o := r.PyTorch, r.Ours
	label := ""
	if o.Simulated {
		label = fmt.Sprintf(" [ours simulated on the CPU: times predicted for %s; PyTorch's on the CPU, a smoke test]", o.Profile)
	}
	fmt.Fprintf(w, "overlap infer --reference: MLP %s in %s, %d rows (%s in, %s out), the same model file and input rows on both sides%s\n",
		o.Model, o.Precision, o.Rows, humanBytes(o.InBytes), humanBytes(o.OutBytes), label)
	cuda := t.CUDA
	if cuda == "" {
		cuda = "none"
	}
	fmt.Fprintf(w, "PyTorch %s (CUDA %s, allow_tf32=%v) on %s, pinned host tensors; ours on %s, host memory %s; the median of %d passes each\n\n",
		t.Torch, cuda, t.AllowTF32, t.Device, o.Backend, o.HostMode, t.Passes)
	flops := o.FLOPsPerRow * float64(o.Rows)
	rate := func(msv float64) string {
		if msv <= 0 {
			return "-"
		}
		return humanRate(float64(o.Rows) / (msv / 1e3))
	}
	minMs := func(v float64) string {
		if v <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f ms", v)
	}
	fmt.Fprintf(w, "%-8s %-48s %7s %11s %11s %10s  %s\n", "SIDE", "VARIANT", "CHUNK", "MEDIAN", "MIN", "ROWS/s", "NOTE")
	line := func(side, name string, chunk int, med, mn float64, note string) {
		c := "-"
		if chunk > 0 {
			c = strconv.Itoa(chunk)
		}
		fmt.Fprintf(w, "%-8s %-48s %7s %8.2f ms %11s %10s  %s\n", side, name, c, med, minMs(mn), rate(med), note)
	}
	stageNote := func(key string, msv float64) string {
		if msv <= 0 {
			return ""
		}
		s := msv / 1e3
		switch key {
		case "h2d_alone":
			return fmt.Sprintf("%.1f GB/s", float64(o.InBytes)/s/1e9)
		case "d2h_alone":
			return fmt.Sprintf("%.1f GB/s", float64(o.OutBytes)/s/1e9)
		case "h2d_d2h_at_once":
			return fmt.Sprintf("%.1f GB/s in all", float64(o.InBytes+o.OutBytes)/s/1e9)
		case "compute_alone":
			return fmt.Sprintf("%.1f TFLOP/s", flops/s/1e12)
		}
		return ""
	}
	for _, v := range t.Variants {
		note := stageNote(v.Key, v.MedianMs)
		if note == "" && t.BoundMs > 0 {
			note = fmt.Sprintf("%.1f%% of its bound", 100*t.BoundMs/v.MedianMs)
		}
		if v.Key == t.Best.Key && v.ChunkRows == t.Best.ChunkRows {
			note += "  ← PyTorch's fastest"
		}
		line("pytorch", v.Name, v.ChunkRows, v.MedianMs, v.MinMs, note)
	}
	for _, m := range o.Modes {
		if m.Mode == "synchronous" {
			line("ours", "synchronous (pageable, whole arrays, one stream)", 0, m.Ms, 0, fmt.Sprintf("%.1f%% of our bound", 100*o.Stages.BoundMs/m.Ms))
		}
	}
	for _, c := range o.Chunks {
		note := ""
		if o.Stages.BoundMs > 0 && c.Ms > 0 {
			note = fmt.Sprintf("%.1f%% of our bound", 100*o.Stages.BoundMs/c.Ms)
		}
		if c.ChunkRows == o.ChunkRows {
			note += "  ← our fastest"
		}
		line("ours", fmt.Sprintf("pipeline (%d slots)", o.Slots), c.ChunkRows, c.Ms, c.MinMs, note)
	}
	s := o.Stages
	for _, st := range []struct {
		key, name string
		ms        float64
	}{{"h2d_alone", "H2D alone (" + strings.Fields(o.HostMode)[0] + ")", s.H2DMs}, {"compute_alone", "compute alone (input resident)", s.ComputeMs},
		{"d2h_alone", "D2H alone", s.D2HMs}, {"h2d_d2h_at_once", "H2D + D2H at once (2 streams)", s.CopiesMs}} {
		if st.ms > 0 {
			line("ours", st.name, o.ChunkRows, st.ms, 0, stageNote(st.key, st.ms))
		}
	}
	fmt.Fprintln(w)
	oursMs := o.Modes[len(o.Modes)-1].Ms
	fmt.Fprintf(w, "PyTorch's fastest: %s, chunk %d: %.2f ms; its bound (slowest stage alone, H2D + D2H at once included) %.2f ms: %.1f%% of it\n",
		t.Best.Name, t.Best.ChunkRows, t.Best.MedianMs, t.BoundMs, 100*r.PyTorchOfBound)
	fmt.Fprintf(w, "ours fastest: chunk %d: %.2f ms; our bound (slowest stage alone, %s) %.2f ms: %.1f%% of it\n",
		o.ChunkRows, oursMs, s.Slowest, s.BoundMs, 100*r.OursOfBound)
	fmt.Fprintf(w, "speed, ours / PyTorch's fastest: %.3f× (%.2f ms / %.2f ms, medians)\n", r.SpeedVsPyTorch, t.Best.MedianMs, oursMs)
	c := r.Comparison
	fmt.Fprintf(w, "ours vs PyTorch's output (%s), value by value: %d values, max |ours − PyTorch| %.3g, max |ours − PyTorch| / tolerance %.3g, %d outside the tolerance\n",
		c.Against, c.Values, c.MaxAbs, c.MaxRatio, c.Outside)
	fmt.Fprintf(w, "tolerance: %s\n", c.Tolerance)
	fmt.Fprintf(w, "ours: %s\n", o.Verified)
	if !t.OutputsEqual {
		fmt.Fprintf(w, "note: PyTorch's own variants' outputs differ by up to %.3g\n", t.MaxDiff)
	}
	for _, n := range o.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.Dir != "" {
		fmt.Fprintf(w, "the twin's files are in %s\n", r.Dir)
	}
}

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

// overlap infer --reference: bench.InferReference runs the PyTorch twin,
// then ours over its rows, and compares every value; with --sim the twin
// runs on the CPU (a smoke test) and ours on the simulator. One table
// shows both.

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

func printInferReference(w io.Writer, r *bench.InferReferenceResult) {
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

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
)

// overlap infer --reference: the PyTorch twin (bench/reference/mlp_torch.py,
// embedded, run as python3 - with the script on its standard input) on
// the same model file first, which writes its input rows and its output;
// then our in-memory run over the same rows at each --chunk; then every
// value of our output compared with PyTorch's (model.Compare), and one
// table of both. With --sim the twin runs on the CPU (--device cpu, a
// smoke test whose times mean nothing) and ours on the simulator.

// torchResult is what the twin writes with --json.
type torchResult struct {
	Device       string         `json:"device"`
	Torch        string         `json:"torch"`
	CUDA         string         `json:"cuda"`
	Precision    string         `json:"precision"`
	AllowTF32    bool           `json:"allow_tf32"`
	Rows         int            `json:"rows"`
	Dims         []int          `json:"dims"`
	Activation   string         `json:"activation"`
	Passes       int            `json:"passes"`
	Variants     []torchVariant `json:"variants"`
	Best         torchVariant   `json:"best"`
	StageBoundMs float64        `json:"stage_bound_ms"`
	// BoundMs is the slowest of its stages alone, its H2D and D2H at
	// once included.
	BoundMs      float64 `json:"bound_ms"`
	OutputsEqual bool    `json:"outputs_equal"`
	MaxDiff      float64 `json:"max_diff"`
	Finite       bool    `json:"finite"`
	Files        struct {
		Model  string `json:"model"`
		Input  string `json:"input"`
		Output string `json:"output"`
	} `json:"files"`
}

// torchVariant is one of the twin's ways of running the rows.
type torchVariant struct {
	Key       string  `json:"key"`
	Name      string  `json:"name"`
	ChunkRows int     `json:"chunk_rows"`
	MedianMs  float64 `json:"median_ms"`
	MinMs     float64 `json:"min_ms"`
}

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

// twinTail is how much of a failed twin's standard error its error shows.
const twinTail = 2000

// runTwin runs the PyTorch twin on o's model and rows into dir and reads
// its JSON.
func runTwin(ctx context.Context, o *inferOptions, m *model.Model, chunks []int, dir string) (*torchResult, error) {
	jsonPath := filepath.Join(dir, "torch.json")
	os.Remove(jsonPath)
	sizes := make([]string, len(chunks))
	for i, c := range chunks {
		sizes[i] = strconv.Itoa(c)
	}
	args := []string{"-", "--model-file", o.model, "--activation", m.Activation.String(), "--rows", strconv.Itoa(o.rows),
		"--precision", o.precision.String(), "--chunk-rows", strings.Join(sizes, ","), "--passes", strconv.Itoa(o.repeat),
		"--save-dir", dir, "--json", jsonPath}
	if o.run.sim {
		args = append(args, "--device", "cpu")
	}
	cmd := exec.CommandContext(ctx, o.python, args...)
	cmd.Stdin = bytes.NewReader(bench.MLPTorchScript())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	line := o.python + " " + strings.Join(args, " ") + " < mlp_torch.py"
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		tail := strings.TrimSpace(errOut.String())
		if len(tail) > twinTail {
			tail = "…" + tail[len(tail)-twinTail:]
		}
		return nil, fmt.Errorf("the PyTorch twin (%s) failed: %v: %s", line, err, tail)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		return nil, fmt.Errorf("the PyTorch twin (%s) wrote no results: %v", line, unwrapPath(err))
	}
	var tr torchResult
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, fmt.Errorf("the PyTorch twin's results %s: %v", jsonPath, err)
	}
	switch {
	case !equalInts(tr.Dims, m.Widths()):
		return nil, fmt.Errorf("the PyTorch twin ran a model of widths %v, not %v", tr.Dims, m.Widths())
	case tr.Activation != m.Activation.String():
		return nil, fmt.Errorf("the PyTorch twin ran the model with %s, not %s", tr.Activation, m.Activation)
	case tr.Rows != o.rows:
		return nil, fmt.Errorf("the PyTorch twin ran %d rows, not %d", tr.Rows, o.rows)
	case len(tr.Variants) == 0 || tr.Best.MedianMs <= 0:
		return nil, fmt.Errorf("the PyTorch twin's results %s hold no timed variant", jsonPath)
	case tr.Files.Input == "" || tr.Files.Output == "":
		return nil, fmt.Errorf("the PyTorch twin's results %s name no input or output file", jsonPath)
	}
	for _, f := range []struct {
		path  string
		bytes int64
	}{{tr.Files.Input, int64(o.rows) * int64(4*m.In())}, {tr.Files.Output, int64(o.rows) * int64(4*m.Out())}} {
		st, err := os.Stat(f.path)
		if err != nil {
			return nil, fmt.Errorf("the PyTorch twin's file: %v", err)
		}
		if st.Size() != f.bytes {
			return nil, fmt.Errorf("the PyTorch twin's %s holds %d bytes, not the %d of %d rows", f.path, st.Size(), f.bytes, o.rows)
		}
	}
	return &tr, nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
	tr, err := runTwin(ctx, o, m, chunks, dir)
	prog.done()
	if err != nil {
		return nil, err
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
	cmp, err := compareWithFile(ctx, m, run.X, run.Y, tr.Files.Output, model.CompareOptions{A: o.precision, B: theirs})
	if err != nil {
		return nil, fmt.Errorf("comparing with PyTorch's output: %w", err)
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

// compareRows is the rows compareWithFile reads at a time.
const compareRows = 1 << 16

// compareWithFile compares y, the outputs of x's rows, with the raw
// float32 outputs in path, a block of rows at a time.
func compareWithFile(ctx context.Context, m *model.Model, x, y []float32, path string, opts model.CompareOptions) (model.Comparison, error) {
	var total model.Comparison
	f, err := os.Open(path)
	if err != nil {
		return total, err
	}
	defer f.Close()
	rows := len(y) / m.Out()
	buf := make([]float32, compareRows*m.Out())
	for lo := 0; lo < rows; lo += compareRows {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		n := min(compareRows, rows-lo)
		b := buf[:n*m.Out()]
		if _, err := f.ReadAt(driver.Bytes(b), int64(lo)*int64(4*m.Out())); err != nil {
			return total, fmt.Errorf("reading %s: %w", path, err)
		}
		o := opts
		o.FirstRow = int64(lo)
		c, err := m.Compare(x[lo*m.In():(lo+n)*m.In()], y[lo*m.Out():(lo+n)*m.Out()], b, o)
		if err != nil {
			return total, err
		}
		total.Add(c)
	}
	return total, nil
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

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/parallel"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
)

// A model beside its PyTorch twin: the twin (RunTorchTwin) on the same
// model file first, which writes its input rows and its output; then our
// in-memory run (InferInMemory) over the same rows at each chunk size;
// then every value of our output compared with PyTorch's
// (CompareWithFile).

// InferReferenceResult is what [InferReference] measured: both sides'
// runs, how they compare, and every output value of ours against
// PyTorch's, as overlap infer --reference prints it and as JSON.
type InferReferenceResult struct {
	PyTorch *TorchResult `json:"pytorch"`
	Ours    *InferResult `json:"ours"`
	// SpeedVsPyTorch is PyTorch's fastest whole pipeline's median time
	// over our fastest chunk size's: above 1, ours is faster.
	SpeedVsPyTorch float64 `json:"speed_vs_pytorch_best"`
	// OursOfBound is our stage bound over our median time; PyTorchOfBound
	// its bound (its stages alone, H2D and D2H at once included) over its
	// best median.
	OursOfBound    float64             `json:"ours_of_bound"`
	PyTorchOfBound float64             `json:"pytorch_of_bound"`
	Comparison     ReferenceComparison `json:"comparison"`
	// Dir holds the twin's files when InferReferenceOptions.Dir kept them.
	Dir string `json:"files_dir,omitempty"`
}

// ReferenceComparison is every value of our output against PyTorch's
// (model.Comparison, with the file compared against).
type ReferenceComparison struct {
	Against  string             `json:"against"`
	Values   int64              `json:"values"`
	Outside  int64              `json:"outside"`
	MaxAbs   float64            `json:"max_abs"`
	MaxRatio float64            `json:"max_ratio"`
	First    []model.Difference `json:"first,omitempty"`
	// Tolerance says how each value's tolerance is bounded.
	Tolerance string `json:"tolerance"`
}

// InferReferenceOptions say what [InferReference] runs. ModelFile and
// Rows are required; the zero Python is python3 and the zero Dir a
// temporary folder, removed.
type InferReferenceOptions struct {
	// InferOptions are our run's. Rows, Chunks (nil: one,
	// m.ChunkRowsFor the rows over the backends), Repeat (the twin's
	// passes; 0: its default) and Precision are the twin's too; X,
	// InputName and KeepOutput are set by InferReference.
	InferOptions
	// Python is the command that has torch ("": python3).
	Python string
	// ModelFile is the safetensors file that m was loaded from.
	ModelFile string
	// Dir, when set, keeps the twin's files (input.f32,
	// output_torch.f32, torch.json), created if missing.
	Dir string
	// TwinOnCPU runs the twin on the CPU: a smoke test whose times mean
	// nothing, as beside a simulator.
	TwinOnCPU bool
}

// InferReference runs the PyTorch twin on o.ModelFile, then m (its kernel
// k, from m.Kernel) on the group of backends over the twin's input rows
// as [InferInMemory] does, and compares every value of our output with
// the twin's. Values outside the tolerance return the result together
// with an error that says how many and where the first is, so that the
// caller can show both.
func InferReference(ctx context.Context, backends []pipeline.Backend, k *pipeline.Kernel, m *model.Model, o InferReferenceOptions) (*InferReferenceResult, error) {
	res, err := inferReference(ctx, backends, k, m, o)
	if err != nil {
		return res, &Error{Op: "InferReference", Err: err}
	}
	return res, nil
}

func inferReference(ctx context.Context, backends []pipeline.Backend, k *pipeline.Kernel, m *model.Model, o InferReferenceOptions) (*InferReferenceResult, error) {
	switch {
	case len(backends) == 0 || backends[0] == nil || k == nil || m == nil:
		return nil, errors.New("no backend, kernel or model")
	case o.ModelFile == "" || o.Rows < 1:
		return nil, errors.New("no model file or no rows")
	}
	dir := o.Dir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "overlap-infer-reference-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	chunks := o.Chunks
	if len(chunks) == 0 {
		chunks = []int{m.ChunkRowsFor(o.Rows, len(backends))}
	}
	for _, c := range chunks {
		if _, err := m.Config(c); err != nil {
			return nil, err
		}
	}
	say(o.Progress, "running the PyTorch twin…")
	tr, err := runTwin(ctx, m, TorchOptions{Python: o.Python, ModelFile: o.ModelFile, Rows: o.Rows, Precision: o.Precision,
		ChunkRows: chunks, Passes: o.Repeat, Dir: dir, CPU: o.TwinOnCPU})
	if err != nil {
		return nil, err
	}
	ours := o.InferOptions
	ours.Chunks, ours.KeepOutput, ours.InputName = chunks, true, tr.Files.Input
	ours.X = make([]float32, o.Rows*m.In())
	say(o.Progress, "reading %d rows from %s…", o.Rows, tr.Files.Input)
	if err := readFloats(tr.Files.Input, ours.X); err != nil {
		return nil, err
	}
	run, err := inferInMemory(ctx, backends, k, m, ours)
	if err != nil {
		return nil, err
	}
	res := &InferReferenceResult{PyTorch: tr, Ours: run, OursOfBound: run.Efficiency}
	if o.Dir != "" {
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
	cmp, err := compareWithFile(ctx, m, run.X, run.Y, tr.Files.Output, model.CompareOptions{A: o.Precision, B: theirs})
	if err != nil {
		return nil, fmt.Errorf("comparing with PyTorch's output: %w", err)
	}
	res.Comparison = ReferenceComparison{Against: tr.Files.Output, Values: cmp.Values, Outside: cmp.Outside, MaxAbs: cmp.MaxAbs, MaxRatio: cmp.MaxRatio,
		First: cmp.First, Tolerance: model.CompareTolerance(o.Precision, theirs)}
	if cmp.Outside > 0 {
		first := cmp.First[0]
		return res, fmt.Errorf("%d of %d output values differ from PyTorch's (%s) beyond the tolerance; the first at row %d, column %d: ours %g, PyTorch's %g, tolerance %.3g",
			cmp.Outside, cmp.Values, tr.Files.Output, first.Row, first.Col, first.A, first.B, first.Tol)
	}
	return res, nil
}

// readFloats reads len(x) float32 from the start of path into x, in
// pieces of at least 64 MiB read at once.
func readFloats(path string, x []float32) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b := driver.Bytes(x)
	if err := parallel.ForErr(len(b), 64<<20, func(lo, hi int) error {
		_, err := f.ReadAt(b[lo:hi], int64(lo))
		return err
	}); err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	return nil
}

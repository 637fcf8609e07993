package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
)

// The PyTorch twin (reference/mlp_torch.py, embedded, run as python3 -
// with the script on its standard input) on a model file: it writes its
// input rows and its output, which overlap's own run takes and is
// compared with value by value (CompareWithFile).

// TorchResult is what the twin writes with --json.
type TorchResult struct {
	Device       string         `json:"device"`
	Torch        string         `json:"torch"`
	CUDA         string         `json:"cuda"`
	Precision    string         `json:"precision"`
	AllowTF32    bool           `json:"allow_tf32"`
	Rows         int            `json:"rows"`
	Dims         []int          `json:"dims"`
	Activation   string         `json:"activation"`
	Passes       int            `json:"passes"`
	Variants     []TorchVariant `json:"variants"`
	Best         TorchVariant   `json:"best"`
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

// TorchVariant is one of the twin's ways of running the rows.
type TorchVariant struct {
	Key       string  `json:"key"`
	Name      string  `json:"name"`
	ChunkRows int     `json:"chunk_rows"`
	MedianMs  float64 `json:"median_ms"`
	MinMs     float64 `json:"min_ms"`
}

// TorchOptions say how [RunTorchTwin] runs the twin. ModelFile, Rows and
// Dir are required.
type TorchOptions struct {
	// Python is the command that has torch ("": python3).
	Python string
	// ModelFile is the safetensors file that m was loaded from.
	ModelFile string
	Rows      int
	Precision model.Precision
	// ChunkRows are the chunk sizes the twin runs (nil: its own).
	ChunkRows []int
	// Passes is each variant's timed passes (0: the twin's default).
	Passes int
	// Dir is where the twin writes its rows, its output and its JSON.
	Dir string
	// CPU runs the twin on the CPU (--device cpu): a smoke test whose
	// times mean nothing.
	CPU bool
}

// twinTail is how much of a failed twin's standard error its error shows.
const twinTail = 2000

// RunTorchTwin runs the PyTorch twin on m's file and o's rows into o.Dir,
// reads its JSON, and checks that it ran m on as many rows and wrote its
// files whole.
func RunTorchTwin(ctx context.Context, m *model.Model, o TorchOptions) (*TorchResult, error) {
	tr, err := runTwin(ctx, m, o)
	if err != nil {
		return nil, &Error{Op: "RunTorchTwin", Err: err}
	}
	return tr, nil
}

func runTwin(ctx context.Context, m *model.Model, o TorchOptions) (*TorchResult, error) {
	switch {
	case m == nil:
		return nil, errors.New("no model")
	case o.ModelFile == "" || o.Dir == "" || o.Rows < 1:
		return nil, errors.New("no model file, no folder or no rows")
	}
	python := o.Python
	if python == "" {
		python = "python3"
	}
	jsonPath := filepath.Join(o.Dir, "torch.json")
	os.Remove(jsonPath)
	args := []string{"-", "--model-file", o.ModelFile, "--activation", m.Activation.String(), "--rows", strconv.Itoa(o.Rows),
		"--precision", o.Precision.String()}
	if len(o.ChunkRows) > 0 {
		sizes := make([]string, len(o.ChunkRows))
		for i, c := range o.ChunkRows {
			sizes[i] = strconv.Itoa(c)
		}
		args = append(args, "--chunk-rows", strings.Join(sizes, ","))
	}
	if o.Passes > 0 {
		args = append(args, "--passes", strconv.Itoa(o.Passes))
	}
	args = append(args, "--save-dir", o.Dir, "--json", jsonPath)
	if o.CPU {
		args = append(args, "--device", "cpu")
	}
	cmd := command(ctx, python, args...)
	cmd.Stdin = bytes.NewReader(MLPTorchScript())
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	line := python + " " + strings.Join(args, " ") + " < mlp_torch.py"
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		tail := strings.TrimSpace(errOut.String())
		if strings.Contains(tail, "No module named 'torch'") {
			// The one failure a new user meets: say what to do, not the
			// traceback.
			return nil, fmt.Errorf("the PyTorch twin needs torch, which %s cannot import: install PyTorch for it, or name a Python that has it (--python in overlap infer)", python)
		}
		if len(tail) > twinTail {
			tail = "…" + tail[len(tail)-twinTail:]
		}
		return nil, fmt.Errorf("the PyTorch twin (%s) failed: %v: %s", line, err, tail)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("the PyTorch twin (%s) wrote no results: %v", line, err)
	}
	var tr TorchResult
	if err := json.Unmarshal(b, &tr); err != nil {
		return nil, fmt.Errorf("the PyTorch twin's results %s: %v", jsonPath, err)
	}
	switch {
	case !slices.Equal(tr.Dims, m.Widths()):
		return nil, fmt.Errorf("the PyTorch twin ran a model of widths %v, not %v", tr.Dims, m.Widths())
	case tr.Activation != m.Activation.String():
		return nil, fmt.Errorf("the PyTorch twin ran the model with %s, not %s", tr.Activation, m.Activation)
	case tr.Rows != o.Rows:
		return nil, fmt.Errorf("the PyTorch twin ran %d rows, not %d", tr.Rows, o.Rows)
	case len(tr.Variants) == 0 || tr.Best.MedianMs <= 0:
		return nil, fmt.Errorf("the PyTorch twin's results %s hold no timed variant", jsonPath)
	case tr.Files.Input == "" || tr.Files.Output == "":
		return nil, fmt.Errorf("the PyTorch twin's results %s name no input or output file", jsonPath)
	}
	for _, f := range []struct {
		path  string
		bytes int64
	}{{tr.Files.Input, int64(o.Rows) * int64(4*m.In())}, {tr.Files.Output, int64(o.Rows) * int64(4*m.Out())}} {
		st, err := os.Stat(f.path)
		if err != nil {
			return nil, fmt.Errorf("the PyTorch twin's file: %v", err)
		}
		if st.Size() != f.bytes {
			return nil, fmt.Errorf("the PyTorch twin's %s holds %d bytes, not the %d of %d rows", f.path, st.Size(), f.bytes, o.Rows)
		}
	}
	return &tr, nil
}

// compareRows is the rows CompareWithFile reads at a time.
const compareRows = 1 << 16

// CompareWithFile compares y, m's outputs of x's rows, with the raw
// float32 outputs in path, a block of rows at a time (model.Compare).
func CompareWithFile(ctx context.Context, m *model.Model, x, y []float32, path string, opts model.CompareOptions) (model.Comparison, error) {
	total, err := compareWithFile(ctx, m, x, y, path, opts)
	if err != nil {
		return total, &Error{Op: "CompareWithFile", Err: err}
	}
	return total, nil
}

func compareWithFile(ctx context.Context, m *model.Model, x, y []float32, path string, opts model.CompareOptions) (model.Comparison, error) {
	var total model.Comparison
	if m == nil || m.Out() == 0 || len(y)%m.Out() != 0 || len(x) != len(y)/m.Out()*m.In() {
		return total, errors.New("no model, or x and y are not as many rows of its widths")
	}
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

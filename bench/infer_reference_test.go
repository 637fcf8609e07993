package bench

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeTwinScript stands in for python3: it saves its arguments in its
// own folder, and copies that folder's input.f32 and output_torch.f32
// into --save-dir and its torch.json, SAVE_DIR replaced, to --json.
const fakeTwinScript = `#!/bin/sh
here=$(dirname "$0")
cat > /dev/null
printf '%s\n' "$@" > "$here/args"
save= js=
while [ $# -gt 0 ]; do
	case "$1" in
	--save-dir) save=$2; shift ;;
	--json) js=$2; shift ;;
	esac
	shift
done
cp "$here/input.f32" "$here/output_torch.f32" "$save/"
sed "s|SAVE_DIR|$save|g" "$here/torch.json" > "$js"
`

// fakeTwin writes the stand-in and its files for rows rows of m, its
// output y, and returns the stand-in's path and its input rows.
func fakeTwin(t *testing.T, m *model.Model, rows int, y func(x []float32) []float32) (python string, x []float32) {
	t.Helper()
	dir := t.TempDir()
	python = filepath.Join(dir, "python3")
	require.NoError(t, os.WriteFile(python, []byte(fakeTwinScript), 0o755))
	x = make([]float32, rows*m.In())
	for i := range x {
		x[i] = float32(i%97)/48 - 1
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "input.f32"), driver.Bytes(x), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "output_torch.f32"), driver.Bytes(y(x)), 0o644))
	tr := TorchResult{Device: "cpu", Rows: rows, Dims: m.Widths(), Activation: m.Activation.String(), Passes: 2, BoundMs: 9, OutputsEqual: true, Finite: true,
		Variants: []TorchVariant{{Key: "three_streams", Name: "(c) pinned, 3 streams + events", ChunkRows: 512, MedianMs: 10, MinMs: 9.5}}}
	tr.Best = tr.Variants[0]
	tr.Files.Input, tr.Files.Output = "SAVE_DIR/input.f32", "SAVE_DIR/output_torch.f32"
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "torch.json"), b, 0o644))
	return python, x
}

// twinArgs are the arguments that the stand-in at python was given.
func twinArgs(t *testing.T, python string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(filepath.Dir(python), "args"))
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestInferReferenceOnSim: InferReference runs the twin with our run's
// rows, chunk sizes, passes and precision, runs ours over the twin's
// input rows, compares every value with the twin's output and derives
// the ratios; a kept Dir is named in the result, a temporary one is
// removed; without Chunks both sides run ChunkRowsFor's; a value outside
// the tolerance comes back with the result and an error.
func TestInferReferenceOnSim(t *testing.T) {
	m, k := testModel(t)
	const rows = 2048
	forward := func(x []float32) []float32 {
		y, err := m.Forward32(x)
		require.NoError(t, err)
		return y
	}
	python, x := fakeTwin(t, m, rows, forward)
	keep := filepath.Join(t.TempDir(), "kept")
	modelFile := filepath.Join(t.TempDir(), "m.safetensors")
	res, err := InferReference(context.Background(), simDevices(1), k, m, InferReferenceOptions{
		InferOptions: InferOptions{Rows: rows, Chunks: []int{512, 1024}, Repeat: 2},
		Python:       python, ModelFile: modelFile, Dir: keep, TwinOnCPU: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"-", "--model-file", modelFile, "--activation", "relu", "--rows", "2048", "--precision", "fp32", "--chunk-rows", "512,1024", "--passes", "2",
		"--save-dir", keep, "--json", filepath.Join(keep, "torch.json"), "--device", "cpu"}, twinArgs(t, python))
	assert.Equal(t, keep, res.Dir)
	assert.Equal(t, filepath.Join(keep, "input.f32"), res.Ours.Input)
	assert.Equal(t, x, res.Ours.X, "ours ran the twin's rows")
	require.Len(t, res.Ours.Chunks, 2)
	oursMs := res.Ours.Modes[len(res.Ours.Modes)-1].Ms
	assert.InEpsilon(t, 10/oursMs, res.SpeedVsPyTorch, 1e-12)
	assert.InEpsilon(t, 0.9, res.PyTorchOfBound, 1e-12)
	assert.Equal(t, res.Ours.Efficiency, res.OursOfBound)
	assert.Equal(t, ReferenceComparison{Against: filepath.Join(keep, "output_torch.f32"), Values: rows * 8, Tolerance: model.CompareTolerance(model.FP32, model.FP32)}, res.Comparison)

	res, err = InferReference(context.Background(), simDevices(2), k, m, InferReferenceOptions{InferOptions: InferOptions{Rows: rows, Precision: model.TF32}, Python: python, ModelFile: modelFile})
	require.NoError(t, err)
	args := twinArgs(t, python)
	assert.Equal(t, []string{"--precision", "tf32", "--chunk-rows", "128", "--save-dir"}, args[7:12], "ChunkRowsFor 2048 rows on 2 devices; the twin's own passes")
	assert.Equal(t, 128, res.Ours.ChunkRows)
	assert.Empty(t, res.Dir)
	_, err = os.Stat(args[12])
	assert.True(t, os.IsNotExist(err), "the temporary folder %s is removed", args[12])
	assert.Equal(t, model.CompareTolerance(model.TF32, model.FP32), res.Comparison.Tolerance)

	python, _ = fakeTwin(t, m, rows, func(x []float32) []float32 {
		y := forward(x)
		y[8*1234+2] += 0.5
		return y
	})
	res, err = InferReference(context.Background(), simDevices(1), k, m, InferReferenceOptions{InferOptions: InferOptions{Rows: rows, Chunks: []int{512}}, Python: python, ModelFile: modelFile})
	require.Error(t, err)
	assert.Regexp(t, `^bench: InferReference: 1 of 16384 output values differ from PyTorch's \(\S+/output_torch\.f32\) beyond the tolerance; the first at row 1234, column 2: ours \S+, PyTorch's \S+, tolerance \S+$`, err.Error())
	require.NotNil(t, res, "the result comes with the error")
	assert.Equal(t, int64(1), res.Comparison.Outside)
	assert.InDelta(t, 0.5, res.Comparison.MaxAbs, 1e-6)
}

// TestInferReferenceArguments: missing arguments and a chunk the model
// cannot run are errors that name the call, before the twin runs.
func TestInferReferenceArguments(t *testing.T) {
	m, k := testModel(t)
	for _, tc := range []struct {
		name string
		run  func() error
		want string
	}{
		{"no backends", func() error {
			_, err := InferReference(context.Background(), nil, k, m, InferReferenceOptions{InferOptions: InferOptions{Rows: 1}, ModelFile: "m"})
			return err
		}, "bench: InferReference: no backend, kernel or model"},
		{"no model", func() error {
			_, err := InferReference(context.Background(), simDevices(1), k, nil, InferReferenceOptions{InferOptions: InferOptions{Rows: 1}, ModelFile: "m"})
			return err
		}, "bench: InferReference: no backend, kernel or model"},
		{"no model file", func() error {
			_, err := InferReference(context.Background(), simDevices(1), k, m, InferReferenceOptions{InferOptions: InferOptions{Rows: 1}})
			return err
		}, "bench: InferReference: no model file or no rows"},
		{"no rows", func() error {
			_, err := InferReference(context.Background(), simDevices(1), k, m, InferReferenceOptions{ModelFile: "m"})
			return err
		}, "bench: InferReference: no model file or no rows"},
		{"bad chunk", func() error {
			_, err := InferReference(context.Background(), simDevices(1), k, m, InferReferenceOptions{InferOptions: InferOptions{Rows: 1, Chunks: []int{-1}}, ModelFile: "m", Python: "/nonexistent/python3"})
			return err
		}, "bench: InferReference: model: a chunk of -1 rows"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.EqualError(t, tc.run(), tc.want)
		})
	}
}

// TestReadFloats: the file's first len(x) values, and an error that names
// a file too short for them.
func TestReadFloats(t *testing.T) {
	dir := t.TempDir()
	path := patternFile(t, dir, "x.f32", 1000)
	want := make([]float32, 1000)
	kernels.FillPattern(want, 0)
	x := make([]float32, 600)
	require.NoError(t, readFloats(path, x))
	assert.Equal(t, want[:600], x)
	assert.EqualError(t, readFloats(path, make([]float32, 1001)), "reading "+path+": EOF")
	assert.Error(t, readFloats(filepath.Join(dir, "none"), x))
}

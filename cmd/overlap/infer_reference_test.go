package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// overlap infer --reference with a stand-in for python3 on PATH, which
// records its arguments and standard input and copies prepared files
// where the twin writes its own.

// fakeTwinScript is the stand-in: it saves the script it is given on
// stdin and its arguments in $FAKE_TWIN, fails with $FAKE_TWIN_FAIL on
// stderr when that is set, and otherwise copies $FAKE_TWIN's input.f32
// and output_torch.f32 into --save-dir and its torch.json, with SAVE_DIR
// replaced, to --json.
const fakeTwinScript = `#!/bin/sh
cat > "$FAKE_TWIN/script.py"
printf '%s\n' "$@" > "$FAKE_TWIN/args"
save= js=
while [ $# -gt 0 ]; do
	case "$1" in
	--save-dir) save=$2; shift ;;
	--json) js=$2; shift ;;
	esac
	shift
done
if [ -n "$FAKE_TWIN_FAIL" ]; then
	echo "$FAKE_TWIN_FAIL" >&2
	exit 1
fi
cp "$FAKE_TWIN/input.f32" "$FAKE_TWIN/output_torch.f32" "$save/"
sed "s|SAVE_DIR|$save|g" "$FAKE_TWIN/torch.json" > "$js"
`

// fakeTwin is a prepared stand-in: its directory, and the model's input
// rows and their float32 output (what PyTorch would give, to rounding).
type fakeTwin struct {
	dir  string
	m    *model.Model
	x, y []float32
}

// newFakeTwin puts the stand-in first on PATH as python3, with files for
// rows rows of the model at mp, and returns it.
func newFakeTwin(t *testing.T, mp string, rows int) *fakeTwin {
	t.Helper()
	bin, dir := t.TempDir(), t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "python3"), []byte(fakeTwinScript), 0o755))
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("FAKE_TWIN", dir)
	t.Setenv("FAKE_TWIN_FAIL", "")
	m, err := model.Load(mp, model.Options{})
	require.NoError(t, err)
	f := &fakeTwin{dir: dir, m: m, x: make([]float32, rows*m.In())}
	for i := range f.x {
		f.x[i] = float32(i%97)/48 - 1
	}
	f.y, err = m.Forward32(f.x)
	require.NoError(t, err)
	f.write(t, f.y, m.Widths())
	return f
}

// write writes the stand-in's output and its results, which say that it
// ran a model of widths dims.
func (f *fakeTwin) write(t *testing.T, y []float32, dims []int) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "input.f32"), driver.Bytes(f.x), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "output_torch.f32"), driver.Bytes(y), 0o644))
	tr := torchResult{Device: "cpu (smoke test)", Torch: "2.0-fake", Precision: "fp32", Rows: len(f.x) / f.m.In(), Dims: dims, Activation: f.m.Activation.String(), Passes: 2,
		StageBoundMs: 8, BoundMs: 9, OutputsEqual: true, Finite: true}
	tr.Variants = []torchVariant{
		{Key: "naive", Name: "(a) naive: pageable, .to(cuda), default stream", ChunkRows: 1024, MedianMs: 40, MinMs: 38},
		{Key: "pinned_1_stream", Name: "(b) pinned, non_blocking, 1 stream", ChunkRows: 512, MedianMs: 12, MinMs: 11},
		{Key: "three_streams", Name: "(c) pinned, 3 streams + events", ChunkRows: 512, MedianMs: 10, MinMs: 9.5},
		{Key: "h2d_alone", Name: "(d) H2D alone (pinned)", ChunkRows: 512, MedianMs: 8, MinMs: 7.9},
		{Key: "compute_alone", Name: "(d) compute alone (input resident)", ChunkRows: 512, MedianMs: 3, MinMs: 2.9},
		{Key: "d2h_alone", Name: "(d) D2H alone (pinned)", ChunkRows: 512, MedianMs: 1, MinMs: 0.9},
		{Key: "h2d_d2h_at_once", Name: "(d) H2D + D2H at once (2 streams)", ChunkRows: 512, MedianMs: 9, MinMs: 8.8},
	}
	tr.Best = tr.Variants[2]
	tr.Files.Model, tr.Files.Input, tr.Files.Output = "m", "SAVE_DIR/input.f32", "SAVE_DIR/output_torch.f32"
	b, err := json.Marshal(tr)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(f.dir, "torch.json"), b, 0o644))
}

// args are the arguments the stand-in was given.
func (f *fakeTwin) args(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(f.dir, "args"))
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// TestInferReference: the twin gets the embedded script on stdin and the
// model, rows, precision, chunk sizes, passes and files as arguments (the
// CPU with --sim); our run reads its input rows, and every value of our
// output is compared with its output; the table has both sides, the
// bound and the ratios, and the JSON every figure.
func TestInferReference(t *testing.T) {
	dir := t.TempDir()
	mp := tinyModel(t, dir)
	const rows = 3000
	twin := newFakeTwin(t, mp, rows)
	keep := filepath.Join(dir, "ref")
	code, out, errOut := runCLI("infer", "--model", mp, "--rows", "3000", "--reference", "--sim", "--chunk", "512,1K", "--repeat", "2", "--reference-dir", keep)
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, []string{"-", "--model-file", mp, "--activation", "relu", "--rows", "3000", "--precision", "fp32", "--chunk-rows", "512,1024", "--passes", "2",
		"--save-dir", keep, "--json", filepath.Join(keep, "torch.json"), "--device", "cpu"}, twin.args(t))
	script, err := os.ReadFile(filepath.Join(twin.dir, "script.py"))
	require.NoError(t, err)
	assert.Equal(t, bench.MLPTorchScript(), script, "the embedded mlp_torch.py on stdin")
	assert.Contains(t, out, "overlap infer --reference: MLP 8→16→4, relu in fp32, 3000 rows (93.8 KiB in, 46.9 KiB out), the same model file and input rows on both sides")
	assert.Contains(t, out, "PyTorch 2.0-fake (CUDA none, allow_tf32=false) on cpu (smoke test), pinned host tensors; ours on simulator")
	assert.Regexp(t, `(?m)^pytorch +\(c\) pinned, 3 streams \+ events +512 +10\.00 ms +9\.50 ms +300\.0K/s +90\.0% of its bound  ← PyTorch's fastest$`, out)
	assert.Regexp(t, `(?m)^pytorch +\(d\) H2D \+ D2H at once \(2 streams\) +512 +9\.00 ms`, out)
	assert.Regexp(t, `(?m)^ours +synchronous \(pageable, whole arrays, one stream\) +- `, out)
	assert.Regexp(t, `(?m)^ours +pipeline \(48 slots\) +512 `, out)
	assert.Regexp(t, `(?m)^ours +pipeline \(48 slots\) +1024 `, out)
	assert.Regexp(t, `(?m)^ours +H2D \+ D2H at once \(2 streams\) +(512|1024) `, out)
	assert.Contains(t, out, "PyTorch's fastest: (c) pinned, 3 streams + events, chunk 512: 10.00 ms; its bound (slowest stage alone, H2D + D2H at once included) 9.00 ms: 90.0% of it")
	assert.Regexp(t, `ours fastest: chunk (512|1024): [0-9.]+ ms; our bound \(slowest stage alone, [^)]+\) [0-9.]+ ms: [0-9.]+% of it`, out)
	assert.Regexp(t, `speed, ours / PyTorch's fastest: [0-9.]+× \(10\.00 ms / [0-9.]+ ms, medians\)`, out)
	assert.Contains(t, out, "ours vs PyTorch's output ("+filepath.Join(keep, "output_torch.f32")+"), value by value: 12000 values, max |ours − PyTorch| 0, max |ours − PyTorch| / tolerance 0, 0 outside the tolerance")
	assert.Contains(t, out, "tolerance: "+model.CompareTolerance(model.FP32, model.FP32))
	assert.Contains(t, out, "the twin's files are in "+keep)

	// JSON: every figure; the ratios are what the table says.
	code, out, errOut = runCLI("infer", "--model", mp, "--rows", "3000", "--reference", "--sim", "--chunk", "512", "--json", "--precision", "tf32")
	require.Equal(t, exitOK, code, errOut)
	var res inferReferenceResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.NotNil(t, res.PyTorch)
	require.NotNil(t, res.Ours)
	assert.Equal(t, 10.0, res.PyTorch.Best.MedianMs)
	assert.InEpsilon(t, 10/res.Ours.Modes[len(res.Ours.Modes)-1].Ms, res.SpeedVsPyTorch, 1e-12)
	assert.Equal(t, res.Ours.Efficiency, res.OursOfBound)
	assert.InEpsilon(t, 0.9, res.PyTorchOfBound, 1e-12)
	assert.Equal(t, int64(rows*4), res.Comparison.Values)
	assert.Zero(t, res.Comparison.Outside)
	assert.Zero(t, res.Comparison.MaxAbs, "the simulator's stand-in is the float32 forward in either precision")
	assert.Equal(t, model.CompareTolerance(model.TF32, model.FP32), res.Comparison.Tolerance)
	assert.Empty(t, res.Dir)
	saved := twin.args(t)[14] // --save-dir's value
	_, err = os.Stat(saved)
	assert.True(t, os.IsNotExist(err), "the temporary directory %s is removed", saved)
	assert.Equal(t, "tf32", res.Ours.Precision)
	assert.Equal(t, 512, res.Ours.ChunkRows)
	assert.Contains(t, res.Ours.Input, "input.f32", "ours read the twin's rows")
}

// TestInferReferenceFailures: a value outside the tolerance fails the
// command after the table; a failing twin, results of another model, and
// a missing python are one line each.
func TestInferReferenceFailures(t *testing.T) {
	dir := t.TempDir()
	mp := tinyModel(t, dir)
	twin := newFakeTwin(t, mp, 3000)
	bad := append([]float32(nil), twin.y...)
	bad[4*1234+2] += 0.5
	twin.write(t, bad, twin.m.Widths())
	code, out, errOut := runCLI("infer", "--model", mp, "--rows", "3000", "--reference", "--sim", "--chunk", "512", "--repeat", "1")
	assert.Equal(t, exitFail, code)
	assert.Contains(t, out, "12000 values, max |ours − PyTorch| 0.5, max |ours − PyTorch| / tolerance ")
	assert.Contains(t, out, ", 1 outside the tolerance")
	assert.Regexp(t, `^overlap infer: 1 of 12000 output values differ from PyTorch's \(\S+output_torch\.f32\) beyond the tolerance; the first at row 1234, column 2: ours \S+, PyTorch's \S+, tolerance \S+\n$`, errOut)

	twin.write(t, twin.y, []int{8, 16, 5})
	code, out, errOut = runCLI("infer", "--model", mp, "--rows", "3000", "--reference", "--sim", "--chunk", "512", "--repeat", "1")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.Equal(t, "overlap infer: the PyTorch twin ran a model of widths [8 16 5], not [8 16 4]\n", errOut)

	twin.write(t, twin.y, twin.m.Widths())
	t.Setenv("FAKE_TWIN_FAIL", "RuntimeError: CUDA error: out of memory")
	code, out, errOut = runCLI("infer", "--model", mp, "--rows", "3000", "--reference", "--sim", "--chunk", "512", "--repeat", "1", "--reference-dir", filepath.Join(dir, "r"))
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.Equal(t, "overlap infer: the PyTorch twin (python3 - --model-file "+mp+" --activation relu --rows 3000 --precision fp32 --chunk-rows 512 --passes 1 --save-dir "+filepath.Join(dir, "r")+
		" --json "+filepath.Join(dir, "r", "torch.json")+" --device cpu < mlp_torch.py) failed: exit status 1: RuntimeError: CUDA error: out of memory\n", errOut)

	// A Python without torch, which the trial met first, gets what to do
	// rather than the traceback.
	t.Setenv("FAKE_TWIN_FAIL", "Traceback (most recent call last):\n  File \"<stdin>\", line 12, in <module>\nModuleNotFoundError: No module named 'torch'")
	code, out, errOut = runCLI("infer", "--model", mp, "--rows", "3000", "--reference", "--sim", "--chunk", "512", "--repeat", "1")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.Equal(t, "overlap infer: the PyTorch twin needs torch, which python3 cannot import: install PyTorch for it, or name a Python that has it (--python in overlap infer)\n", errOut)

	t.Setenv("PATH", t.TempDir())
	code, _, errOut = runCLI("infer", "--model", mp, "--rows", "3000", "--reference", "--sim")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, "overlap infer: --reference runs the PyTorch twin with python3, which is not found (--python names another): executable file not found in $PATH\n", errOut)
}

// torchPython is a Python on this machine that imports torch, or "".
func torchPython() string {
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		if exec.Command(p, "-c", "import torch").Run() == nil {
			return p
		}
	}
	return ""
}

// TestInferReferenceTorch runs the real twin on the CPU (its smoke test)
// beside ours on the simulator, where a Python with torch is installed:
// its model loader, its input, and its output within the tolerance of
// ours, value by value.
func TestInferReferenceTorch(t *testing.T) {
	py := torchPython()
	if py == "" {
		t.Skip("no Python with torch here; the coordinator's GPU host runs the twin")
	}
	dir := t.TempDir()
	mp := filepath.Join(dir, "m.safetensors")
	code, _, errOut := runCLI("infer", "--gen-model", mp, "--widths", "64,96,10", "--activation", "gelu")
	require.Equal(t, exitOK, code, errOut)
	for _, p := range []string{"fp32", "tf32"} {
		code, out, errOut := runCLI("infer", "--model", mp, "--rows", "2000", "--reference", "--sim", "--python", py, "--chunk", "256,512", "--repeat", "1", "--precision", p, "--json")
		require.Equal(t, exitOK, code, errOut)
		var res inferReferenceResult
		require.NoError(t, json.Unmarshal([]byte(out), &res))
		assert.Equal(t, []int{64, 96, 10}, res.PyTorch.Dims)
		assert.Equal(t, "gelu", res.PyTorch.Activation)
		assert.Equal(t, 2000, res.PyTorch.Rows)
		assert.Equal(t, int64(2000*10), res.Comparison.Values)
		assert.Zero(t, res.Comparison.Outside, "%s: %+v", p, res.Comparison.First)
		assert.Positive(t, res.Comparison.MaxAbs, "PyTorch's CPU sums in another order")
		t.Logf("%s: max |ours − torch| %.3g, %.3g of the tolerance", p, res.Comparison.MaxAbs, res.Comparison.MaxRatio)
	}
}

package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	os.Exit(m.Run())
}

// runArgs parses args as overlap-beam's own flags and runs it.
func runArgs(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	fs := flag.NewFlagSet("overlap-beam", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := defineFlags(fs)
	if err := fs.Parse(args); err != nil {
		return exitUsage, "", err.Error()
	}
	var out, errb bytes.Buffer
	code = run(context.Background(), o, fs.Args(), &out, &errb)
	return code, out.String(), errb.String()
}

func TestFlagErrors(t *testing.T) {
	dir := t.TempDir()
	for _, sub := range []string{"x", "y"} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, sub), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, sub, "a.f32"), make([]byte, 8), 0o644))
	}
	out := filepath.Join(dir, "out")
	m, err := model.Random([]int{8, 4}, model.ReLU, 1)
	require.NoError(t, err)
	mlp := filepath.Join(dir, "mlp.safetensors")
	require.NoError(t, m.WriteFile(mlp))
	missing := filepath.Join(dir, "missing.safetensors")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no input", []string{"--output", out}, "overlap-beam: --input GLOB is required\n"},
		{"no output", []string{"--input", "x"}, "overlap-beam: --output DIR is required\n"},
		{"argument", []string{"--input", "x", "--output", out, "extra"}, "overlap-beam: unexpected argument \"extra\"\n"},
		{"kernel", []string{"--input", "x", "--output", out, "--kernel", "saxpy", "--sim"},
			"overlap-beam: --kernel: shard: kernel saxpy has 2 input(s) and 1 output(s); a shard is one input and one output ([axpb seed] qualify)\n"},
		{"iters", []string{"--input", "x", "--output", out, "--iters", "-2"}, "overlap-beam: --iters -2: must not be negative\n"},
		{"devices", []string{"--input", "x", "--output", out, "--devices", "0,0"}, "overlap-beam: --devices: shard: device 0 listed twice\n"},
		{"model and kernel", []string{"--input", "x", "--output", out, "--model", mlp, "--kernel", "seed"},
			"overlap-beam: --kernel and --iters choose an embedded kernel; --model runs the model instead\n"},
		{"model and iterations", []string{"--input", "x", "--output", out, "--model", mlp, "--iters", "3"},
			"overlap-beam: --kernel and --iters choose an embedded kernel; --model runs the model instead\n"},
		{"precision without a model", []string{"--input", "x", "--output", out, "--precision", "tf32"},
			"overlap-beam: --precision and --activation go with --model FILE\n"},
		{"activation without a model", []string{"--input", "x", "--output", out, "--activation", "gelu"},
			"overlap-beam: --precision and --activation go with --model FILE\n"},
		{"precision", []string{"--input", "x", "--output", out, "--model", mlp, "--precision", "fp16"},
			"overlap-beam: --precision: want fp32 or tf32, not \"fp16\"\n"},
		{"activation", []string{"--input", "x", "--output", out, "--model", mlp, "--activation", "tanh"},
			"overlap-beam: --activation: want relu or gelu, not \"tanh\"\n"},
		{"missing model", []string{"--input", "x", "--output", out, "--model", missing},
			"overlap-beam: --model: open " + missing + ": no such file or directory\n"},
		{"chunk too large for the model", []string{"--input", "x", "--output", out, "--model", mlp, "--chunk", "16M"},
			"overlap-beam: --chunk: a chunk of 16777216 rows through 0.weight: gemm: 16777216 rows need 131072 blocks along y, more than the 65535 a grid may have: at most 8388480 rows a launch\n"},
		{"one output name for two shards", []string{"--input", filepath.Join(dir, "*", "a.f32"), "--output", out, "--sim"},
			"overlap-beam: --input: " + filepath.Join(dir, "x", "a.f32") + " and " + filepath.Join(dir, "y", "a.f32") + " have one base name, so one output name (a.f32.out)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runArgs(t, tt.args...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Equal(t, tt.want, stderr)
		})
	}
	code, _, stderr := runArgs(t, "--chunk", "0")
	assert.Equal(t, exitUsage, code)
	assert.Equal(t, `invalid value "0" for flag -chunk: want a positive count of elements, such as 65536, 64K or 1M, at most 1G`, stderr)
}

// TestRunOnSim runs two good shards and one cut short on prism with the
// simulator: the good ones are done and verified, the bad one is listed,
// and the exit status is 1.
func TestRunOnSim(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	for i, name := range []string{"a.f32", "b.f32"} {
		x := make([]float32, 20000)
		kernels.FillPattern(x, 20000*i)
		require.NoError(t, os.WriteFile(filepath.Join(in, name), driver.Bytes(x), 0o644))
	}
	bad := filepath.Join(in, "c.f32")
	require.NoError(t, os.WriteFile(bad, make([]byte, 4001), 0o644))
	code, stdout, stderr := runArgs(t, "--input", filepath.Join(in, "*.f32"), "--output", out, "--sim", "--iters", "10", "--chunk", "8K", "--verify")
	assert.Equal(t, exitFail, code, "stderr: %s", stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 8, "%s", stdout)
	assert.Equal(t, "overlap-beam: seed (10 iterations) on the simulator (times predicted for an NVIDIA H200), runner prism (in this process)", lines[0])
	assert.Equal(t, filepath.Join(in, "*.f32")+" → "+out+" (each output <shard>.out)", lines[1])
	assert.Regexp(t, `^2 shard\(s\) done, 1 failed: 40000 rows, 156\.2 KiB in, 156\.2 KiB out; wall time \d+\.\d\d s$`, lines[2])
	assert.Regexp(t, `^per shard \(simulated clock\): min \d+\.\d\d ms, mean \d+\.\d\d ms, max \d+\.\d\d ms; wall clock: `, lines[3])
	assert.Regexp(t, `^shards bounded by: `, lines[4])
	assert.Equal(t, "failed shard(s), listed in "+filepath.Join(out, "_failed.jsonl")+":", lines[5])
	assert.Equal(t, "  shard: "+bad+" (4001 bytes) is not a whole number of 4-byte rows: the row at byte offset 4000 is cut short", lines[6])
	assert.Equal(t, "verified: every element of the 2 output(s), read back from "+out+", matched the CPU reference", lines[7])
	assert.FileExists(t, filepath.Join(out, "a.f32.out"))
	assert.NoFileExists(t, filepath.Join(out, "c.f32.out"))

	// A second run without the bad shard starts from clean lists.
	require.NoError(t, os.Remove(bad))
	code, stdout, stderr = runArgs(t, "--input", filepath.Join(in, "*.f32"), "--output", out, "--sim", "--iters", "10", "--chunk", "8K")
	assert.Equal(t, exitOK, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "\n2 shard(s) done, 0 failed: 40000 rows")
	assert.NoFileExists(t, filepath.Join(out, "_failed.jsonl"))
}

// TestRunModelOnSim runs two shards through a model on prism with the
// simulator, and a third written for a model of another width: the good
// ones are done and every value verified, the third is listed with the
// model's row, and the exit status is 1.
func TestRunModelOnSim(t *testing.T) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	m, err := model.Random([]int{12, 24, 5}, model.GELU, 2)
	require.NoError(t, err)
	mlp := filepath.Join(t.TempDir(), "mlp.safetensors")
	require.NoError(t, m.WriteFile(mlp))
	for i, name := range []string{"a.f32", "b.f32"} {
		x := make([]float32, 3000*12)
		kernels.FillPattern(x, len(x)*i)
		require.NoError(t, os.WriteFile(filepath.Join(in, name), driver.Bytes(x), 0o644))
	}
	bad := filepath.Join(in, "c.f32")
	require.NoError(t, os.WriteFile(bad, make([]byte, 1001*4*8), 0o644)) // 1001 rows of 8 values
	code, stdout, stderr := runArgs(t, "--input", filepath.Join(in, "*.f32"), "--output", out, "--sim", "--model", mlp,
		"--precision", "tf32", "--chunk", "512", "--verify")
	assert.Equal(t, exitFail, code, "stderr: %s", stderr)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 8, "%s", stdout)
	assert.Equal(t, "overlap-beam: MLP 12→24→5, gelu (activation from the file) in tf32 on the simulator (times predicted for an NVIDIA H200), runner prism (in this process)", lines[0])
	assert.Regexp(t, `^2 shard\(s\) done, 1 failed: 6000 rows, 281\.2 KiB in, 117\.2 KiB out; wall time \d+\.\d\d s$`, lines[2])
	assert.Equal(t, "  shard: "+bad+" (32032 bytes) is not a whole number of 48-byte rows (12 float32, the input of the model 12→24→5, gelu): the row at byte offset 32016 is cut short", lines[6])
	assert.Equal(t, "verified: every value of the 2 output(s), read back from "+out+", matched the float64 CPU reference within the tf32 error bound", lines[7])
	assert.NoFileExists(t, filepath.Join(out, "c.f32.out"))

	// --activation overrides the file's: the outputs are relu's, and
	// --verify checks them against relu.
	require.NoError(t, os.Remove(bad))
	code, stdout, stderr = runArgs(t, "--input", filepath.Join(in, "*.f32"), "--output", out, "--sim", "--model", mlp,
		"--activation", "relu", "--verify")
	assert.Equal(t, exitOK, code, "stderr: %s", stderr)
	assert.Contains(t, stdout, "overlap-beam: MLP 12→24→5, relu (activation from --activation) in fp32 on the simulator")
	assert.Contains(t, stdout, "\n2 shard(s) done, 0 failed: 6000 rows")
	assert.Contains(t, stdout, "\nverified: every value of the 2 output(s)")
}

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

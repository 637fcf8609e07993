package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// overlap infer on the simulator, with a tiny model.

// tinyModel writes a random 8→16→4 model and returns its path.
func tinyModel(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	path := filepath.Join(dir, "m.safetensors")
	code, out, errOut := runCLI(append([]string{"infer", "--gen-model", path, "--widths", "8,16,4"}, extra...)...)
	require.Equal(t, exitOK, code, errOut)
	assert.Empty(t, errOut)
	_ = out
	return path
}

func TestInferGenModel(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	code, out, errOut := runCLI("infer", "--gen-model", path, "--widths", "8,16,4", "--activation", "gelu", "--seed", "9")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "wrote "+path+": a random MLP 8→16→4, gelu, 212 parameters (848 B), seed 9\n", out)
	m, err := model.Load(path, model.Options{})
	require.NoError(t, err)
	assert.Equal(t, []int{8, 16, 4}, m.Widths())
	assert.Equal(t, model.GELU, m.Activation)
	assert.Equal(t, "file", m.ActivationFrom)
	want, err := model.Random([]int{8, 16, 4}, model.GELU, 9)
	require.NoError(t, err)
	assert.Equal(t, want.Layers[1].Weight, m.Layers[1].Weight)

	code, out, _ = runCLI("infer", "--gen-model", path, "--widths", "3,2", "--quiet")
	require.Equal(t, exitOK, code)
	assert.Empty(t, out)
	m, err = model.Load(path, model.Options{})
	require.NoError(t, err)
	assert.Equal(t, model.ReLU, m.Activation, "relu unless --activation says otherwise")

	in := filepath.Join(dir, "in.f32")
	code, out, errOut = runCLI("infer", "--model", path, "--gen-input", in, "--rows", "1K")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, "wrote "+in+": 1024 rows of 3 float32 (12.0 KiB), overlap's standard pattern\n", out)
	got, err := os.ReadFile(in)
	require.NoError(t, err)
	x := make([]float32, 1024*3)
	kernels.FillPattern(x, 0)
	assert.Equal(t, driver.Bytes(x), got)
}

// TestInferBadFlags: each mistake is one line and exit 2, before any work.
func TestInferBadFlags(t *testing.T) {
	dir := t.TempDir()
	m := tinyModel(t, dir)
	in := filepath.Join(dir, "in.f32")
	require.NoError(t, os.WriteFile(in, make([]byte, 64), 0o644))
	ragged := filepath.Join(dir, "ragged.f32")
	require.NoError(t, os.WriteFile(ragged, make([]byte, 100), 0o644))
	empty := filepath.Join(dir, "empty.f32")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	chain := filepath.Join(dir, "chain.safetensors")
	var b bytes.Buffer
	require.NoError(t, model.WriteSafetensors(&b, []model.Tensor{
		{Name: "0.weight", Shape: []int{16, 8}, Data: make([]float32, 128)},
		{Name: "2.weight", Shape: []int{4, 12}, Data: make([]float32, 48)},
	}, nil))
	require.NoError(t, os.WriteFile(chain, b.Bytes(), 0o644))
	out := filepath.Join(dir, "out.f32")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "overlap infer: --model FILE is required (or --gen-model FILE to write one)"},
		{[]string{"--model", m}, "overlap infer: give --rows N (generated rows, in memory) or --in FILE --out FILE (a stream)"},
		{[]string{"--model", m, "--in", in}, "overlap infer: a stream needs both --in FILE and --out FILE"},
		{[]string{"--model", m, "--in", in, "--out", out, "--rows", "5"}, "overlap infer: --rows runs generated rows in memory; a stream's rows are its --in file's"},
		{[]string{"--model", m, "--in", in, "--out", out, "--repeat", "2"}, "overlap infer: --repeat and --no-baseline apply to the in-memory run (--rows), not to a stream"},
		{[]string{"--model", m, "--in", in, "--out", in}, "overlap infer: --out " + in + " is also the input"},
		{[]string{"--model", m, "--in", in, "--out", out, "--sim", "--devices", "0,1"}, "overlap infer: --devices: a stream runs on one GPU; several share an in-memory run (--rows)"},
		{[]string{"--model", m, "--rows", "5", "--repeat", "0"}, "overlap infer: --repeat 0: want 1 to 1000"},
		{[]string{"--model", m, "--rows", "5", "--precision", "fp16"}, `overlap infer: invalid value "fp16" for flag -precision: want fp32 or tf32, not "fp16"`},
		{[]string{"--model", m, "--rows", "5", "--activation", "tanh"}, `overlap infer: invalid value "tanh" for flag -activation: want relu or gelu, not "tanh"`},
		{[]string{"--model", m, "--rows", "5", "extra"}, `overlap infer: unexpected argument "extra"`},
		{[]string{"--model", m, "--rows", "5", "--widths", "3,4"}, "overlap infer: --widths and --seed go with --gen-model FILE"},
		{[]string{"--gen-model", filepath.Join(dir, "g")}, "overlap infer: --gen-model needs --widths, such as --widths 768,256,16"},
		{[]string{"--gen-model", filepath.Join(dir, "g"), "--widths", "8"}, `overlap infer: invalid value "8" for flag -widths: "8": want the input width and at least one layer's, such as 768,256,16`},
		{[]string{"--gen-model", filepath.Join(dir, "g"), "--widths", "8,0"}, `overlap infer: invalid value "8,0" for flag -widths: "0" is not a width (want positive integers up to 1048576, such as 768,256,16)`},
		{[]string{"--gen-model", filepath.Join(dir, "g"), "--widths", "8,2", "--rows", "4"}, "overlap infer: --rows does not apply to --gen-model, which only writes a model"},
		{[]string{"--gen-model", filepath.Join(dir, "no", "g"), "--widths", "8,2"}, "overlap infer: --gen-model " + filepath.Join(dir, "no", "g") + ": no such directory " + filepath.Join(dir, "no")},
		{[]string{"--model", m, "--gen-input", filepath.Join(dir, "gi")}, "overlap infer: --gen-input needs --rows N"},
		{[]string{"--model", m, "--gen-input", filepath.Join(dir, "gi"), "--rows", "4", "--sim"}, "overlap infer: --sim does not apply to --gen-input, which only writes rows"},
		{[]string{"--model", filepath.Join(dir, "none"), "--rows", "5", "--sim"}, "overlap infer: --model " + filepath.Join(dir, "none") + ": no such file or directory"},
		{[]string{"--model", chain, "--rows", "5", "--sim"}, `overlap infer: --model: ` + chain + `: the layers' widths do not chain: "0.weight" is [16 8] (16 outputs), but "2.weight", the next layer, is [4 12] (12 inputs)`},
		{[]string{"--model", in, "--rows", "5", "--sim"}, "overlap infer: --model: " + in + ": the header length is 0 bytes: too short for a JSON object"},
		{[]string{"--model", m, "--in", ragged, "--out", out, "--sim"}, "overlap infer: --in " + ragged + ": an input of 100 bytes is not a whole number of rows of 8 float32 (32 bytes each)"},
		{[]string{"--model", m, "--in", empty, "--out", out, "--sim"}, "overlap infer: --in " + empty + ": the input is empty: no rows"},
		{[]string{"--model", m, "--in", filepath.Join(dir, "none"), "--out", out, "--sim"}, "overlap infer: --in: stat " + filepath.Join(dir, "none") + ": no such file or directory"},
		{[]string{"--model", m, "--rows", "5000", "--chunk", "9M", "--sim"}, "overlap infer: --chunk: a chunk of 9437184 rows through 0.weight: gemm: 9437184 rows need 73728 blocks along y, more than the 65535 a grid may have: at most 8388480 rows a launch"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, stdout, errOut := runCLI(append([]string{"infer"}, tc.args...)...)
			assert.Equal(t, exitUsage, code)
			assert.Empty(t, stdout)
			assert.Equal(t, tc.want+"\n", errOut)
		})
	}
	_, err := os.Stat(out)
	assert.True(t, os.IsNotExist(err), "nothing written")
}

func TestInferHelp(t *testing.T) {
	code, out, errOut := runCLI("infer", "-h")
	assert.Equal(t, exitOK, code)
	assert.Empty(t, errOut)
	assert.True(t, strings.HasPrefix(out, "usage: overlap infer --model FILE (--rows N | --in FILE --out FILE | --gen-input FILE --rows N) [flags]\n"), out)
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^  (-[a-z-]+)`).FindAllStringSubmatch(out, -1) {
		got = append(got, m[1])
	}
	assert.Equal(t, []string{"-activation", "-chunk", "-devices", "-gen-input", "-gen-model", "-in", "-json", "-model", "-no-baseline", "-out", "-precision", "-quiet", "-repeat", "-rows", "-seed", "-sim", "-verify", "-widths"}, got)
}

func TestInferWithoutDriver(t *testing.T) {
	if driverPresent() {
		t.Skip("a driver is present; this test covers machines without one")
	}
	m := tinyModel(t, t.TempDir())
	code, out, errOut := runCLI("infer", "--model", m, "--rows", "1K")
	assert.Equal(t, exitFail, code)
	assert.Empty(t, out)
	assert.True(t, strings.HasPrefix(errOut, "overlap: no NVIDIA driver found (tried "), errOut)
	assert.True(t, strings.HasSuffix(errOut, "; use --sim to run on the CPU simulator\n"), errOut)
}

// TestInferSimInMemory runs generated rows in memory on one and two
// simulated devices, verifying every value, and prints the table and the
// JSON.
func TestInferSimInMemory(t *testing.T) {
	m := tinyModel(t, t.TempDir())
	code, out, errOut := runCLI("infer", "--model", m, "--rows", "3000", "--sim", "--verify", "--chunk", "512", "--repeat", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "overlap infer: MLP 8→16→4, relu (activation from the file) in fp32 on simulator, 3000 rows (93.8 KiB in, 46.9 KiB out, weights 848 B)")
	assert.Contains(t, out, "chunk 512 rows, 6 slots")
	assert.Contains(t, out, "ROWS/s")
	assert.Contains(t, out, "synchronous ")
	assert.Contains(t, out, "pipeline (")
	assert.Contains(t, out, "stage bound (slowest stage alone, ")
	assert.Contains(t, out, "every value of 2 run(s) matched the float64 CPU reference within the fp32 error bound")

	code, out, errOut = runCLI("infer", "--model", m, "--rows", "2000", "--sim", "--devices", "0,1", "--verify", "--chunk", "256", "--precision", "tf32", "--activation", "gelu", "--json", "--repeat", "1")
	require.Equal(t, exitOK, code, errOut)
	var res inferResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.True(t, res.Simulated)
	assert.Equal(t, "tf32", res.Precision)
	assert.Equal(t, "gelu", res.Activation)
	assert.Equal(t, "option", res.From)
	assert.Equal(t, []int{8, 16, 4}, res.Widths)
	assert.Equal(t, 2000, res.Rows)
	assert.Equal(t, 256, res.ChunkRows)
	require.Len(t, res.Modes, 2)
	assert.Greater(t, res.Modes[1].RowsPerSec, 0.0)
	assert.Contains(t, res.Backend, "2 devices")
	assert.Contains(t, res.Verified, "every value of 2 run(s) matched")
	assert.Equal(t, model.TF32.Tolerance(), res.Tolerance)

	// Without --chunk, a few rows still make 8 chunks a device, in
	// multiples of the GEMM's 128-row tile.
	code, out, errOut = runCLI("infer", "--model", m, "--rows", "3000", "--sim", "--json", "--repeat", "1", "--no-baseline")
	require.Equal(t, exitOK, code, errOut)
	res = inferResult{}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, 384, res.ChunkRows)
	require.Len(t, res.Modes, 1, "no baseline")
	assert.Contains(t, res.Verified, "not verified")
}

// TestInferSimStream streams a file through the model and checks the
// output byte for byte against the CPU's float32 forward, and every value
// against the reference (--verify); then stdin to stdout.
func TestInferSimStream(t *testing.T) {
	dir := t.TempDir()
	mp := tinyModel(t, dir)
	in, out := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.f32")
	const rows = 10007
	code, _, errOut := runCLI("infer", "--model", mp, "--gen-input", in, "--rows", "10007")
	require.Equal(t, exitOK, code, errOut)
	code, stdout, errOut := runCLI("infer", "--model", mp, "--in", in, "--out", out, "--sim", "--verify", "--chunk", "1000")
	require.Equal(t, exitOK, code, errOut)
	m, err := model.Load(mp, model.Options{})
	require.NoError(t, err)
	x := make([]float32, rows*8)
	kernels.FillPattern(x, 0)
	want, err := m.Forward32(x)
	require.NoError(t, err)
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(driver.Bytes(want), got), "the output file holds every row's output")
	assert.Contains(t, stdout, "streaming "+in+" → "+out)
	assert.Contains(t, stdout, "10007 rows (312.7 KiB in, 156.4 KiB out); chunk 1000 rows")
	assert.Contains(t, stdout, "every one of the 10007 rows' 40028 values, read back from "+out+", matched the float64 CPU reference within the fp32 error bound")

	stdin = struct{ io.Reader }{bytes.NewReader(driver.Bytes(x[:300*8]))} // a pipe: no ReadAt
	defer func() { stdin = os.Stdin }()
	code, stdout, errOut = runCLI("infer", "--model", mp, "--in", "-", "--out", "-", "--sim", "--chunk", "128")
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, bytes.Equal(driver.Bytes(want[:300*4]), []byte(stdout)), "stdout holds the outputs alone")
	assert.Contains(t, errOut, "streaming - → -")

	stdin = struct{ io.Reader }{bytes.NewReader(nil)}
	code, stdout, errOut = runCLI("infer", "--model", mp, "--in", "-", "--out", "-", "--sim")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "overlap infer: --in -: the input is empty: no rows\n", errOut)
}

// TestInferStreamStops: a stream cancelled part way (Ctrl-C) fails, says
// how much of the output is there, and leaves an exact prefix of the
// correct output.
func TestInferStreamStops(t *testing.T) {
	dir := t.TempDir()
	mp := tinyModel(t, dir)
	out := filepath.Join(dir, "out.f32")
	m, err := model.Load(mp, model.Options{})
	require.NoError(t, err)
	const rows = 20000
	x := make([]float32, rows*8)
	kernels.FillPattern(x, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdin = &cancelAfter{r: bytes.NewReader(driver.Bytes(x)), left: rows * 32 / 2, cancel: cancel}
	defer func() { stdin = os.Stdin }()
	o := &inferOptions{model: mp, in: "-", out: out, repeat: 1, chunk: 512}
	o.run.sim, o.run.devices = true, []int{0}
	_, err = executeInferStream(ctx, o, m, io.Discard, io.Discard)
	require.Error(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "("+out+" holds the first ")
	got, rerr := os.ReadFile(out)
	require.NoError(t, rerr)
	want, ferr := m.Forward32(x)
	require.NoError(t, ferr)
	assert.Less(t, len(got), rows*16)
	assert.Zero(t, len(got)%16, "whole rows")
	assert.True(t, bytes.Equal(driver.Bytes(want)[:len(got)], got), "an exact prefix of the correct output")
}

// cancelAfter reads from r and cancels after left bytes, as Ctrl-C does
// part way through a stream.
type cancelAfter struct {
	r      io.Reader
	left   int
	cancel func()
}

func (c *cancelAfter) Read(b []byte) (int, error) {
	if c.left <= 0 {
		c.cancel()
	}
	n, err := c.r.Read(b[:min(len(b), max(c.left, 1))])
	c.left -= n
	return n, err
}

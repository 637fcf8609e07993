package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// overlap infer on the simulator, with a tiny model.

// The results' types in package bench, by the names that these tests
// were written with.
type (
	inferResult          = bench.InferResult
	inferStreamResult    = bench.InferStreamResult
	inferReferenceResult = bench.InferReferenceResult
	torchResult          = bench.TorchResult
	torchVariant         = bench.TorchVariant
)

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

// TestGenModelTooLarge: --gen-model with widths whose parameters the
// host cannot hold is refused up front; the trial's --widths
// 100000,100000 (40 GB) ended in Go's "fatal error: runtime: out of
// memory" and 113 lines of stacks.
func TestGenModelTooLarge(t *testing.T) {
	if _, ok := availableMemory(); !ok {
		t.Skip("skipping: this host does not say how much memory is available")
	}
	out := filepath.Join(t.TempDir(), "g.safetensors")
	code, stdout, errOut := runCLI("infer", "--gen-model", out, "--widths", "1048576,1048576")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Contains(t, errOut, "overlap infer: --widths 1048576,1048576: the model's parameters need 4096.0 GiB of host memory, more than the ")
	assert.Contains(t, errOut, " available; use smaller widths\n")
	assert.NoFileExists(t, out)
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
		{[]string{"--model", m, "--in", in, "--out", in}, "overlap infer: --out " + in + " is the input file " + in + ": writing it would erase the input"},
		{[]string{"--model", m, "--in", in, "--out", m}, "overlap infer: --out " + m + " is the model file " + m + ": writing it would erase the model"},
		{[]string{"--model", m, "--in", in, "--out", out, "--chunk", "1K,2K"}, "overlap infer: --chunk: a stream runs one chunk size; several are for the in-memory run (--rows)"},
		{[]string{"--model", m, "--rows", "5", "--chunk", "1K,1K"}, `overlap infer: --chunk "1K,1K": 1K is listed twice`},
		{[]string{"--model", m, "--rows", "5", "--chunk", "1K,0"}, `overlap infer: --chunk "1K,0": "0": must be positive`},
		{[]string{"--model", m, "--rows", "5", "--bound"}, "overlap infer: --bound measures a stream's bound (--in FILE --out FILE); the in-memory run measures each stage alone anyway"},
		{[]string{"--model", m, "--in", "-", "--out", out, "--bound"}, "overlap infer: --bound reads the input alone: it needs a file, not stdin (--in -)"},
		{[]string{"--model", m, "--rows", "5", "--timing-only"}, "overlap infer: --timing-only needs --sim: a GPU always moves the bytes"},
		{[]string{"--model", m, "--rows", "5", "--timing-only", "--sim", "--verify"}, "overlap infer: --timing-only computes nothing, so there is nothing to --verify or compare with --reference"},
		{[]string{"--model", m, "--in", in, "--out", out, "--timing-only", "--sim"}, "overlap infer: --timing-only is for the in-memory run (--rows): a stream's bytes come from its files"},
		{[]string{"--model", m, "--in", in, "--out", out, "--reference"}, "overlap infer: --reference compares an in-memory run (--rows) with PyTorch's, not a stream"},
		{[]string{"--model", m, "--rows", "5", "--profile", in}, "overlap infer: --profile needs --sim: a GPU measures its own times"},
		{[]string{"--model", m, "--rows", "5", "--sim", "--profile", filepath.Join(dir, "none.json")}, "overlap infer: --profile " + filepath.Join(dir, "none.json") + ": no such file"},
		{[]string{"--model", m, "--rows", "5", "--sim", "--profile", in}, "overlap infer: --profile: pipeline: profile: invalid character '\\x00' looking for beginning of value (in " + in + ")"},
		{[]string{"--model", m, "--rows", "5", "--python", "python3"}, "overlap infer: --python and --reference-dir go with --reference"},
		{[]string{"--model", m, "--rows", "5", "--reference", "--python", "no-such-python-for-overlap"}, "overlap infer: --reference runs the PyTorch twin with no-such-python-for-overlap, which is not found (--python names another): executable file not found in $PATH"},
		{[]string{"--model", m, "--rows", "5", "--reference", "--python", "sh", "--reference-dir", in}, "overlap infer: --reference-dir " + in + ": not a directory"},
		{[]string{"--model", m, "--rows", "5", "--json-out", m}, "overlap infer: --json-out " + m + " is also the model, the input or the output"},
		{[]string{"--model", m, "--in", in, "--out", out, "--json-out", in}, "overlap infer: --json-out " + in + " is also the model, the input or the output"},
		{[]string{"--model", m, "--rows", "5", "--json-out", filepath.Join(dir, "no", "r.json")}, "overlap infer: --json-out " + filepath.Join(dir, "no", "r.json") + ": no such directory " + filepath.Join(dir, "no")},
		{[]string{"--gen-model", filepath.Join(dir, "g"), "--widths", "8,2", "--bound"}, "overlap infer: --bound does not apply to --gen-model, which only writes a model"},
		{[]string{"--model", m, "--gen-input", filepath.Join(dir, "gi"), "--rows", "4", "--reference"}, "overlap infer: --reference does not apply to --gen-input, which only writes rows"},
		{[]string{"--model", m, "--rows", "4M", "--chunk", "1", "--sim", "--timing-only"}, "overlap infer: --chunk 1 cuts --rows 4194304 into 4194304 chunks; the simulator takes at most 1048576: use a larger --chunk"},
		{[]string{"--model", m, "--rows", "5", "--repeat", "0"}, "overlap infer: --repeat 0: want 1 to 1000"},
		{[]string{"--model", m, "--rows", "5", "--precision", "fp16"}, `overlap infer: --precision "fp16": want fp32 or tf32, not "fp16"`},
		{[]string{"--model", m, "--rows", "5", "--activation", "tanh"}, `overlap infer: --activation "tanh": want relu or gelu, not "tanh"`},
		{[]string{"--model", m, "--rows", "5", "extra"}, `overlap infer: unexpected argument "extra"`},
		{[]string{"--model", m, "--rows", "5", "--widths", "3,4"}, "overlap infer: --widths and --seed go with --gen-model FILE"},
		{[]string{"--gen-model", filepath.Join(dir, "g")}, "overlap infer: --gen-model needs --widths, such as --widths 768,256,16"},
		{[]string{"--gen-model", filepath.Join(dir, "g"), "--widths", "8"}, `overlap infer: --widths "8": want the input width and at least one layer's, such as 768,256,16`},
		{[]string{"--gen-model", filepath.Join(dir, "g"), "--widths", "8,0"}, `overlap infer: --widths "8,0": "0" is not a width (want positive integers up to 1048576, such as 768,256,16)`},
		{[]string{"--gen-model", filepath.Join(dir, "g"), "--widths", "8,2", "--rows", "4"}, "overlap infer: --rows does not apply to --gen-model, which only writes a model"},
		{[]string{"--gen-model", filepath.Join(dir, "no", "g"), "--widths", "8,2"}, "overlap infer: --gen-model " + filepath.Join(dir, "no", "g") + ": no such directory " + filepath.Join(dir, "no")},
		{[]string{"--model", m, "--gen-input", filepath.Join(dir, "gi")}, "overlap infer: --gen-input needs --rows N"},
		{[]string{"--model", m, "--gen-input", m, "--rows", "10"}, "overlap infer: --gen-input " + m + " is the model file " + m + ": writing it would erase the model"},
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
	assert.True(t, strings.HasPrefix(out, "usage: overlap infer --model FILE (--rows N [--reference] | --in FILE --out FILE | --gen-input FILE --rows N) [flags]\n"), out)
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^  (-[a-z-]+)`).FindAllStringSubmatch(out, -1) {
		got = append(got, m[1])
	}
	assert.Equal(t, []string{"-activation", "-bound", "-chunk", "-devices", "-gen-input", "-gen-model", "-in", "-json", "-json-out", "-model", "-no-baseline", "-out", "-precision",
		"-profile", "-python", "-quiet", "-reference", "-reference-dir", "-repeat", "-rows", "-seed", "-sim", "-timing-only", "-verify", "-widths"}, got)
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
// simulated devices, at one and several chunk sizes, verifying every
// value, and prints the table and the JSON: each chunk size's median and
// fastest run, the stages alone with the copies both ways at once in the
// bound, and the efficiency against it.
func TestInferSimInMemory(t *testing.T) {
	m := tinyModel(t, t.TempDir())
	code, out, errOut := runCLI("infer", "--model", m, "--rows", "3000", "--sim", "--verify", "--chunk", "512,1K", "--repeat", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "overlap infer: MLP 8→16→4, relu (activation from the file) in fp32 on simulator, 3000 rows (93.8 KiB in, 46.9 KiB out, weights 848 B)")
	assert.Contains(t, out, "input generated: overlap's standard pattern; host memory registered (page-locked once, in place); 48 slots\n")
	assert.Regexp(t, `(?m)^CHUNK +MEDIAN +MIN +ROWS/s +GB/s\n512 .*\n1024 .*$`, out)
	assert.Contains(t, out, "ROWS/s")
	assert.Contains(t, out, "synchronous ")
	assert.Regexp(t, `(?m)^pipeline \(chunk (512|1024)\) `, out)
	assert.Regexp(t, `stage bound \(slowest stage alone, [^)]+\): [0-9.]+ ms \(H2D [0-9.]+ ms, compute [0-9.]+ ms, D2H [0-9.]+ ms, H2D\+D2H at once [0-9.]+ ms\)`, out)
	assert.Contains(t, out, "efficiency = stage bound / the pipeline's median time; every value of 2 run(s) matched the float64 CPU reference within the fp32 error bound")
	assert.NotContains(t, out, "note:", "the built-in profile costs the GEMM")

	code, out, errOut = runCLI("infer", "--model", m, "--rows", "3000", "--sim", "--chunk", "512,1K,256", "--repeat", "3", "--json")
	require.Equal(t, exitOK, code, errOut)
	var res inferResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.Len(t, res.Chunks, 3)
	fastest := res.Chunks[0]
	for i, c := range res.Chunks {
		assert.Equal(t, []int{512, 1024, 256}[i], c.ChunkRows)
		require.Len(t, c.RunsMs, 3)
		sorted := append([]float64(nil), c.RunsMs...)
		sort.Float64s(sorted)
		assert.Equal(t, sorted[1], c.Ms, "the median")
		assert.Equal(t, sorted[0], c.MinMs)
		assert.InEpsilon(t, 3000/(c.Ms/1e3), c.RowsPerSec, 1e-9)
		if c.Ms < fastest.Ms {
			fastest = c
		}
	}
	assert.Equal(t, fastest.ChunkRows, res.ChunkRows)
	require.Len(t, res.Modes, 2)
	p := res.Modes[1]
	assert.Equal(t, "pipeline", p.Mode)
	assert.Equal(t, fastest.ChunkRows, p.ChunkRows)
	assert.Equal(t, fastest.Ms, p.Ms)
	assert.Equal(t, fastest.MinMs, p.MinMs)
	st := res.Stages
	assert.Positive(t, st.CopiesMs, "one device: the copies both ways at once are measured too")
	assert.GreaterOrEqual(t, st.CopiesMs, max(st.H2DMs, st.D2HMs))
	assert.Equal(t, max(st.H2DMs, st.ComputeMs, st.D2HMs, st.CopiesMs), st.BoundMs)
	assert.InEpsilon(t, st.BoundMs/p.Ms, res.Efficiency, 1e-12)
	assert.Equal(t, res.Efficiency, p.Efficiency)
	assert.Equal(t, "fp32", res.Precision)
	assert.Equal(t, 2.0*(8*16+16*4), res.FLOPsPerRow)
	assert.Empty(t, res.Notes)
	assert.Positive(t, res.UploadMs)

	code, out, errOut = runCLI("infer", "--model", m, "--rows", "2000", "--sim", "--devices", "0,1", "--verify", "--chunk", "256", "--precision", "tf32", "--activation", "gelu", "--json", "--repeat", "1")
	require.Equal(t, exitOK, code, errOut)
	res = inferResult{}
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
	assert.Positive(t, res.Stages.CopiesMs, "a group measures its copies both ways at once")
	assert.Contains(t, res.Verified, "every value of 2 run(s) matched")
	assert.Equal(t, model.TF32.Tolerance(), res.Tolerance)

	// --json-out writes the JSON beside the table.
	jsonFile := filepath.Join(t.TempDir(), "r.json")
	code, out, errOut = runCLI("infer", "--model", m, "--rows", "1000", "--sim", "--repeat", "1", "--json-out", jsonFile)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "stage bound (slowest stage alone, ")
	b, err := os.ReadFile(jsonFile)
	require.NoError(t, err)
	res = inferResult{}
	require.NoError(t, json.Unmarshal(b, &res))
	assert.Equal(t, 1000, res.Rows)

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

// profileWithoutGemm writes the built-in profile less its GEMM entries
// to a file, and returns its path.
func profileWithoutGemm(t *testing.T) string {
	p := sim.BuiltinProfile()
	delete(p.Kernels, "gemm_f32")
	delete(p.Kernels, "gemm_tf32")
	path := filepath.Join(t.TempDir(), "nogemm.json")
	require.NoError(t, p.Write(path))
	return path
}

// noteFor is what a simulator of the profile at path says about a model
// layer's kernel at precision p (Report.Notes), which it has no cost for.
func noteFor(t *testing.T, path string, p model.Precision) string {
	prof, err := sim.ReadProfile(path)
	require.NoError(t, err)
	m, err := model.Random([]int{4, 2}, model.ReLU, 1)
	require.NoError(t, err)
	k, err := m.Kernel(model.KernelOptions{Precision: p})
	require.NoError(t, err)
	cfg, err := m.Config(16)
	require.NoError(t, err)
	pl, err := pipeline.New(sim.NewHost(sim.HostOptions{}).NewDevice(prof), cfg)
	require.NoError(t, err)
	defer pl.Close()
	rep, err := pl.Run(context.Background(), pipeline.Job{N: 16, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Rows(make([]float32, 64), 4)}, Outputs: []pipeline.Buffer{pipeline.Rows(make([]float32, 32), 2)}})
	require.NoError(t, err)
	require.Len(t, rep.Notes, 1)
	require.Contains(t, rep.Notes[0], "has no cost for kernel")
	return rep.Notes[0]
}

// TestInferPrintsNotes: a profile without a cost for the GEMM makes the
// simulator say what it charged instead, in the table and the JSON, once
// per kernel, for a run in memory and a stream.
func TestInferPrintsNotes(t *testing.T) {
	dir := t.TempDir()
	m := tinyModel(t, dir)
	prof := profileWithoutGemm(t)
	want := noteFor(t, prof, model.FP32)
	code, out, errOut := runCLI("infer", "--model", m, "--rows", "3000", "--sim", "--profile", prof, "--chunk", "512,1K", "--repeat", "2")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, 1, strings.Count(out, "\nnote: "+want+"\n"), out)
	assert.Contains(t, out, "times predicted for NVIDIA H200 ("+prof+")")

	code, out, errOut = runCLI("infer", "--model", m, "--rows", "3000", "--sim", "--profile", prof, "--precision", "tf32", "--json", "--repeat", "1")
	require.Equal(t, exitOK, code, errOut)
	var res inferResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.Equal(t, []string{noteFor(t, prof, model.TF32)}, res.Notes)

	in, outFile := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.f32")
	code, _, errOut = runCLI("infer", "--model", m, "--gen-input", in, "--rows", "2000")
	require.Equal(t, exitOK, code, errOut)
	code, out, errOut = runCLI("infer", "--model", m, "--in", in, "--out", outFile, "--sim", "--profile", prof, "--chunk", "1K")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "\nnote: "+want+"\n")
}

// TestInferSimStream streams a file through the model and checks the
// output byte for byte against the CPU's float32 forward, and every value
// against the reference (--verify); on two simulated devices the same;
// then stdin to stdout.
func TestInferSimStream(t *testing.T) {
	dir := t.TempDir()
	mp := tinyModel(t, dir)
	in, out := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.f32")
	const rows = 10007
	code, _, errOut := runCLI("infer", "--model", mp, "--gen-input", in, "--rows", "10007")
	require.Equal(t, exitOK, code, errOut)
	m, err := model.Load(mp, model.Options{})
	require.NoError(t, err)
	x := make([]float32, rows*8)
	kernels.FillPattern(x, 0)
	want, err := m.Forward32(x)
	require.NoError(t, err)
	for _, devices := range []string{"0", "0,1"} {
		os.Remove(out)
		code, stdout, errOut := runCLI("infer", "--model", mp, "--in", in, "--out", out, "--sim", "--verify", "--chunk", "1000", "--devices", devices)
		require.Equal(t, exitOK, code, errOut)
		got, err := os.ReadFile(out)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(driver.Bytes(want), got), "devices %s: the output file holds every row's output", devices)
		assert.Contains(t, stdout, "streaming "+in+" → "+out)
		assert.Contains(t, stdout, "10007 rows (312.7 KiB in, 156.4 KiB out); chunk 1000 rows")
		assert.Contains(t, stdout, "every one of the 10007 rows' 40028 values, read back from "+out+", matched the float64 CPU reference within the fp32 error bound")
		if devices == "0,1" {
			assert.Contains(t, stdout, "on 2 devices (simulator ×2)")
			assert.Regexp(t, `(?m)^DEVICE +NAME +CHUNKS\n0 +simulator +\d+\n1 +simulator +\d+$`, stdout)
		}
	}

	stdin = struct{ io.Reader }{bytes.NewReader(driver.Bytes(x[:300*8]))} // a pipe: no ReadAt
	defer func() { stdin = os.Stdin }()
	code, stdout, errOut := runCLI("infer", "--model", mp, "--in", "-", "--out", "-", "--sim", "--chunk", "128")
	require.Equal(t, exitOK, code, errOut)
	assert.True(t, bytes.Equal(driver.Bytes(want[:300*4]), []byte(stdout)), "stdout holds the outputs alone")
	assert.Contains(t, errOut, "streaming - → -")

	stdin = struct{ io.Reader }{bytes.NewReader(nil)}
	code, stdout, errOut = runCLI("infer", "--model", mp, "--in", "-", "--out", "-", "--sim")
	assert.Equal(t, exitUsage, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "overlap infer: --in -: the input is empty: no rows\n", errOut)
}

// TestInferSimStreamBound: --bound measures reading the input alone,
// writing as much alone and the in-memory pipeline over as many rows, the
// slowest the bound, and the efficiency against it, in the table and the
// JSON, with the peak RSS; on two devices too, and the output is still
// every row's.
func TestInferSimStreamBound(t *testing.T) {
	dir := t.TempDir()
	mp := tinyModel(t, dir)
	in, out := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.f32")
	code, _, errOut := runCLI("infer", "--model", mp, "--gen-input", in, "--rows", "20000")
	require.Equal(t, exitOK, code, errOut)
	code, stdout, errOut := runCLI("infer", "--model", mp, "--in", in, "--out", out, "--sim", "--bound", "--chunk", "2K")
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `bound, measured in this run \(slowest alone\): [0-9.]+ ms, (read|write|in-memory pipeline) \(read the input into pinned memory [0-9.]+ ms, in-memory pinned pipeline [0-9.]+ ms, write the output [0-9.]+ ms\)`, stdout)
	assert.Regexp(t, `the in-memory pipeline's stages alone: H2D [0-9.]+ ms, compute [0-9.]+ ms, D2H [0-9.]+ ms, H2D\+D2H at once [0-9.]+ ms`, stdout)
	assert.Regexp(t, `efficiency = bound / streaming time: [0-9.]+%`, stdout)
	for _, devices := range []string{"0", "0,1"} {
		os.Remove(out)
		code, stdout, errOut = runCLI("infer", "--model", mp, "--in", in, "--out", out, "--sim", "--bound", "--chunk", "2K", "--json", "--verify", "--devices", devices)
		require.Equal(t, exitOK, code, errOut)
		var res inferStreamResult
		require.NoError(t, json.Unmarshal([]byte(stdout), &res), stdout)
		b := res.Bound
		require.NotNil(t, b)
		assert.Positive(t, b.ReadMs)
		assert.Positive(t, b.PipelineMs)
		assert.True(t, b.WriteMeasured)
		assert.Positive(t, b.WriteMs)
		assert.Equal(t, max(b.ReadMs, b.PipelineMs, b.WriteMs), b.BoundMs)
		assert.InEpsilon(t, b.BoundMs/res.Ms, b.Efficiency, 1e-12)
		require.NotNil(t, res.BoundStages)
		assert.Positive(t, res.BoundStages.CopiesMs, "devices %s", devices)
		assert.Equal(t, int64(20000), res.Rows)
		if runtime.GOOS == "linux" {
			assert.Positive(t, res.PeakRSS)
		}
		assert.Contains(t, res.Verified, "every one of the 20000 rows' 80000 values")
		assert.Equal(t, model.FP32.Tolerance(), res.Tolerance)
		if devices == "0,1" {
			require.Len(t, res.Devices, 2)
			assert.Equal(t, 10, res.Devices[0].Chunks+res.Devices[1].Chunks)
		}
	}
}

// TestInferTimingOnly: --timing-only predicts the same times as the
// simulator that moves every byte and computes every value, without
// doing either: 1M rows of the 768→256→16 model take moments.
func TestInferTimingOnly(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "m.safetensors")
	code, _, errOut := runCLI("infer", "--gen-model", small, "--widths", "64,128,8")
	require.Equal(t, exitOK, code, errOut)
	var res [2]inferResult
	for i, extra := range [][]string{nil, {"--timing-only"}} {
		code, out, errOut := runCLI(append([]string{"infer", "--model", small, "--rows", "20000", "--sim", "--chunk", "2K,4K", "--repeat", "2", "--json"}, extra...)...)
		require.Equal(t, exitOK, code, errOut)
		require.NoError(t, json.Unmarshal([]byte(out), &res[i]))
	}
	assert.False(t, res[0].TimingOnly)
	assert.True(t, res[1].TimingOnly)
	// The same times, within 3%: the two runs order the simulated host's
	// goroutines alike, but not always to the nanosecond where real
	// scheduling decides which of two goroutines reaches the simulated
	// clock first (seen under -race on a loaded 2-core machine: 0.212014
	// against 0.211871 ms).
	same := func(what string, a, b float64) {
		t.Helper()
		assert.InEpsilon(t, a, b, 0.03, "%s: the same times", what)
	}
	require.Len(t, res[1].Chunks, len(res[0].Chunks))
	for i := range res[0].Chunks {
		assert.Equal(t, res[0].Chunks[i].ChunkRows, res[1].Chunks[i].ChunkRows)
		same(fmt.Sprintf("chunk %d", res[0].Chunks[i].ChunkRows), res[0].Chunks[i].Ms, res[1].Chunks[i].Ms)
	}
	require.Len(t, res[1].Modes, len(res[0].Modes))
	for i := range res[0].Modes {
		assert.Equal(t, res[0].Modes[i].Mode, res[1].Modes[i].Mode)
		same(res[0].Modes[i].Mode, res[0].Modes[i].Ms, res[1].Modes[i].Ms)
	}
	st0, st1 := res[0].Stages, res[1].Stages
	same("H2D", st0.H2DMs, st1.H2DMs)
	same("compute", st0.ComputeMs, st1.ComputeMs)
	same("D2H", st0.D2HMs, st1.D2HMs)
	same("bound", st0.BoundMs, st1.BoundMs)
	assert.Equal(t, "not verified: the simulator computed nothing (--timing-only)", res[1].Verified)

	big := filepath.Join(dir, "big.safetensors")
	code, _, errOut = runCLI("infer", "--gen-model", big, "--widths", "768,256,16")
	require.Equal(t, exitOK, code, errOut)
	start := time.Now()
	code, out, errOut := runCLI("infer", "--model", big, "--rows", "1M", "--sim", "--timing-only", "--chunk", "64K", "--repeat", "1")
	require.Equal(t, exitOK, code, errOut)
	assert.Less(t, time.Since(start), 60*time.Second)
	assert.Contains(t, out, "1048576 rows (3.0 GiB in, 64.0 MiB out")
	assert.Contains(t, out, "[simulated, timing only: times predicted for NVIDIA H200 (built-in profile)]")
	assert.Contains(t, out, "input none: the simulator moved no bytes (--timing-only)")
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
	o := &inferOptions{model: mp, in: "-", out: out, repeat: 1, chunks: []int{512}}
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

// TestInferOutputThatIsAnInputIsRefused guards issue 27's data loss in
// overlap infer: --out naming the input (or the model) by another spelling
// truncated it to 0 bytes before the stream refused to run.
func TestInferOutputThatIsAnInputIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	tinyModel(t, dir)
	code, _, errOut := runCLI("infer", "--model", "m.safetensors", "--gen-input", "in.f32", "--rows", "1000")
	require.Equal(t, exitOK, code, errOut)
	want, err := os.ReadFile("in.f32")
	require.NoError(t, err)
	model, err := os.ReadFile("m.safetensors")
	require.NoError(t, err)
	require.NoError(t, os.Mkdir("sub", 0o755))
	require.NoError(t, os.Symlink("in.f32", "link.f32"))
	require.NoError(t, os.Link("in.f32", "hard.f32"))
	require.NoError(t, os.Symlink("m.safetensors", "mlink"))
	abs := filepath.Join(dir, "in.f32")
	for _, tc := range []struct{ out, what string }{
		{"./in.f32", "input"}, {abs, "input"}, {"link.f32", "input"}, {"hard.f32", "input"},
		{"sub/../in.f32", "input"}, {"./m.safetensors", "model"}, {"mlink", "model"},
	} {
		t.Run(tc.out, func(t *testing.T) {
			code, _, errOut := runCLI("infer", "--model", "m.safetensors", "--in", "in.f32", "--out", tc.out, "--sim")
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, errOut, "writing it would erase the "+tc.what)
			got, err := os.ReadFile(abs)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "the input is left as it was (%d bytes of %d)", len(got), len(want))
			gotModel, err := os.ReadFile("m.safetensors")
			require.NoError(t, err)
			assert.True(t, bytes.Equal(model, gotModel), "the model is left as it was (%d bytes of %d)", len(gotModel), len(model))
		})
	}
}

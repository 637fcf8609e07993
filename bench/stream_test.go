package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simDevices are k simulated H200s on one host.
func simDevices(k int) []pipeline.Backend {
	host := sim.NewHost(sim.HostOptions{Seed: 1})
	var bs []pipeline.Backend
	for range k {
		bs = append(bs, host.NewDevice(sim.BuiltinProfile()))
	}
	return bs
}

// patternFile writes n float32 of overlap's pattern to a file in dir.
func patternFile(t *testing.T, dir, name string, n int) string {
	t.Helper()
	x := make([]float32, n)
	kernels.FillPattern(x, 0)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, driver.Bytes(x), 0o644))
	return path
}

// TestStreamOnSim: Stream streams a file through the seed kernel, with
// the bound and the read-back check, and says so in its result; a file
// that cannot be opened is an *OpenError inside a *Error.
func TestStreamOnSim(t *testing.T) {
	dir := t.TempDir()
	in := patternFile(t, dir, "in.f32", 64<<10)
	out := filepath.Join(dir, "out.f32")
	var msgs []string
	res, err := Stream(context.Background(), simDevices(1)[0], StreamOptions{Inputs: []string{in}, Output: out, Iters: 5, ChunkElems: 16 << 10,
		Bound: true, Verify: true, Progress: func(m string) { msgs = append(msgs, m) }})
	require.NoError(t, err)
	assert.True(t, res.Simulated)
	assert.Equal(t, "seed", res.Kernel)
	assert.Equal(t, 5, res.Iters)
	assert.Equal(t, int64(64<<10), res.Elems)
	assert.Equal(t, int64(256<<10), res.InBytes)
	assert.Equal(t, int64(256<<10), res.OutBytes)
	assert.Equal(t, 16<<10, res.ChunkElems)
	var stages []string
	for _, s := range res.Stages {
		stages = append(stages, s.Stage)
	}
	assert.Equal(t, []string{"read", "H2D", "compute", "D2H", "write"}, stages)
	require.NotNil(t, res.Bound)
	assert.True(t, res.Bound.WriteMeasured)
	assert.Positive(t, res.Bound.BoundMs)
	assert.Equal(t, "every one of the 65536 output elements, read back from "+out+", matched the CPU reference", res.Verified)
	assert.Equal(t, []string{"bound: reading the inputs alone (twice)…", "bound: writing the output alone (twice)…", "warming up…", "streaming…",
		"timing the device's stages alone…", "verifying every element from " + out + "…"}, msgs)

	_, err = Stream(context.Background(), simDevices(1)[0], StreamOptions{Inputs: []string{filepath.Join(dir, "none.f32")}, Output: out})
	var oe *OpenError
	require.ErrorAs(t, err, &oe)
	assert.False(t, oe.Output)
	var be *Error
	require.ErrorAs(t, err, &be)
	assert.Equal(t, "Stream", be.Op)

	for _, tc := range []struct {
		o    StreamOptions
		want string
	}{
		{StreamOptions{Output: out}, "bench: Stream: no input or no output file"},
		{StreamOptions{Inputs: []string{"-"}, Output: out}, "bench: Stream: input - (stdin) but no Stdin"},
		{StreamOptions{Inputs: []string{in}, Output: "-"}, "bench: Stream: output - (stdout) but no Stdout"},
		{StreamOptions{Inputs: []string{"-"}, Output: out, Stdin: bytes.NewReader(nil), Bound: true}, "bench: Stream: the options Verify and Bound read the inputs back from their files: an input is stdin (-)"},
		{StreamOptions{Inputs: []string{in}, Output: out, Kernel: "gemm"}, `bench: Stream: Kernel "gemm": unknown (have axpb, lerp, saxpy, seed)`},
	} {
		_, err := Stream(context.Background(), simDevices(1)[0], tc.o)
		assert.EqualError(t, err, tc.want)
	}
	_, err = Stream(context.Background(), nil, StreamOptions{Inputs: []string{in}, Output: out})
	assert.EqualError(t, err, "bench: Stream: no backend")
}

// TestScalingOnSim: Scaling gives a row for each size, host mode and
// device count, in that order, each verified, with the speedup over one
// device.
func TestScalingOnSim(t *testing.T) {
	var msgs []string
	rows, err := Scaling(context.Background(), simDevices(2), ScalingOptions{Sizes: []int{64 << 10}, Iters: 5, ChunkElems: 16 << 10,
		Progress: func(m string) { msgs = append(msgs, m) }})
	require.NoError(t, err)
	require.Len(t, rows, 6)
	want := []string{"pinned", "pinned", "registered", "registered", "auto", "auto"}
	for i, r := range rows {
		assert.Equal(t, 64<<10, r.Elems)
		assert.Equal(t, i%2+1, r.Devices)
		assert.Contains(t, r.Host, want[i])
		assert.Len(t, r.Chunks, r.Devices)
		assert.Positive(t, r.Ms)
		if r.Devices == 1 {
			assert.Equal(t, 1.0, r.Speedup)
		}
	}
	assert.Equal(t, "64K elements, pinned, 1 device(s)…", msgs[0])

	for _, r := range rows {
		assert.Equal(t, 16<<10, r.ChunkElems, "the chunk asked for")
	}

	_, err = Scaling(context.Background(), nil, ScalingOptions{})
	assert.EqualError(t, err, "bench: Scaling: no backend")
	_, err = Scaling(context.Background(), simDevices(1), ScalingOptions{Slots: 2, ComputeStreams: 4})
	assert.EqualError(t, err, "bench: Scaling: Slots 2: fewer than the 4 compute streams")
}

// TestScalingDefaultChunks: with no ChunkElems, each size runs in the
// chunk that overlap run takes for it (pipeline.DefaultChunkFor), so a
// small job still has chunks for every device; the trial's 1M job ran as
// one chunk of 1M, and its second device took none.
func TestScalingDefaultChunks(t *testing.T) {
	rows, err := Scaling(context.Background(), simDevices(2), ScalingOptions{Sizes: []int{256 << 10, 3 << 20}, Iters: 1})
	require.NoError(t, err)
	require.Len(t, rows, 12)
	for _, r := range rows {
		want := pipeline.DefaultChunkFor(r.Elems)
		assert.Equal(t, want, r.ChunkElems, "%d elements", r.Elems)
		total := 0
		for _, c := range r.Chunks {
			total += c
			if r.Devices == 2 && r.Elems/want >= 8*r.Devices { // a queue of two chunks may go to one device
				assert.Positive(t, c, "%d elements: every device takes chunks", r.Elems)
			}
		}
		assert.Equal(t, (r.Elems+want-1)/want, total, "%d elements", r.Elems)
	}
	assert.Equal(t, 128<<10, pipeline.DefaultChunkFor(256<<10), "the test's premise: a job of two chunks")
	_, err = Scaling(context.Background(), simDevices(1), ScalingOptions{ChunkElems: -1})
	assert.EqualError(t, err, "bench: Scaling: ChunkElems -1: must not be negative")
}

// testModel is a small random MLP and its kernel for the simulator.
func testModel(t *testing.T) (*model.Model, *pipeline.Kernel) {
	t.Helper()
	m, err := model.Random([]int{64, 32, 8}, model.ReLU, 1)
	require.NoError(t, err)
	k, err := m.Kernel(model.KernelOptions{})
	require.NoError(t, err)
	return m, k
}

// TestInferOnSim: InferInMemory runs the baseline and each chunk size,
// keeps the fastest, verifies, and returns the rows; InferStream streams
// a file through the model and verifies it; an empty input is ErrNoRows.
func TestInferOnSim(t *testing.T) {
	m, k := testModel(t)
	res, err := InferInMemory(context.Background(), simDevices(1), k, m, InferOptions{Rows: 4096, Chunks: []int{1024, 2048}, Verify: true})
	require.NoError(t, err)
	assert.True(t, res.Simulated)
	require.Len(t, res.Chunks, 2)
	require.Len(t, res.Modes, 2)
	assert.Equal(t, "synchronous", res.Modes[0].Mode)
	assert.Equal(t, "pipeline", res.Modes[1].Mode)
	assert.Equal(t, res.ChunkRows, res.Modes[1].ChunkRows)
	assert.Len(t, res.X, 4096*64)
	assert.Len(t, res.Y, 4096*8)
	assert.Contains(t, res.Verified, "every value of 2 run(s) matched the float64 CPU reference")
	require.NoError(t, m.Verify(res.X, res.Y, model.VerifyOptions{}), "Y is the fastest chunk size's output")

	_, err = InferInMemory(context.Background(), simDevices(1), k, m, InferOptions{})
	assert.EqualError(t, err, "bench: InferInMemory: 0 rows: want at least 1")
	_, err = InferInMemory(context.Background(), simDevices(1), k, m, InferOptions{Rows: 2, X: make([]float32, 3)})
	assert.EqualError(t, err, "bench: InferInMemory: 3 input values: 2 rows of 64 need 128")
	_, err = InferInMemory(context.Background(), nil, k, m, InferOptions{Rows: 1})
	assert.EqualError(t, err, "bench: InferInMemory: no backend, kernel or model")

	dir := t.TempDir()
	in := patternFile(t, dir, "rows.f32", 2048*64)
	out := filepath.Join(dir, "y.f32")
	sr, err := InferStream(context.Background(), simDevices(2), k, m, InferStreamOptions{Input: in, Output: out, ChunkRows: 256, Verify: true, Bound: true})
	require.NoError(t, err)
	assert.Equal(t, int64(2048), sr.Rows)
	assert.Equal(t, "2 devices (simulator ×2)", sr.Backend)
	require.Len(t, sr.Devices, 2)
	assert.Equal(t, []int{0, 1}, []int{sr.Devices[0].Device, sr.Devices[1].Device})
	require.NotNil(t, sr.Bound)
	require.NotNil(t, sr.BoundStages)
	assert.Contains(t, sr.Verified, "every one of the 2048 rows' 16384 values, read back from "+out)

	empty := filepath.Join(dir, "empty.f32")
	require.NoError(t, os.WriteFile(empty, nil, 0o644))
	_, err = InferStream(context.Background(), simDevices(1), k, m, InferStreamOptions{Input: empty, Output: filepath.Join(dir, "y2.f32")})
	assert.EqualError(t, err, "bench: InferStream: model: the input is empty: no rows", "an empty file, known before the stream")
	_, err = InferStream(context.Background(), simDevices(1), k, m, InferStreamOptions{Input: "-", Stdin: bytes.NewReader(nil), Output: filepath.Join(dir, "y3.f32")})
	assert.True(t, errors.Is(err, ErrNoRows), "%v", err)
	assert.EqualError(t, err, "bench: InferStream: the input is empty: no rows", "an empty pipe, known after it")
}

// TestTorchTwinArguments: the twin and the comparison refuse missing
// arguments with an error that names the call, never a panic.
func TestTorchTwinArguments(t *testing.T) {
	m, _ := testModel(t)
	_, err := RunTorchTwin(context.Background(), nil, TorchOptions{})
	assert.EqualError(t, err, "bench: RunTorchTwin: no model")
	_, err = RunTorchTwin(context.Background(), m, TorchOptions{Rows: 1})
	assert.EqualError(t, err, "bench: RunTorchTwin: no model file, no folder or no rows")
	_, err = CompareWithFile(context.Background(), m, make([]float32, 64), make([]float32, 7), "x", model.CompareOptions{})
	assert.EqualError(t, err, "bench: CompareWithFile: no model, or x and y are not as many rows of its widths")
	_, err = CompareWithFile(context.Background(), nil, nil, nil, "x", model.CompareOptions{})
	assert.EqualError(t, err, "bench: CompareWithFile: no model, or x and y are not as many rows of its widths")
}

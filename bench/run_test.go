package bench

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunOnSim runs the seed job on two simulated devices: the baseline
// and two pipelined runs are verified (three in all), the rows are the
// baseline then the best pipelined run, with its speedup and
// efficiency, each device's part is there under its ordinal, and a
// wrong output or no backend is an error.
func TestRunOnSim(t *testing.T) {
	host := sim.NewHost(sim.HostOptions{Seed: 1})
	backends := []pipeline.Backend{host.NewDevice(sim.BuiltinProfile()), host.NewDevice(sim.BuiltinProfile())}
	kernel, err := kernels.Seed.Pipeline(nil, 10)
	require.NoError(t, err)
	const n = 256 << 10
	d, err := newSeedData(backends[0], kernel, n, false)
	require.NoError(t, err)
	defer d.close()
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Host = 32<<10, pipeline.HostStaged
	verify := func(out []float32) error { return kernels.Seed.Verify([][]float32{d.in}, out, 10) }
	var msgs []string
	res, err := Run(context.Background(), backends, RunOptions{Config: cfg, Job: d.job, Output: d.out, Verify: verify, Repeat: 2,
		Ordinals: []int{4, 7}, Progress: func(m string) { msgs = append(msgs, m) }})
	require.NoError(t, err)
	assert.Equal(t, int64(8*n), res.Bytes)
	assert.Equal(t, 3, res.Verified)
	assert.Equal(t, 32<<10, res.ChunkElems)
	assert.Equal(t, pipeline.DefaultComputeStreams, res.ComputeStreams)
	assert.Equal(t, "staged", res.HostMode)
	require.Len(t, res.Rows, 2)
	assert.Equal(t, "synchronous", res.Rows[0].Mode)
	assert.Equal(t, 1.0, res.Rows[0].Speedup)
	assert.Equal(t, "pipeline (staged)", res.Rows[1].Mode)
	assert.Positive(t, res.Rows[1].Speedup)
	assert.Positive(t, res.Rows[1].Efficiency)
	assert.Positive(t, res.Stages.BoundMs)
	require.Len(t, res.Devices, 2)
	assert.Equal(t, 4, res.Devices[0].Device)
	assert.Equal(t, 7, res.Devices[1].Device)
	assert.Equal(t, n/(32<<10), res.Devices[0].Chunks+res.Devices[1].Chunks)
	require.NotNil(t, res.Last)
	assert.Equal(t, []string{"synchronous baseline…", "pipeline run 1 of 2…", "verifying run 1 of 2…",
		"pipeline run 2 of 2…", "verifying run 2 of 2…", "timing each stage alone…"}, msgs)

	wrong := errors.New("element 0 is wrong")
	_, err = Run(context.Background(), backends[:1], RunOptions{Config: cfg, Job: d.job, Output: d.out, Verify: func([]float32) error { return wrong }})
	assert.EqualError(t, err, "bench: Run: synchronous baseline gave wrong results: element 0 is wrong")
	assert.ErrorIs(t, err, wrong)
	_, err = Run(context.Background(), backends[:1], RunOptions{Config: cfg, Job: d.job, Output: d.out, NoBaseline: true, Verify: func([]float32) error { return wrong }})
	assert.EqualError(t, err, "bench: Run: pipeline run 1 gave wrong results: element 0 is wrong")
	_, err = Run(context.Background(), nil, RunOptions{})
	assert.EqualError(t, err, "bench: Run: no backend")
	_, err = Run(context.Background(), backends, RunOptions{})
	assert.Error(t, err, "the zero value's job has no kernel")
}

// allNaN says whether every element of out is NaN, and fails t naming
// the first that is not, and when (what: the progress line of the run
// about to start).
func allNaN(t *testing.T, what string, out []float32) bool {
	t.Helper()
	for i, v := range out {
		if !math.IsNaN(float64(v)) {
			t.Errorf("%s: element %d is %g, not NaN, before the run", what, i, v)
			return false
		}
	}
	return true
}

// TestRunRehearsesAndPoisons runs the seed job with Rehearse: a
// verified untimed run comes first, then an untimed run before each timed
// one; the output is all NaN right before every verified run (the
// baseline, the first, each timed run), so a run that wrote nothing
// would fail Verify, and a wrong first run is named. In auto host mode
// the first timed run finds the slices registered and pays for no
// registration.
func TestRunRehearsesAndPoisons(t *testing.T) {
	b := sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(sim.BuiltinProfile())
	kernel, err := kernels.Seed.Pipeline(nil, 10)
	require.NoError(t, err)
	const n = 64 << 10
	d, err := newSeedData(b, kernel, n, false)
	require.NoError(t, err)
	defer d.close()
	verify := func(out []float32) error { return kernels.Seed.Verify([][]float32{d.in}, out, 10) }
	var msgs []string
	poisoned := 0
	progress := func(m string) {
		msgs = append(msgs, m)
		for _, p := range []string{"verifying", "timing", "untimed run before"} {
			if strings.HasPrefix(m, p) {
				return
			}
		}
		if allNaN(t, m, d.out) {
			poisoned++
		}
	}
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Host = 16<<10, pipeline.HostStaged
	opts := RunOptions{Config: cfg, Job: d.job, Output: d.out, Verify: verify, Repeat: 2, Rehearse: true, Progress: progress}
	res, err := Run(context.Background(), []pipeline.Backend{b}, opts)
	require.NoError(t, err)
	assert.Equal(t, 4, res.Verified, "the baseline, the first pipelined run and two timed runs")
	assert.Equal(t, 4, poisoned)
	assert.Equal(t, []string{"synchronous baseline…", "first pipelined run (untimed)…",
		"untimed run before pipeline run 1 of 2…", "pipeline run 1 of 2…", "verifying run 1 of 2…",
		"untimed run before pipeline run 2 of 2…", "pipeline run 2 of 2…", "verifying run 2 of 2…",
		"timing each stage alone…"}, msgs)

	msgs, poisoned = nil, 0
	opts.Config.Host, opts.NoBaseline, opts.Repeat = pipeline.HostAuto, true, 1
	res, err = Run(context.Background(), []pipeline.Backend{b}, opts)
	require.NoError(t, err)
	assert.Equal(t, []string{"first pipelined run (untimed)…", "untimed run before pipeline run 1 of 1…",
		"pipeline run 1 of 1…", "verifying run 1 of 1…", "timing each stage alone…"}, msgs)
	assert.Equal(t, 2, poisoned)
	assert.Equal(t, "registered", res.HostMode)
	assert.Zero(t, res.Last.Register, "the untimed runs registered the slices")

	calls := 0
	opts.Verify = func(out []float32) error {
		if calls++; calls == 1 {
			return errors.New("element 3 is wrong")
		}
		return verify(out)
	}
	opts.Progress = nil
	_, err = Run(context.Background(), []pipeline.Backend{b}, opts)
	assert.EqualError(t, err, "bench: Run: first pipelined run (untimed) gave wrong results: element 3 is wrong")
}

// TestRunPoisonsDeviceSlots guards the device half of Run's poison: in a
// job of as many chunks as slots, each chunk has a slot of its own, so
// the rehearsal leaves every chunk's result in the device slots. A timed
// run whose launches write nothing (the kernel here stops computing after
// the first pipelined run and the rehearsal) would copy those out and
// pass the check; with the slots filled with NaN before it, it fails.
func TestRunPoisonsDeviceSlots(t *testing.T) {
	b := sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(sim.BuiltinProfile())
	seed, err := kernels.Seed.Pipeline(nil, 10)
	require.NoError(t, err)
	const chunk, slots = 8 << 10, 4
	d, err := newSeedData(b, seed, chunk*slots, false)
	require.NoError(t, err)
	defer d.close()
	lazy := *seed
	var launches atomic.Int64
	lazy.CPU = func(c pipeline.HostChunk) {
		if launches.Add(1) <= 2*slots { // the first pipelined run and the rehearsal
			seed.CPU(c)
		}
	}
	d.job.Kernel = &lazy
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = chunk, slots, 2, pipeline.HostRegistered
	verify := func(out []float32) error { return kernels.Seed.Verify([][]float32{d.in}, out, 10) }
	_, err = Run(context.Background(), []pipeline.Backend{b}, RunOptions{Config: cfg, Job: d.job, Output: d.out, Verify: verify,
		NoBaseline: true, Rehearse: true})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "bench: Run: pipeline run 1 gave wrong results: ")
	assert.Equal(t, int64(3*slots), launches.Load(), "three runs of a launch per chunk")
	assert.Equal(t, 2*2, b.Count("fill"), "the input's and the output's slots, before each of the two checked runs")
}

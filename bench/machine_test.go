package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purecuda/overlap/internal/procfs"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOpenMachineSim opens simulated machines: one device by default, on
// the built-in profile; several on a profile given; a workload on two of
// them runs verified through Run; and what the simulator cannot be is an
// error that names it.
func TestOpenMachineSim(t *testing.T) {
	m, err := OpenMachine(MachineOptions{Sim: true})
	require.NoError(t, err)
	assert.Len(t, m.Backends, 1)
	assert.Equal(t, []int{0}, m.Ordinals)
	require.NotNil(t, m.Sim)
	assert.Equal(t, sim.BuiltinProfile().Device, m.Sim.Profile().Device)
	assert.Nil(t, m.Context)
	assert.Nil(t, m.Modules, "no modules on the simulator")
	assert.NoError(t, m.Close())
	assert.NoError(t, m.Close(), "a second Close")

	prof := sim.BuiltinProfile()
	prof.Device = "Test GPU"
	m, err = OpenMachine(MachineOptions{Sim: true, SimDevices: 2, Profile: prof, Kernel: "seed"})
	require.NoError(t, err)
	defer m.Close()
	assert.Equal(t, []int{0, 1}, m.Ordinals)
	assert.Equal(t, "Test GPU", m.Sim.Profile().Device)
	w, err := m.NewWorkload(WorkloadOptions{Elems: 1 << 16, Scalars: map[string]float64{"iters": 3, "nope": 1}})
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, "seed", w.Name)
	assert.Len(t, w.Inputs, 1)
	assert.Len(t, w.Outputs, 1)
	assert.Equal(t, 1<<16, w.Job.N)
	assert.NotEmpty(t, w.Tolerance)
	require.NotNil(t, w.Verify)
	cfg := w.Config
	cfg.ChunkElems = 1 << 14
	res, err := Run(context.Background(), m.Backends, RunOptions{Config: cfg, Job: w.Job, Output: w.Outputs[0], Verify: w.Verify, Repeat: 1, Ordinals: m.Ordinals})
	require.NoError(t, err)
	assert.Equal(t, 2, res.Verified, "the baseline and the pipelined run")
	assert.Len(t, res.Devices, 2)
	// The scalars were set: the output is three iterations', not the
	// default's.
	p, err := pipeline.New(m.Backends[0], cfg)
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Run(context.Background(), w.Job)
	require.NoError(t, err)
	ref := kernels.SeedReference(w.Inputs[0][5], 3)
	assert.InDelta(t, ref, w.Outputs[0][5], kernels.SeedTolerance(ref, 3))

	for _, c := range []struct {
		o    MachineOptions
		want string
	}{
		{MachineOptions{Sim: true, SimDevices: MaxSimDevices + 1}, "bench: OpenMachine: 17 simulated devices; at most 16"},
		{MachineOptions{Sim: true, PTXFile: "k.ptx", Entry: "k"}, "bench: OpenMachine: a user's kernel needs a GPU: the simulator has no CPU version of it"},
	} {
		m, err := OpenMachine(c.o)
		assert.Nil(t, m)
		assert.EqualError(t, err, c.want)
		var be *Error
		assert.True(t, errors.As(err, &be))
	}
}

// TestNewWorkloadRefuses: a nil machine, no elements, an unknown kernel
// and arrays larger than the host's memory are errors, not panics.
func TestNewWorkloadRefuses(t *testing.T) {
	_, err := (*Machine)(nil).NewWorkload(WorkloadOptions{Elems: 1})
	assert.EqualError(t, err, "bench: NewWorkload: nil machine")
	m, err := OpenMachine(MachineOptions{Sim: true, Kernel: "seed"})
	require.NoError(t, err)
	defer m.Close()
	_, err = m.NewWorkload(WorkloadOptions{})
	assert.EqualError(t, err, "bench: NewWorkload: 0 elements: want at least 1")
	bad, err := OpenMachine(MachineOptions{Sim: true, Kernel: "nope"})
	require.NoError(t, err)
	_, err = bad.NewWorkload(WorkloadOptions{Elems: 1})
	assert.ErrorContains(t, err, "bench: NewWorkload: ")
	assert.ErrorContains(t, err, "nope")
	_, err = m.NewWorkload(WorkloadOptions{Elems: 1 << 62 / 8})
	var me *MemoryError
	if err != nil && errors.As(err, &me) {
		assert.Equal(t, "the job's 2 input and output arrays", me.What)
		assert.Equal(t, int64(1<<62), me.Need)
	} else {
		_, known := procfs.AvailableMemory()
		assert.False(t, known, "with the available memory known, 4 EiB of arrays is refused: %v", err)
	}
	var nilW *Workload
	assert.NoError(t, nilW.Close())
}

// TestElementwiseInputs: a user's kernel is (out, in..., n), pointers of
// 8 bytes and a count of 4; anything else says what is wrong.
func TestElementwiseInputs(t *testing.T) {
	p := func(name string, size int) ptx.Param { return ptx.Param{Name: name, Size: size} }
	for _, c := range []struct {
		params []ptx.Param
		want   int
		err    string
	}{
		{[]ptx.Param{p("out", 8), p("n", 4)}, 0, ""},
		{[]ptx.Param{p("out", 8), p("a", 8), p("b", 8), p("n", 4)}, 2, ""},
		{[]ptx.Param{p("out", 8)}, 0, "bench: ElementwiseInputs: kernel k must take (float *out, const float *in..., unsigned n); it has 1 parameters"},
		{[]ptx.Param{p("out", 8), p("n", 8)}, 0, "bench: ElementwiseInputs: kernel k must take (float *out, const float *in..., unsigned n); it has 2 parameters"},
		{[]ptx.Param{p("out", 8), p("x", 4), p("n", 4)}, 0, "bench: ElementwiseInputs: kernel k: parameter x is 4 bytes; every parameter but the last must be a pointer"},
	} {
		n, err := ElementwiseInputs(ptx.Entry{Name: "k", Params: c.params})
		if c.err != "" {
			assert.EqualError(t, err, c.err)
			continue
		}
		assert.NoError(t, err)
		assert.Equal(t, c.want, n)
	}
}

// TestTuneCache: a missing or broken file is an empty cache; a choice
// stored is written and read back under its key, and looked up only for
// a job that it fits; a nil cache has nothing.
func TestTuneCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "tune.json")
	c := ReadTuneCache(path)
	assert.Empty(t, c.Choices)
	key := TuneKey("NVIDIA H200", "seed", 100, 1<<20, pipeline.HostPinned)
	assert.Equal(t, "NVIDIA H200|seed|iters=100|n=1048576|host=pinned", key)
	ch := pipeline.Choice{ChunkElems: 1 << 18, Slots: 3, ComputeStreams: 2}
	require.NoError(t, c.Store(key, ch))
	got, ok := ReadTuneCache(path).Lookup(key, 1<<20)
	assert.True(t, ok)
	assert.Equal(t, ch, got)
	_, ok = ReadTuneCache(path).Lookup(key, 1<<17)
	assert.False(t, ok, "a chunk larger than the job")
	_, ok = ReadTuneCache(path).Lookup("other", 1<<20)
	assert.False(t, ok)
	_, ok = (*TuneCache)(nil).Lookup(key, 1<<20)
	assert.False(t, ok)
	assert.EqualError(t, (*TuneCache)(nil).Store(key, ch), "bench: TuneCache.Store: no cache file")
	require.NoError(t, os.WriteFile(path, []byte("null"), 0o644))
	assert.Empty(t, ReadTuneCache(path).Choices)
	require.NoError(t, os.WriteFile(path, []byte("{junk"), 0o644))
	assert.NoError(t, ReadTuneCache(path).Store(key, ch), "a broken file is overwritten")
}

// seedJobOnSim opens a simulated machine and a 1M-element seed workload
// of 10 iterations on it, both closed when t ends.
func seedJobOnSim(t *testing.T) (*Machine, *Workload) {
	t.Helper()
	m, err := OpenMachine(MachineOptions{Sim: true, Kernel: "seed"})
	require.NoError(t, err)
	t.Cleanup(func() { m.Close() })
	w, err := m.NewWorkload(WorkloadOptions{Elems: 1 << 20, Scalars: map[string]float64{"iters": 10}})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	return m, w
}

// TestChooseChunkOnSim probes the seed job on the simulator and stores
// the choice; the second call finds it in the cache; a nil backend is an
// error.
func TestChooseChunkOnSim(t *testing.T) {
	m, w := seedJobOnSim(t)
	cache := ReadTuneCache(filepath.Join(t.TempDir(), "tune.json"))
	got, err := ChooseChunk(context.Background(), m.Backends[0], w.Config, w.Job, cache, "k")
	require.NoError(t, err)
	assert.False(t, got.Cached)
	assert.Positive(t, got.ChunkElems)
	assert.Positive(t, got.Predicted)
	again, err := ChooseChunk(context.Background(), nil, w.Config, w.Job, ReadTuneCache(cache.Path), "k")
	require.NoError(t, err)
	assert.True(t, again.Cached)
	assert.Equal(t, got.Choice, again.Choice)
	_, err = ChooseChunk(context.Background(), nil, w.Config, w.Job, nil, "k")
	assert.EqualError(t, err, "bench: ChooseChunk: nil backend")
}

// TestChooseChunkWithWarmsBeforeProbing: with Warm, a choice that is not
// cached warms the device up before the probes (and gets the same choice
// on the simulator, whose devices have no clocks), a cached one does not,
// and a negative Warm is an error.
func TestChooseChunkWithWarmsBeforeProbing(t *testing.T) {
	m, w := seedJobOnSim(t)
	var msgs []string
	o := ChooseOptions{Warm: time.Millisecond, Progress: func(m string) { msgs = append(msgs, m) }}
	cache := ReadTuneCache(filepath.Join(t.TempDir(), "tune.json"))
	got, err := ChooseChunkWith(context.Background(), m.Backends[0], w.Config, w.Job, cache, "k", o)
	require.NoError(t, err)
	assert.False(t, got.Cached)
	assert.Equal(t, []string{"warming up the GPU before the probes…", "probing the stage costs…"}, msgs)
	cold, err := ChooseChunk(context.Background(), m.Backends[0], w.Config, w.Job, nil, "k")
	require.NoError(t, err)
	assert.Equal(t, cold.Choice.ChunkElems, got.ChunkElems, "the simulator's choice does not depend on a warm-up")

	msgs = nil
	again, err := ChooseChunkWith(context.Background(), m.Backends[0], w.Config, w.Job, ReadTuneCache(cache.Path), "k", o)
	require.NoError(t, err)
	assert.True(t, again.Cached)
	assert.Empty(t, msgs, "a cached choice runs nothing")

	_, err = ChooseChunkWith(context.Background(), m.Backends[0], w.Config, w.Job, nil, "k", ChooseOptions{Warm: -time.Second})
	assert.EqualError(t, err, "bench: ChooseChunkWith: warm-up of -1s: want 0 or more")
}

package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	. "github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simCase is one randomised configuration.
type simCase struct {
	n, chunk, slots, streams int
	mode                     HostMode
	kernel                   string
}

func (c simCase) String() string {
	return fmt.Sprintf("n=%d chunk=%d slots=%d streams=%d mode=%s kernel=%s", c.n, c.chunk, c.slots, c.streams, c.mode, c.kernel)
}

// jobFor builds the job and the expected output for c, with inputs from
// the standard pattern.
func jobFor(t testing.TB, c simCase, sim *Sim, pinned bool) (Job, []float32, func() []float32) {
	ins := 1
	if c.kernel != "seed" {
		ins = 2
	}
	var kernel *Kernel
	switch c.kernel {
	case "seed":
		kernel = seedKernel(nil, 3)
	case "saxpy":
		kernel = saxpyKernel(nil, 1.5)
	case "lerp":
		kernel = lerpKernel(nil, 0.25, 2)
	}
	inputs := make([][]float32, ins)
	for i := range inputs {
		inputs[i] = make([]float32, c.n)
		kernels.FillPattern(inputs[i], i*1000)
	}
	want := make([]float32, c.n)
	hc := HostChunk{N: c.n, Outputs: [][]byte{driver.Bytes(want)}}
	for _, in := range inputs {
		hc.Inputs = append(hc.Inputs, driver.Bytes(in))
	}
	if c.n > 0 {
		kernel.CPU(hc)
	}
	job := Job{N: c.n, Kernel: kernel}
	var outMem HostMemory
	out := make([]float32, c.n)
	for _, in := range inputs {
		if pinned && c.n > 0 {
			h, err := sim.AllocPinned(c.n * 4)
			require.NoError(t, err)
			copy(h.Bytes(), driver.Bytes(in))
			t.Cleanup(func() { h.Close() })
			job.Inputs = append(job.Inputs, Pinned(h))
		} else {
			job.Inputs = append(job.Inputs, Slice(in))
		}
	}
	if pinned && c.n > 0 {
		h, err := sim.AllocPinned(c.n * 4)
		require.NoError(t, err)
		t.Cleanup(func() { h.Close() })
		outMem = h
		job.Outputs = []Buffer{Pinned(h)}
	} else {
		job.Outputs = []Buffer{Slice(out)}
	}
	got := func() []float32 {
		if outMem != nil {
			return driver.View[float32](outMem.Bytes())[:c.n]
		}
		return out
	}
	return job, want, got
}

func configFor(c simCase) Config {
	cfg := Float32Config(1, 1)
	if c.kernel != "seed" {
		cfg = Float32Config(2, 1)
	}
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = c.chunk, c.slots, c.streams, c.mode
	return cfg
}

func randomCase(r *rand.Rand) simCase {
	c := simCase{
		chunk:   1 + r.IntN(64),
		slots:   2 + r.IntN(4),
		kernel:  []string{"seed", "saxpy", "lerp"}[r.IntN(3)],
		mode:    HostMode(r.IntN(4)),
		streams: 1,
	}
	c.streams = 1 + r.IntN(c.slots)
	switch r.IntN(6) {
	case 0:
		c.n = 0
	case 1:
		c.n = c.chunk // a single chunk
	case 2:
		c.n = 1 + r.IntN(c.chunk) // less than a chunk
	default:
		c.n = r.IntN(40*c.chunk) + 1 // odd remainders
	}
	return c
}

func checkExact(t testing.TB, c simCase, want, got []float32) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("%s: element %d = %v, want %v", c, i, got[i], want[i])
		}
	}
}

// TestSimRandomConfigs runs thousands of randomised configurations on the
// simulator and requires exact outputs and zero hazards.
func TestSimRandomConfigs(t *testing.T) {
	cases := 2000
	if testing.Short() {
		cases = 300
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < cases; i++ {
		c := randomCase(r)
		sim := NewSim(uint64(i), time.Duration(r.IntN(3))*time.Microsecond)
		pinned := c.mode == HostPinned
		job, want, got := jobFor(t, c, sim, pinned)
		p, err := New(sim, configFor(c))
		require.NoError(t, err, c.String())
		runs := 1 + r.IntN(2)
		for k := 0; k < runs; k++ {
			rep, err := p.Run(context.Background(), job)
			require.NoError(t, err, c.String())
			checkExact(t, c, want, got())
			assert.Equal(t, (c.n+c.chunk-1)/c.chunk, rep.Chunks)
		}
		require.NoError(t, p.Close())
		if h := sim.Hazards(); len(h) > 0 {
			t.Fatalf("%s: %d hazards, first: %s", c, len(h), h[0])
		}
		live := sim.Live()
		if pinned && c.n > 0 {
			assert.LessOrEqual(t, live["pinned"], 3, "only the test's own pinned buffers remain")
			delete(live, "pinned")
		}
		require.Empty(t, live, "%s: leaked %v", c, live)
	}
}

// TestSimCatchesLectureHazard replays the lecture's schedule: two pinned
// staging buffers refilled by a host copy with no wait for the H2D copy
// that last read them. The detector must report it.
func TestSimCatchesLectureHazard(t *testing.T) {
	sim := NewSim(7, 20*time.Microsecond)
	const chunk, chunks = 64, 16
	var streams []Stream
	var staging, stagingOut []PinnedMem
	var din, dout []DeviceMem
	for s := 0; s < 2; s++ {
		st, err := sim.NewStream()
		require.NoError(t, err)
		streams = append(streams, st)
		h, _ := sim.AllocPinned(chunk * 4)
		staging = append(staging, h)
		h2, _ := sim.AllocPinned(chunk * 4)
		stagingOut = append(stagingOut, h2)
		d, _ := sim.AllocDevice(chunk * 4)
		din = append(din, d)
		d2, _ := sim.AllocDevice(chunk * 4)
		dout = append(dout, d2)
	}
	in := make([]float32, chunk*chunks)
	kernels.FillPattern(in, 0)
	iss, _ := sim.Issuer()
	k := seedKernel(nil, 1)
	for c := 0; c < chunks; c++ {
		s := c % 2
		// Serial host copy into the staging buffer: no wait for the H2D of chunk c-2.
		require.NoError(t, sim.StageIn(staging[s], 0, driver.Bytes(in[c*chunk:(c+1)*chunk])))
		require.NoError(t, iss.CopyToDevice(streams[s], din[s], 0, staging[s], 0, chunk*4))
		require.NoError(t, iss.Launch(streams[s], k, Chunk{Index: c, N: chunk,
			Inputs: []driver.DevicePtr{din[s].Ptr()}, InBytes: []int{chunk * 4},
			Outputs: []driver.DevicePtr{dout[s].Ptr()}, OutBytes: []int{chunk * 4}}))
		require.NoError(t, iss.CopyToHost(streams[s], stagingOut[s], 0, dout[s], 0, chunk*4))
	}
	for _, st := range streams {
		require.NoError(t, st.Synchronize())
	}
	hz := sim.Hazards()
	require.NotEmpty(t, hz, "the lecture's schedule has a write-after-read hazard; the detector must see it")
	assert.Contains(t, hz[0].String(), "host stage-in")
	assert.Contains(t, hz[0].String(), "H2D copy")
	t.Logf("%d hazards; first: %s", len(hz), hz[0])
}

// TestSimCatchesMissingWARWait removes the pipeline's write-after-read
// waits and requires the detector to notice.
func TestSimCatchesMissingWARWait(t *testing.T) {
	found := 0
	for seed := uint64(0); seed < 20; seed++ {
		sim := NewSim(seed, 30*time.Microsecond)
		c := simCase{n: 64 * 20, chunk: 64, slots: 2, streams: 2, mode: HostPinned, kernel: "seed"}
		job, _, _ := jobFor(t, c, sim, true)
		p, err := New(sim, configFor(c))
		require.NoError(t, err)
		SetSkipWAR(p, true)
		_, err = p.Run(context.Background(), job)
		require.NoError(t, err)
		require.NoError(t, p.Close())
		if len(sim.Hazards()) > 0 {
			found++
		}
	}
	assert.Equal(t, 20, found, "every run without write-after-read waits has unordered accesses")
}

func TestSimZeroAndSingle(t *testing.T) {
	sim := NewSim(1, 0)
	p, err := New(sim, Config{ChunkElems: 100, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer p.Close()
	rep, err := p.Run(context.Background(), Job{N: 0, Kernel: seedKernel(nil, 1), Inputs: []Buffer{{}}, Outputs: []Buffer{{}}})
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Chunks)
	in, out := []float32{0.5}, []float32{0}
	rep, err = p.Run(context.Background(), Job{N: 1, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Chunks)
	assert.NoError(t, verifySeed(in, out, 1))
}

func TestConfigErrors(t *testing.T) {
	sim := NewSim(1, 0)
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{ChunkElems: -1, Outputs: []int{4}}, "pipeline: chunk size -1 elements: must be positive"},
		{Config{Slots: 1, Outputs: []int{4}}, "pipeline: 1 slots: at least 2 are needed to overlap anything"},
		{Config{Slots: 2, ComputeStreams: 3, Outputs: []int{4}}, "pipeline: 2 slots for 3 compute streams: each compute stream needs a slot"},
		{Config{ComputeStreams: 100, Outputs: []int{4}}, "pipeline: 100 compute streams: want 1 to 64"},
		{Config{}, "pipeline: the kernel needs at least one output"},
		{Config{Outputs: []int{0}}, "pipeline: element size 0 bytes: want 1 to 1 MiB"},
		{Config{Outputs: []int{4}, Host: HostMode(9)}, "pipeline: unknown host mode 9"},
		{Config{ChunkElems: 1 << 62, Outputs: []int{8}}, "pipeline: chunk of 4611686018427387904 elements of 8 bytes is too large"},
	}
	for _, tc := range cases {
		p, err := New(sim, tc.cfg)
		assert.Nil(t, p)
		assert.EqualError(t, err, tc.want)
	}
	_, err := New(nil, Config{Outputs: []int{4}})
	assert.EqualError(t, err, "pipeline: nil Backend")
	assert.Empty(t, sim.Live())
}

func TestJobErrors(t *testing.T) {
	sim := NewSim(1, 0)
	p, err := New(sim, Config{ChunkElems: 16, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, 100), make([]float32, 100)
	k := seedKernel(nil, 1)
	cases := []struct {
		job  Job
		want string
	}{
		{Job{N: 100, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}}, "pipeline: job has no Kernel"},
		{Job{N: -1, Kernel: k, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}}, "pipeline: -1 elements: must not be negative"},
		{Job{N: 100, Kernel: k, Outputs: []Buffer{Slice(out)}}, "pipeline: job has 0 inputs, the pipeline was built for 1"},
		{Job{N: 101, Kernel: k, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}}, "pipeline: input 0 holds 400 bytes, but 101 elements of 4 bytes need 404"},
		{Job{N: 100, Kernel: k, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out[:10])}}, "pipeline: output 0 holds 40 bytes, but 100 elements of 4 bytes need 400"},
		{Job{N: 100, Kernel: k, Inputs: []Buffer{{}}, Outputs: []Buffer{Slice(out)}}, "pipeline: input 0: set exactly one of Data and Pinned"},
		{Job{N: 100, Kernel: k, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}, Host: HostPinned}, "pipeline: setup: host mode pinned needs every buffer in pinned memory; use staged or registered for Go slices"},
		{Job{N: 100, Kernel: k, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}, Host: HostMode(-2)}, "pipeline: unknown host mode -2"},
	}
	for _, tc := range cases {
		rep, err := p.Run(context.Background(), tc.job)
		assert.Nil(t, rep)
		assert.EqualError(t, err, tc.want)
	}
	// Still usable.
	_, err = p.Run(context.Background(), Job{N: 100, Kernel: k, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = p.Run(context.Background(), Job{N: 100, Kernel: k, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = ParseHostMode("sometimes")
	assert.EqualError(t, err, `pipeline: unknown host mode "sometimes" (want auto, pinned, staged, registered)`)
	m, err := ParseHostMode("registered")
	require.NoError(t, err)
	assert.Equal(t, HostRegistered, m)
}

func TestAutoModeAndRegistrationCache(t *testing.T) {
	sim := NewSim(3, 0)
	p, err := New(sim, Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	in, out := make([]float32, 1000), make([]float32, 1000)
	kernels.FillPattern(in, 0)
	job := Job{N: 1000, Kernel: seedKernel(nil, 2), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}}
	rep, err := p.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, HostStaged, rep.Mode, "a slice seen once is staged")
	assert.Zero(t, p.Registered())
	rep, err = p.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, HostRegistered, rep.Mode, "a slice seen again is registered")
	assert.Equal(t, int64(8000), p.Registered())
	assert.Equal(t, 2, sim.Live()["registered"])
	rep, err = p.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, HostRegistered, rep.Mode)
	assert.Zero(t, rep.Register, "the cached registration is reused")
	assert.Equal(t, 2, sim.Live()["registered"])
	require.NoError(t, verifySeed(in, out, 2))
	require.NoError(t, p.Unregister(driver.Bytes(in)))
	assert.Equal(t, int64(4000), p.Registered())
	require.NoError(t, p.Close())
	assert.Empty(t, sim.Live())
	assert.Empty(t, sim.Hazards())
}

func TestRegistrationEviction(t *testing.T) {
	sim := NewSim(3, 0)
	p, err := New(sim, Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}, Host: HostRegistered, MaxRegistered: 10000})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 5; i++ {
		in, out := make([]float32, 1000), make([]float32, 1000)
		_, err := p.Run(context.Background(), Job{N: 1000, Kernel: seedKernel(nil, 0), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}})
		require.NoError(t, err)
		assert.LessOrEqual(t, p.Registered(), int64(10000))
	}
}

func TestSimTimingSpans(t *testing.T) {
	sim := NewSim(5, 5*time.Microsecond)
	cfg := Config{ChunkElems: 100, Slots: 3, ComputeStreams: 2, Inputs: []int{4}, Outputs: []int{4}, Timing: true, Host: HostStaged}
	p, err := New(sim, cfg)
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, 1050), make([]float32, 1050)
	rep, err := p.Run(context.Background(), Job{N: 1050, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}})
	require.NoError(t, err)
	count := map[Stage]int{}
	lanes := map[string]bool{}
	for _, s := range rep.Spans {
		count[s.Stage]++
		lanes[s.Lane] = true
		assert.LessOrEqual(t, s.Start, s.End)
	}
	for _, st := range []Stage{StageIn, StageH2D, StageCompute, StageD2H, StageOut} {
		assert.Equal(t, 11, count[st], st.String())
	}
	assert.True(t, lanes["compute 0"] && lanes["compute 1"] && lanes["H2D"] && lanes["D2H"])
}

func TestSimFaultInjection(t *testing.T) {
	injected := errors.New("injected failure")
	for _, kind := range []string{"copy", "launch", "record", "wait"} {
		for k := 1; k <= 12; k += 3 {
			sim := NewSim(uint64(k), time.Microsecond)
			p, err := New(sim, Config{ChunkElems: 10, Inputs: []int{4}, Outputs: []int{4}, Host: HostStaged})
			require.NoError(t, err)
			in, out := make([]float32, 95), make([]float32, 95)
			kernels.FillPattern(in, 0)
			job := Job{N: 95, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}}
			sim.FailAt(kind, sim.Count(kind)+k, injected)
			_, err = p.Run(context.Background(), job)
			require.Error(t, err, "%s #%d", kind, k)
			assert.ErrorIs(t, err, injected)
			var se *StageError
			require.ErrorAs(t, err, &se)
			assert.GreaterOrEqual(t, se.Chunk, 0)
			assert.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("pipeline: chunk %d, ", se.Chunk)), err.Error())
			// The pipeline is still usable and exact.
			_, err = p.Run(context.Background(), job)
			require.NoError(t, err, "%s #%d: run after failure", kind, k)
			require.NoError(t, verifySeed(in, out, 1))
			require.NoError(t, p.Close())
			assert.Empty(t, sim.Live(), "%s #%d", kind, k)
			assert.Empty(t, sim.Hazards())
		}
	}
	// Allocation failures in New leave nothing behind.
	for k := 1; k <= 4; k++ {
		sim := NewSim(1, 0)
		sim.FailAt("alloc", k, injected)
		_, err := New(sim, Config{Inputs: []int{4}, Outputs: []int{4}, ChunkElems: 8})
		assert.ErrorIs(t, err, injected)
		assert.Contains(t, err.Error(), "pipeline: setup: ")
		assert.Empty(t, sim.Live())
	}
}

func TestSimCancellation(t *testing.T) {
	before := runtime.NumGoroutine()
	r := rand.New(rand.NewPCG(9, 9))
	canceled := 0
	tries := 300
	if testing.Short() {
		tries = 50
	}
	for i := 0; i < tries; i++ {
		sim := NewSim(uint64(i), 5*time.Microsecond)
		mode := []HostMode{HostStaged, HostRegistered, HostPinned}[i%3]
		c := simCase{n: 600, chunk: 20, slots: 3, streams: 2, mode: mode, kernel: "seed"}
		job, want, got := jobFor(t, c, sim, mode == HostPinned)
		p, err := New(sim, configFor(c))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(r.IntN(1500))*time.Microsecond, cancel)
		start := time.Now()
		_, err = p.Run(ctx, job)
		took := time.Since(start)
		if err != nil {
			require.ErrorIs(t, err, context.Canceled)
			canceled++
		}
		assert.Less(t, took, 5*time.Second)
		cancel()
		// Usable afterwards, and exact.
		_, err = p.Run(context.Background(), job)
		require.NoError(t, err)
		checkExact(t, c, want, got())
		require.NoError(t, p.Close())
		live := sim.Live()
		delete(live, "pinned") // the test's own pinned buffers, closed by t.Cleanup
		require.Empty(t, live)
		require.Empty(t, sim.Hazards())
	}
	t.Logf("%d of %d runs were cancelled mid-flight", canceled, tries)
	assert.Greater(t, canceled, 0)
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2, "no goroutine is left behind")
}

func TestSynchronousAndStageTimesOnSim(t *testing.T) {
	sim := NewSim(1, 0)
	cfg := Float32Config(1, 1)
	cfg.ChunkElems = 100
	in, out := make([]float32, 1234), make([]float32, 1234)
	kernels.FillPattern(in, 0)
	job := Job{N: 1234, Kernel: seedKernel(nil, 2), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}}
	_, err := Synchronous(context.Background(), sim, cfg, job)
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, 2))
	p, err := New(sim, cfg)
	require.NoError(t, err)
	st, err := p.StageTimes(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, max(st.H2D, st.Compute, st.D2H), st.Bound())
	require.NoError(t, p.Close())
	assert.Empty(t, sim.Live())
	assert.Empty(t, sim.Hazards())
}

// TestAutoModeStagesMemoryRegisteredElsewhere: when another pipeline holds
// the registration of a slice, auto mode stages it instead of failing,
// and an explicit registered mode reports the driver's error.
func TestAutoModeStagesMemoryRegisteredElsewhere(t *testing.T) {
	sim := NewSim(1, 0)
	in, out := make([]float32, 500), make([]float32, 500)
	kernels.FillPattern(in, 0)
	job := Job{N: 500, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}}
	owner, err := New(sim, Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}, Host: HostRegistered})
	require.NoError(t, err)
	defer owner.Close()
	_, err = owner.Run(context.Background(), job)
	require.NoError(t, err)

	other, err := New(sim, Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer other.Close()
	for i := 0; i < 3; i++ {
		clear(out)
		rep, err := other.Run(context.Background(), job)
		require.NoError(t, err)
		require.NoError(t, verifySeed(in, out, 1))
		assert.Equal(t, HostStaged, rep.Mode, "run %d", i)
	}
	_, err = other.Run(context.Background(), Job{N: 500, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}, Host: HostRegistered})
	assert.ErrorIs(t, err, ErrRegistered)
	assert.EqualError(t, err, "pipeline: setup: memory is already registered")
	assert.Empty(t, sim.Hazards())
}

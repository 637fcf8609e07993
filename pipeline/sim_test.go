package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// simCase is one randomised configuration.
type simCase struct {
	n, chunk, slots, streams int
	mode                     pipeline.HostMode
	kernel                   string
}

func (c simCase) String() string {
	return fmt.Sprintf("n=%d chunk=%d slots=%d streams=%d mode=%s kernel=%s", c.n, c.chunk, c.slots, c.streams, c.mode, c.kernel)
}

// jobFor builds the job and the expected output for c, with inputs from
// the standard pattern.
func jobFor(t testing.TB, c simCase, dev *sim.Sim, pinned bool) (pipeline.Job, []float32, func() []float32) {
	ins := 1
	if c.kernel != "seed" {
		ins = 2
	}
	var kernel *pipeline.Kernel
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
	hc := pipeline.HostChunk{N: c.n, Outputs: [][]byte{driver.Bytes(want)}}
	for _, in := range inputs {
		hc.Inputs = append(hc.Inputs, driver.Bytes(in))
	}
	if c.n > 0 {
		kernel.CPU(hc)
	}
	job := pipeline.Job{N: c.n, Kernel: kernel}
	var outMem pipeline.HostMemory
	out := make([]float32, c.n)
	for _, in := range inputs {
		if pinned && c.n > 0 {
			h, err := dev.AllocPinned(c.n * 4)
			require.NoError(t, err)
			copy(h.Bytes(), driver.Bytes(in))
			t.Cleanup(func() { h.Close() })
			job.Inputs = append(job.Inputs, pipeline.Pinned(h))
		} else {
			job.Inputs = append(job.Inputs, pipeline.Slice(in))
		}
	}
	if pinned && c.n > 0 {
		h, err := dev.AllocPinned(c.n * 4)
		require.NoError(t, err)
		t.Cleanup(func() { h.Close() })
		outMem = h
		job.Outputs = []pipeline.Buffer{pipeline.Pinned(h)}
	} else {
		job.Outputs = []pipeline.Buffer{pipeline.Slice(out)}
	}
	got := func() []float32 {
		if outMem != nil {
			return driver.View[float32](outMem.Bytes())[:c.n]
		}
		return out
	}
	return job, want, got
}

func configFor(c simCase) pipeline.Config {
	cfg := pipeline.Float32Config(1, 1)
	if c.kernel != "seed" {
		cfg = pipeline.Float32Config(2, 1)
	}
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = c.chunk, c.slots, c.streams, c.mode
	return cfg
}

func randomCase(r *rand.Rand) simCase {
	c := simCase{
		chunk:   1 + r.IntN(64),
		slots:   2 + r.IntN(4),
		kernel:  []string{"seed", "saxpy", "lerp"}[r.IntN(3)],
		mode:    pipeline.HostMode(r.IntN(4)),
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
		dev := sim.New(uint64(i), time.Duration(r.IntN(3))*time.Microsecond)
		pinned := c.mode == pipeline.HostPinned
		job, want, got := jobFor(t, c, dev, pinned)
		p, err := pipeline.New(dev, configFor(c))
		require.NoError(t, err, c.String())
		runs := 1 + r.IntN(2)
		for k := 0; k < runs; k++ {
			rep, err := p.Run(context.Background(), job)
			require.NoError(t, err, c.String())
			checkExact(t, c, want, got())
			assert.Equal(t, (c.n+c.chunk-1)/c.chunk, rep.Chunks)
		}
		require.NoError(t, p.Close())
		if h := dev.Hazards(); len(h) > 0 {
			t.Fatalf("%s: %d hazards, first: %s", c, len(h), h[0])
		}
		live := dev.Live()
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
	dev := sim.New(7, 20*time.Microsecond)
	const chunk, chunks = 64, 16
	var streams []pipeline.Stream
	var staging, stagingOut []pipeline.PinnedMem
	var din, dout []pipeline.DeviceMem
	for s := 0; s < 2; s++ {
		st, err := dev.NewStream()
		require.NoError(t, err)
		streams = append(streams, st)
		h, _ := dev.AllocPinned(chunk * 4)
		staging = append(staging, h)
		h2, _ := dev.AllocPinned(chunk * 4)
		stagingOut = append(stagingOut, h2)
		d, _ := dev.AllocDevice(chunk * 4)
		din = append(din, d)
		d2, _ := dev.AllocDevice(chunk * 4)
		dout = append(dout, d2)
	}
	in := make([]float32, chunk*chunks)
	kernels.FillPattern(in, 0)
	iss, _ := dev.Issuer()
	k := seedKernel(nil, 1)
	for c := 0; c < chunks; c++ {
		s := c % 2
		// Serial host copy into the staging buffer: no wait for the H2D of chunk c-2.
		require.NoError(t, dev.StageIn(staging[s], 0, driver.Bytes(in[c*chunk:(c+1)*chunk])))
		require.NoError(t, iss.CopyToDevice(streams[s], din[s], 0, staging[s], 0, chunk*4))
		require.NoError(t, iss.Launch(streams[s], k, pipeline.Chunk{Index: c, N: chunk,
			Inputs: []driver.DevicePtr{din[s].Ptr()}, InBytes: []int{chunk * 4},
			Outputs: []driver.DevicePtr{dout[s].Ptr()}, OutBytes: []int{chunk * 4}}))
		require.NoError(t, iss.CopyToHost(streams[s], stagingOut[s], 0, dout[s], 0, chunk*4))
	}
	for _, st := range streams {
		require.NoError(t, st.Synchronize())
	}
	hz := dev.Hazards()
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
		dev := sim.New(seed, 30*time.Microsecond)
		c := simCase{n: 64 * 20, chunk: 64, slots: 2, streams: 2, mode: pipeline.HostPinned, kernel: "seed"}
		job, _, _ := jobFor(t, c, dev, true)
		p, err := pipeline.New(dev, configFor(c))
		require.NoError(t, err)
		pipeline.SetSkipWAR(p, true)
		_, err = p.Run(context.Background(), job)
		require.NoError(t, err)
		require.NoError(t, p.Close())
		if len(dev.Hazards()) > 0 {
			found++
		}
	}
	assert.Equal(t, 20, found, "every run without write-after-read waits has unordered accesses")
}

func TestSimZeroAndSingle(t *testing.T) {
	dev := sim.New(1, 0)
	p, err := pipeline.New(dev, pipeline.Config{ChunkElems: 100, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer p.Close()
	rep, err := p.Run(context.Background(), pipeline.Job{N: 0, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{{}}, Outputs: []pipeline.Buffer{{}}})
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Chunks)
	in, out := []float32{0.5}, []float32{0}
	rep, err = p.Run(context.Background(), pipeline.Job{N: 1, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Chunks)
	assert.NoError(t, verifySeed(in, out, 1))
}

// TestRunInto: RunInto writes what Run returns into the caller's report,
// overwriting the last one, and refuses a nil report or a bad job with
// Run's errors, leaving only the job's shape.
func TestRunInto(t *testing.T) {
	dev := sim.New(1, 0)
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Timing = 100, true
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, 250), make([]float32, 250)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: 250, Kernel: seedKernel(nil, 1), Host: pipeline.HostStaged, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	want, err := p.Run(context.Background(), job)
	require.NoError(t, err)
	rep := pipeline.Report{N: -1, Chunks: 99, Devices: []pipeline.DeviceReport{{}}}
	require.NoError(t, p.RunInto(context.Background(), job, &rep))
	require.NoError(t, verifySeed(in, out, 1))
	assert.Equal(t, want.Chunks, rep.Chunks)
	assert.Equal(t, want.Mode, rep.Mode)
	assert.Equal(t, want.Backend, rep.Backend)
	assert.Equal(t, 250, rep.N)
	assert.Nil(t, rep.Devices, "the last report is overwritten")
	assert.Len(t, rep.Spans, len(want.Spans), "a timed run's spans")
	assert.Positive(t, rep.Elapsed)

	assert.EqualError(t, p.RunInto(context.Background(), job, nil), "pipeline: RunInto: nil *Report")
	bad := job
	bad.Outputs = nil
	err = p.RunInto(context.Background(), bad, &rep)
	assert.EqualError(t, err, "pipeline: job has 0 outputs, the pipeline was built for 1")
	assert.Equal(t, pipeline.Report{Backend: want.Backend, N: 250, ChunkElems: 100}, rep, "a failed run leaves the job's shape")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, p.RunInto(ctx, job, &rep), context.Canceled)
	assert.Zero(t, rep.Chunks)
}

// TestRunKeepsNoJobMemory: the plan that Run reuses from run to run
// forgets the job when the run ends, so that a pipeline keeps no caller's
// slices alive between runs (staged, so that no registration holds them).
func TestRunKeepsNoJobMemory(t *testing.T) {
	p, err := pipeline.New(sim.New(1, 0), pipeline.Config{ChunkElems: 100, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer p.Close()
	var freed atomic.Int32
	func() {
		in, out := make([]float32, 250), make([]float32, 250)
		runtime.AddCleanup(&in[0], func(int) { freed.Add(1) }, 0)
		runtime.AddCleanup(&out[0], func(int) { freed.Add(1) }, 0)
		_, err := p.Run(context.Background(), pipeline.Job{N: 250, Kernel: seedKernel(nil, 1), Host: pipeline.HostStaged, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
	}()
	for end := time.Now().Add(2 * time.Second); freed.Load() < 2 && time.Now().Before(end); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	assert.Equal(t, int32(2), freed.Load(), "the job's input and output were freed after the run")
}

func TestConfigErrors(t *testing.T) {
	dev := sim.New(1, 0)
	cases := []struct {
		cfg  pipeline.Config
		want string
	}{
		{pipeline.Config{ChunkElems: -1, Outputs: []int{4}}, "pipeline: chunk size -1 elements: must be positive"},
		{pipeline.Config{Slots: 1, Outputs: []int{4}}, "pipeline: 1 slots: at least 2 are needed to overlap anything"},
		{pipeline.Config{Slots: 2, ComputeStreams: 3, Outputs: []int{4}}, "pipeline: 2 slots for 3 compute streams: each compute stream needs a slot"},
		{pipeline.Config{ComputeStreams: 100, Outputs: []int{4}}, "pipeline: 100 compute streams: want 1 to 64"},
		{pipeline.Config{}, "pipeline: the kernel needs at least one output"},
		{pipeline.Config{Outputs: []int{0}}, "pipeline: element size 0 bytes: want 1 to 1 MiB"},
		{pipeline.Config{Outputs: []int{4}, Host: pipeline.HostMode(9)}, "pipeline: unknown host mode 9"},
		{pipeline.Config{ChunkElems: 1 << 62, Outputs: []int{8}}, "pipeline: chunk of 4611686018427387904 elements of 8 bytes is too large"},
	}
	for _, tc := range cases {
		p, err := pipeline.New(dev, tc.cfg)
		assert.Nil(t, p)
		assert.EqualError(t, err, tc.want)
	}
	_, err := pipeline.New(nil, pipeline.Config{Outputs: []int{4}})
	assert.EqualError(t, err, "pipeline: nil Backend")
	assert.Empty(t, dev.Live())
}

func TestJobErrors(t *testing.T) {
	dev := sim.New(1, 0)
	p, err := pipeline.New(dev, pipeline.Config{ChunkElems: 16, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, 100), make([]float32, 100)
	k := seedKernel(nil, 1)
	cases := []struct {
		job  pipeline.Job
		want string
	}{
		{pipeline.Job{N: 100, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}, "pipeline: job has no Kernel"},
		{pipeline.Job{N: -1, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}, "pipeline: -1 elements: must not be negative"},
		{pipeline.Job{N: 100, Kernel: k, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}, "pipeline: job has 0 inputs, the pipeline was built for 1"},
		{pipeline.Job{N: 101, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}, "pipeline: input 0 holds 400 bytes, but 101 elements of 4 bytes need 404"},
		{pipeline.Job{N: 100, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out[:10])}}, "pipeline: output 0 holds 40 bytes, but 100 elements of 4 bytes need 400"},
		{pipeline.Job{N: 100, Kernel: k, Inputs: []pipeline.Buffer{{}}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}, "pipeline: input 0: set exactly one of Data and Pinned"},
		{pipeline.Job{N: 100, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}, Host: pipeline.HostPinned}, "pipeline: setup: host mode pinned needs every buffer in pinned memory; use staged or registered for Go slices"},
		{pipeline.Job{N: 100, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}, Host: pipeline.HostMode(-2)}, "pipeline: unknown host mode -2"},
	}
	for _, tc := range cases {
		rep, err := p.Run(context.Background(), tc.job)
		assert.Nil(t, rep)
		assert.EqualError(t, err, tc.want)
	}
	// Still usable.
	_, err = p.Run(context.Background(), pipeline.Job{N: 100, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	require.NoError(t, p.Close())
	require.NoError(t, p.Close())
	_, err = p.Run(context.Background(), pipeline.Job{N: 100, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	assert.ErrorIs(t, err, pipeline.ErrClosed)
	_, err = pipeline.ParseHostMode("sometimes")
	assert.EqualError(t, err, `pipeline: unknown host mode "sometimes" (want auto, pinned, staged, registered)`)
	m, err := pipeline.ParseHostMode("registered")
	require.NoError(t, err)
	assert.Equal(t, pipeline.HostRegistered, m)
}

func TestAutoModeAndRegistrationCache(t *testing.T) {
	dev := sim.New(3, 0)
	p, err := pipeline.New(dev, pipeline.Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	in, out := make([]float32, 1000), make([]float32, 1000)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: 1000, Kernel: seedKernel(nil, 2), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	rep, err := p.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, pipeline.HostStaged, rep.Mode, "a slice seen once is staged")
	assert.Zero(t, p.Registered())
	rep, err = p.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, pipeline.HostRegistered, rep.Mode, "a slice seen again is registered")
	assert.Equal(t, int64(8000), p.Registered())
	assert.Equal(t, 2, dev.Live()["registered"])
	rep, err = p.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Equal(t, pipeline.HostRegistered, rep.Mode)
	assert.Zero(t, rep.Register, "the cached registration is reused")
	assert.Equal(t, 2, dev.Live()["registered"])
	require.NoError(t, verifySeed(in, out, 2))
	require.NoError(t, p.Unregister(driver.Bytes(in)))
	assert.Equal(t, int64(4000), p.Registered())
	require.NoError(t, p.Close())
	assert.Empty(t, dev.Live())
	assert.Empty(t, dev.Hazards())
}

func TestRegistrationEviction(t *testing.T) {
	dev := sim.New(3, 0)
	p, err := pipeline.New(dev, pipeline.Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostRegistered, MaxRegistered: 10000})
	require.NoError(t, err)
	defer p.Close()
	for i := 0; i < 5; i++ {
		in, out := make([]float32, 1000), make([]float32, 1000)
		_, err := p.Run(context.Background(), pipeline.Job{N: 1000, Kernel: seedKernel(nil, 0), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		assert.LessOrEqual(t, p.Registered(), int64(10000))
	}
}

// TestSimTimingSpans guards issue 10 (section 5) with issue 11's clock: on
// real data, staged both ways, every chunk's spans come in the order the
// schedule promises, on the virtual clock.
func TestSimTimingSpans(t *testing.T) {
	dev := sim.NewHost(sim.HostOptions{}).NewDevice(testProfile(t))
	const chunk, slots = 256 << 10, 3
	const n = 10*chunk + 1234
	cfg := pipeline.Config{ChunkElems: chunk, Slots: slots, ComputeStreams: 2, Inputs: []int{4}, Outputs: []int{4}, Timing: true, Host: pipeline.HostStaged}
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	rep, err := p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, 1))
	const chunks = (n + chunk - 1) / chunk
	span := map[pipeline.Stage][]pipeline.Span{}
	for _, s := range rep.Spans {
		span[s.Stage] = append(span[s.Stage], s)
		assert.Less(t, s.Start, s.End, "chunk %d %s takes time", s.Chunk, s.Stage)
		assert.LessOrEqual(t, s.End, rep.Elapsed, "chunk %d %s ends within the run", s.Chunk, s.Stage)
	}
	at := func(st pipeline.Stage, c int) pipeline.Span {
		for _, s := range span[st] {
			if s.Chunk == c {
				return s
			}
		}
		t.Fatalf("no %s span for chunk %d", st, c)
		return pipeline.Span{}
	}
	for _, st := range []pipeline.Stage{pipeline.StageIn, pipeline.StageH2D, pipeline.StageCompute, pipeline.StageD2H, pipeline.StageOut} {
		require.Len(t, span[st], chunks, st.String())
	}
	for c := 0; c < chunks; c++ {
		// A chunk goes through its stages in order.
		assert.LessOrEqual(t, at(pipeline.StageIn, c).End, at(pipeline.StageH2D, c).Start, "chunk %d: staged before its copy", c)
		assert.LessOrEqual(t, at(pipeline.StageH2D, c).End, at(pipeline.StageCompute, c).Start, "chunk %d: copied before its kernel", c)
		assert.LessOrEqual(t, at(pipeline.StageCompute, c).End, at(pipeline.StageD2H, c).Start, "chunk %d: computed before its copy back", c)
		assert.LessOrEqual(t, at(pipeline.StageD2H, c).End, at(pipeline.StageOut, c).Start, "chunk %d: copied back before it is unstaged", c)
		assert.Equal(t, fmt.Sprintf("compute %d", c%2), at(pipeline.StageCompute, c).Lane, "chunk %d's kernel stream", c)
		if c == 0 {
			continue
		}
		// One stream per direction: copies in chunk order, one at a time.
		assert.LessOrEqual(t, at(pipeline.StageH2D, c-1).End, at(pipeline.StageH2D, c).Start, "H2D %d after H2D %d", c, c-1)
		assert.LessOrEqual(t, at(pipeline.StageD2H, c-1).End, at(pipeline.StageD2H, c).Start, "D2H %d after D2H %d", c, c-1)
		if c >= slots {
			// A slot is refilled only after the kernel that read it, and
			// its output rewritten only after the copy that read it.
			assert.LessOrEqual(t, at(pipeline.StageCompute, c-slots).End, at(pipeline.StageH2D, c).Start, "H2D %d after kernel %d", c, c-slots)
			assert.LessOrEqual(t, at(pipeline.StageD2H, c-slots).End, at(pipeline.StageCompute, c).Start, "kernel %d after D2H %d", c, c-slots)
			assert.LessOrEqual(t, at(pipeline.StageH2D, c-slots).End, at(pipeline.StageIn, c).Start, "stage-in %d after H2D %d", c, c-slots)
		}
	}
	// And the stages of different chunks overlap. (Here the host copies
	// are the slowest stages, so each stage waits for its stage-in and
	// the two GPU copies never meet.)
	busy := func(a, b pipeline.Stage) bool {
		for _, x := range span[a] {
			for _, y := range span[b] {
				if x.Chunk != y.Chunk && x.Start < y.End && y.Start < x.End {
					return true
				}
			}
		}
		return false
	}
	for _, pair := range [][2]pipeline.Stage{{pipeline.StageIn, pipeline.StageH2D}, {pipeline.StageIn, pipeline.StageCompute}, {pipeline.StageIn, pipeline.StageOut}, {pipeline.StageOut, pipeline.StageH2D}} {
		assert.True(t, busy(pair[0], pair[1]), "no %s ran during another chunk's %s", pair[0], pair[1])
	}
}

func TestSimFaultInjection(t *testing.T) {
	injected := errors.New("injected failure")
	for _, kind := range []string{"copy", "launch", "record", "wait"} {
		for k := 1; k <= 12; k += 3 {
			dev := sim.New(uint64(k), time.Microsecond)
			p, err := pipeline.New(dev, pipeline.Config{ChunkElems: 10, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostStaged})
			require.NoError(t, err)
			in, out := make([]float32, 95), make([]float32, 95)
			kernels.FillPattern(in, 0)
			job := pipeline.Job{N: 95, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
			dev.FailAt(kind, dev.Count(kind)+k, injected)
			_, err = p.Run(context.Background(), job)
			require.Error(t, err, "%s #%d", kind, k)
			assert.ErrorIs(t, err, injected)
			var se *pipeline.StageError
			require.ErrorAs(t, err, &se)
			assert.GreaterOrEqual(t, se.Chunk, 0)
			assert.True(t, strings.HasPrefix(err.Error(), fmt.Sprintf("pipeline: chunk %d, ", se.Chunk)), err.Error())
			// The pipeline is still usable and exact.
			_, err = p.Run(context.Background(), job)
			require.NoError(t, err, "%s #%d: run after failure", kind, k)
			require.NoError(t, verifySeed(in, out, 1))
			require.NoError(t, p.Close())
			assert.Empty(t, dev.Live(), "%s #%d", kind, k)
			assert.Empty(t, dev.Hazards())
		}
	}
	// Allocation failures in New leave nothing behind.
	for k := 1; k <= 4; k++ {
		dev := sim.New(1, 0)
		dev.FailAt("alloc", k, injected)
		_, err := pipeline.New(dev, pipeline.Config{Inputs: []int{4}, Outputs: []int{4}, ChunkElems: 8})
		assert.ErrorIs(t, err, injected)
		assert.Contains(t, err.Error(), "pipeline: setup: ")
		assert.Empty(t, dev.Live())
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
		dev := sim.New(uint64(i), 5*time.Microsecond)
		mode := []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered, pipeline.HostPinned}[i%3]
		c := simCase{n: 600, chunk: 20, slots: 3, streams: 2, mode: mode, kernel: "seed"}
		job, want, got := jobFor(t, c, dev, mode == pipeline.HostPinned)
		p, err := pipeline.New(dev, configFor(c))
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
		live := dev.Live()
		delete(live, "pinned") // the test's own pinned buffers, closed by t.Cleanup
		require.Empty(t, live)
		require.Empty(t, dev.Hazards())
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
	dev := sim.NewHost(sim.HostOptions{}).NewDevice(testProfile(t))
	const chunk = 64 << 10
	const n = 5*chunk + 1234
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.ComputeStreams = chunk, 1
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: n, Kernel: seedKernel(nil, 2), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	_, err := pipeline.Synchronous(context.Background(), dev, cfg, job)
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, 2))
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	// Issue 10 (section 5): the stage times are each stage's own time. On
	// the virtual clock a staged job's stages take what the profile says,
	// chunk after chunk (five full chunks and one of 1234 elements): the
	// host copies at the staging rate for their size, the copies at their fixed
	// cost plus bytes over rate, each kernel its fixed cost plus its work;
	// a device stage also pays its first call's issue and the final sync.
	job.Host = pipeline.HostStaged
	st, err := p.StageTimes(context.Background(), job)
	require.NoError(t, err)
	prof := dev.Profile()
	ns := func(f float64) time.Duration { return time.Duration(f) }
	copyTime := func(c sim.CopyCost, elems int) time.Duration { return ns(c.FixedNs + float64(4*elems)/c.GBps) }
	kernel := func(elems int) time.Duration {
		f, w, err := prof.KernelTime(job.Kernel, elems)
		require.NoError(t, err)
		return f + w
	}
	memcpy := func(elems int) time.Duration {
		alone, _ := prof.StagingRates(4 * elems)
		return ns(float64(4*elems) / alone)
	}
	sync := func(kind string) time.Duration { return ns(prof.IssueNs[kind] + prof.SyncNs) }
	for _, tc := range []struct {
		what      string
		got, want time.Duration
	}{
		{"stage-in", st.In, 5*memcpy(chunk) + memcpy(1234)},
		{"H2D", st.H2D, 5*copyTime(prof.H2D, chunk) + copyTime(prof.H2D, 1234) + sync("copy")},
		{"compute", st.Compute, 5*kernel(chunk) + kernel(1234) + sync("launch")},
		{"D2H", st.D2H, 5*copyTime(prof.D2H, chunk) + copyTime(prof.D2H, 1234) + sync("copy")},
		{"stage-out", st.Out, 5*memcpy(chunk) + memcpy(1234)},
	} {
		assert.InDelta(t, float64(tc.want), float64(tc.got), 12, "%s alone: %v, want %v", tc.what, tc.got, tc.want)
	}
	assert.Equal(t, pipeline.StageIn, st.Slowest(), "%+v", st)
	assert.Equal(t, st.In, st.Bound())
	require.NoError(t, p.Close())
	assert.Empty(t, dev.Live())
	assert.Empty(t, dev.Hazards())
}

// TestAutoModeStagesMemoryRegisteredElsewhere: when another pipeline holds
// the registration of a slice, auto mode stages it instead of failing,
// and an explicit registered mode reports the driver's error.
func TestAutoModeStagesMemoryRegisteredElsewhere(t *testing.T) {
	dev := sim.New(1, 0)
	in, out := make([]float32, 500), make([]float32, 500)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: 500, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	owner, err := pipeline.New(dev, pipeline.Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostRegistered})
	require.NoError(t, err)
	defer owner.Close()
	_, err = owner.Run(context.Background(), job)
	require.NoError(t, err)

	other, err := pipeline.New(dev, pipeline.Config{ChunkElems: 64, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer other.Close()
	for i := 0; i < 3; i++ {
		clear(out)
		rep, err := other.Run(context.Background(), job)
		require.NoError(t, err)
		require.NoError(t, verifySeed(in, out, 1))
		assert.Equal(t, pipeline.HostStaged, rep.Mode, "run %d", i)
	}
	_, err = other.Run(context.Background(), pipeline.Job{N: 500, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}, Host: pipeline.HostRegistered})
	assert.ErrorIs(t, err, pipeline.ErrRegistered)
	assert.EqualError(t, err, "pipeline: setup: memory is already registered")
	assert.Empty(t, dev.Hazards())
}

// TestSimRunsOnTwoGoroutines: runs on one pipeline from different
// goroutines, one after the other, are ordered by the pipeline's lock; the
// simulator must see that order too, or the second run's staging copies
// into the slots look unordered with the first run's.
func TestSimRunsOnTwoGoroutines(t *testing.T) {
	dev := sim.New(2, 0)
	p, err := pipeline.New(dev, pipeline.Config{ChunkElems: 64, Slots: 2, ComputeStreams: 2, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostStaged})
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, 300), make([]float32, 300)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: 300, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	for i := 0; i < 3; i++ {
		done := make(chan error)
		go func() {
			_, err := p.Run(context.Background(), job)
			done <- err
		}()
		require.NoError(t, <-done, "run %d", i)
		require.NoError(t, verifySeed(in, out, 1), "run %d", i)
	}
	assert.Empty(t, dev.Hazards())
}

// TestSimGoForksTogether: two staging copiers forked by SimHost.Go from an
// actor of their own start at that actor's clock and share the host's
// memory bandwidth, however long the forking goroutine takes in wall time
// between the two forks (100 ms here); forked by a goroutine that holds nothing, the
// first runs ahead in virtual time while the second is not yet forked,
// as SimHost.Go's doc warns (the pair of overlap profile's staging
// measurement, which failed TestProfileSimEndToEnd under load).
func TestSimGoForksTogether(t *testing.T) {
	dev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(sim.BuiltinProfile())
	h := dev.Host()
	const n = 64 << 20
	in, err := dev.AllocPinned(n)
	require.NoError(t, err)
	out, err := dev.AllocPinned(n)
	require.NoError(t, err)
	src, dst := make([]byte, n), make([]byte, n)
	copyIn := func() { assert.NoError(t, dev.StageIn(in, 0, src)) }
	copyOut := func() { assert.NoError(t, dev.StageOut(dst, out, 0)) }
	// pair times the two copies forked with a wall-clock pause between the
	// forks, from an actor of its own (held) or from this goroutine.
	pair := func(held bool) time.Duration {
		fork := func() {
			w1 := h.Go("first copier", copyIn)
			// The first copier runs meanwhile; long enough that it has,
			// even on a loaded machine (without a holder, the assertion
			// below needs it to).
			time.Sleep(100 * time.Millisecond)
			w2 := h.Go("second copier", copyOut)
			w1()
			w2()
		}
		t0 := pipeline.Now(dev)
		if held {
			h.Go("copiers", fork)()
		} else {
			fork()
		}
		return pipeline.Now(dev) - t0
	}
	t0 := pipeline.Now(dev)
	copyIn()
	alone := pipeline.Now(dev) - t0
	held := pair(true)
	assert.Equal(t, held, pair(true), "held: the same every time")
	var pairGBps float64
	for _, r := range sim.BuiltinProfile().Staging {
		if r.Bytes == n {
			pairGBps = r.PairGBps
		}
	}
	require.Positive(t, pairGBps, "the built-in profile times two staging copies of %d bytes at once", n)
	assert.InDelta(t, 2*n/pairGBps, float64(held), float64(held)/100, "held: the copies overlap, at the profile's rate for two at once")
	assert.NotEqual(t, 2*alone, held)
	assert.Equal(t, 2*alone, pair(false), "held by nothing: the copies run one after the other")
	t0 = pipeline.Now(dev)
	h.GoTogether("copier", 2, func(i int) {
		if i == 0 {
			copyIn()
		} else {
			copyOut()
		}
	})
	assert.Equal(t, held, pipeline.Now(dev)-t0, "GoTogether: as held")
}

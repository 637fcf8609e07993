package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// halfProfile is the test profile at half speed: half the copy rates and
// twice the kernel time.
func halfProfile(t testing.TB) *sim.Profile {
	slow := testProfile(t)
	slow.Device = "half an H200"
	slow.H2D.GBps, slow.D2H.GBps, slow.BothGBps = slow.H2D.GBps/2, slow.D2H.GBps/2, slow.BothGBps/2
	for k, c := range slow.Kernels {
		c.NsPerElem, c.NsPerElemPerIter = 2*c.NsPerElem, 2*c.NsPerElemPerIter
		slow.Kernels[k] = c
	}
	return slow
}

// simGroup builds a group of simulated devices on one host: fast H200s
// and, where slow[d], one at half speed.
func simGroup(t *testing.T, o sim.HostOptions, cfg pipeline.Config, slow ...bool) (*pipeline.Group, []*sim.Sim) {
	t.Helper()
	host := sim.NewHost(o)
	var backends []pipeline.Backend
	var sims []*sim.Sim
	for _, s := range slow {
		prof := testProfile(t)
		if s {
			prof = halfProfile(t)
		}
		dev := host.NewDevice(prof)
		sims = append(sims, dev)
		backends = append(backends, dev)
	}
	g, err := pipeline.NewGroup(backends, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, g.Close())
		for d, dev := range sims {
			for kind, n := range dev.Live() {
				assert.Zero(t, n, "device %d leaked %d %s", d, n, kind)
			}
		}
	})
	return g, sims
}

// TestGroupSimulated guards issue 12: groups of 2, 3 and 4 simulated
// devices sharing a host link, one of them half as fast as the others,
// run the seed job from one shared queue of chunks. Every element is
// right, no hazard is reported, the slow device takes fewer chunks, and
// the makespan is within 5% of the group's measured stage bound.
func TestGroupSimulated(t *testing.T) {
	for _, tc := range []struct {
		slow []bool
		host pipeline.HostMode
	}{
		{[]bool{false, true}, pipeline.HostRegistered},
		{[]bool{false, true, false}, pipeline.HostRegistered},
		{[]bool{false, false, true, false}, pipeline.HostRegistered},
		{[]bool{false, true}, pipeline.HostStaged},
		{[]bool{true, false, false}, pipeline.HostStaged},
		{[]bool{false, true, false, false}, pipeline.HostPinned},
	} {
		t.Run(fmt.Sprintf("%d devices %s", len(tc.slow), tc.host), func(t *testing.T) {
			// Every element checked, on a small job.
			const iters = 20
			run := func(o sim.HostOptions, n, chunk int) (*pipeline.Report, pipeline.GroupStageTimes, []float32, []float32) {
				cfg := pipeline.Float32Config(1, 1)
				cfg.ChunkElems, cfg.Host = chunk, tc.host
				g, sims := simGroup(t, o, cfg, tc.slow...)
				in, out := make([]float32, n), make([]float32, n)
				kernels.FillPattern(in, 7)
				bufs := []pipeline.Buffer{pipeline.Slice(in), pipeline.Slice(out)}
				if tc.host == pipeline.HostPinned {
					for i := range bufs {
						h, err := sims[0].AllocPinned(4 * n)
						require.NoError(t, err)
						defer h.Close()
						bufs[i] = pipeline.Pinned(h)
					}
					copy(bufs[0].Pinned.Bytes(), driver.Bytes(in))
				}
				job := pipeline.Job{N: n, Kernel: seedKernel(nil, iters), Inputs: bufs[:1], Outputs: bufs[1:]}
				var st pipeline.GroupStageTimes
				if o.TimingOnly {
					var err error
					st, err = g.StageTimes(context.Background(), job)
					require.NoError(t, err)
				}
				first, err := g.Run(context.Background(), job) // registers, in registered mode
				require.NoError(t, err)
				if tc.host == pipeline.HostRegistered && !o.TimingOnly { // StageTimes registered it already
					assert.Positive(t, first.Register, "the first run registers, and says how long it took")
				}
				clear(out)
				rep, err := g.Run(context.Background(), job)
				require.NoError(t, err)
				assert.Zero(t, rep.Register, "the registration is cached for the next run")
				for d, dev := range sims {
					assert.Empty(t, dev.Hazards(), "device %d", d)
				}
				if tc.host == pipeline.HostPinned {
					copy(driver.Bytes(out), bufs[1].Pinned.Bytes())
				}
				return rep, st, in, out
			}
			// The host link of the measured two-H200 host: 148 GB/s for
			// every copy at once.
			const link = 148
			k := len(tc.slow)
			rep, _, in, out := run(sim.HostOptions{LinkGBps: link}, 256<<10*k, 8<<10)
			require.NoError(t, verifySeed(in, out, iters))
			assert.Equal(t, rep.Chunks, 32*k)
			if tc.host == pipeline.HostPinned {
				return // copies from pinned memory time as registered memory's do
			}
			if raceEnabled {
				// Virtual times do not depend on the race detector, and
				// the cgo-free run checks them; here they would take
				// minutes.
				return
			}

			// The time, on a job of about 128 default chunks per device,
			// timed without computing.
			rep, st, _, _ := run(sim.HostOptions{LinkGBps: link, TimingOnly: true}, 128<<20*k, 0)
			eff := float64(st.Bound()) / float64(rep.Elapsed)
			t.Logf("%s: %v against a bound of %v (%s; shares %v): %.1f%%", rep.Backend, rep.Elapsed, st.Bound(), st.Slowest(), st.Shares[st.Slowest()], 100*eff)
			require.Len(t, rep.Devices, k)
			total := 0
			for d, dr := range rep.Devices {
				t.Logf("  device %d: %d chunks, busy %v", d, dr.Chunks, dr.Busy)
				total += dr.Chunks
				assert.LessOrEqual(t, dr.Busy, rep.Elapsed)
			}
			assert.Equal(t, rep.Chunks, total, "every chunk ran once")
			hostBound := st.Slowest() == pipeline.StageIn || st.Slowest() == pipeline.StageOut || st.Slowest() == pipeline.StageStaging
			for d := range tc.slow {
				// Where the host's staging bounds the job, a slow device
				// is as fast as the others.
				for e := range tc.slow {
					if hostBound {
						break
					}
					if tc.slow[d] && !tc.slow[e] {
						assert.Less(t, rep.Devices[d].Chunks, rep.Devices[e].Chunks, "the slow device %d takes fewer chunks than device %d", d, e)
					}
				}
			}
			assert.GreaterOrEqual(t, eff, 0.95, "makespan within 5%% of the bound")
			// Shares are whole chunks, so the bound is the best split
			// to within a chunk.
			assert.LessOrEqual(t, eff, 1.01, "nothing beats the bound")
		})
	}
}

// TestGroupOneDeviceMatchesPipeline guards issue 12: a group of one
// device computes what a pipeline does, in about the same time.
func TestGroupOneDeviceMatchesPipeline(t *testing.T) {
	const n, chunk = 4 << 20, 256 << 10
	cfg := pipeline.Float32Config(2, 1)
	cfg.ChunkElems, cfg.Host = chunk, pipeline.HostStaged
	x, y := make([]float32, n), make([]float32, n)
	kernels.FillPattern(x, 1)
	kernels.FillPattern(y, 2)
	job := func(out []float32) pipeline.Job {
		return pipeline.Job{N: n, Kernel: saxpyKernel(nil, 3), Inputs: []pipeline.Buffer{pipeline.Slice(x), pipeline.Slice(y)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	}
	g, _ := simGroup(t, sim.HostOptions{}, cfg, false)
	gout := make([]float32, n)
	grep, err := g.Run(context.Background(), job(gout))
	require.NoError(t, err)
	require.NoError(t, verifySaxpy(x, y, gout, 3))

	p, err := pipeline.New(sim.NewHost(sim.HostOptions{}).NewDevice(testProfile(t)), cfg)
	require.NoError(t, err)
	defer p.Close()
	pout := make([]float32, n)
	prep, err := p.Run(context.Background(), job(pout))
	require.NoError(t, err)
	assert.Equal(t, pout, gout)
	// The group's device waits on the host before taking each chunk; on
	// one device that may cost a little, never much.
	t.Logf("group of one %v, pipeline %v", grep.Elapsed, prep.Elapsed)
	assert.InDelta(t, float64(prep.Elapsed), float64(grep.Elapsed), 0.03*float64(prep.Elapsed))
}

// TestGroupDeviceFault guards issue 12: a fault on one device stops the
// whole job with an error that names the device, the chunk and the stage;
// nothing leaks (simGroup's cleanup) and the group runs the next job.
func TestGroupDeviceFault(t *testing.T) {
	const n, chunk = 8 << 20, 128 << 10
	for _, tc := range []struct {
		kind  string
		k     int
		stage pipeline.Stage
	}{{"launch", 5, pipeline.StageCompute}, {"copy", 5, pipeline.StageH2D}, {"copy", 6, pipeline.StageD2H}} {
		t.Run(tc.stage.String(), func(t *testing.T) {
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Host = chunk, pipeline.HostRegistered
			g, sims := simGroup(t, sim.HostOptions{}, cfg, false, false, false)
			boom := errors.New("injected fault")
			sims[1].FailAt(tc.kind, tc.k, boom) // copies go H2D, D2H, H2D, …
			in, out := make([]float32, n), make([]float32, n)
			kernels.FillPattern(in, 3)
			job := pipeline.Job{N: n, Kernel: seedKernel(nil, 2), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
			_, err := g.Run(context.Background(), job)
			require.ErrorIs(t, err, boom)
			var de *pipeline.DeviceError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, 1, de.Device)
			var se *pipeline.StageError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, tc.stage, se.Stage)
			assert.GreaterOrEqual(t, se.Chunk, 0)
			assert.Contains(t, err.Error(), "device 1")

			// The other devices stopped taking chunks: well short of the job.
			done := 0
			for _, dev := range sims {
				done += dev.Count("launch")
			}
			assert.Less(t, done, n/chunk, "devices stopped issuing after the fault")

			clear(out)
			_, err = g.Run(context.Background(), job)
			require.NoError(t, err, "the group runs the next job")
			require.NoError(t, verifySeed(in, out, 2))
		})
	}
}

// TestGroupCancel guards issue 12: cancelling a group's run stops every
// device, returns the context's error, and leaves the group usable.
func TestGroupCancel(t *testing.T) {
	const n, chunk = 16 << 20, 64 << 10
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Host = chunk, pipeline.HostStaged
	g, sims := simGroup(t, sim.HostOptions{TimingOnly: true}, cfg, false, false)
	in, out := make([]float32, n), make([]float32, n)
	job := pipeline.Job{N: n, Kernel: seedKernel(nil, 100), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	launches := func() int {
		total := 0
		for _, dev := range sims {
			total += dev.Count("launch")
		}
		return total
	}
	ctx, cancel := context.WithCancel(context.Background())
	atCancel := make(chan int, 1)
	go func() {
		for sims[0].Count("launch") < 10 {
			time.Sleep(time.Millisecond)
		}
		cancel()
		atCancel <- launches()
	}()
	_, err := g.Run(ctx, job)
	require.ErrorIs(t, err, context.Canceled)
	var de *pipeline.DeviceError
	assert.False(t, errors.As(err, &de), "a cancellation is nobody's fault: %v", err)
	// Once cancel has returned, each device launches at most the chunk
	// it was issuing (cancelMidRun says why the bound is not the job).
	total, cancelled := launches(), <-atCancel
	assert.LessOrEqual(t, total-cancelled, len(sims), "every device stopped: %d launches once cancel had returned, %d in all", cancelled, total)
	_, err = g.Run(context.Background(), job)
	require.NoError(t, err)
}

// TestNewGroupRefuses guards issue 12: a group of no devices, a nil one,
// one device twice, or simulators of two hosts is refused with an error
// that says so.
func TestNewGroupRefuses(t *testing.T) {
	host := sim.NewHost(sim.HostOptions{})
	a, b := host.NewDevice(testProfile(t)), host.NewDevice(testProfile(t))
	other := sim.NewHost(sim.HostOptions{}).NewDevice(testProfile(t))
	cfg := pipeline.Float32Config(1, 1)
	for _, tc := range []struct {
		backends []pipeline.Backend
		want     string
	}{
		{nil, "at least one device"},
		{[]pipeline.Backend{a, nil}, "device 1 of the group is a nil Backend"},
		{[]pipeline.Backend{a, b, a}, "devices 0 and 2 of the group are the same device"},
		{[]pipeline.Backend{a, other}, "all devices of one shared host"},
	} {
		g, err := pipeline.NewGroup(tc.backends, cfg)
		assert.Nil(t, g)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err := pipeline.NewGroup([]pipeline.Backend{a, b}, pipeline.Config{})
	assert.ErrorContains(t, err, "at least one output")
	assert.Empty(t, a.Live())
}

// TestLocalSubset guards issue 12's thread pinning: an issuing thread is
// pinned to the CPUs local to its GPU that the process may use, and not at
// all when that would change nothing (every allowed CPU is local, as on a
// one-node host) or leave it no CPU.
func TestLocalSubset(t *testing.T) {
	for _, tc := range []struct {
		local, allowed, want []int
	}{
		{[]int{0, 1, 2, 3}, []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{0, 1, 2, 3}},
		{[]int{4, 5, 6, 7}, []int{2, 3, 4, 5}, []int{4, 5}},
		{[]int{0, 1, 2, 3}, []int{0, 1, 2, 3}, nil},
		{[]int{0, 1}, []int{4, 5}, nil},
		{nil, []int{0, 1}, nil},
	} {
		assert.Equal(t, tc.want, pipeline.LocalSubset(tc.local, tc.allowed), "local %v, allowed %v", tc.local, tc.allowed)
	}
}

// TestGroupDefaultSlots: a group of several devices copies each chunk on
// its own, so Slots 0 is ComputeStreams+2 on each even for small chunks,
// where one device takes the more slots that its coalesced copies use.
func TestGroupDefaultSlots(t *testing.T) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = 64 << 10
	one, _ := simGroup(t, sim.HostOptions{}, cfg, false)
	assert.Equal(t, 48, one.Config().Slots, "one device")
	two, _ := simGroup(t, sim.HostOptions{}, cfg, false, false)
	assert.Equal(t, 6, two.Config().Slots, "two devices")
	for d := range 2 {
		assert.Equal(t, 6, pipeline.GroupPipeline(two, d).Config().Slots, "device %d", d)
	}
}

package pipeline_test

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// panickyKernel is seed (3 iterations) whose Args panics on the chunk of
// index at while armed is set, calling before first where it is not nil:
// the caller's code failing in the middle of a run. With goexit it ends
// its goroutine with runtime.Goexit instead, as a test's t.FailNow does.
// Once it has panicked, every other chunk's Args of the armed run takes
// afterPanicArgs first: a group's other devices then launch the chunk they
// were issuing no sooner than that after the panic, so that a bound on
// their launches tests the group's stop and not how soon the panicking
// goroutine, descheduled on a loaded machine, reaches it (a fresh clone's
// make test, beside other tests, saw 4 launches after the panic where 1
// is the bound).
func panickyKernel(at int, armed *atomic.Bool, before func(), goexit bool) *pipeline.Kernel {
	k := *seedKernel(nil, 3)
	args := k.Args
	var panicked atomic.Bool
	k.Args = func(a *driver.Args, c pipeline.Chunk) {
		if armed.Load() && panicked.Load() {
			time.Sleep(afterPanicArgs)
		}
		if armed.Load() && c.Index == at {
			panicked.Store(true)
			if before != nil {
				before()
			}
			if goexit {
				runtime.Goexit()
			}
			panic("boom in Args")
		}
		args(a, c)
	}
	return &k
}

// afterPanicArgs is how long panickyKernel's Args waits, after the panic,
// on the other chunks of the run.
const afterPanicArgs = 20 * time.Millisecond

// goexited is what endingOf returns for a function that ended its
// goroutine with runtime.Goexit.
const goexited = "runtime.Goexit"

// endingOf runs fn on a goroutine of its own and says how it ended: nil
// when it returned, what it panicked with, goexited, or stillRunning
// after 10 s (a run whose join waits forever).
func endingOf(fn func()) any {
	ending := make(chan any, 1)
	go func() {
		returned, recovered := false, false
		defer func() {
			if !returned && !recovered {
				ending <- goexited
			}
		}()
		defer func() {
			if v := recover(); v != nil {
				recovered = true
				ending <- v
			}
		}()
		fn()
		returned = true
		ending <- nil
	}()
	select {
	case v := <-ending:
		return v
	case <-time.After(10 * time.Second):
		return stillRunning
	}
}

// stillRunning is what endingOf returns for a function that did not end.
const stillRunning = "still running after 10 s"

// noGoroutinesLeft waits up to 3 s for the goroutines to be back to
// before, which their count was before the run, and fails the test, with
// what, if they are not.
func noGoroutinesLeft(t *testing.T, before int, what string) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); runtime.NumGoroutine() > before && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, what)
}

// panicsWith runs fn and returns what it panicked with (nil if it did not).
func panicsWith(fn func()) (v any) {
	defer func() { v = recover() }()
	fn()
	return nil
}

// settlesAfterPanic checks what a caller who recovered a panic from a run
// of runner must find: no goroutine of the run left behind (they waited
// for a handoff forever), a group's other devices stopped, no hazard on
// the simulator (the run's copies drained before the next run's), and a next run that succeeds, with
// exact output where run writes it (computes).
// With goexit the caller's code ends the goroutine with runtime.Goexit
// instead of panicking, and so must the run's caller.
func settlesAfterPanic(t *testing.T, sims []*sim.Sim, run func(pipeline.Job) error, n int, computes, goexit bool) {
	t.Helper()
	var armed atomic.Bool
	launches := func() int {
		total := 0
		for _, s := range sims {
			total += s.Count("launch")
		}
		return total
	}
	var atPanic atomic.Int64 // the launches when Args panicked
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 6)
	k := panickyKernel(min(3, n/1024-1), &armed, func() { atPanic.Store(int64(launches())) }, goexit)
	job := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	require.NoError(t, run(job), "a rehearsal, which registers the job's memory")
	before := runtime.NumGoroutine()
	armed.Store(true)
	want := any("boom in Args")
	if goexit {
		want = goexited
	}
	assert.Equal(t, want, endingOf(func() { _ = run(job) }), "the panic or the Goexit reaches the caller")
	armed.Store(false)
	if computes && len(sims) > 1 {
		// Each other device launches at most the chunk it was issuing:
		// they stop before the panicking one drains (settleOnPanic's
		// stopGroup). Without the stop they went on to the end of the
		// queue (14-15 launches of 16 in all).
		after := launches() - int(atPanic.Load())
		assert.LessOrEqual(t, after, len(sims)-1, "the other devices stop taking chunks: %d launches after the panic", after)
	}
	noGoroutinesLeft(t, before, "goroutines left behind by the run that panicked")
	clear(out)
	require.NoError(t, run(job), "the run after the panic")
	if computes {
		require.NoError(t, verifySeed(in, out, 3))
	}
	for d, s := range sims {
		assert.Empty(t, s.Hazards(), "device %d", d)
	}
}

// panicChunk is the panic tests' chunk, in elements.
const panicChunk = 1024

// panicWay is a way of issuing that the panic tests run through: a host
// mode and schedule, over n elements.
type panicWay struct {
	name     string
	host     pipeline.HostMode
	schedule pipeline.Schedule
	n        int
}

// panicWays are the ways of issuing a job of 16 chunks.
func panicWays() []panicWay {
	return []panicWay{
		{"events/staged", pipeline.HostStaged, pipeline.ScheduleEvents, 16 * panicChunk},
		{"events/registered", pipeline.HostRegistered, pipeline.ScheduleEvents, 16 * panicChunk},
		{"in-stream/registered", pipeline.HostRegistered, pipeline.ScheduleInStream, 16 * panicChunk},
	}
}

// TestPanicInArgsSettles: a kernel's Args that panics mid-run, in every
// way of issuing (events staged and registered, in-stream, a job of one
// chunk, StageTimes), in a group of one device and in a group of two
// (Run and StageTimes),
// reaches the caller's goroutine, where it can be recovered, and leaves
// the run's goroutines stopped and its copies drained. A group of two
// panicked on a device's goroutine, which ended the program; a Pipeline
// left its stage goroutines waiting and its copies in flight. An Args
// that calls runtime.Goexit (t.FailNow) settles the same way and ends
// the caller's goroutine: recover cannot see it, so it left the same
// goroutines behind, and on a device's goroutine the group's join waited
// for it forever.
func TestPanicInArgsSettles(t *testing.T) {
	const chunk = panicChunk
	for _, goexit := range []bool{false, true} {
		ending := "panic/"
		if goexit {
			ending = "goexit/"
		}
		for _, c := range append(panicWays(), panicWay{"one chunk/registered", pipeline.HostRegistered, pipeline.ScheduleAuto, chunk}) {
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host, cfg.Schedule = chunk, 4, 2, c.host, c.schedule
			t.Run(ending+"pipeline/"+c.name, func(t *testing.T) {
				dev := sim.New(7, 2*time.Microsecond)
				p, err := pipeline.New(dev, cfg)
				require.NoError(t, err)
				settlesAfterPanic(t, []*sim.Sim{dev}, func(job pipeline.Job) error { _, err := p.Run(context.Background(), job); return err }, c.n, true, goexit)
				require.NoError(t, p.Close())
			})
			t.Run(ending+"stage times/"+c.name, func(t *testing.T) {
				dev := sim.New(7, 2*time.Microsecond)
				p, err := pipeline.New(dev, cfg)
				require.NoError(t, err)
				settlesAfterPanic(t, []*sim.Sim{dev}, func(job pipeline.Job) error { _, err := p.StageTimes(context.Background(), job); return err }, c.n, false, goexit)
				require.NoError(t, p.Close())
			})
			for _, devices := range []int{1, 2} {
				t.Run(ending+"group of "+string(rune('0'+devices))+"/"+c.name, func(t *testing.T) {
					g, sims := simGroup(t, sim.HostOptions{Seed: 7, Jitter: 2 * time.Microsecond}, cfg, make([]bool, devices)...)
					settlesAfterPanic(t, sims, func(job pipeline.Job) error { _, err := g.Run(context.Background(), job); return err }, c.n, true, goexit)
				})
				t.Run(ending+"group stage times of "+string(rune('0'+devices))+"/"+c.name, func(t *testing.T) {
					g, sims := simGroup(t, sim.HostOptions{Seed: 7, Jitter: 2 * time.Microsecond}, cfg, make([]bool, devices)...)
					settlesAfterPanic(t, sims, func(job pipeline.Job) error { _, err := g.StageTimes(context.Background(), job); return err }, c.n, false, goexit)
				})
			}
		}
	}
}

// TestPanicWhoseDrainFailsClosesTheGroup: when the drain that settles a
// panic fails (the device's context is broken), the device's pipeline
// closes itself, and so must its group, whose next run is refused with
// the failure; it went on to run on the closed pipeline.
func TestPanicWhoseDrainFailsClosesTheGroup(t *testing.T) {
	const chunk = 1024
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = chunk, 4, 2, pipeline.HostRegistered
	g, sims := simGroup(t, sim.HostOptions{}, cfg, false)
	var armed atomic.Bool
	n := 16 * chunk
	in, out := make([]float32, n), make([]float32, n)
	job := pipeline.Job{N: n, Kernel: panickyKernel(3, &armed, nil, false), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	_, err := g.Run(context.Background(), job)
	require.NoError(t, err)
	boom := errors.New("injected sync fault")
	sims[0].FailAt("sync", sims[0].Count("sync")+1, boom) // the settling drain's first wait
	armed.Store(true)
	assert.Equal(t, "boom in Args", panicsWith(func() { _, _ = g.Run(context.Background(), job) }))
	armed.Store(false)
	_, err = g.Run(context.Background(), job)
	require.ErrorIs(t, err, pipeline.ErrClosed)
	assert.ErrorContains(t, err, "injected sync fault")
}

// TestPanicInCPUFaultsTheSimulatedDevice: a kernel's CPU stand-in that
// panics is the simulator's faulting kernel. The run returns the fault,
// which names the launch and the panic, and closes the pipeline, as a
// GPU's faulting kernel does, with no goroutine left behind. The panic
// used to run on through the simulated clock's locks: the run hung, or
// the program ended on a staging goroutine.
func TestPanicInCPUFaultsTheSimulatedDevice(t *testing.T) {
	const chunk = panicChunk
	for _, c := range panicWays() {
		t.Run(c.name, func(t *testing.T) {
			before := runtime.NumGoroutine()
			dev := sim.New(8, 2*time.Microsecond)
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host, cfg.Schedule = chunk, 4, 2, c.host, c.schedule
			p, err := pipeline.New(dev, cfg)
			require.NoError(t, err)
			k := *seedKernel(nil, 3)
			cpu := k.CPU
			k.CPU = func(hc pipeline.HostChunk) {
				if hc.Index == 3 {
					panic("boom in CPU")
				}
				cpu(hc)
			}
			n := c.n
			in, out := make([]float32, n), make([]float32, n)
			job := pipeline.Job{N: n, Kernel: &k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
			var runErr error
			returnsWithin(30*time.Second, "Run with a panicking CPU stand-in", func() { _, runErr = p.Run(context.Background(), job) })
			require.Error(t, runErr)
			assert.ErrorContains(t, runErr, "kernel seed (chunk 3)")
			assert.ErrorContains(t, runErr, "its CPU stand-in panicked: boom in CPU")
			_, err = p.Run(context.Background(), job)
			assert.ErrorIs(t, err, pipeline.ErrClosed, "the device faulted: the pipeline closed itself")
			require.NoError(t, p.Close())
			noGoroutinesLeft(t, before, "goroutines left behind")
		})
	}
}

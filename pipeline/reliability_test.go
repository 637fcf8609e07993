package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reliability tests behind docs/RELIABILITY.md. Each logs the figure
// it measures with the prefix "RELIABILITY:".

var errInjected = errors.New("injected fault")

// faultCase is the workload of the fault sweep: 7 chunks, staged, so that
// every stage (staging included) is exercised.
func faultWorkload(t *testing.T, dev *sim.Sim, mode pipeline.HostMode, sched pipeline.Schedule) (pipeline.Config, pipeline.Job, []float32, []float32) {
	cfg := pipeline.Config{ChunkElems: 10, Slots: 3, ComputeStreams: 2, Inputs: []int{4}, Outputs: []int{4}, Host: mode, Schedule: sched}
	in, out := make([]float32, 65), make([]float32, 65)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: 65, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	return cfg, job, in, out
}

// groupedFaultWorkload is faultWorkload with copies coalesced: 14 chunks
// of 64 elements (256 bytes) on 12 slots, groups of four, the last of two
// with a short chunk.
func groupedFaultWorkload(t *testing.T, dev *sim.Sim, mode pipeline.HostMode, sched pipeline.Schedule) (pipeline.Config, pipeline.Job, []float32, []float32) {
	cfg, job, _, _ := faultWorkload(t, dev, mode, sched)
	cfg.ChunkElems, cfg.Slots = 64, 12
	n := 13*64 + 5
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	job.N, job.Inputs, job.Outputs = n, []pipeline.Buffer{pipeline.Slice(in)}, []pipeline.Buffer{pipeline.Slice(out)}
	return cfg, job, in, out
}

// TestFaultSweep fails every operation of every kind, one at a time, over
// a full New+Run, and checks that the error names its stage (and chunk),
// that nothing leaks, and that the pipeline runs again exactly or reports
// itself closed.
func TestFaultSweep(t *testing.T) {
	kinds := []string{"alloc", "stream", "event", "copy", "launch", "record", "wait", "sync"}
	injected, survivedUsable, survivedClosed := 0, 0, 0
	setupFaults, failedInNew, closedByDrain := 0, 0, 0
	type sweep struct {
		mode     pipeline.HostMode
		sched    pipeline.Schedule
		workload func(*testing.T, *sim.Sim, pipeline.HostMode, pipeline.Schedule) (pipeline.Config, pipeline.Job, []float32, []float32)
	}
	for _, sw := range []sweep{{pipeline.HostStaged, pipeline.ScheduleAuto, faultWorkload}, {pipeline.HostRegistered, pipeline.ScheduleEvents, faultWorkload},
		{pipeline.HostRegistered, pipeline.ScheduleInStream, faultWorkload}, {pipeline.HostRegistered, pipeline.ScheduleEvents, groupedFaultWorkload}} {
		mode := sw.mode
		// Count each kind in a clean New + Run.
		clean := sim.New(1, 0)
		cfg, job, _, _ := sw.workload(t, clean, mode, sw.sched)
		p, err := pipeline.New(clean, cfg)
		require.NoError(t, err)
		inNew := map[string]int{}
		for _, kind := range kinds {
			inNew[kind] = clean.Count(kind)
			setupFaults += inNew[kind]
		}
		_, err = p.Run(context.Background(), job)
		require.NoError(t, err)
		require.NoError(t, p.Close())
		for _, kind := range kinds {
			total := clean.Count(kind)
			if sw.sched == pipeline.ScheduleInStream && (kind == "record" || kind == "wait") {
				// Stream order alone orders an in-stream run.
				require.Equal(t, inNew[kind], total, "%s: an in-stream run has no %s operations", mode, kind)
				continue
			}
			require.Greater(t, total, 0, "%s %s: a run has %s operations", mode, sw.sched, kind)
			for k := 1; k <= total; k++ {
				dev := sim.New(uint64(k), time.Microsecond)
				dev.FailAt(kind, k, errInjected)
				cfg, job, in, out := sw.workload(t, dev, mode, sw.sched)
				injected++
				what := fmt.Sprintf("%s %s, %s #%d of %d", mode, sw.sched, kind, k, total)
				p, err := pipeline.New(dev, cfg)
				// The k-th operation falls in New exactly when a clean
				// New performs k of them.
				require.Equal(t, k <= inNew[kind], err != nil, "%s: New failed: %v", what, err)
				if err != nil {
					failedInNew++
					assert.ErrorIs(t, err, errInjected, what)
					assert.Contains(t, err.Error(), "pipeline: setup: ", what)
					assert.Empty(t, dev.Live(), "%s: New cleans up after itself", what)
					survivedClosed++
					continue
				}
				_, err = p.Run(context.Background(), job)
				require.Error(t, err, what)
				assert.ErrorIs(t, err, errInjected, what)
				var se *pipeline.StageError
				require.ErrorAs(t, err, &se, what)
				if kind != "alloc" && kind != "sync" {
					assert.GreaterOrEqual(t, se.Chunk, 0, "%s: %v", what, err)
				}
				_, again := p.Run(context.Background(), job)
				// The run ends by synchronising each stream (H2D, D2H and
				// the compute streams); only a fault there closes it.
				inDrain := kind == "sync" && k > total-(2+cfg.ComputeStreams)
				assert.Equal(t, inDrain, errors.Is(again, pipeline.ErrClosed), "%s: closed: %v", what, again)
				switch {
				case again == nil:
					require.NoError(t, verifySeed(in, out, 1), what)
					survivedUsable++
				case errors.Is(again, pipeline.ErrClosed):
					assert.Equal(t, pipeline.StageDrain, se.Stage, "%s: only a failed drain closes the pipeline", what)
					survivedClosed++
					closedByDrain++
				default:
					t.Fatalf("%s: second run: %v", what, again)
				}
				require.NoError(t, p.Close(), what)
				assert.Empty(t, dev.Live(), "%s: leaked", what)
				assert.Empty(t, dev.Hazards(), what)
			}
		}
	}
	t.Logf("RELIABILITY: faults injected %d; pipeline usable afterwards %d; closed cleanly (setup failed or drain failed) %d", injected, survivedUsable, survivedClosed)
	// Issue 10: injected == usable+closed held by construction. Which
	// faults fail New and which close the pipeline is predicted instead,
	// per fault above and in total here.
	assert.Equal(t, setupFaults, failedInNew, "faults that New reported")
	assert.Equal(t, 4*(2+2), closedByDrain, "four sweeps, four streams to synchronise each")
}

// TestCancellationThousand cancels 1000 runs at random points.
func TestCancellationThousand(t *testing.T) {
	tries := 1000
	if testing.Short() {
		tries = 100
	}
	before := runtime.NumGoroutine()
	r := rand.New(rand.NewPCG(42, 7))
	var longest time.Duration
	var latencies []time.Duration
	canceled, midRun := 0, 0
	for i := 0; i < tries; i++ {
		dev := sim.New(uint64(i), 2*time.Microsecond)
		mode := []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered, pipeline.HostRegistered}[i%3]
		// The registered runs take turns at both schedules.
		sched := []pipeline.Schedule{pipeline.ScheduleAuto, pipeline.ScheduleEvents, pipeline.ScheduleInStream}[i%3]
		cfg, job, _, _ := faultWorkload(t, dev, mode, sched)
		in, out := make([]float32, 400), make([]float32, 400)
		job.N, job.Inputs, job.Outputs = 400, []pipeline.Buffer{pipeline.Slice(in)}, []pipeline.Buffer{pipeline.Slice(out)}
		kernels.FillPattern(in, i)
		p, err := pipeline.New(dev, cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		delay := time.Duration(r.IntN(400)) * time.Microsecond
		var cancelAt time.Time
		var mu sync.Mutex
		time.AfterFunc(delay, func() { mu.Lock(); cancelAt = time.Now(); mu.Unlock(); cancel() })
		_, err = p.Run(ctx, job)
		if err != nil {
			require.ErrorIs(t, err, context.Canceled)
			mu.Lock()
			took := time.Since(cancelAt)
			mu.Unlock()
			longest = max(longest, took)
			latencies = append(latencies, took)
			canceled++
			// Cancelled mid-run: copies had been issued, and not every
			// chunk's kernel (400 elements in chunks of 10).
			if dev.Count("copy") > 0 && dev.Count("launch") < 40 {
				midRun++
			}
		}
		cancel()
		_, err = p.Run(context.Background(), job)
		require.NoError(t, err)
		require.NoError(t, verifySeed(in, out, 1))
		require.NoError(t, p.Close())
		require.Empty(t, dev.Live())
		require.Empty(t, dev.Hazards())
	}
	settle(before)
	t.Logf("RELIABILITY: sim cancellations tried %d, cancelled %d (%d after work was issued and before the last kernel), longest from cancel to return %v, goroutines before %d after %d",
		tries, canceled, midRun, longest, before, runtime.NumGoroutine())
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2)
	// Issue 10: a Run that ignored its context passed this test, and its
	// only bound (a second) was 60 times the longest figure recorded in
	// docs/RELIABILITY.md. Runs must stop part-way, after work was issued;
	// nine in ten within 20 ms of the cancel (typically under 5 ms), the
	// slowest within 500 ms (a loaded 2-core CI machine's scheduling).
	assert.GreaterOrEqual(t, midRun, tries/4, "runs cancelled after work was issued and before every kernel was launched")
	require.NotEmpty(t, latencies)
	slices.Sort(latencies)
	p90 := latencies[len(latencies)*9/10]
	t.Logf("cancel to return: median %v, 90th percentile %v, longest %v", latencies[len(latencies)/2], p90, longest)
	assert.Less(t, p90, 20*time.Millisecond)
	assert.Less(t, longest, 500*time.Millisecond)
}

// settle waits briefly for exiting goroutines.
func settle(target int) {
	deadline := time.Now().Add(3 * time.Second)
	for runtime.NumGoroutine() > target+2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLeaksManyRuns runs 10,000 jobs on one pipeline and 1,000
// open/run/close cycles, and checks that objects and goroutines return
// to where they started.
func TestLeaksManyRuns(t *testing.T) {
	runs, cycles := 10000, 1000
	if testing.Short() {
		runs, cycles = 1000, 100
	}
	before := runtime.NumGoroutine()
	dev := sim.New(1, 0)
	cfg := pipeline.Config{ChunkElems: 8, Slots: 3, ComputeStreams: 2, Inputs: []int{4}, Outputs: []int{4}}
	in, out := make([]float32, 20), make([]float32, 20)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: 20, Kernel: seedKernel(nil, 0), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	live0 := dev.Live()
	for i := 0; i < runs; i++ {
		if _, err := p.Run(context.Background(), job); err != nil {
			t.Fatal(err)
		}
	}
	assert.Equal(t, live0["stream"], dev.Live()["stream"])
	assert.Equal(t, live0["event"], dev.Live()["event"])
	assert.Equal(t, live0["device"], dev.Live()["device"])
	assert.LessOrEqual(t, dev.Live()["registered"], 2)
	require.NoError(t, p.Close())
	assert.Empty(t, dev.Live())
	for i := 0; i < cycles; i++ {
		p, err := pipeline.New(dev, cfg)
		require.NoError(t, err)
		if _, err := p.Run(context.Background(), job); err != nil {
			t.Fatal(err)
		}
		require.NoError(t, p.Close())
	}
	require.NoError(t, verifySeed(in, out, 0))
	settle(before)
	t.Logf("RELIABILITY: sim leaks after %d runs and %d open/run/close cycles: live objects %v, goroutines %+d",
		runs, cycles, dev.Live(), runtime.NumGoroutine()-before)
	assert.Empty(t, dev.Live())
	assert.Empty(t, dev.Hazards())
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2)
}

// TestConcurrentPipelinesOnSim runs 16 goroutines, each with its own
// pipeline, chunk size and kernel, on one simulator.
func TestConcurrentPipelinesOnSim(t *testing.T) {
	dev := sim.New(3, time.Microsecond)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			c := simCase{n: 300 + 37*g, chunk: 5 + g, slots: 2 + g%3, streams: 1 + g%2, mode: pipeline.HostMode(1 + g%3), kernel: []string{"seed", "saxpy", "lerp"}[g%3]}
			job, want, got := jobFor(t, c, dev, c.mode == pipeline.HostPinned)
			p, err := pipeline.New(dev, configFor(c))
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			for r := 0; r < 5; r++ {
				if _, err := p.Run(context.Background(), job); err != nil {
					errs <- fmt.Errorf("%s: %w", c, err)
					return
				}
				g := got()
				for i := range want {
					if want[i] != g[i] {
						errs <- fmt.Errorf("%s: element %d = %v, want %v", c, i, g[i], want[i])
						return
					}
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Empty(t, dev.Hazards())
}

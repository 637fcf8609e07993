//go:build linux

package pipeline_test

import (
	"context"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// namedContext is a context to run a job under, and its name.
type namedContext struct {
	name string
	ctx  context.Context
}

// jobContexts are the two kinds of context whose cost to a job differs: one
// that cannot be cancelled, and one that can (a service's request
// context), cancelled when tb ends.
func jobContexts(tb testing.TB) []namedContext {
	cancellable, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	return []namedContext{{"Background", context.Background()}, {"WithCancel", cancellable}}
}

// TestSmallJobAllocsOnFakeDriver measures, through package driver on the
// fake driver, the allocations of one small job: one chunk, pinned
// buffers, on a pipeline reused for every job, as overlap bench
// --small-jobs runs it, under a context that cannot be cancelled and under
// one that can (a service's request context), and holds them to the one
// that issue 14 left, the Report that Run returns, and RunInto to none.
func TestSmallJobAllocsOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctx := gputest.FakeContext(t, 0)
	f.ClosedBeforeContexts(t)
	p, job, _, _ := smallJob(t, ctx, 4<<10, 4<<10, 1)
	for _, c := range jobContexts(t) {
		_, err := p.Run(c.ctx, job)
		require.NoError(t, err)
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := p.Run(c.ctx, job); err != nil {
				t.Fatal(err)
			}
		})
		// Issue 14 took it from 21 to 9, then to 1. Reused from run to
		// run: the chunk's slices, the argument slab, the plan and its
		// source lists, the run's state, the issuer and its Bound. Not
		// made for a job of one chunk: the cancellation watch, which has
		// nobody to wake, and the drain's list of streams.
		if raceEnabled {
			// The race detector allocates, and sync.Pool drops items at random.
			t.Logf("%s: allocations per small job under the race detector: %.1f", c.name, allocs)
			continue
		}
		assert.LessOrEqual(t, allocs, 1.0, "%s: allocations per small job", c.name)

		// RunInto writes the report into the caller's: nothing at all.
		var rep pipeline.Report
		allocs = testing.AllocsPerRun(100, func() {
			if err := p.RunInto(c.ctx, job, &rep); err != nil {
				t.Fatal(err)
			}
		})
		assert.Equal(t, 1, rep.Chunks)
		if !raceEnabled {
			assert.Zero(t, allocs, "%s: allocations per small job through RunInto", c.name)
		}
	}
}

// TestSmallJobCallsOnFakeDriver guards issue 14's one-stream path: a job
// of one chunk, pinned and untimed, makes the driver calls that a
// hand-written C loop makes (a copy in, a launch, a copy out and one
// stream synchronise, plus the issuer's one context check), with no event
// records or stream waits; a two-chunk job still gets the three-stream
// schedule with its events.
func TestSmallJobCallsOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctx := gputest.FakeContext(t, 0)
	f.ClosedBeforeContexts(t)
	const n = 4 << 10
	// Room for the two-chunk job below.
	p, job, _, _ := smallJob(t, ctx, n, 2*n, 1)
	_, err := p.Run(context.Background(), job) // loads the kernel
	require.NoError(t, err)
	calls := []string{"cuMemcpyHtoDAsync_v2", "cuLaunchKernel", "cuMemcpyDtoHAsync_v2", "cuEventRecord", "cuStreamWaitEvent", "cuStreamSynchronize",
		"cuCtxGetCurrent", "cuCtxSetCurrent"}
	count := func() map[string]int {
		m := map[string]int{}
		for _, c := range calls {
			m[c] = f.Calls(c)
		}
		return m
	}
	diff := func(job pipeline.Job) map[string]int {
		before := count()
		_, err := p.Run(context.Background(), job)
		require.NoError(t, err)
		after := count()
		for c := range after {
			after[c] -= before[c]
		}
		return after
	}
	// One context check: the issuer's, when it binds its thread. The
	// stream is synchronised on that bound thread, without a second. The
	// check sets the context where the goroutine landed on a thread that
	// did not have it current (under the race detector, now and then).
	one := diff(job)
	assert.LessOrEqual(t, one["cuCtxSetCurrent"], 1, "one chunk: the context set at most once")
	delete(one, "cuCtxSetCurrent")
	assert.Equal(t, map[string]int{"cuMemcpyHtoDAsync_v2": 1, "cuLaunchKernel": 1, "cuMemcpyDtoHAsync_v2": 1,
		"cuEventRecord": 0, "cuStreamWaitEvent": 0, "cuStreamSynchronize": 1, "cuCtxGetCurrent": 1}, one, "one chunk")
	job.N = 2 * n
	two := diff(job)
	assert.Equal(t, 2, two["cuLaunchKernel"])
	assert.Equal(t, 6, two["cuEventRecord"], "two chunks: an event per stage per chunk")
	assert.Equal(t, 3, two["cuStreamSynchronize"], "the drain waits for the H2D, D2H and compute streams")
}

// fakeSmallJob starts the fake driver ([gputest.Fake]), or returns a nil
// session where the test does not run here, and returns a pipeline and
// its 4K one-chunk job with the kernel loaded.
func fakeSmallJob(t *testing.T) (*gputest.FakeSession, *pipeline.Pipeline, pipeline.Job) {
	t.Helper()
	f := gputest.Fake(t)
	if f == nil {
		return nil, nil, pipeline.Job{}
	}
	ctx := gputest.FakeContext(t, 0)
	f.ClosedBeforeContexts(t)
	p, job, _, _ := smallJob(t, ctx, 4<<10, 4<<10, 1)
	_, err := p.Run(context.Background(), job) // loads the kernel
	require.NoError(t, err)
	return f, p, job
}

// TestSmallJobCancelOnFakeDriver: a one-chunk job runs without a
// cancellation watch, yet a cancellation while it runs still returns
// ctx.Err() once its work has drained, from Run and RunInto alike, and the
// pipeline runs the next job.
func TestSmallJobCancelOnFakeDriver(t *testing.T) {
	f, p, job := fakeSmallJob(t)
	if f == nil {
		return
	}

	const step = 20 * time.Millisecond // each of the job's three operations
	f.ExecDelay(step)
	for _, into := range []bool{false, true} {
		runCtx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(step/2, cancel)
		start := time.Now()
		var rep pipeline.Report
		var err error
		if into {
			err = p.RunInto(runCtx, job, &rep)
			assert.Zero(t, rep.Chunks, "RunInto: a cancelled run leaves only the job's shape")
		} else {
			var r *pipeline.Report
			r, err = p.Run(runCtx, job)
			assert.Nil(t, r, "Run: no report for a cancelled run")
		}
		assert.ErrorIs(t, err, context.Canceled, "into %v", into)
		assert.GreaterOrEqual(t, time.Since(start), 3*step-step/2, "into %v: the job's work drained first", into)
	}
	f.ExecDelay(0)
	rep, err := p.Run(context.Background(), job)
	require.NoError(t, err, "the next job")
	assert.Equal(t, 1, rep.Chunks)
}

// TestIssuerReleaseTwiceOnFakeDriver: the GPU backend pools its issuers;
// a second Release of one must not put it in the pool twice, which would
// hand one issuer (and its bound thread and argument slab) to two callers.
func TestIssuerReleaseTwiceOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctx := gputest.FakeContext(t, 0)
	f.ClosedBeforeContexts(t)
	b := pipeline.GPU(ctx)
	iss, err := b.Issuer()
	require.NoError(t, err)
	iss.Release()
	iss.Release()
	a, err := b.Issuer()
	require.NoError(t, err)
	c, err := b.Issuer()
	require.NoError(t, err, "a second issuer while the first is held")
	assert.True(t, a != c, "two callers hold one issuer")
	c.Release()
	a.Release()
}

// fakeCopyKernel is the fake driver's one working kernel (fake_copy: out
// = in, float32) as a pipeline kernel, loaded on ctx; it sets the fake's
// parameter sizes, which the session's next Watch clears.
func fakeCopyKernel(t *testing.T, f *gputest.FakeSession, ctx *driver.Context) *pipeline.Kernel {
	t.Helper()
	m, err := ctx.LoadModule([]byte("// fake"), driver.ModuleOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	f.SetParams(8, 8, 4)
	fn, err := m.Function("fake_copy")
	require.NoError(t, err)
	return &pipeline.Kernel{
		Name:     "fake_copy",
		Function: func(*driver.Context) (*driver.Function, error) { return fn, nil },
		Args: func(a *driver.Args, c pipeline.Chunk) {
			a.Pointer(c.Outputs[0]).Pointer(c.Inputs[0]).Uint32(uint32(c.N))
		},
	}
}

// fakeCopyRig starts the fake driver ([gputest.Fake]), or returns a nil
// session where the test does not run here, and returns a context and the
// fake's copying kernel on it.
func fakeCopyRig(t *testing.T) (*gputest.FakeSession, *driver.Context, *pipeline.Kernel) {
	t.Helper()
	f := gputest.Fake(t)
	if f == nil {
		return nil, nil, nil
	}
	ctx := gputest.FakeContext(t, 0)
	f.ClosedBeforeContexts(t)
	return f, ctx, fakeCopyKernel(t, f, ctx)
}

// TestRunStateReuseOnFakeDriver runs multi-chunk staged jobs, whose
// stage-in and stage-out goroutines share the run's state, under a context
// that cannot be cancelled (so the pipeline reuses its plan and run state,
// and every output element is checked), between runs cancelled at random
// points (which get their own state), with one-chunk jobs in between;
// under the race detector in make test.
func TestRunStateReuseOnFakeDriver(t *testing.T) {
	f, ctx, k := fakeCopyRig(t)
	if f == nil {
		return
	}
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = 1<<10, 2, 1
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	require.NoError(t, err)
	defer p.Close()
	const n = 5<<10 + 7 // six chunks, the last short
	in, out := make([]float32, n), make([]float32, n)
	staged := pipeline.Job{N: n, Kernel: k, Host: pipeline.HostStaged, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	hin, hout := pinnedCopy(t, ctx, make([]float32, 1<<10)), pinnedCopy(t, ctx, make([]float32, 1<<10))
	small := pipeline.Job{N: 1 << 10, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Pinned(hin)}, Outputs: []pipeline.Buffer{pipeline.Pinned(hout)}}
	f.ExecDelay(20 * time.Microsecond)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 60 {
		for j := range in {
			in[j] = float32(i*n + j)
		}
		clear(out)
		switch i % 3 {
		case 0:
			rep, err := p.Run(context.Background(), staged)
			require.NoError(t, err, "run %d", i)
			require.Equal(t, 6, rep.Chunks)
			require.Equal(t, in, out, "run %d: every element", i)
		case 1:
			runCtx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(time.Duration(rng.IntN(600))*time.Microsecond, cancel)
			if _, err := p.Run(runCtx, staged); err != nil {
				require.ErrorIs(t, err, context.Canceled, "run %d", i)
			} else {
				require.Equal(t, in, out, "run %d: every element", i)
			}
			cancel()
		default:
			copy(hin.Float32s(), in)
			var rep pipeline.Report
			require.NoError(t, p.RunInto(context.Background(), small, &rep), "run %d", i)
			require.Equal(t, 1, rep.Chunks)
			require.Equal(t, in[:1<<10], hout.Float32s()[:1<<10], "run %d: every element", i)
		}
	}
}

// TestSmallJobDrainsAfterFailedIssueOnFakeDriver: a one-chunk job whose
// launch fails still waits for the copy it queued before it returns (the
// slot is free for the next job, and the caller's input no longer read),
// names the failed stage, and leaves the pipeline usable.
func TestSmallJobDrainsAfterFailedIssueOnFakeDriver(t *testing.T) {
	f, p, job := fakeSmallJob(t)
	if f == nil {
		return
	}
	f.ExecDelay(20 * time.Millisecond)
	f.Fail("cuLaunchKernel", 1, 1)
	_, err := p.Run(context.Background(), job)
	var se *pipeline.StageError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, pipeline.StageCompute, se.Stage)
	assert.Zero(t, f.Pending(), "the job's queued copy finished before Run returned")
	f.Fail("cuLaunchKernel", 0, 0)
	f.ExecDelay(0)
	_, err = p.Run(context.Background(), job)
	assert.NoError(t, err, "the pipeline runs the next job")
}

// TestDirectCallsOnFakeDriver runs jobs on a backend made with
// GPUOptions.DirectCalls and on one without: one-chunk jobs, jobs of four
// chunks with their events, and staged jobs, every element checked,
// while the collector runs all the while. Where the build has direct
// calls, a one-chunk job makes two calls through runtime.cgocall (the
// issuer's context check and the wait) instead of five; a job of four
// chunks, which queues many operations without waiting, makes as many
// as without the option.
func TestDirectCallsOnFakeDriver(t *testing.T) {
	f, ctx, k := fakeCopyRig(t)
	if f == nil {
		return
	}
	const chunk = 1 << 10
	hin, hout := pinnedCopy(t, ctx, make([]float32, 4*chunk)), pinnedCopy(t, ctx, make([]float32, 4*chunk))
	in, out := make([]float32, 4*chunk+3), make([]float32, 4*chunk+3)
	jobs := []struct {
		name string
		job  pipeline.Job
		got  func() []float32
	}{
		{"one chunk", pipeline.Job{N: chunk, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Pinned(hin)}, Outputs: []pipeline.Buffer{pipeline.Pinned(hout)}},
			func() []float32 { return hout.Float32s()[:chunk] }},
		{"four chunks", pipeline.Job{N: 4 * chunk, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Pinned(hin)}, Outputs: []pipeline.Buffer{pipeline.Pinned(hout)}},
			func() []float32 { return hout.Float32s()[:4*chunk] }},
		{"staged", pipeline.Job{N: len(in), Kernel: k, Host: pipeline.HostStaged, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}},
			func() []float32 { return out }},
	}
	// cgoPerJob[direct][j]: runtime.cgocall per job of jobs[j] (the first two).
	cgoPerJob := map[bool][2]float64{}
	for _, direct := range []bool{false, true} {
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
		p, err := pipeline.New(pipeline.GPUWith(ctx, pipeline.GPUOptions{DirectCalls: direct}), cfg)
		require.NoError(t, err)
		var rep pipeline.Report
		gputest.WhileCollecting(func() {
			for i := range 30 {
				for _, j := range jobs {
					for e := range in {
						in[e] = float32(i*len(in) + e)
					}
					copy(hin.Float32s(), in)
					clear(hout.Float32s())
					clear(out)
					require.NoError(t, p.RunInto(context.Background(), j.job, &rep), "direct %v, %s, run %d", direct, j.name, i)
					require.Equal(t, in[:j.job.N], j.got(), "direct %v, %s, run %d: every element", direct, j.name, i)
				}
			}
		})
		const n = 50
		var per [2]float64
		for j := range per {
			cgo := runtime.NumCgoCall()
			for range n {
				if err := p.RunInto(context.Background(), jobs[j].job, &rep); err != nil {
					t.Fatal(err)
				}
			}
			per[j] = float64(runtime.NumCgoCall()-cgo) / n
		}
		cgoPerJob[direct] = per
		require.NoError(t, p.Close())
	}
	t.Logf("runtime.cgocall per job (one chunk, four chunks): %v safe, %v direct", cgoPerJob[false], cgoPerJob[true])
	assert.GreaterOrEqual(t, cgoPerJob[false][0], 5.0, "safe: the check, two copies, the launch and the wait")
	if driver.DirectCallsAvailable() {
		assert.LessOrEqual(t, cgoPerJob[true][0], 3.0, "direct: the check and the wait (and at most one context set)")
	} else {
		assert.GreaterOrEqual(t, cgoPerJob[true][0], 5.0, "no direct path in this build")
	}
	assert.InDelta(t, cgoPerJob[false][1], cgoPerJob[true][1], 0.5, "four chunks: the safe path either way")
}

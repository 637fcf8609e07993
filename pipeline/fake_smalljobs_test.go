//go:build linux

package pipeline_test

import (
	"context"
	"testing"

	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	. "github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSmallJobAllocsOnFakeDriver measures, through package driver on the
// fake driver, the allocations of one small job: one chunk, pinned
// buffers, on a pipeline reused for every job, as overlap bench
// --small-jobs runs it, under a context that cannot be cancelled and under
// one that can (a service's request context), and holds them to the one
// that issue 14 left, the Report that Run returns, and RunInto to none.
func TestSmallJobAllocsOnFakeDriver(t *testing.T) {
	f := fakecuda.Run(t)
	if f == nil {
		return
	}
	f.Reset()
	ctx := gputest.Context(t)
	mods := new(kernels.Modules)
	defer mods.Close()
	const n = 4 << 10
	p := smallJobPipeline(t, ctx, n)
	defer p.Close()
	hin, hout := pinnedCopy(t, ctx, make([]float32, n)), pinnedCopy(t, ctx, make([]float32, n))
	job := Job{N: n, Kernel: seedKernel(mods, 1), Inputs: []Buffer{Pinned(hin)}, Outputs: []Buffer{Pinned(hout)}}
	cancellable, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"Background", context.Background()}, {"WithCancel", cancellable}} {
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
		var rep Report
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
	f := fakecuda.Run(t)
	if f == nil {
		return
	}
	f.Reset()
	ctx := gputest.Context(t)
	mods := new(kernels.Modules)
	defer mods.Close()
	const n = 4 << 10
	p := smallJobPipeline(t, ctx, n)
	defer p.Close()
	hin, hout := pinnedCopy(t, ctx, make([]float32, 2*n)), pinnedCopy(t, ctx, make([]float32, 2*n))
	job := Job{N: n, Kernel: seedKernel(mods, 1), Inputs: []Buffer{Pinned(hin)}, Outputs: []Buffer{Pinned(hout)}}
	_, err := p.Run(context.Background(), job) // loads the kernel
	require.NoError(t, err)
	calls := []string{"cuMemcpyHtoDAsync_v2", "cuLaunchKernel", "cuMemcpyDtoHAsync_v2", "cuEventRecord", "cuStreamWaitEvent", "cuStreamSynchronize"}
	count := func() map[string]int {
		m := map[string]int{}
		for _, c := range calls {
			m[c] = f.Calls(c)
		}
		return m
	}
	diff := func(job Job) map[string]int {
		before := count()
		_, err := p.Run(context.Background(), job)
		require.NoError(t, err)
		after := count()
		for c := range after {
			after[c] -= before[c]
		}
		return after
	}
	assert.Equal(t, map[string]int{"cuMemcpyHtoDAsync_v2": 1, "cuLaunchKernel": 1, "cuMemcpyDtoHAsync_v2": 1,
		"cuEventRecord": 0, "cuStreamWaitEvent": 0, "cuStreamSynchronize": 1}, diff(job), "one chunk")
	job.N = 2 * n
	two := diff(job)
	assert.Equal(t, 2, two["cuLaunchKernel"])
	assert.Equal(t, 6, two["cuEventRecord"], "two chunks: an event per stage per chunk")
	assert.Equal(t, 3, two["cuStreamSynchronize"], "the drain waits for the H2D, D2H and compute streams")
}

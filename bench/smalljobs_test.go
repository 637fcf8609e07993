package bench

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMergeRounds: a cell's rounds make one row of medians, with Jobs and
// Seconds summed, and each ratio the median of the rounds' own ratios,
// not the ratio of the medians (a round's Go and C++ ran side by side).
// A round without CPU time or without the C++ twin leaves that out.
func TestMergeRounds(t *testing.T) {
	cpp := func(rate, p99, cpu float64) *RefSmallJobs {
		return &RefSmallJobs{Wait: "yield", Elems: 4096, Workers: 1, Jobs: 10, Seconds: 1, JobsPerSec: rate, P50us: 20, P99us: p99, CPUusPerJob: cpu}
	}
	row := func(rate, p99, cpu float64, c *RefSmallJobs) SmallJobsRow {
		r := SmallJobsRow{Wait: "yield", Elems: 4096, Workers: 1, Jobs: 100, Seconds: 0.5, JobsPerSec: rate, P50us: 10, P99us: p99, CPUusPerJob: cpu, Cpp: c}
		if c != nil {
			r.RateRatio, r.P99Ratio, r.CPURatio = rate/c.JobsPerSec, p99/c.P99us, cpu/c.CPUusPerJob
		}
		return r
	}
	// Go's rates 100, 90, 120 against C++'s 80, 100, 150: the rounds'
	// ratios 1.25, 0.9, 0.8 have the median 0.9, where the ratio of the
	// medians would be 100/100.
	rs := []SmallJobsRow{row(100, 30, 20, cpp(80, 30, 20)), row(90, 60, 22, cpp(100, 40, 20)), row(120, 33, 21, cpp(150, 30, 21))}
	m := MergeRounds(rs)
	assert.Equal(t, 3, m.Rounds)
	assert.Equal(t, 300, m.Jobs)
	assert.InDelta(t, 1.5, m.Seconds, 1e-12)
	assert.Equal(t, 100.0, m.JobsPerSec)
	assert.Equal(t, []float64{100, 90, 120}, m.RoundJobsPerSec)
	assert.Equal(t, 33.0, m.P99us)
	assert.Equal(t, 21.0, m.CPUusPerJob)
	require.NotNil(t, m.Cpp)
	assert.Equal(t, 100.0, m.Cpp.JobsPerSec)
	assert.Equal(t, 30, m.Cpp.Jobs)
	assert.InDelta(t, 0.9, m.RateRatio, 1e-12)
	assert.Equal(t, []float64{1.25, 0.9, 0.8}, m.RoundRateRatios)
	assert.InDelta(t, 1.1, m.P99Ratio, 1e-12, "p99 ratios 1, 1.5, 1.1")
	assert.InDelta(t, 1.0, m.CPURatio, 1e-12, "CPU ratios 1, 1.1, 1")
	assert.Equal(t, 30.0, rs[0].P99us, "the rounds are left as they were")

	rs[1].CPUusPerJob, rs[1].CPURatio = -1, 0
	rs[2].Cpp = nil
	m = MergeRounds(rs)
	assert.Equal(t, -1.0, m.CPUusPerJob, "a round without CPU time")
	assert.Nil(t, m.Cpp, "a round without the C++ twin")
	assert.Zero(t, m.RateRatio)
	assert.Nil(t, m.RoundRateRatios)

	one := MergeRounds(rs[:1])
	assert.Equal(t, 1, one.Rounds)
	assert.Equal(t, rs[0].JobsPerSec, one.JobsPerSec)
	assert.Nil(t, one.RoundJobsPerSec)
}

// TestAttachCpp guards issue 14: the C++ cells stand beside the Go rows of
// the same wait mode, size and workers, with Go over C++ ratios, and C++
// cells with wrong elements are an error.
func TestAttachCpp(t *testing.T) {
	rows := []SmallJobsRow{
		{Wait: "spin", Elems: 4096, Workers: 1, JobsPerSec: 900, P99us: 30, CPUusPerJob: 12},
		{Wait: "block", Elems: 4096, Workers: 1, JobsPerSec: 500, P99us: 60, CPUusPerJob: -1},
	}
	cpp := []RefSmallJobs{
		{Wait: "spin", Elems: 4096, Workers: 1, JobsPerSec: 1000, P99us: 25, CPUusPerJob: 10},
		{Wait: "spin", Elems: 4096, Workers: 4, JobsPerSec: 3000, P99us: 40, CPUusPerJob: 10},
	}
	require.NoError(t, AttachCpp(rows, cpp))
	require.NotNil(t, rows[0].Cpp)
	assert.Equal(t, 1, rows[0].Cpp.Workers)
	assert.InDelta(t, 0.9, rows[0].RateRatio, 1e-12)
	assert.InDelta(t, 1.2, rows[0].P99Ratio, 1e-12)
	assert.InDelta(t, 1.2, rows[0].CPURatio, 1e-12)
	assert.Nil(t, rows[1].Cpp, "no C++ cell in block mode")

	cpp[0].Mismatches = 3
	assert.EqualError(t, AttachCpp(rows, cpp), "the C++ small-jobs reference gave 3 wrong elements (4096-element jobs, 1 workers)")
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i))
	}
	assert.Equal(t, time.Duration(50), Percentile(d, 0.5))
	assert.Equal(t, time.Duration(99), Percentile(d, 0.99))
	assert.Equal(t, time.Duration(1), Percentile(d[:1], 0.99))
	assert.Equal(t, time.Duration(0), Percentile(nil, 0.5))
	assert.Equal(t, time.Duration(2), Percentile(d[:3], 0.5), "nearest rank, as the C++ twin computes it")
}

// TestTogether guards the small-jobs cell's start on a GPU: every worker
// goroutine exists and waits behind the barrier before start (which sets
// the one deadline they share) runs, and none begins work before start
// has returned; so no worker runs ahead of the others, and all see the
// same deadline.
func TestTogether(t *testing.T) {
	for _, k := range []int{1, 3, 16} {
		var arrived atomic.Int32 // workers inside work
		var started atomic.Bool
		var deadline time.Time
		var mu sync.Mutex
		var seen []time.Time
		together(k, func() {
			assert.Zero(t, arrived.Load(), "k=%d: a worker began before start", k)
			time.Sleep(10 * time.Millisecond) // a worker not behind the barrier would arrive now
			assert.Zero(t, arrived.Load(), "k=%d: a worker began before start returned", k)
			deadline = time.Now().Add(time.Hour)
			started.Store(true)
		}, func(i int) {
			arrived.Add(1)
			assert.True(t, started.Load(), "k=%d: worker %d ran before start", k, i)
			mu.Lock()
			seen = append(seen, deadline)
			mu.Unlock()
		})
		assert.Equal(t, int32(k), arrived.Load(), "k=%d: every worker ran once", k)
		require.Len(t, seen, k)
		for i, d := range seen {
			assert.True(t, d.Equal(deadline), "k=%d: worker %d saw another deadline", k, i)
		}
	}
}

// TestSmallJobsOnSimLibrary: SmallJobs's zero-valued fields take the
// defaults, every goroutine runs exactly its jobs, the rows come in the
// table's order, and Progress hears each cell.
func TestSmallJobsOnSimLibrary(t *testing.T) {
	var msgs []string
	res, err := SmallJobs(context.Background(), SmallJobsOptions{Sim: true, Sizes: []int{1 << 10, 2 << 10}, Workers: []int{1, 3}, Jobs: 2, Iters: 5,
		Progress: func(m string) { msgs = append(msgs, m) }})
	require.NoError(t, err)
	assert.Equal(t, "simulator", res.Backend)
	require.Len(t, res.Rows, 4)
	i := 0
	for _, n := range []int{1 << 10, 2 << 10} {
		for _, k := range []int{1, 3} {
			r := res.Rows[i]
			i++
			assert.Equal(t, "default", r.Wait, "nothing waits on a driver on the simulator")
			assert.Equal(t, n, r.Elems)
			assert.Equal(t, k, r.Workers)
			assert.Equal(t, 2*k, r.Jobs)
			assert.Equal(t, 1, r.Rounds)
			assert.Equal(t, -1.0, r.CPUusPerJob)
			assert.Positive(t, r.JobsPerSec)
		}
	}
	assert.Equal(t, []string{"wait default: 1K-element jobs from 1 goroutine(s)…", "wait default: 1K-element jobs from 3 goroutine(s)…",
		"wait default: 2K-element jobs from 1 goroutine(s)…", "wait default: 2K-element jobs from 3 goroutine(s)…"}, msgs)

	_, err = SmallJobs(context.Background(), SmallJobsOptions{Sim: true, Workers: []int{0}})
	assert.EqualError(t, err, "bench: SmallJobs: Workers 0: want 1 to 256")
	_, err = SmallJobs(context.Background(), SmallJobsOptions{Sim: true, Sizes: []int{-1}})
	assert.EqualError(t, err, "bench: SmallJobs: Sizes -1: want at least 1 element")
}

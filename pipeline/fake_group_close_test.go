//go:build linux

package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeGroup builds a group over the fake driver's two GPUs, each with
// its own context, running staged seed jobs of n elements in chunks of
// chunk; the fake does not compute, so outputs are not checked. When the
// test ends the group is closed (again), and the fake must have seen no
// misuse and every driver object must be gone (gputest.Fake). Nil when
// the test runs against the fake in a child process.
func fakeGroup(t *testing.T, n, chunk int) (*gputest.FakeSession, func() groupRaces) {
	f := gputest.Fake(t)
	if f == nil {
		return nil, nil
	}
	ctxs := gputest.FakeContexts(t)
	ctx0, ctx1 := ctxs[0], ctxs[1]
	f.ClosedBeforeContexts(t)
	mods := new(kernels.Modules)
	var groups []*pipeline.Group
	t.Cleanup(func() {
		for _, g := range groups {
			assert.NoError(t, g.Close())
		}
		assert.NoError(t, mods.Close())
	})
	cfg := pipeline.Float32Config(1, 1)
	// Six slots, not the default for these small chunks (48): with 48 the
	// two devices hold the whole 64-chunk job in their slots before a
	// cancellation can land mid-run, which is what the tests here need.
	cfg.ChunkElems, cfg.Host, cfg.Slots = chunk, pipeline.HostStaged, 6
	k := seedKernel(mods, 1)
	return f, func() groupRaces {
		g, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctx0), pipeline.GPU(ctx1)}, cfg)
		require.NoError(t, err)
		groups = append(groups, g)
		newJob := func() (pipeline.Job, func() error) {
			in, out := make([]float32, n), make([]float32, n)
			return pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}, nil
		}
		return groupRaces{g: g, newJob: newJob, launches: func() int { return f.Calls("cuLaunchKernel") }}
	}
}

// TestGroupCancelMidRunOnFakeDriver is TestGroupCancelMidRunOnSim through
// package driver, on the fake driver's two GPUs, each operation slowed so
// that the cancellations land mid-run: each run returns ctx's error, no
// goroutine is left behind, the next run succeeds, and the fake sees no
// misuse and nothing left alive (fakeGroup's cleanup).
func TestGroupCancelMidRunOnFakeDriver(t *testing.T) {
	const n, chunk = 64 << 12, 1 << 12
	f, group := fakeGroup(t, n, chunk)
	if f == nil {
		return
	}
	f.ExecDelay(100 * time.Microsecond)
	cancelMidRun(t, group(), n/chunk, []int{0, 1, 2, 5, 17, 40})
	f.ExecDelay(0)
}

// TestGroupCloseRacesRunOnFakeDriver is TestGroupCloseRacesRunOnSim on
// the fake driver's two GPUs: Close, twice, while four goroutines run
// jobs on the group; each run succeeds or is refused with ErrClosed, and
// the fake sees no misuse and nothing left alive.
func TestGroupCloseRacesRunOnFakeDriver(t *testing.T) {
	f, group := fakeGroup(t, 16<<12, 1<<12)
	if f == nil {
		return
	}
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			closeDuringRuns(t, group(), seed)
		})
	}
}

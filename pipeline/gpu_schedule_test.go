package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUSchedules runs both schedules on the H200 and checks every
// element against the CPU: in-stream with slots that are not a multiple
// of the streams, events with copies coalesced in groups of 2, 3 and 4
// slots (and a last group and chunk cut short), and groups of 4 and 16 on
// 12 and 48 slots; the report names the schedule each took.
func TestGPUSchedules(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	for _, c := range []struct {
		chunk, slots, streams, n int
		host                     pipeline.HostMode
		sched, want              pipeline.Schedule
	}{
		{64 << 10, 6, 4, 23*(64<<10) - 77, pipeline.HostPinned, pipeline.ScheduleInStream, pipeline.ScheduleInStream},
		{128 << 10, 5, 3, 1 << 20, pipeline.HostRegistered, pipeline.ScheduleAuto, pipeline.ScheduleInStream},
		{64 << 10, 6, 4, 37*(64<<10) + 5, pipeline.HostPinned, pipeline.ScheduleEvents, pipeline.ScheduleEvents},
		{64 << 10, 9, 4, 37*(64<<10) + 5, pipeline.HostRegistered, pipeline.ScheduleEvents, pipeline.ScheduleEvents},
		{64 << 10, 12, 4, 100*(64<<10) - 3, pipeline.HostPinned, pipeline.ScheduleAuto, pipeline.ScheduleEvents},
		{1000, 12, 4, 200*1000 + 7, pipeline.HostPinned, pipeline.ScheduleEvents, pipeline.ScheduleEvents}, // slots padded to 256 bytes: no groups
		{16 << 10, 48, 2, 300 * (16 << 10), pipeline.HostRegistered, pipeline.ScheduleAuto, pipeline.ScheduleEvents},
	} {
		name := fmt.Sprintf("%s %d chunks of %d, %d slots %d streams %s", c.host, (c.n+c.chunk-1)/c.chunk, c.chunk, c.slots, c.streams, c.sched)
		t.Run(name, func(t *testing.T) {
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Schedule = c.chunk, c.slots, c.streams, c.sched
			p, err := pipeline.New(pipeline.GPU(ctx), cfg)
			require.NoError(t, err)
			defer p.Close()
			in := make([]float32, c.n)
			kernels.FillPattern(in, c.n)
			job := pipeline.Job{N: c.n, Kernel: seedKernel(ks, 100), Host: c.host}
			out := make([]float32, c.n)
			var hout *driver.HostBuffer
			if c.host == pipeline.HostPinned {
				hout = pinnedCopy(t, ctx, make([]float32, c.n))
				job.Inputs, job.Outputs = []pipeline.Buffer{pipeline.Pinned(pinnedCopy(t, ctx, in))}, []pipeline.Buffer{pipeline.Pinned(hout)}
			} else {
				job.Inputs, job.Outputs = []pipeline.Buffer{pipeline.Slice(in)}, []pipeline.Buffer{pipeline.Slice(out)}
			}
			// Each run checked on its own: a fault in the first (a wait on
			// an event of no run yet, say) would be hidden by the second.
			for r := range 2 {
				clear(out)
				if hout != nil {
					clear(hout.Float32s())
				}
				rep, err := p.Run(context.Background(), job)
				require.NoError(t, err)
				assert.Equal(t, c.want, rep.Schedule, "run %d", r)
				got := out
				if hout != nil {
					got = hout.Float32s()[:c.n]
				}
				require.NoError(t, verifySeed(in, got, 100), "run %d", r)
			}
		})
	}
}

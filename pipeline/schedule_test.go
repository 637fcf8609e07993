package pipeline_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestInStreamScheduleVerified runs ScheduleInStream on real data under
// the hazard detector (runOnClock checks every element against the CPU
// and that the detector saw nothing), on shapes where slots are not a
// multiple of the streams, so that a slot shared by two streams without
// an event would be a hazard the detector names.
func TestInStreamScheduleVerified(t *testing.T) {
	const K = 1 << 10
	for _, c := range []overlapCase{
		{name: "6 slots 4 streams, 23 chunks", n: 23*700 - 11, chunk: 700, slots: 6, streams: 4, host: pipeline.HostPinned, kernel: "seed", data: true},
		{name: "5 slots 2 streams, 13 chunks", n: 13 * 512, chunk: 512, slots: 5, streams: 2, host: pipeline.HostRegistered, kernel: "saxpy", data: true},
		{name: "3 slots 3 streams, 40 chunks", n: 40*256 + 1, chunk: 256, slots: 3, streams: 3, host: pipeline.HostRegistered, kernel: "seed", data: true},
		{name: "1M in 128K chunks", n: 1 << 20, chunk: 128 * K, slots: 6, streams: 4, host: pipeline.HostRegistered, kernel: "saxpy", data: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.sched = pipeline.ScheduleInStream
			runOnClock(t, c)
		})
	}
}

// TestInStreamScheduleReport: the report names the schedule a run took;
// ScheduleAuto takes in-stream for a small job of at least two chunks a
// stream on enough streams, and events for a long one, one of fewer
// chunks, one on too few streams, a staged one and one that asked for
// events; a job of one chunk is one stream's.
func TestInStreamScheduleReport(t *testing.T) {
	for _, c := range []struct {
		name                     string
		n, chunk, slots, streams int
		host                     pipeline.HostMode
		sched                    pipeline.Schedule
		want                     pipeline.Schedule
	}{
		{"small, auto", 16 * 100, 100, 6, 4, pipeline.HostRegistered, pipeline.ScheduleAuto, pipeline.ScheduleInStream},
		{"17 chunks, auto", 17 * 100, 100, 6, 4, pipeline.HostRegistered, pipeline.ScheduleAuto, pipeline.ScheduleEvents},
		{"8 chunks on 4 streams, auto", 8 * 100, 100, 6, 4, pipeline.HostRegistered, pipeline.ScheduleAuto, pipeline.ScheduleInStream},
		{"7 chunks on 4 streams, auto", 7 * 100, 100, 6, 4, pipeline.HostRegistered, pipeline.ScheduleAuto, pipeline.ScheduleEvents},
		{"2 streams, auto", 8 * 100, 100, 4, 2, pipeline.HostRegistered, pipeline.ScheduleAuto, pipeline.ScheduleEvents},
		{"staged, in-stream", 8 * 100, 100, 6, 4, pipeline.HostStaged, pipeline.ScheduleInStream, pipeline.ScheduleEvents},
		{"small, events", 8 * 100, 100, 6, 4, pipeline.HostRegistered, pipeline.ScheduleEvents, pipeline.ScheduleEvents},
		{"long, in-stream", 100 * 100, 100, 6, 4, pipeline.HostRegistered, pipeline.ScheduleInStream, pipeline.ScheduleInStream},
		{"one chunk", 100, 100, 6, 4, pipeline.HostRegistered, pipeline.ScheduleEvents, pipeline.ScheduleInStream},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := sim.New(1, 0)
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host, cfg.Schedule = c.chunk, c.slots, c.streams, c.host, c.sched
			p, err := pipeline.New(dev, cfg)
			require.NoError(t, err)
			defer p.Close()
			in, out := make([]float32, c.n), make([]float32, c.n)
			kernels.FillPattern(in, 3)
			rep, err := p.Run(context.Background(), pipeline.Job{N: c.n, Kernel: seedKernel(nil, 2),
				Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
			require.NoError(t, err)
			assert.Equal(t, c.want, rep.Schedule)
			require.NoError(t, verifySeed(in, out, 2))
			assert.Empty(t, dev.Hazards())
		})
	}
}

// TestInStreamScheduleSmallWholeJobs: on the simulator's clock, a small
// whole job runs faster in-stream than on events, since it makes three
// calls a chunk instead of ten, and reaches its floor; a long job on
// events keeps its floor (TestOverlapFloors).
func TestInStreamScheduleSmallWholeJobs(t *testing.T) {
	const M, K = 1 << 20, 1 << 10
	for _, c := range []overlapCase{
		{name: "1M in 128K chunks", n: M, chunk: 128 * K, slots: 6, streams: 4, host: pipeline.HostRegistered, kernel: "seed", floor: 0.60, prof: sim.BuiltinProfile()},
		{name: "4M in 512K chunks", n: 4 * M, chunk: 512 * K, slots: 6, streams: 4, host: pipeline.HostRegistered, kernel: "seed", floor: 0.75, prof: sim.BuiltinProfile()},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := c
			ev.sched = pipeline.ScheduleEvents
			stE, bestE := runOnClock(t, ev)
			c.sched = pipeline.ScheduleInStream
			stI, bestI := runOnClock(t, c)
			effE, effI := float64(stE.Bound())/float64(bestE), float64(stI.Bound())/float64(bestI)
			t.Logf("%s: events %v (%.1f%%), in-stream %v (%.1f%%), bound %v", c.name, bestE, 100*effE, bestI, 100*effI, stI.Bound())
			assert.Less(t, bestI, bestE, "in-stream is faster on a small whole job")
			assert.GreaterOrEqual(t, effI, c.floor)
		})
	}
}

// TestCoalescedCopiesVerified runs ScheduleEvents with small chunks, whose
// copies are coalesced a group of neighbouring slots at a time, on real
// data under the hazard detector: groups of 4 (12 slots) with a last
// group of 1 and a short last chunk, groups of 2 (6 slots), of 3 (9
// slots), none (5 slots: no divisor up to a third of them), and a staged
// run, which never coalesces. A group
// that wrapped around the ring or a kernel that did not wait for its
// group's copy would be a hazard.
func TestCoalescedCopiesVerified(t *testing.T) {
	for _, c := range []overlapCase{
		{name: "12 slots 4 streams, groups of 4", n: 29*704 - 13, chunk: 704, slots: 12, streams: 4, host: pipeline.HostPinned, kernel: "seed", data: true},
		{name: "12 slots, chunks not a multiple of 256 bytes: no groups", n: 29*700 - 13, chunk: 700, slots: 12, streams: 4, host: pipeline.HostPinned, kernel: "seed", data: true},
		{name: "6 slots 2 streams, groups of 2", n: 21 * 512, chunk: 512, slots: 6, streams: 2, host: pipeline.HostRegistered, kernel: "saxpy", data: true},
		{name: "9 slots 4 streams, groups of 3", n: 23 * 512, chunk: 512, slots: 9, streams: 4, host: pipeline.HostRegistered, kernel: "seed", data: true},
		{name: "5 slots 3 streams, no groups", n: 21 * 512, chunk: 512, slots: 5, streams: 3, host: pipeline.HostRegistered, kernel: "seed", data: true},
		{name: "staged, no groups", n: 21 * 512, chunk: 512, slots: 6, streams: 4, host: pipeline.HostStaged, kernel: "saxpy", data: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.sched = pipeline.ScheduleEvents
			runOnClock(t, c)
		})
	}
}

// TestCoalescedCopiesCount: a run on ScheduleEvents in small chunks makes
// one copy a group of chunks each way, not one a chunk.
func TestCoalescedCopiesCount(t *testing.T) {
	for _, c := range []struct {
		slots, chunks, copies int
	}{
		{12, 29, 2 * 8}, // groups of 4: ceil(29/4) each way
		{9, 29, 2 * 10}, // groups of 3
		{6, 29, 2 * 15}, // groups of 2
		{5, 29, 2 * 29}, // no divisor of 5 up to a third of it
		{4, 29, 2 * 29}, // a third of 4 slots is 1
	} {
		dev := sim.New(1, 0)
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Schedule = 64, c.slots, 2, pipeline.ScheduleEvents
		p, err := pipeline.New(dev, cfg)
		require.NoError(t, err)
		n := c.chunks * 64
		in, out := make([]float32, n), make([]float32, n)
		kernels.FillPattern(in, 1)
		before := dev.Count("copy")
		_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(nil, 2), Host: pipeline.HostRegistered,
			Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		assert.Equal(t, c.copies, dev.Count("copy")-before, "%d slots", c.slots)
		require.NoError(t, verifySeed(in, out, 2))
		assert.Empty(t, dev.Hazards())
		require.NoError(t, p.Close())
	}
}

// TestCopyChunks: Config.CopyChunks fixes the chunks a copy moves, 1
// turning coalescing off, and a value that does not divide the slots or
// leaves fewer than three groups is refused.
func TestCopyChunks(t *testing.T) {
	dev := sim.New(1, 0)
	for _, c := range []struct {
		slots, copyChunks, copies int
		err                       string
	}{
		{12, 1, 2 * 29, ""},
		{12, 3, 2 * 10, ""},
		{12, 0, 2 * 8, ""}, // chunks of 256 bytes: the largest group, a third of the slots
		{12, 5, 0, "pipeline: 5 chunks a copy on 12 slots: want 0, 1, or a divisor of the slots of at most a third of them"},
		{-12, 3, 0, "pipeline: 3 chunks a copy: a chunk of 65 elements is not a multiple of 256 bytes for every input and output, so its slots are not back to back"},
		{12, 6, 0, "pipeline: 6 chunks a copy on 12 slots: want 0, 1, or a divisor of the slots of at most a third of them"},
		{12, -1, 0, "pipeline: -1 chunks a copy on 12 slots: want 0, 1, or a divisor of the slots of at most a third of them"},
	} {
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Schedule, cfg.CopyChunks = 64, c.slots, 2, pipeline.ScheduleEvents, c.copyChunks
		if c.slots < 0 { // a chunk of 260 bytes
			cfg.ChunkElems, cfg.Slots = 65, -c.slots
		}
		p, err := pipeline.New(dev, cfg)
		if c.err != "" {
			assert.EqualError(t, err, c.err)
			continue
		}
		require.NoError(t, err)
		n := 29 * 64
		in, out := make([]float32, n), make([]float32, n)
		kernels.FillPattern(in, 2)
		before := dev.Count("copy")
		_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(nil, 2), Host: pipeline.HostRegistered,
			Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		assert.Equal(t, c.copies, dev.Count("copy")-before, "CopyChunks %d", c.copyChunks)
		require.NoError(t, verifySeed(in, out, 2))
		assert.Empty(t, dev.Hazards())
		require.NoError(t, p.Close())
	}
}

// TestNewPathsTimed: Config.Timing on both new paths gives every chunk
// its three spans, each ending after it starts, and on coalesced copies
// the chunks of one group share their copy's span.
func TestNewPathsTimed(t *testing.T) {
	for _, c := range []struct {
		name  string
		slots int
		sched pipeline.Schedule
		group int // chunks a copy
	}{
		{"in-stream", 6, pipeline.ScheduleInStream, 1},
		{"events, groups of 4", 12, pipeline.ScheduleEvents, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			dev := sim.New(1, 0)
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Schedule, cfg.Timing = 64, c.slots, 4, c.sched, true
			p, err := pipeline.New(dev, cfg)
			require.NoError(t, err)
			defer p.Close()
			const chunks = 14
			n := chunks*64 - 9
			in, out := make([]float32, n), make([]float32, n)
			kernels.FillPattern(in, 4)
			rep, err := p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(nil, 2), Host: pipeline.HostRegistered,
				Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
			require.NoError(t, err)
			assert.Equal(t, c.sched, rep.Schedule)
			require.NoError(t, verifySeed(in, out, 2))
			assert.Empty(t, dev.Hazards())
			require.Len(t, rep.Spans, 3*chunks)
			by := map[pipeline.Stage]map[int]pipeline.Span{}
			for _, sp := range rep.Spans {
				assert.Greater(t, sp.End, sp.Start, "%+v", sp)
				if by[sp.Stage] == nil {
					by[sp.Stage] = map[int]pipeline.Span{}
				}
				by[sp.Stage][sp.Chunk] = sp
			}
			for _, st := range []pipeline.Stage{pipeline.StageH2D, pipeline.StageCompute, pipeline.StageD2H} {
				require.Len(t, by[st], chunks, "%s", st)
			}
			// A group's chunks are marked one after another around one
			// copy: every start precedes every end of the group.
			for g := 0; g < chunks; g += c.group {
				for _, st := range []pipeline.Stage{pipeline.StageH2D, pipeline.StageD2H} {
					lastStart, firstEnd := by[st][g].Start, by[st][g].End
					for i := g; i < min(g+c.group, chunks); i++ {
						lastStart, firstEnd = max(lastStart, by[st][i].Start), min(firstEnd, by[st][i].End)
					}
					assert.Less(t, lastStart, firstEnd, "%s of the group from chunk %d is one copy", st, g)
				}
			}
			for i := 0; i < chunks; i++ {
				// Each span's lane is the stream it ran on: in-stream, a
				// chunk's copies run on its compute stream.
				copyLanes := [2]string{"H2D", "D2H"}
				if c.sched == pipeline.ScheduleInStream {
					k := fmt.Sprintf("compute %d", i%4)
					copyLanes = [2]string{k, k}
				}
				assert.Equal(t, copyLanes[0], by[pipeline.StageH2D][i].Lane, "chunk %d's copy in", i)
				assert.Equal(t, copyLanes[1], by[pipeline.StageD2H][i].Lane, "chunk %d's copy out", i)
				assert.Equal(t, fmt.Sprintf("compute %d", i%4), by[pipeline.StageCompute][i].Lane, "chunk %d's kernel", i)
				assert.GreaterOrEqual(t, by[pipeline.StageCompute][i].Start, by[pipeline.StageH2D][i].End, "chunk %d computes after its copy in", i)
				assert.GreaterOrEqual(t, by[pipeline.StageD2H][i].Start, by[pipeline.StageCompute][i].End, "chunk %d is copied out after its kernel", i)
			}
		})
	}
}

// TestStageTimesCoalesced: StageTimes copies as a run does, a copy a
// group each way on coalesced copies, a copy a chunk with CopyChunks 1.
func TestStageTimesCoalesced(t *testing.T) {
	for _, c := range []struct{ copyChunks, copies int }{{0, 2 * 8}, {1, 2 * 29}} {
		dev := sim.New(1, 0)
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.CopyChunks = 64, 12, 2, c.copyChunks
		p, err := pipeline.New(dev, cfg)
		require.NoError(t, err)
		n := 29*64 - 3
		in, out := make([]float32, n), make([]float32, n)
		before := dev.Count("copy")
		_, err = p.StageTimes(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(nil, 2), Host: pipeline.HostRegistered,
			Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		assert.Equal(t, c.copies, dev.Count("copy")-before, "CopyChunks %d", c.copyChunks)
		assert.Empty(t, dev.Hazards())
		require.NoError(t, p.Close())
	}
}

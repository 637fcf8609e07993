package pipeline

import (
	"context"
	"fmt"
)

// Schedule is how a run orders its chunks' stages on the device.
type Schedule int

const (
	// ScheduleAuto picks per run: ScheduleInStream for a run of at most
	// 16 chunks, and at least two for each compute stream, on at least 3
	// compute streams, that it can run; ScheduleEvents otherwise. With
	// one chunk a stream, every stream's copy in runs at once and shares
	// the link, so the first kernel starts later than on events (4M
	// elements in 1M chunks on 4 streams: 0.71-0.73 ms in-stream against
	// 0.68-0.70 on events on the H200).
	ScheduleAuto Schedule = iota
	// ScheduleEvents puts every H2D copy on one stream, every D2H copy on
	// another and the kernels on the compute streams, ordered by events
	// and stream waits (see issue). A chunk's H2D copy waits only for the
	// kernel that last read its slot, so a slot is refilled while its
	// last output is still being copied out; where the copies of small
	// chunks are coalesced (Config.CopyChunks), a group's copy in waits
	// for the copy out of the group a ring back instead (issueGrouped).
	ScheduleEvents
	// ScheduleInStream puts each chunk's H2D copies, kernel and D2H
	// copies in order on one compute stream, chunk i on stream i mod
	// ComputeStreams, and gives each stream slots of its own, so that
	// stream order is the only ordering a run needs: three calls a chunk
	// where ScheduleEvents makes ten. The device still overlaps one
	// stream's copies with another's kernel. It needs no events, so it
	// runs only jobs whose buffers are copied in place (pinned or
	// registered) and not a Group's: staging and a group's queue wait on
	// events. Other jobs run on ScheduleEvents whatever the Config says.
	ScheduleInStream
)

var scheduleNames = [...]string{"auto", "events", "in-stream"}

func (s Schedule) String() string {
	if s < 0 || int(s) >= len(scheduleNames) {
		return fmt.Sprintf("Schedule(%d)", int(s))
	}
	return scheduleNames[s]
}

// ParseSchedule reads "auto", "events" or "in-stream".
func ParseSchedule(s string) (Schedule, error) {
	for i, n := range scheduleNames {
		if s == n {
			return Schedule(i), nil
		}
	}
	return 0, fmt.Errorf("pipeline: unknown schedule %q: want auto, events or in-stream", s)
}

// inStreamMaxChunks is the most chunks a run may have for ScheduleAuto to
// pick ScheduleInStream. A small whole job's time is bound by the calls
// that issue it (bench/RESULTS.md, "Small whole jobs: a chunk's stages on
// one stream"); a long job's is bound by the device, and there the events
// let a slot be refilled before its output is out.
const inStreamMaxChunks = 16

// inStreamMinStreams is the fewest compute streams for which ScheduleAuto
// picks ScheduleInStream: a stream runs its chunks' stages one after
// another, so it takes three, one copying in, one computing and one
// copying out, to keep the three stages busy at once. On one stream the
// schedule overlaps nothing.
const inStreamMinStreams = 3

// scheduleFor is the schedule a run of pl takes; p.mu held.
func (p *Pipeline) scheduleFor(pl *plan, staged bool) Schedule {
	if staged || pl.queue != nil || p.skipWAR || p.inStreamSlots() == 0 {
		return ScheduleEvents
	}
	switch p.cfg.Schedule {
	case ScheduleInStream:
		return ScheduleInStream
	case ScheduleAuto:
		k := len(p.comp)
		if pl.chunks <= inStreamMaxChunks && pl.chunks >= 2*k && p.inStreamSlots() >= inStreamMinStreams && k >= inStreamMinStreams {
			return ScheduleInStream
		}
	}
	return ScheduleEvents
}

// inStreamSlots is how many slots an in-stream run uses: the most that is
// a multiple of the compute streams, so that slot s always belongs to
// stream s mod ComputeStreams and two chunks in one slot are always on one
// stream, in order.
func (p *Pipeline) inStreamSlots() int {
	k := len(p.comp)
	if k == 0 {
		return 0
	}
	return k * (p.cfg.Slots / k)
}

// executeInStream runs a job on ScheduleInStream: one goroutine issues
// every chunk without waiting on the host, then waits for the compute
// streams. A cancellation stops the issuing at the next chunk.
func (p *Pipeline) executeInStream(ctx context.Context, pl *plan) error {
	iss, timers, err := p.beginIssue(pl)
	if err != nil {
		return err
	}
	defer iss.Release()
	issuing := true
	defer p.settleOnPanic(nil, pl.stopGroup, &issuing)
	issued, issueErr := p.issueInStream(ctx, pl, iss, timers)
	issuing = false
	pl.issued = issued
	// Drain even after a failed issue: what was queued must finish before
	// the slots are used again. The timing origin is on the H2D stream.
	if err := p.drain(); err != nil {
		return p.drainFailed(err)
	}
	if issueErr != nil {
		return issueErr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if timers != nil {
		spans, err := timers.collect()
		if err != nil {
			return &StageError{Chunk: -1, Stage: StageDrain, Err: err}
		}
		pl.report.Spans = spans
	}
	return nil
}

// issueInStream issues chunk i's H2D copies, kernel and D2H copies on
// compute stream i mod K, in slot i mod U (U = inStreamSlots), and returns
// how many chunks it issued. Chunks i and i+U share a slot and a stream,
// so the second's copy into the slot is queued behind the first's copy
// out of it: no event is needed.
func (p *Pipeline) issueInStream(ctx context.Context, pl *plan, iss Issuer, tm *timing) (int, error) {
	k, u := len(p.comp), p.inStreamSlots()
	watch := ctx.Done() != nil
	for i := 0; i < pl.chunks; i++ {
		if watch && ctx.Err() != nil {
			return i, nil // execute reports ctx.Err() after the drain
		}
		s, cs := i%u, p.comp[i%k]
		off, n := p.chunkBounds(pl, i)
		if err := tm.mark(iss, cs, i, StageH2D, 0); err != nil {
			return i, &StageError{Chunk: i, Stage: StageH2D, Err: err}
		}
		for j, src := range pl.ins {
			if err := iss.CopyToDevice(cs, p.din[s][j].all, p.din[s][j].off, src.mem, off*src.elem, n*src.elem); err != nil {
				return i, &StageError{Chunk: i, Stage: StageH2D, Err: err}
			}
		}
		if err := tm.mark(iss, cs, i, StageH2D, 1); err != nil {
			return i, &StageError{Chunk: i, Stage: StageH2D, Err: err}
		}
		if err := tm.mark(iss, cs, i, StageCompute, 0); err != nil {
			return i, &StageError{Chunk: i, Stage: StageCompute, Err: err}
		}
		chunk := &p.chunk
		p.fillChunk(chunk, i, s, off, n)
		if err := iss.Launch(cs, pl.job.Kernel, *chunk); err != nil {
			return i, &StageError{Chunk: i, Stage: StageCompute, Err: err}
		}
		if err := tm.mark(iss, cs, i, StageCompute, 1); err != nil {
			return i, &StageError{Chunk: i, Stage: StageCompute, Err: err}
		}
		if err := tm.mark(iss, cs, i, StageD2H, 0); err != nil {
			return i, &StageError{Chunk: i, Stage: StageD2H, Err: err}
		}
		for j, dst := range pl.outs {
			if err := iss.CopyToHost(cs, dst.mem, off*dst.elem, p.dout[s][j].all, p.dout[s][j].off, n*dst.elem); err != nil {
				return i, &StageError{Chunk: i, Stage: StageD2H, Err: err}
			}
		}
		if err := tm.mark(iss, cs, i, StageD2H, 1); err != nil {
			return i, &StageError{Chunk: i, Stage: StageD2H, Err: err}
		}
	}
	return pl.chunks, nil
}

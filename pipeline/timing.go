package pipeline

import (
	"fmt"
	"time"
)

// maxTimedChunks bounds per-chunk timing: six events per chunk.
const maxTimedChunks = 1 << 16

// timing records a start and an end event for each GPU stage of each chunk,
// all measured against one origin event.
type timing struct {
	p          *Pipeline
	chunks     int
	origin     Event
	hostOrigin time.Duration
	lane       []int  // each chunk's stage's compute stream, -1 on the copy streams (lanes of 3 a chunk)
	taken      []bool // chunks this device ran (a device of a group runs some)
}

// startTiming makes sure enough timing events exist and records the origin.
func (p *Pipeline) startTiming(iss Issuer, chunks int) (*timing, error) {
	if chunks > maxTimedChunks {
		return nil, fmt.Errorf("per-chunk timing is limited to %d chunks; this run has %d", maxTimedChunks, chunks)
	}
	need := 1 + 6*chunks
	for len(p.timers) < need {
		e, err := p.b.NewEvent(true)
		if err != nil {
			return nil, err
		}
		p.timers = append(p.timers, e)
	}
	t := &timing{p: p, chunks: chunks, origin: p.timers[0], lane: make([]int, 3*chunks), taken: make([]bool, chunks)}
	if err := iss.Record(t.origin, p.h2d); err != nil {
		return nil, err
	}
	if err := t.origin.Synchronize(); err != nil {
		return nil, err
	}
	t.hostOrigin = p.now()
	return t, nil
}

func (t *timing) event(c int, st Stage, which int) Event {
	return t.p.timers[1+c*6+int(st-StageH2D)*2+which]
}

// mark records the start (which 0) or end (which 1) of a stage; it does
// nothing when timing is off.
func (t *timing) mark(iss Issuer, s Stream, c int, st Stage, which int) error {
	if t == nil {
		return nil
	}
	t.taken[c] = true
	// The lane is the stream the stage ran on: on ScheduleInStream a
	// chunk's copies run on its compute stream, not the copy streams.
	lane := -1
	for k, cs := range t.p.comp {
		if cs == s {
			lane = k
		}
	}
	t.lane[3*c+int(st-StageH2D)] = lane
	return iss.Record(t.event(c, st, which), s)
}

// collect reads every span once the run has drained.
func (t *timing) collect() ([]Span, error) {
	spans := make([]Span, 0, 3*t.chunks)
	for c := 0; c < t.chunks; c++ {
		if !t.taken[c] {
			continue
		}
		for _, st := range []Stage{StageH2D, StageCompute, StageD2H} {
			a, err := t.origin.Elapsed(t.event(c, st, 0))
			if err != nil {
				return nil, err
			}
			b, err := t.origin.Elapsed(t.event(c, st, 1))
			if err != nil {
				return nil, err
			}
			lane := st.String()
			if k := t.lane[3*c+int(st-StageH2D)]; k >= 0 {
				lane = fmt.Sprintf("compute %d", k)
			}
			spans = append(spans, Span{Chunk: c, Stage: st, Lane: lane, Start: a, End: b})
		}
	}
	return spans, nil
}

// markGroup marks stage st of the gn chunks from c, which one copy moves:
// each chunk's span is the copy's.
func (t *timing) markGroup(iss Issuer, s Stream, c, gn int, st Stage, which int) error {
	if t == nil {
		return nil
	}
	for k := range gn {
		if err := t.mark(iss, s, c+k, st, which); err != nil {
			return err
		}
	}
	return nil
}

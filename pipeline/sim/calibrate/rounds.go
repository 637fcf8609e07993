package calibrate

import (
	"context"
	"fmt"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
)

// hostSamples are the host's speed figures of a profile that Validate
// times again in each of its rounds: the engine's issue loops
// (IssueLoops) and the staging copies in a staged run (StagingInRun,
// its issue lags included, and StagingChunkNs). The
// host's speed on the H200 host drifts by a fifth and more within a
// process, so a figure timed once, before the rows, can be far from the
// speed the rows ran at; the profile takes the median of each figure over
// the same rounds in which each row takes its median, and leaves out its
// own figure, timed before the first round.
type hostSamples struct {
	loops   [][]float64 // ns per chunk, by loopShapes
	in, out [][]float64 // GB/s, by StagingInRun entry
	boost   [][]float64 // AloneBoost, by StagingInRun entry
	lag     [][]float64 // IssueLagNs, by StagingInRun entry
	chunkNs []float64   // StagingChunkNs
}

// newHostSamples starts no samples for p's figures, once it has checked
// that p's issue loops are the shapes that a round times.
func newHostSamples(p *sim.Profile) (*hostSamples, error) {
	if len(p.IssueLoops) != len(loopShapes) {
		return nil, fmt.Errorf("the profile has %d issue loops, not %d", len(p.IssueLoops), len(loopShapes))
	}
	s := &hostSamples{}
	for i, l := range p.IssueLoops {
		if sh := loopShapes[i]; l.Slots != sh[0] || l.Streams != sh[1] || max(l.Inputs, 1) != sh[2] {
			return nil, fmt.Errorf("the profile's issue loop %d has %d slots, %d streams and %d inputs, not %v", i, l.Slots, l.Streams, max(l.Inputs, 1), sh)
		}
	}
	n := len(p.StagingInRun)
	s.loops = make([][]float64, len(p.IssueLoops))
	s.in, s.out, s.boost, s.lag = make([][]float64, n), make([][]float64, n), make([][]float64, n), make([][]float64, n)
	return s, nil
}

// round times the figures again on b: the issue loops, and, if p has
// in-run staging rates, staged runs of k over in and out. The staging
// goroutines' time per chunk is reckoned against this round's other
// figures, so that a drift in them is not taken for it. It adds the
// samples only once all are timed.
func (s *hostSamples) round(ctx context.Context, b pipeline.Backend, ks kernelSet, k *pipeline.Kernel, p *sim.Profile, in, out []float32) error {
	q := p.Clone() // this round's figures
	for i, sh := range loopShapes {
		ns, err := engineLoop(b, loopKernel(ks, sh), sh[0], sh[1], sh[2])
		if err != nil {
			return err
		}
		q.IssueLoops[i].Ns = ns
	}
	q.IssueScale = loopScale(q.IssueLoops)
	var chunkNs float64
	if len(p.StagingInRun) > 0 {
		rates, err := stagingInRunRates(ctx, b, k, q, in, out)
		if err != nil {
			return err
		}
		if len(rates) != len(s.in) {
			return fmt.Errorf("%d in-run staging rates timed, and the profile has %d", len(rates), len(s.in))
		}
		for i, r := range rates {
			if r.Bytes != p.StagingInRun[i].Bytes {
				return fmt.Errorf("in-run staging rate %d timed at %d bytes, and the profile's is at %d", i, r.Bytes, p.StagingInRun[i].Bytes)
			}
		}
		q.StagingInRun = rates
		if chunkNs, err = stagingChunkNs(ctx, b, k, q, in, out); err != nil {
			return err
		}
	}
	for i, l := range q.IssueLoops {
		s.loops[i] = append(s.loops[i], l.Ns)
	}
	if len(p.StagingInRun) > 0 {
		for i, r := range q.StagingInRun {
			s.in[i] = append(s.in[i], r.InGBps)
			s.out[i] = append(s.out[i], r.OutGBps)
			s.boost[i] = append(s.boost[i], r.AloneBoost)
			s.lag[i] = append(s.lag[i], r.IssueLagNs)
		}
		s.chunkNs = append(s.chunkNs, chunkNs)
	}
	return nil
}

// apply sets p's figures to the medians of their samples, and IssueScale
// from the loops, and says so in p's notes; with no round timed it leaves
// p as it is.
func (s *hostSamples) apply(p *sim.Profile) {
	rounds := len(s.loops[0])
	if rounds == 0 {
		return
	}
	for i := range p.IssueLoops {
		p.IssueLoops[i].Ns = median(s.loops[i])
	}
	p.IssueScale = loopScale(p.IssueLoops)
	then := fmt.Sprintf("; then, in --validate, replaced by the median of %d rounds' timings", rounds)
	if rounds == 1 {
		then = "; then, in --validate, replaced by its one round's timing"
	}
	p.Notes["issue_loops"] += then
	if len(p.StagingInRun) == 0 {
		return
	}
	for i := range p.StagingInRun {
		p.StagingInRun[i].InGBps, p.StagingInRun[i].OutGBps = median(s.in[i]), median(s.out[i])
		p.StagingInRun[i].AloneBoost = median(s.boost[i])
		p.StagingInRun[i].IssueLagNs = median(s.lag[i])
	}
	p.StagingChunkNs = median(s.chunkNs)
	p.Notes["staging_in_run"] += then
	p.Notes["staging_chunk_ns"] += then
	p.Notes["staging_issue_lag"] += then
}

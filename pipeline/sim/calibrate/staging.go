package calibrate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// stagingRunReps is how many timed runs measureStagingInRun makes of each
// chunk size, after one untimed run; the median run's spans count.
const stagingRunReps = 3

// stagingRunChunks are the chunk sizes at which measureStagingInRun times
// a staged run of n elements: n/1024 to n/4, the staged rows' chunks of
// Validate (64K to 16M float32s, 256 KiB to 64 MiB a copy, when the run
// is half the validation's 128M elements).
func stagingRunChunks(n int) []int {
	var chunks []int
	for _, div := range []int{1024, 256, 64, 16, 4} {
		chunks = append(chunks, max(1, n/div))
	}
	return chunks
}

// measureStagingInRun sets Profile.StagingInRun from staged runs of the
// engine itself: the kernel k over n float32s of Go memory, 3 slots and 1
// compute stream (a shape that Validate does not measure), with
// Config.Timing, at each of stagingRunChunks(n). Of the median of
// stagingRunReps runs it takes each direction's bytes over the total time
// of its spans, with the time that a span ran alone (no span of the other
// direction beside it) counted StagingAloneBoost times, as the simulator
// charges a run's staging copies. Each size's issue lag (IssueLagNs) is
// fitted to the same runs (issueLags). p's Staging table must be measured.
//
// The staging rates of measureHost do not describe such a run: its copies
// read Go memory too large for the host's caches into a few pinned slots
// that DMA reads and writes between two uses. On the H200 host they put
// staged rows of Validate up to 94% off; timed this way the copies are
// what the run does.
func measureStagingInRun(ctx context.Context, b pipeline.Backend, k *pipeline.Kernel, p *sim.Profile, n int) error {
	switch {
	case n < 1:
		return fmt.Errorf("measureStagingInRun: %d elements; at least 1", n)
	case len(p.Staging) == 0:
		return errors.New("measureStagingInRun: the profile's staging table is not measured yet")
	}
	in, out := stagingMemory(n)
	rates, err := stagingInRunRates(ctx, b, k, p, in, out)
	if err != nil {
		return err
	}
	p.StagingInRun = rates
	if p.StagingChunkNs, err = stagingChunkNs(ctx, b, k, p, in, out); err != nil {
		return err
	}
	p.Notes["staging_chunk_ns"] = fmt.Sprintf("a staged Run of %d float32s in chunks of %d, %d slots and %d compute streams, the median of %d after an untimed one, against the simulator's prediction of it with staging_chunk_ns 0 and %v, interpolated, then one secant step", len(in), stagingRunChunks(len(in))[0], chunkSlots, kernelStreams, stagingRunReps, chunkProbe)
	p.Notes["staging_issue_lag"] = fmt.Sprintf("in the same runs, the mean time from a chunk's stage-in to its H2D copy, over the chunks whose stage-in ended after the previous chunk's H2D and after the stage-out of the chunk %d before that, less the same mean in the run on the timing-only simulator with these rates and no lag (at least 0; a size with fewer than %d such chunks takes the previous size's lag)", stagingRunSlots, minLagChunks)
	p.Notes["staging_in_run"] = fmt.Sprintf("the stage-in and stage-out spans of staged Runs of %d float32s of Go memory (3 slots, 1 compute stream, kernel %s), per chunk size: each direction's bytes over its spans' total time, the time a span ran with no span of the other direction beside it counted alone_boost times: fitted to the spans (a span that ran b beside the other direction and a alone moved r·b + q·a bytes, boost q/r, by least squares, the mean over the directions that determine it), or the staging table's ratio of one copy alone to each of two at once where they do not, from the median of %d runs after an untimed one", n, k.Name, stagingRunReps)
	return nil
}

// stagingMemory is the Go memory of measureStagingInRun's runs: n
// float32s of input with a pattern, and n of output, touched.
func stagingMemory(n int) (in, out []float32) {
	in, out = make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	clear(out)
	return in, out
}

// stagingInRunRates times staged runs over in and out at each of
// stagingRunChunks, reckoned with p's Staging table, and fits each size's
// issue lag (issueLags).
func stagingInRunRates(ctx context.Context, b pipeline.Backend, k *pipeline.Kernel, p *sim.Profile, in, out []float32) ([]sim.StagingInRun, error) {
	var rates []sim.StagingInRun
	var late []lateness
	for _, chunk := range stagingRunChunks(len(in)) {
		r, l, err := stagingRunRates(ctx, b, k, p, in, out, chunk)
		if err != nil {
			return nil, fmt.Errorf("timing staging in a staged run of %d-element chunks: %w", chunk, err)
		}
		rates, late = append(rates, r), append(late, l)
	}
	if err := issueLags(ctx, k, p, in, out, rates, late); err != nil {
		return nil, err
	}
	return rates, nil
}

// minLagChunks is how many chunks of a staged run must have been issued
// right after their staging for issueLags to fit a lag to that run.
const minLagChunks = 3

// issueLags sets the issue lag of each of rates (StagingInRun's
// IssueLagNs) from the lateness measured in its staged run: the measured
// mean less the mean of the same run on the timing-only simulator with
// rates and no lag (and StagingChunkNs 0), whose issue costs account for
// part of it; at least 0. A size whose run, measured or simulated, has
// fewer than minLagChunks chunks to judge by takes the previous size's
// lag, or 0.
func issueLags(ctx context.Context, k *pipeline.Kernel, p *sim.Profile, in, out []float32, rates []sim.StagingInRun, measured []lateness) error {
	q := p.Clone()
	q.StagingInRun, q.StagingChunkNs = append([]sim.StagingInRun(nil), rates...), 0
	for i := range q.StagingInRun {
		q.StagingInRun[i].IssueLagNs = 0
	}
	for i := range rates {
		simulated, err := stagedLateness(ctx, sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q), k, in, out, rates[i].Bytes/4)
		if err != nil {
			return fmt.Errorf("simulating a staged run of %d-element chunks: %w", rates[i].Bytes/4, err)
		}
		switch {
		case measured[i].chunks >= minLagChunks && simulated.chunks >= minLagChunks:
			rates[i].IssueLagNs = math.Max(0, float64(measured[i].mean-simulated.mean))
		case i > 0:
			rates[i].IssueLagNs = rates[i-1].IssueLagNs
		}
	}
	return nil
}

// lateness is how late, on average, a staged run's issuing goroutine
// issued a chunk's host-to-device copy after the chunk's staging ended,
// over the chunks whose staging is the last of what the copy waited for
// (issueLateness), and how many those are.
type lateness struct {
	mean   time.Duration
	chunks int
}

// issueLateness is the lateness of a staged run with the given slots, by
// its spans: of chunk i's host-to-device copy after its stage-in ended,
// over the chunks whose stage-in ended after chunk i−1's host-to-device
// copy and after the stage-out of chunk i−1−slots (which the issuer waits
// for before it issues chunk i−1's copy out), so that neither of those
// held the copy back.
func issueLateness(spans []pipeline.Span, slots int) lateness {
	type key struct {
		chunk int
		stage pipeline.Stage
	}
	at := map[key]pipeline.Span{}
	for _, s := range spans {
		at[key{s.Chunk, s.Stage}] = s
	}
	var sum time.Duration
	var l lateness
	for k, in := range at {
		h2d, ok := at[key{k.chunk, pipeline.StageH2D}]
		if k.stage != pipeline.StageIn || !ok {
			continue
		}
		if prev, ok := at[key{k.chunk - 1, pipeline.StageH2D}]; ok && prev.End > in.End {
			continue
		}
		if drained, ok := at[key{k.chunk - 1 - slots, pipeline.StageOut}]; ok && drained.End > in.End {
			continue
		}
		sum += h2d.Start - in.End
		l.chunks++
	}
	if l.chunks > 0 {
		l.mean = sum / time.Duration(l.chunks)
	}
	return l
}

// stagingRunSlots is the slots of measureStagingInRun's staged runs.
const stagingRunSlots = 3

// stagedRun runs a staged job of k over in and out in chunks of chunk
// elements, stagingRunSlots slots and 1 compute stream, with
// Config.Timing, reps times after an untimed run (once, and no untimed
// run, for reps 0: the timing-only simulator's runs repeat exactly), and
// returns the median run's report.
func stagedRun(ctx context.Context, b pipeline.Backend, k *pipeline.Kernel, in, out []float32, chunk, reps int) (*pipeline.Report, error) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host, cfg.Timing = chunk, stagingRunSlots, 1, pipeline.HostStaged, true
	pp, err := pipeline.New(b, cfg)
	if err != nil {
		return nil, err
	}
	defer pp.Close()
	job := pipeline.Job{N: len(in), Kernel: k, Host: pipeline.HostStaged, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	untimed := 1
	if reps <= 0 {
		untimed, reps = 0, 1
	}
	var runs []*pipeline.Report
	for rep := range untimed + reps {
		r, err := pp.Run(ctx, job)
		if err != nil {
			return nil, err
		}
		if rep >= untimed {
			runs = append(runs, r)
		}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Elapsed < runs[j].Elapsed })
	return runs[len(runs)/2], nil
}

// stagedLateness is the issuer's lateness in one staged run on the
// timing-only simulator b (stagedRun).
func stagedLateness(ctx context.Context, b pipeline.Backend, k *pipeline.Kernel, in, out []float32, chunk int) (lateness, error) {
	r, err := stagedRun(ctx, b, k, in, out, chunk, 0)
	if err != nil {
		return lateness{}, err
	}
	return issueLateness(r.Spans, stagingRunSlots), nil
}

// stagingRunRates runs a staged job over in and out in chunks of chunk
// elements and returns its staging rates, as measureStagingInRun says,
// and the issuer's lateness in the median run.
func stagingRunRates(ctx context.Context, b pipeline.Backend, k *pipeline.Kernel, p *sim.Profile, in, out []float32, chunk int) (sim.StagingInRun, lateness, error) {
	n := len(in)
	mid, err := stagedRun(ctx, b, k, in, out, chunk, stagingRunReps)
	if err != nil {
		return sim.StagingInRun{}, lateness{}, err
	}
	var ins, outs []pipeline.Span
	for _, s := range mid.Spans {
		switch s.Stage {
		case pipeline.StageIn:
			ins = append(ins, s)
		case pipeline.StageOut:
			outs = append(outs, s)
		}
	}
	spanBytes := func(s pipeline.Span) int { return 4 * min(chunk, n-s.Chunk*chunk) }
	// beside is how long span s ran beside a span of others.
	beside := func(s pipeline.Span, others []pipeline.Span) time.Duration {
		var d time.Duration
		for _, o := range others {
			d += max(0, min(s.End, o.End)-max(s.Start, o.Start))
		}
		return min(d, s.End-s.Start)
	}
	boost := aloneBoost(ins, outs, spanBytes, beside)
	if boost == 0 {
		boost = p.StagingTableBoost(4 * chunk)
	}
	// Each span counts its time beside a span of the other direction
	// whole, and its time alone as that much longer as the copy would have
	// taken beside one: the simulator runs a copy alone faster by
	// the boost.
	reckon := func(spans, others []pipeline.Span) (bytes int, took time.Duration) {
		for _, s := range spans {
			bytes += spanBytes(s)
			b := beside(s, others)
			took += b + time.Duration(boost*float64(s.End-s.Start-b))
		}
		return bytes, took
	}
	inBytes, inTime := reckon(ins, outs)
	outBytes, outTime := reckon(outs, ins)
	if inTime <= 0 || outTime <= 0 {
		return sim.StagingInRun{}, lateness{}, fmt.Errorf("the run gave no staging spans to time (in %v, out %v)", inTime, outTime)
	}
	rate := func(bytes int, d time.Duration) float64 { return math.Max(float64(bytes)/float64(d), 1e-6) }
	return sim.StagingInRun{Bytes: 4 * chunk, InGBps: rate(inBytes, inTime), OutGBps: rate(outBytes, outTime), AloneBoost: boost}, issueLateness(mid.Spans, stagingRunSlots), nil
}

// aloneBoost fits how much faster a staging copy goes while the other
// direction's staging goroutine does not copy, to a run's spans: a span
// that ran for b beside the other direction and a alone moved r·b + q·a
// bytes, with r and q fitted by least squares for each direction and the
// boost q/r. It is the mean of the directions' boosts that the spans
// determine (both kinds of time present, the fit not degenerate), at
// least 1 and at most maxAloneBoost; 0 if neither direction's spans
// determine one.
func aloneBoost(ins, outs []pipeline.Span, bytes func(pipeline.Span) int, beside func(pipeline.Span, []pipeline.Span) time.Duration) float64 {
	var sum float64
	var fits int
	for _, d := range [][2][]pipeline.Span{{ins, outs}, {outs, ins}} {
		var bb, ba, aa, yb, ya float64
		for _, s := range d[0] {
			b := float64(beside(s, d[1]))
			a := float64(s.End-s.Start) - b
			y := float64(bytes(s))
			bb, ba, aa, yb, ya = bb+b*b, ba+b*a, aa+a*a, yb+y*b, ya+y*a
		}
		det := bb*aa - ba*ba
		if bb == 0 || aa == 0 || det < 1e-3*bb*aa {
			continue // only one kind of time, or both in the same proportion
		}
		r, q := (yb*aa-ya*ba)/det, (ya*bb-yb*ba)/det
		if r <= 0 || q <= 0 {
			continue
		}
		sum += min(maxAloneBoost, max(1, q/r))
		fits++
	}
	if fits == 0 {
		return 0
	}
	return sum / float64(fits)
}

// maxAloneBoost bounds a fitted alone boost, against spans too few or
// too noisy to fit: the staging tables of the H200 host put one copy
// alone at up to 2.7 times each of two at once (128 MiB), and the fits in
// staged runs at up to 1.95.
const maxAloneBoost = 3.0

// chunkSlots and chunkProbe are stagingChunkNs's run's slots (more than
// Validate uses, so that the staging goroutines set the pace) and the
// second StagingChunkNs that it predicts that run at.
const (
	chunkSlots = 8
	chunkProbe = 20 * time.Microsecond
)

// stagingChunkNs measures Profile.StagingChunkNs with p's in-run staging
// rates: a staged run over in and out in the smallest of
// stagingRunChunks, with chunkSlots slots and kernelStreams compute
// streams, the median of stagingRunReps runs after an untimed one, against
// the simulator's prediction of the same run at 0 and chunkProbe,
// solved by solveFrom; 0 if the simulator's staging goroutines do not set
// that run's pace.
func stagingChunkNs(ctx context.Context, b pipeline.Backend, k *pipeline.Kernel, p *sim.Profile, in, out []float32) (float64, error) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = stagingRunChunks(len(in))[0], chunkSlots, kernelStreams, pipeline.HostStaged
	job := pipeline.Job{N: len(in), Kernel: k, Host: pipeline.HostStaged, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	timed := func(bk pipeline.Backend) (time.Duration, error) {
		pp, err := pipeline.New(bk, cfg)
		if err != nil {
			return 0, err
		}
		defer pp.Close()
		var took []time.Duration
		for rep := 0; rep <= stagingRunReps; rep++ {
			r, err := pp.Run(ctx, job)
			if err != nil {
				return 0, err
			}
			if rep > 0 {
				took = append(took, r.Elapsed)
			}
		}
		return median(took), nil
	}
	measured, err := timed(b)
	if err != nil {
		return 0, fmt.Errorf("timing a staged run's copies: %w", err)
	}
	var at [2]time.Duration
	for i, v := range []time.Duration{0, chunkProbe} {
		q := p.Clone()
		q.StagingChunkNs = float64(v)
		if at[i], err = timed(sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q)); err != nil {
			return 0, err
		}
	}
	// Where the staging goroutines do not set the run's pace (chunks so
	// small that the issuing goroutine does), the run says nothing of them.
	if chunks := (len(in) + cfg.ChunkElems - 1) / cfg.ChunkElems; at[1]-at[0] < time.Duration(chunks)*chunkProbe/2 {
		return 0, nil
	}
	// The run's time is not linear in the time per chunk where the
	// staging goroutines set its pace only for part of it (copies alone
	// faster by more than 1.2, say): solveFrom takes a secant step.
	x, _, err := solveFrom(measured, float64(chunkProbe), at, func(v float64) (time.Duration, error) {
		q := p.Clone()
		q.StagingChunkNs = v
		return timed(sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q))
	})
	return x, err
}

package pipeline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// StageCost is one stage's per-chunk cost model: Fixed + PerElem × elements.
type StageCost struct {
	Fixed   time.Duration
	PerElem float64 // nanoseconds per element
}

// At returns the stage's predicted time for a chunk of n elements.
func (c StageCost) At(n int) time.Duration {
	return c.Fixed + time.Duration(c.PerElem*float64(n))
}

// Model predicts a pipeline's time from its stages' cost models.
type Model struct {
	H2D, Compute, D2H StageCost
	// PerChunk is the least time a chunk adds to a run in steady state,
	// whatever its stages cost alone: the host's work to issue it and the
	// device's waits between its streams. Stage costs measured alone do
	// not see it, and without it a small job looks fastest in many small
	// chunks, each of which then costs the issue loop more than its
	// copies. Probe measures it with one pipelined run; zero ignores it.
	PerChunk time.Duration
	// PerChunkInStream is PerChunk for ScheduleInStream, which issues
	// three calls a chunk where ScheduleEvents issues ten. Probe measures
	// it with one more run; zero leaves the in-stream candidates out.
	PerChunkInStream time.Duration
}

// inStreamCandidateStreams are the compute streams of the in-stream
// candidates, each stream with one slot: three keep the three stages busy
// at once (inStreamMinStreams), four let a stream's kernel start while
// another's copies run.
var inStreamCandidateStreams = []int{3, 4}

// Predict returns the predicted time of a job of n elements in chunks of
// chunk elements, with slots buffer slots and computeStreams compute
// streams: the first chunk goes through every stage (fill), then each
// further chunk costs the slowest stage, and the last chunk's remaining
// stages drain. Kernels in flight on several streams overlap their fixed
// (launch and tail) costs; each needs a slot of its own besides the one
// being filled, so at most slots-1 are in flight.
func (m Model) Predict(n, chunk, slots, computeStreams int) time.Duration {
	if n <= 0 || chunk <= 0 {
		return 0
	}
	computeStreams = max(1, min(computeStreams, slots-1))
	k := (n + chunk - 1) / chunk
	last := n - (k-1)*chunk
	steady := func(c int) time.Duration {
		comp := time.Duration(float64(m.Compute.Fixed)/float64(max(computeStreams, 1))) + time.Duration(m.Compute.PerElem*float64(c))
		return max(m.H2D.At(c), comp, m.D2H.At(c), m.PerChunk)
	}
	if k == 1 {
		return m.H2D.At(last) + m.Compute.At(last) + m.D2H.At(last)
	}
	fill := m.H2D.At(chunk) + m.Compute.At(chunk) + m.D2H.At(chunk)
	return fill + time.Duration(k-2)*steady(chunk) + steady(last)
}

// PredictInStream is Predict for ScheduleInStream on computeStreams
// streams, each with a slot of its own: a stream runs its chunks' three
// stages one after another, so besides the slowest stage a chunk costs at
// least its three stages over the streams.
func (m Model) PredictInStream(n, chunk, computeStreams int) time.Duration {
	if n <= 0 || chunk <= 0 || computeStreams <= 0 {
		return 0
	}
	k := (n + chunk - 1) / chunk
	last := n - (k-1)*chunk
	through := func(c int) time.Duration { return m.H2D.At(c) + m.Compute.At(c) + m.D2H.At(c) }
	if k == 1 {
		return through(last)
	}
	steady := func(c int) time.Duration {
		comp := time.Duration(float64(m.Compute.Fixed)/float64(computeStreams)) + time.Duration(m.Compute.PerElem*float64(c))
		return max(m.H2D.At(c), comp, m.D2H.At(c), m.PerChunkInStream, through(c)/time.Duration(computeStreams))
	}
	return through(chunk) + time.Duration(k-2)*steady(chunk) + steady(last)
}

// Fit fits each stage's cost model by least squares to per-chunk
// measurements: chunks[i] elements took stages[i] per chunk.
func Fit(chunks []int, stages []StageTimes) (Model, error) {
	if len(chunks) != len(stages) || len(chunks) < 2 {
		return Model{}, errors.New("pipeline: fitting a cost model needs at least two probes")
	}
	fit := func(get func(StageTimes) time.Duration) StageCost {
		var sx, sy, sxx, sxy float64
		n := float64(len(chunks))
		for i, c := range chunks {
			x, y := float64(c), float64(get(stages[i]))
			sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
		}
		den := n*sxx - sx*sx
		if den == 0 {
			return StageCost{PerElem: sy / math.Max(sx, 1)}
		}
		slope := (n*sxy - sx*sy) / den
		icpt := (sy - slope*sx) / n
		if slope < 0 {
			slope = 0
		}
		if icpt < 0 {
			icpt = 0
		}
		return StageCost{Fixed: time.Duration(icpt), PerElem: slope}
	}
	return Model{
		H2D:     fit(func(s StageTimes) time.Duration { return s.H2D }),
		Compute: fit(func(s StageTimes) time.Duration { return s.Compute }),
		D2H:     fit(func(s StageTimes) time.Duration { return s.D2H }),
	}, nil
}

// Choice is a tuned configuration with its predicted time.
type Choice struct {
	ChunkElems, Slots, ComputeStreams int
	// Schedule is the schedule the prediction is for: ScheduleEvents or
	// ScheduleInStream (the zero value, in a choice cached before
	// schedules existed, runs as ScheduleAuto).
	Schedule  Schedule
	Predicted time.Duration
	// Measured is the candidate's time in a run, when Pick ran it.
	Measured time.Duration
}

// Candidates lists every configuration Best considers, with its
// prediction: chunk sizes in powers of two from 64K elements up to n;
// on ScheduleEvents 1, 2 or 4 compute streams and 2, 3, 4 or 6 slots (at
// least as many as compute streams); on ScheduleInStream, when the model
// has its cost per chunk, 3 or 4 streams with a slot each.
func (m Model) Candidates(n int) []Choice {
	var out []Choice
	for chunk := 64 << 10; ; chunk *= 2 {
		c := min(chunk, n)
		for _, k := range []int{1, 2, 4} {
			for _, s := range []int{2, 3, 4, 6} {
				if s >= k {
					out = append(out, Choice{ChunkElems: c, Slots: s, ComputeStreams: k, Schedule: ScheduleEvents, Predicted: m.Predict(n, c, s, k)})
				}
			}
		}
		if m.PerChunkInStream > 0 && c < n {
			for _, k := range inStreamCandidateStreams {
				out = append(out, Choice{ChunkElems: c, Slots: k, ComputeStreams: k, Schedule: ScheduleInStream, Predicted: m.PredictInStream(n, c, k)})
			}
		}
		if chunk >= n || chunk >= 1<<30 {
			break
		}
	}
	return out
}

// Best returns the candidate with the lowest predicted time; among equals,
// the one with the fewest slots and streams.
func (m Model) Best(n int) Choice {
	best := Choice{Predicted: time.Duration(math.MaxInt64)}
	for _, c := range m.Candidates(n) {
		if c.Predicted < best.Predicted {
			best = c
		}
	}
	return best
}

// Probe measures per-chunk stage costs of job at a few chunk sizes, by
// building a pipeline for each (with cfg's shape; the slots, streams and
// CopyChunks are the probe's own) and timing its stages
// alone, and fits a Model to them; then it measures the model's PerChunk
// and PerChunkInStream with two pipelined runs of the whole job in small
// chunks on each schedule. The job's outputs are written. Go slices in
// auto mode are probed registered, as the job's runs take them from the
// second run of a pipeline on (tunedJob).
func Probe(ctx context.Context, b Backend, cfg Config, job Job) (Model, error) {
	if tj, ok := tunedJob(cfg, job); ok {
		m, err := probe(ctx, b, cfg, tj)
		if !errors.Is(err, ErrRegistered) {
			return m, err
		}
		// Registered by someone else: the job's runs stage it, and so
		// does the probe.
	}
	return probe(ctx, b, cfg, job)
}

// tunedJob is job in the host mode that its runs settle into, and whether
// that differs from job's own: a pipeline in auto mode stages Go slices
// the first time it sees them and registers them from its second run on
// (autoMode). The probes each run on a pipeline of their own, so in auto
// mode they would time staging, which costs a host copy per chunk that
// the tuned runs do not make: on the H200 that fitted 40-47 µs of H2D to
// every chunk and moved the choice for a 1M-element job from 128K chunks
// to 512K (bench/RESULTS.md, "Small whole jobs: the tuner probes what
// the runs do").
func tunedJob(cfg Config, job Job) (Job, bool) {
	if job.Host != HostAuto || cfg.Host != HostAuto {
		return job, false
	}
	for _, bufs := range [2][]Buffer{job.Inputs, job.Outputs} {
		for _, b := range bufs {
			if b.Pinned == nil {
				job.Host = HostRegistered
				return job, true
			}
		}
	}
	return job, false
}

func probe(ctx context.Context, b Backend, cfg Config, job Job) (Model, error) {
	if job.N <= 0 {
		return Model{}, errors.New("pipeline: tuning needs a job with elements")
	}
	var sizes []int
	for _, c := range []int{256 << 10, 1 << 20, 4 << 20, 16 << 20} {
		if c <= job.N {
			sizes = append(sizes, c)
		}
	}
	if len(sizes) < 2 {
		sizes = []int{max(job.N/8, 1), max(job.N/2, 2)}
	}
	var per []StageTimes
	for _, c := range sizes {
		pc := cfg
		pc.ChunkElems, pc.Slots, pc.ComputeStreams, pc.CopyChunks, pc.Timing = c, 2, 1, 0, false
		p, err := New(b, pc)
		if err != nil {
			return Model{}, err
		}
		st, err := p.StageTimes(ctx, job)
		p.Close()
		if err != nil {
			return Model{}, fmt.Errorf("pipeline: probing chunk %d: %w", c, err)
		}
		k := time.Duration((job.N + c - 1) / c)
		per = append(per, StageTimes{H2D: st.H2D / k, Compute: st.Compute / k, D2H: st.D2H / k})
	}
	m, err := Fit(sizes, per)
	if err != nil {
		return Model{}, err
	}
	// The candidates' slots and streams, not the defaults', which give
	// small chunks more slots than any candidate has.
	events := cfg
	events.Schedule, events.ComputeStreams, events.Slots, events.CopyChunks = ScheduleEvents, 4, 6, 0
	if m.PerChunk, err = probePerChunk(ctx, b, events, job, m); err != nil {
		return Model{}, err
	}
	inStream := cfg
	inStream.Schedule, inStream.ComputeStreams, inStream.Slots, inStream.CopyChunks = ScheduleInStream, 4, 4, 0
	if m.PerChunkInStream, err = probePerChunk(ctx, b, inStream, job, m); err != nil {
		return Model{}, err
	}
	return m, nil
}

// perChunkProbeChunks is how many chunks the per-chunk probe's run has at
// most: enough that fill and drain are a small part of it.
const perChunkProbeChunks = 64

// probePerChunk measures Model.PerChunk: it runs the whole job, pipelined
// with cfg's slots and streams, in chunks of the smallest size Candidates
// offers (or more, so that the run has at most perChunkProbeChunks
// chunks), and takes the time it spent beyond the first chunk's fill per
// further chunk. A run that is bound by its stages gives their steady
// cost, which the model already has; one bound by the issue loop gives
// more, and that becomes the floor of a chunk's cost.
func probePerChunk(ctx context.Context, b Backend, cfg Config, job Job, m Model) (time.Duration, error) {
	c := 64 << 10
	for (job.N+c-1)/c > perChunkProbeChunks {
		c *= 2
	}
	k := (job.N + c - 1) / c
	if k < 4 {
		return 0, nil // too few chunks to tell a steady state from fill
	}
	pc := cfg
	pc.ChunkElems, pc.Timing = c, false
	// The first run pays for the pipeline's buffers, the kernel's
	// preparation and any registration, which a tuned run pays once too:
	// timeRun times the second. A run of many chunks varies less than a
	// small job's, and may be long: one is enough.
	took, _, err := timeRun(ctx, b, pc, job, 1)
	if err != nil {
		return 0, fmt.Errorf("pipeline: probing the cost per chunk at chunk %d: %w", c, err)
	}
	fill := m.H2D.At(c) + m.Compute.At(c) + m.D2H.At(c)
	return max(0, (took-fill)/time.Duration(k-1)), nil
}

// pickTop is how many of each schedule's fastest-predicted candidates
// Pick runs.
const pickTop = 3

// pickMaxPredicted is the longest predicted run that Pick measures
// candidates for: beyond it a run of the job costs more than a
// misprediction is likely to.
const pickMaxPredicted = 20 * time.Millisecond

// Pick chooses a configuration for job from m: for a job predicted to
// take at most 20 ms it runs the three fastest-predicted candidates of
// each schedule, each on a pipeline of its own, once untimed (a tuned run
// pays for its buffers once) and then timedRuns times, and returns the
// candidate whose fastest run was fastest; for a longer job, Best. A small job's time is its
// issue costs, fill and drain, which the model predicts worst (a small
// whole job on 2 slots and one stream took 1.4 times its prediction on
// the H200, bench/RESULTS.md, "Small whole jobs: a chunk's stages on one
// stream"), while a run of it costs less than a millisecond. The job's
// outputs are written.
func Pick(ctx context.Context, b Backend, cfg Config, job Job, m Model) (Choice, error) {
	if b == nil {
		return Choice{}, errors.New("pipeline: Pick: nil Backend")
	}
	if ctx == nil {
		ctx = context.Background()
	}
	if tj, ok := tunedJob(cfg, job); ok {
		c, err := pick(ctx, b, cfg, tj, m)
		if !errors.Is(err, ErrRegistered) {
			return c, err
		}
	}
	return pick(ctx, b, cfg, job, m)
}

func pick(ctx context.Context, b Backend, cfg Config, job Job, m Model) (Choice, error) {
	best := m.Best(job.N)
	if best.Predicted <= 0 || best.Predicted > pickMaxPredicted {
		return best, nil
	}
	cands := m.Candidates(job.N)
	slices.SortStableFunc(cands, func(a, b Choice) int { return cmp.Compare(a.Predicted, b.Predicted) })
	taken := map[Schedule]int{}
	var measured []Choice
	for _, c := range cands {
		if taken[c.Schedule] >= pickTop {
			continue
		}
		taken[c.Schedule]++
		pc := cfg
		pc.ChunkElems, pc.Slots, pc.ComputeStreams, pc.Schedule, pc.CopyChunks, pc.Timing = c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, 0, false
		took, ran, err := timeRun(ctx, b, pc, job, timedRuns)
		if err != nil {
			return Choice{}, fmt.Errorf("pipeline: Pick: chunk %d, %d slots, %d compute streams, %s: %w", c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, err)
		}
		// A run that stages takes ScheduleEvents whatever it asks for: the
		// choice says what ran.
		c.Measured, c.Schedule = took, ran
		measured = append(measured, c)
	}
	return slices.MinFunc(measured, func(a, b Choice) int { return cmp.Compare(a.Measured, b.Measured) }), nil
}

// timedRuns is how many runs of each candidate Pick takes the fastest of,
// after one that pays for the pipeline's buffers and the job's
// registration: a small
// job's single runs on the H200 varied by 10-20% (bench/RESULTS.md,
// "Small whole jobs: the tuner probes what the runs do"), as much as its
// candidates differ.
const timedRuns = 3

// timeRun runs job on a pipeline of cfg's once untimed and then runs
// times, and returns the fastest of those, less any registration, and the
// schedule the last one took.
func timeRun(ctx context.Context, b Backend, cfg Config, job Job, runs int) (time.Duration, Schedule, error) {
	p, err := New(b, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer p.Close()
	best, ran := time.Duration(math.MaxInt64), cfg.Schedule
	for i := range 1 + runs {
		rep, err := p.Run(ctx, job)
		if err != nil {
			return 0, 0, err
		}
		if i > 0 {
			best, ran = min(best, rep.Elapsed-rep.Register), rep.Schedule
		}
	}
	return best, ran, nil
}

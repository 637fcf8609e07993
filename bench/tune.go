package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// The measuring of overlap tune: a cost model fitted to probes, its
// candidates, and the best candidate run for a measurement to set beside
// its prediction.

// TuneOptions say what [Tune] probes and runs: Job in Config, whose
// chunk, slots and compute streams are what Tune chooses. The zero
// value's Job has no kernel, which the pipeline refuses.
type TuneOptions struct {
	Config pipeline.Config
	Job    pipeline.Job
	// Host is the host mode of the chosen candidate's runs; the probes run
	// in Config's.
	Host pipeline.HostMode
	// Repeat is the runs of the chosen candidate, the fastest kept (0: 1).
	Repeat int
	// Output is the job's first output and Verify, when not nil, checks it
	// after the chosen candidate's first run, which runs on its new
	// pipeline's slots and into an Output filled with NaN, so that Verify
	// checks what that run wrote, not what a probe left. With Repeat 1 that run
	// is also the one timed, and pays for the fill (package ntstore).
	Output []float32
	Verify func(out []float32) error
	// Warm is untimed work on the device before the probes, as
	// ChooseOptions.Warm: the probes time runs of under a millisecond,
	// which a device fresh from idling runs slower. 0: none; negative is
	// refused.
	Warm time.Duration
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// TuneResult is what [Tune] measured.
type TuneResult struct {
	// Model is the fitted per-chunk cost model.
	Model pipeline.Model
	// Candidates are the model's configurations for the job, fastest
	// predicted first; Candidates[0] is the one run.
	Candidates []pipeline.Choice
	// Measured is the best of the chosen candidate's runs.
	Measured time.Duration
	// Verified says that Verify passed on the first run's output.
	Verified bool
}

// Tune fits a cost model to probes of o.Job on b, ranks its candidates
// by predicted time, and runs the best o.Repeat times to measure it.
func Tune(ctx context.Context, b pipeline.Backend, o TuneOptions) (*TuneResult, error) {
	if b == nil {
		return nil, &Error{Op: "Tune", Err: errors.New("nil backend")}
	}
	if err := checkWarm(o.Warm); err != nil {
		return nil, &Error{Op: "Tune", Err: err}
	}
	o.Repeat = max(1, o.Repeat)
	if err := warmForProbes(ctx, b, o.Config, o.Job, o.Warm, o.Progress); err != nil {
		return nil, &Error{Op: "Tune", Err: err}
	}
	m, err := pipeline.Probe(ctx, b, o.Config, o.Job)
	if err != nil {
		return nil, &Error{Op: "Tune", Err: err}
	}
	cands := m.Candidates(o.Job.N)
	if len(cands) == 0 {
		return nil, &Error{Op: "Tune", Err: errors.New("the model has no candidate for the job")}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].Predicted < cands[j].Predicted })
	res := &TuneResult{Model: m, Candidates: cands}
	best := cands[0]
	cfg := o.Config
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Schedule, cfg.CopyChunks, cfg.Host = best.ChunkElems, best.Slots, best.ComputeStreams, best.Schedule, 0, o.Host
	p, err := pipeline.New(b, cfg)
	if err != nil {
		return nil, &Error{Op: "Tune", Err: err}
	}
	defer p.Close()
	res.Measured = time.Duration(math.MaxInt64)
	for r := 0; r < o.Repeat; r++ {
		check := o.Verify != nil && r == 0
		if check {
			// The first run is the one checked: on the new pipeline's
			// staging slots (a run that left stale results in slots an
			// earlier run of it filled would pass a later check), on
			// device slots filled with NaN (their memory may hold what
			// a probe of the same shape left, Pipeline.PoisonSlots), into
			// an output no probe's results are left in. The fills come
			// before the progress line, which TestTuneOnSim relies on.
			// The runs after it go back to back, as Pipeline.Run is used,
			// without the fill's cost to the run right after it (package
			// ntstore says what it is).
			if err := poisonRun(o.Output, p); err != nil {
				return nil, &Error{Op: "Tune", Err: err}
			}
		}
		say(o.Progress, "run %d of %d of the chosen candidate…", r+1, o.Repeat)
		rep, err := p.Run(ctx, o.Job)
		if err != nil {
			return nil, &Error{Op: "Tune", Err: err}
		}
		res.Measured = min(res.Measured, rep.Elapsed)
		if check {
			say(o.Progress, "verifying run 1…")
			if err := o.Verify(o.Output); err != nil {
				return nil, &Error{Op: "Tune", Err: fmt.Errorf("run 1 of the chosen candidate gave wrong results: %w", err)}
			}
			res.Verified = true
		}
	}
	return res, nil
}

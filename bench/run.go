package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/purecuda/overlap/internal/ntstore"
	"github.com/purecuda/overlap/pipeline"
)

// The measuring of overlap run: a job's synchronous baseline, then the
// best of several pipelined runs over a group of devices, each verified,
// and the stages alone that bound them.

// RunMode is one line of overlap run's table: a way of running the job.
type RunMode struct {
	Mode    string  `json:"mode"`
	Ms      float64 `json:"ms"`
	GBps    float64 `json:"gb_per_s"`
	Speedup float64 `json:"speedup"`
	// Efficiency is the stage bound over the time (pipelined rows only).
	Efficiency float64 `json:"efficiency,omitempty"`
}

// RunDevice is one device's part of a group's best run.
type RunDevice struct {
	Device int     `json:"device"`
	Name   string  `json:"name"`
	Chunks int     `json:"chunks"`
	BusyMs float64 `json:"busy_ms"`
	// Share is the device's share of the job's chunks; BoundShare is its
	// share in the stage bound's split of the slowest stage.
	Share      float64 `json:"share"`
	BoundShare float64 `json:"bound_share"`
}

// RunOptions say what [Run] runs: Job through a group of pipelines of
// Config. The zero value's Job has no kernel, which the pipeline refuses.
type RunOptions struct {
	Config pipeline.Config
	Job    pipeline.Job
	// Output is the job's first output, filled with NaN right before each
	// run that is checked (after its warm-up and rehearsal), as are the
	// device slots (pipeline.Group.PoisonSlots); Verify,
	// when not nil, checks it after each (nil: nothing is verified).
	Output []float32
	Verify func(out []float32) error
	// Repeat is the pipelined runs, the fastest kept (0: 1).
	Repeat int
	// NoBaseline skips the synchronous baseline.
	NoBaseline bool
	// Warm, when positive, keeps the devices busy that long right before
	// each timed part (pipeline.Group.Warm says why); 0 for the
	// simulator, whose profile describes a warm device.
	Warm time.Duration
	// Rehearse runs the job once, untimed, between each warm-up and the
	// pipelined run it precedes: Group.Warm runs copies in and kernels,
	// never the copies out, which the timed run would then issue first.
	// Before all of them, it runs the job once more and verifies that
	// run on a poisoned output, then warms up again: that run is the
	// group's first, and in auto host mode the one that stages Go
	// slices, so that the first rehearsal registers them and no timed run
	// pays for it. A rehearsal itself is not verified: the check takes
	// milliseconds on every CPU, and on the H200 the 1M-element job's
	// timed runs right after a verified rehearsal took 0.32–0.33 ms
	// against 0.17–0.19 (bench/RESULTS.md, "Verified rehearsals, and a
	// poison on every CPU").
	// Off for the simulator, whose devices have no such state.
	Rehearse bool
	// Ordinals are the backends' GPU indexes, for Devices (nil: 0, 1, …).
	Ordinals []int
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// RunResult is what [Run] measured.
type RunResult struct {
	// Bytes is the host data the job moves: every input and output once.
	Bytes int64
	// ChunkElems, Slots and ComputeStreams are the group's configuration,
	// its defaults filled in, and HostMode the host mode of the last run.
	ChunkElems, Slots, ComputeStreams int
	HostMode                          string
	// Rows are the synchronous baseline (unless NoBaseline) and the best
	// pipelined run.
	Rows []RunMode
	// Stages are the stages alone, in the best run's host mode.
	Stages Stages
	// Devices are each device's part of the best run, for several.
	Devices []RunDevice
	// Verified counts the runs whose output Verify passed.
	Verified int
	// Last is the last pipelined run's report (its spans, with
	// Config.Timing).
	Last *pipeline.Report
}

// Run measures o.Job on backends, a group: the synchronous baseline on
// the first backend, then o.Repeat pipelined runs (each after an untimed
// one with o.Rehearse, and a verified one before all), the fastest kept,
// then each stage alone in that run's host mode, for the bound; Verify
// checks the output of every run. A wrong output is an error.
func Run(ctx context.Context, backends []pipeline.Backend, o RunOptions) (*RunResult, error) {
	fail := func(err error) (*RunResult, error) { return nil, &Error{Op: "Run", Err: err} }
	if len(backends) == 0 {
		return fail(errors.New("no backend"))
	}
	o.Repeat = max(1, o.Repeat)
	res := &RunResult{Bytes: JobBytes(o.Config, o.Job.N)}
	p, err := pipeline.NewGroup(backends, o.Config)
	if err != nil {
		return fail(err)
	}
	defer p.Close()
	warm := func() error {
		if o.Warm <= 0 {
			return nil
		}
		say(o.Progress, "warming up the GPU…")
		return p.Warm(ctx, o.Job, o.Warm)
	}
	// check verifies the run just made, which name names in its error.
	check := func(name string) error {
		if o.Verify == nil {
			return nil
		}
		if err := o.Verify(o.Output); err != nil {
			return fmt.Errorf("%s gave wrong results: %w", name, err)
		}
		res.Verified++
		return nil
	}
	// poisonAll fills the output and the group's device slots with NaN
	// before each pipelined run that is checked, and before the same runs
	// when nothing is verified, so that they are timed alike. The slots
	// keep the last run's results: where each chunk has a slot of its
	// own (no more chunks than slots), a run that skipped a chunk's copy
	// in or launch would copy out the right answer from the rehearsal
	// or the warm-up before it (pipeline.Pipeline.PoisonSlots).
	poisonAll := func() error { return poisonRun(o.Output, p) }
	var baseline time.Duration
	if !o.NoBaseline {
		if err := warm(); err != nil {
			return fail(err)
		}
		poison(o.Output)
		say(o.Progress, "synchronous baseline…")
		baseline, err = pipeline.Synchronous(ctx, backends[0], o.Config, o.Job)
		if err != nil {
			return fail(fmt.Errorf("synchronous baseline: %w", err))
		}
		if err := check("synchronous baseline"); err != nil {
			return fail(err)
		}
		res.Rows = append(res.Rows, RunMode{Mode: "synchronous", Ms: ms(baseline), GBps: gbps(res.Bytes, baseline), Speedup: 1})
	}
	pc := p.Config()
	res.ChunkElems, res.Slots, res.ComputeStreams = pc.ChunkElems, pc.Slots, pc.ComputeStreams

	var best *pipeline.Report
	for r := 0; r < o.Repeat; r++ {
		if o.Rehearse && r == 0 {
			// The first pipelined run is checked as a timed run is, on a
			// poisoned output and poisoned device slots (poisonAll), and
			// on staging slots no run has used: a run that left stale
			// results in the staging slots, which the rehearsals fill, is
			// caught here. A warm-up follows it: a timed run right after a
			// check was slow (RunOptions.Rehearse).
			if err := warm(); err != nil {
				return fail(err)
			}
			if err := poisonAll(); err != nil {
				return fail(err)
			}
			say(o.Progress, "first pipelined run (untimed)…")
			if _, err := p.Run(ctx, o.Job); err != nil {
				return fail(fmt.Errorf("first pipelined run: %w", err))
			}
			if err := check("first pipelined run (untimed)"); err != nil {
				return fail(err)
			}
		}
		if err := warm(); err != nil {
			return fail(err)
		}
		if o.Rehearse {
			say(o.Progress, "untimed run before pipeline run %d of %d…", r+1, o.Repeat)
			if _, err := p.Run(ctx, o.Job); err != nil {
				return fail(fmt.Errorf("untimed run before pipeline run %d: %w", r+1, err))
			}
		}
		// Right before the timed run, after the warm-up and the
		// rehearsals: an element that the timed run does not write to
		// the output fails Verify, and so does one of a chunk whose copy
		// in or launch it skipped (poisonAll).
		if err := poisonAll(); err != nil {
			return fail(err)
		}
		say(o.Progress, "pipeline run %d of %d…", r+1, o.Repeat)
		rep, err := p.Run(ctx, o.Job)
		if err != nil {
			return fail(err)
		}
		if o.Verify != nil {
			say(o.Progress, "verifying run %d of %d…", r+1, o.Repeat)
		}
		if err := check(fmt.Sprintf("pipeline run %d", r+1)); err != nil {
			return fail(err)
		}
		res.HostMode = rep.Mode.String()
		if best == nil || rep.Elapsed < best.Elapsed {
			best = rep
		}
		res.Last = rep
	}
	// The stages alone, in the host mode of the best run (auto mode stages
	// a slice the first time and registers it from the second).
	stJob := o.Job
	stJob.Host = best.Mode
	if err := warm(); err != nil {
		return fail(err)
	}
	say(o.Progress, "timing each stage alone…")
	st, err := p.StageTimes(ctx, stJob)
	if err != nil {
		return fail(fmt.Errorf("stage timing: %w", err))
	}
	res.Stages = stagesOf(st.StageTimes)
	if len(best.Devices) > 1 {
		shares := st.Shares[st.Slowest()]
		for i, dr := range best.Devices {
			dev := i
			if i < len(o.Ordinals) {
				dev = o.Ordinals[i]
			}
			row := RunDevice{Device: dev, Name: dr.Backend, Chunks: dr.Chunks, BusyMs: ms(dr.Busy),
				Share: float64(dr.Chunks) / float64(max(1, best.Chunks))}
			if i < len(shares) {
				row.BoundShare = float64(shares[i]) / float64(max(1, best.Chunks))
			}
			res.Devices = append(res.Devices, row)
		}
	}
	row := RunMode{Mode: "pipeline (" + best.Mode.String() + ")", Ms: ms(best.Elapsed), GBps: gbps(res.Bytes, best.Elapsed)}
	if baseline > 0 {
		row.Speedup = float64(baseline) / float64(best.Elapsed)
	}
	if st.Bound() > 0 {
		row.Efficiency = float64(st.Bound()) / float64(best.Elapsed)
	}
	res.Rows = append(res.Rows, row)
	return res, nil
}

// poison fills out with NaN, which no reference matches
// (kernels.VerifyError counts a NaN as a mismatch), with stores that
// leave its lines out of the CPU's caches (ntstore says why): the timed
// run's copies out then find the output as a run back to back does. One
// goroutine fills it: on the H200, with the fill spread over every CPU
// right before the timed run, the 4M-element job ran in 0.63–0.73 ms
// against 0.50–0.53 ms with one (bench/RESULTS.md, "Verified rehearsals,
// and a poison on every CPU"). 512 MiB take about 30 ms.
func poison(out []float32) { ntstore.Fill(out, float32(math.NaN())) }

// poisonRun fills out (poison) and the slots of p, a Pipeline or a Group
// (PoisonSlots), with NaN before a run that is checked: what Run and Tune
// do.
func poisonRun(out []float32, p interface{ PoisonSlots() error }) error {
	poison(out)
	if err := p.PoisonSlots(); err != nil {
		return fmt.Errorf("poisoning the device slots: %w", err)
	}
	return nil
}

// JobBytes is the host data a job of n elements in cfg moves: every
// input and output once.
func JobBytes(cfg pipeline.Config, n int) int64 {
	var per int64
	for _, s := range append(append([]int(nil), cfg.Inputs...), cfg.Outputs...) {
		per += int64(s)
	}
	return per * int64(n)
}

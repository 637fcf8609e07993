package main

import (
	"context"
	"fmt"
	"io"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
)

// tuneCache is the cache of tuned choices in the user's cache directory
// (bench.TuneCache), or nil where there is none or on the simulator, whose
// costs are not a GPU's.
func tuneCache(o *runOptions) *bench.TuneCache {
	path, err := bench.TuneCachePath()
	if err != nil || o.sim {
		return nil
	}
	return bench.ReadTuneCache(path)
}

func tuneKey(e *env, w *workload, o *runOptions) string {
	return bench.TuneKey(e.backend.Name(), w.Name, o.iters, o.elems, o.host)
}

// tuneChunk picks the chunk size, slots and compute streams from a cost
// model fitted to probes, or the cache's choice (bench.ChooseChunk), and
// says why.
func tuneChunk(ctx context.Context, e *env, w *workload, o *runOptions, progress func(string)) (pipeline.Choice, string, error) {
	cache := tuneCache(o)
	co := bench.ChooseOptions{Progress: progress}
	if !o.sim {
		// The probes time runs of under a millisecond: on a device at
		// work, as the timed parts run (bench.ChooseOptions.Warm).
		co.Warm = o.warm
	}
	c, err := bench.ChooseChunkWith(ctx, e.backend, w.Config, w.Job, cache, tuneKey(e, w, o), co)
	if err != nil {
		return pipeline.Choice{}, "", fmt.Errorf("tuning: %w", benchError(err))
	}
	return c.Choice, c.String(), nil
}

// runTune runs overlap tune once its flags are checked: it probes the
// stage costs, prints the model's best candidates, runs the chosen one
// and prints the measurement next to the prediction. It takes the job's
// flags; the chunk, slots and streams are what it chooses.
func runTune(o *runOptions, stdout, stderr io.Writer) int {
	ctx, stop := signalContext("tune", stderr)
	defer stop()
	err := tune(ctx, o, stdout, stderr)
	stop()
	if err := stoppedBy(ctx, err); err != nil {
		return reportError("tune", err, stderr)
	}
	return exitOK
}

func tune(ctx context.Context, o *runOptions, w, stderr io.Writer) error {
	e, err := openEnv(o)
	if err != nil {
		return err
	}
	defer e.close()
	wl, err := newWorkload(o, e)
	if err != nil {
		return err
	}
	defer wl.Close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	to := bench.TuneOptions{Config: wl.Config, Job: wl.Job, Host: o.host, Repeat: o.repeat, Output: wl.Outputs[0], Verify: wl.Verify, Progress: prog.line}
	if !o.sim {
		// As for overlap run --chunk auto (tuneChunk): probes on a device
		// at work.
		to.Warm = o.warm
	}
	tr, err := bench.Tune(ctx, e.backend, to)
	prog.done()
	if err != nil {
		return benchError(err)
	}
	if o.simSmaller {
		fmt.Fprintln(w, simSmallerNote(o.elems))
	}
	if err := tr.WriteTable(w, bench.TuneTable{Workload: wl.Name, Backend: e.backend.Name(), Elems: o.elems, Host: o.host, Repeat: o.repeat, Simulated: o.sim}); err != nil {
		return err
	}
	if cache := tuneCache(o); cache != nil {
		_ = cache.Store(tuneKey(e, wl, o), tr.Candidates[0]) // best effort: a read-only cache costs the next run a probe
		fmt.Fprintf(w, "cached for overlap run --chunk auto in %s\n", cache.Path)
	}
	return nil
}

package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"time"

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
func tuneChunk(ctx context.Context, e *env, w *workload, o *runOptions) (pipeline.Choice, string, error) {
	cache := tuneCache(o)
	c, err := bench.ChooseChunk(ctx, e.backend, w.Config, w.Job, cache, tuneKey(e, w, o))
	if err != nil {
		return pipeline.Choice{}, "", fmt.Errorf("tuning: %w", benchError(err))
	}
	if c.Cached {
		return c.Choice, fmt.Sprintf("chunk %d, %d slots, %d compute stream(s), %s, cached in %s (%s)",
			c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, cache.Path, choiceTime(c.Choice)), nil
	}
	return c.Choice, fmt.Sprintf("chunk %d, %d slots, %d compute stream(s), %s: %s; per-chunk costs %s",
		c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, choiceTime(c.Choice), modelText(c.Model)), nil
}

// choiceTime is a choice's predicted time and, when the tuner ran it,
// its measured one.
func choiceTime(c pipeline.Choice) string {
	if c.Measured > 0 {
		return fmt.Sprintf("predicted %.2f ms, measured %.2f ms", ms(c.Predicted), ms(c.Measured))
	}
	return fmt.Sprintf("predicted %.2f ms", ms(c.Predicted))
}

func modelText(m pipeline.Model) string {
	s := fmt.Sprintf("H2D %v+%.3f ns/elem, compute %v+%.3f ns/elem, D2H %v+%.3f ns/elem, at least %v a chunk",
		m.H2D.Fixed.Round(time.Microsecond/10), m.H2D.PerElem, m.Compute.Fixed.Round(time.Microsecond/10), m.Compute.PerElem,
		m.D2H.Fixed.Round(time.Microsecond/10), m.D2H.PerElem, m.PerChunk.Round(time.Microsecond/10))
	if m.PerChunkInStream > 0 {
		s += fmt.Sprintf(" (in-stream %v)", m.PerChunkInStream.Round(time.Microsecond/10))
	}
	return s
}

// runTune runs overlap tune once its flags are checked: it probes the
// stage costs, prints the model's best candidates, runs the chosen one
// and prints the measurement next to the prediction. It takes the job's
// flags; the chunk, slots and streams are what it chooses.
func runTune(o *runOptions, stdout, stderr io.Writer) int {
	ctx, stop := signalContext()
	defer stop()
	if err := tune(ctx, o, stdout); err != nil {
		return reportError("tune", stoppedBy(ctx, err), stderr)
	}
	return exitOK
}

func tune(ctx context.Context, o *runOptions, w io.Writer) error {
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
	label := ""
	if o.sim {
		label = " [simulated]"
	}
	tr, err := bench.Tune(ctx, e.backend, bench.TuneOptions{Config: wl.Config, Job: wl.Job, Host: o.host, Repeat: o.repeat, Output: wl.Outputs[0], Verify: wl.Verify})
	if err != nil {
		return benchError(err)
	}
	if o.simSmaller {
		fmt.Fprintln(w, simSmallerNote(o.elems))
	}
	fmt.Fprintf(w, "overlap tune: %s on %s, %d elements, host memory %s%s\n", wl.Name, e.backend.Name(), o.elems, o.host, label)
	fmt.Fprintf(w, "per-chunk stage costs (fixed + per element), fitted to probes: %s\n\n", modelText(tr.Model))
	fmt.Fprintf(w, "%10s %6s %8s %11s\n", "CHUNK", "SLOTS", "STREAMS", "PREDICTED")
	for i, c := range tr.Candidates[:min(8, len(tr.Candidates))] {
		mark := ""
		if i == 0 {
			mark = "  <- chosen"
		}
		fmt.Fprintf(w, "%10d %6d %8d %8.2f ms%s\n", c.ChunkElems, c.Slots, c.ComputeStreams, ms(c.Predicted), mark)
	}
	best := tr.Candidates[0]
	checked := "not verified: no CPU reference for a user's kernel"
	if tr.Verified {
		checked = "every element of the last run verified"
	}
	fmt.Fprintf(w, "\nmeasured %.2f ms (best of %d; %s), predicted %.2f ms (%s)%s\n",
		ms(tr.Measured), o.repeat, checked, ms(best.Predicted), predictionText(tr.Measured, best.Predicted), label)
	if cache := tuneCache(o); cache != nil {
		_ = cache.Store(tuneKey(e, wl, o), best) // best effort: a read-only cache costs the next run a probe
		fmt.Fprintf(w, "cached for overlap run --chunk auto in %s\n", cache.Path)
	}
	return nil
}

// predictionText says how a prediction compares with a measurement, with
// no sign to decode: "12.5% below the measurement".
func predictionText(measured, predicted time.Duration) string {
	if measured <= 0 {
		return "nothing measured"
	}
	off := 100 * (float64(predicted) - float64(measured)) / float64(measured)
	switch {
	case math.Abs(off) < 0.05:
		return "equal to the measurement"
	case off < 0:
		return fmt.Sprintf("%.1f%% below the measurement", -off)
	default:
		return fmt.Sprintf("%.1f%% above the measurement", off)
	}
}

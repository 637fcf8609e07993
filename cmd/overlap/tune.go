package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
)

// tuneCache is the on-disk cache of tuned choices, one per GPU and job shape.
type tuneCache map[string]pipeline.Choice

func tuneCachePath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "overlap", "tune.json"), nil
}

func tuneKey(e *env, w *workload, o *runOptions) string {
	return fmt.Sprintf("%s|%s|iters=%d|n=%d|host=%s", e.backend.Name(), w.name, o.iters, o.elems, o.host)
}

// tuneChunk picks the chunk size, slots and compute streams from a cost
// model fitted to probes, caching the choice per GPU and job shape. The
// simulator is never cached: its costs are not a GPU's.
func tuneChunk(ctx context.Context, e *env, w *workload, o *runOptions) (pipeline.Choice, string, error) {
	key := tuneKey(e, w, o)
	path, perr := tuneCachePath()
	cache := tuneCache{}
	if perr == nil && !o.sim {
		if b, err := os.ReadFile(path); err == nil {
			_ = json.Unmarshal(b, &cache)
		}
		if c, ok := cache[key]; ok && c.ChunkElems > 0 && c.ChunkElems <= o.elems {
			return c, fmt.Sprintf("chunk %d, %d slots, %d compute stream(s), cached in %s (predicted %.2f ms)",
				c.ChunkElems, c.Slots, c.ComputeStreams, path, ms(c.Predicted)), nil
		}
	}
	m, err := pipeline.Probe(ctx, e.backend, w.cfg, w.job)
	if err != nil {
		return pipeline.Choice{}, "", fmt.Errorf("tuning: %w", err)
	}
	c := m.Best(o.elems)
	why := fmt.Sprintf("chunk %d, %d slots, %d compute stream(s), %s: predicted %.2f ms from per-chunk costs %s",
		c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, ms(c.Predicted), modelText(m))
	if perr == nil && !o.sim {
		storeChoice(path, cache, key, c)
	}
	return c, why, nil
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

// storeChoice writes the cache, best effort: a read-only cache directory
// only costs the next run a probe.
func storeChoice(path string, cache tuneCache, key string, c pipeline.Choice) {
	if path != "" {
		cache[key] = c
		if b, err := json.MarshalIndent(cache, "", "  "); err == nil {
			if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
				_ = os.WriteFile(path, b, 0o644)
			}
		}
	}
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
	defer wl.close()
	label := ""
	if o.sim {
		label = " [simulated]"
	}
	tr, err := bench.Tune(ctx, e.backend, bench.TuneOptions{Config: wl.cfg, Job: wl.job, Host: o.host, Repeat: o.repeat, Output: wl.outputs[0], Verify: wl.verify})
	if err != nil {
		return benchError(err)
	}
	if o.simSmaller {
		fmt.Fprintln(w, simSmallerNote(o.elems))
	}
	fmt.Fprintf(w, "overlap tune: %s on %s, %d elements, host memory %s%s\n", wl.name, e.backend.Name(), o.elems, o.host, label)
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
	if !o.sim {
		if path, err := tuneCachePath(); err == nil {
			cache := tuneCache{}
			if b, err := os.ReadFile(path); err == nil {
				_ = json.Unmarshal(b, &cache)
			}
			storeChoice(path, cache, tuneKey(e, wl, o), best)
			fmt.Fprintf(w, "cached for overlap run --chunk auto in %s\n", path)
		}
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

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

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
	why := fmt.Sprintf("chunk %d, %d slots, %d compute stream(s): predicted %.2f ms from per-chunk costs H2D %v+%.3f ns/elem, compute %v+%.3f ns/elem, D2H %v+%.3f ns/elem",
		c.ChunkElems, c.Slots, c.ComputeStreams, ms(c.Predicted),
		m.H2D.Fixed.Round(time.Microsecond/10), m.H2D.PerElem, m.Compute.Fixed.Round(time.Microsecond/10), m.Compute.PerElem,
		m.D2H.Fixed.Round(time.Microsecond/10), m.D2H.PerElem)
	if perr == nil && !o.sim {
		cache[key] = c
		if b, err := json.MarshalIndent(cache, "", "  "); err == nil {
			if os.MkdirAll(filepath.Dir(path), 0o755) == nil {
				_ = os.WriteFile(path, b, 0o644)
			}
		}
	}
	return c, why, nil
}

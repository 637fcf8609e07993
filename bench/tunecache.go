package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// TuneCache is a file of tuned choices by key, one per GPU and job shape
// ([TuneKey]): what overlap tune writes and overlap run --chunk auto
// reads, so that a job tuned once is not probed again. A simulator's
// costs are not a GPU's: keep its choices out.
type TuneCache struct {
	// Path is the JSON file, an object of pipeline.Choice by key.
	Path string
	// Choices are the file's, as read and stored.
	Choices map[string]pipeline.Choice
}

// TuneCachePath is the cache in the user's cache directory,
// overlap/tune.json; an error where the system has none.
func TuneCachePath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", &Error{Op: "TuneCachePath", Err: err}
	}
	return filepath.Join(dir, "overlap", "tune.json"), nil
}

// ReadTuneCache reads the cache at path; a file that is missing or does
// not parse is an empty cache, which the next Store overwrites.
func ReadTuneCache(path string) *TuneCache {
	c := &TuneCache{Path: path, Choices: map[string]pipeline.Choice{}}
	if b, err := os.ReadFile(path); err == nil {
		_ = json.Unmarshal(b, &c.Choices)
	}
	if c.Choices == nil { // the file held null
		c.Choices = map[string]pipeline.Choice{}
	}
	return c
}

// TuneKey is the cache's key for a job: the GPU, the kernel and its
// iterations, the elements and the host mode.
func TuneKey(backend, kernel string, iters, elems int, host pipeline.HostMode) string {
	return fmt.Sprintf("%s|%s|iters=%d|n=%d|host=%s", backend, kernel, iters, elems, host)
}

// Lookup returns the choice under key when there is one that fits a job
// of n elements; false otherwise, and for a nil cache.
func (c *TuneCache) Lookup(key string, n int) (pipeline.Choice, bool) {
	if c == nil {
		return pipeline.Choice{}, false
	}
	ch, ok := c.Choices[key]
	return ch, ok && ch.ChunkElems > 0 && ch.ChunkElems <= n
}

// Store sets the choice under key and writes the file, creating its
// directory. A cache that cannot be written only costs the next run a
// probe: the caller may ignore the error.
func (c *TuneCache) Store(key string, ch pipeline.Choice) error {
	if c == nil || c.Path == "" {
		return &Error{Op: "TuneCache.Store", Err: errors.New("no cache file")}
	}
	if c.Choices == nil {
		c.Choices = map[string]pipeline.Choice{}
	}
	c.Choices[key] = ch
	b, err := json.MarshalIndent(c.Choices, "", "  ")
	if err == nil {
		if err = os.MkdirAll(filepath.Dir(c.Path), 0o755); err == nil {
			err = os.WriteFile(c.Path, b, 0o644)
		}
	}
	if err != nil {
		return &Error{Op: "TuneCache.Store", Err: err}
	}
	return nil
}

// AutoChunk is a chosen configuration and where it came from.
type AutoChunk struct {
	pipeline.Choice
	// Cached says that it came from the cache, whose file is CachePath;
	// otherwise Model is the cost model fitted to probes that chose it.
	Cached    bool
	CachePath string
	Model     pipeline.Model
}

// ChooseChunk picks job's chunk size, slots and compute streams on b: the
// cache's choice under key where it has one that fits, else the pick of
// a cost model fitted to probes (pipeline.Probe, pipeline.Pick), which it stores in the
// cache. A nil cache probes and stores nothing. Its error is a *[Error];
// a cache that cannot be written is no error.
func ChooseChunk(ctx context.Context, b pipeline.Backend, cfg pipeline.Config, job pipeline.Job, cache *TuneCache, key string) (AutoChunk, error) {
	return chooseChunk("ChooseChunk", ctx, b, cfg, job, cache, key, ChooseOptions{})
}

// ChooseOptions are ChooseChunkWith's; the zero value probes at once, as
// ChooseChunk does.
type ChooseOptions struct {
	// Warm, when positive, keeps the device busy that long with the job's
	// stages (pipeline.Group.Warm) before the probes, and only when they
	// run (not for a cached choice). The probes time runs and stages of
	// under a millisecond. On the H200, probes of the 4M-element job that
	// began on a device fresh from idling fitted the kernel's cost at
	// 0.123–0.133 ns an element in three runs of six (0.109–0.110 in the
	// others) and chose configurations that then ran in 0.56–0.63 ms
	// against 0.51; after 500 ms of Warm, four runs of four fitted 0.109–
	// 0.110 ns and ran in 0.50–0.53 ms (bench/RESULTS.md, "Small whole
	// jobs: what the first run after a warm-up waits on").
	Warm time.Duration
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// ChooseChunkWith is ChooseChunk with options.
func ChooseChunkWith(ctx context.Context, b pipeline.Backend, cfg pipeline.Config, job pipeline.Job, cache *TuneCache, key string, o ChooseOptions) (AutoChunk, error) {
	return chooseChunk("ChooseChunkWith", ctx, b, cfg, job, cache, key, o)
}

// chooseChunk is ChooseChunkWith, its errors naming op.
func chooseChunk(op string, ctx context.Context, b pipeline.Backend, cfg pipeline.Config, job pipeline.Job, cache *TuneCache, key string, o ChooseOptions) (AutoChunk, error) {
	fail := func(err error) (AutoChunk, error) { return AutoChunk{}, &Error{Op: op, Err: err} }
	if err := checkWarm(o.Warm); err != nil {
		return fail(err)
	}
	if ch, ok := cache.Lookup(key, job.N); ok {
		return AutoChunk{Choice: ch, Cached: true, CachePath: cache.Path}, nil
	}
	if b == nil {
		return fail(errors.New("nil backend"))
	}
	if err := warmForProbes(ctx, b, cfg, job, o.Warm, o.Progress); err != nil {
		return fail(err)
	}
	m, err := pipeline.Probe(ctx, b, cfg, job)
	if err != nil {
		return fail(err)
	}
	choice, err := pipeline.Pick(ctx, b, cfg, job, m)
	if err != nil {
		return fail(err)
	}
	res := AutoChunk{Choice: choice, Model: m}
	if cache != nil {
		_ = cache.Store(key, res.Choice)
	}
	return res, nil
}

// checkWarm refuses a negative warm-up (ChooseOptions.Warm,
// TuneOptions.Warm).
func checkWarm(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("warm-up of %v: want 0 or more", d)
	}
	return nil
}

// warmForProbes warms b up for d (warmBackend) when d is positive, then
// says the probes come next: what ChooseChunkWith and Tune do before
// pipeline.Probe.
func warmForProbes(ctx context.Context, b pipeline.Backend, cfg pipeline.Config, job pipeline.Job, d time.Duration, progress func(string)) error {
	if d > 0 {
		say(progress, "warming up the GPU before the probes…")
		if err := warmBackend(ctx, b, cfg, job, d); err != nil {
			return fmt.Errorf("warming up before the probes: %w", err)
		}
	}
	say(progress, "probing the stage costs…")
	return nil
}

// warmBackend runs pipeline.Group.Warm for d on a group of b alone, of
// cfg (its defaults filled in), and closes the group.
func warmBackend(ctx context.Context, b pipeline.Backend, cfg pipeline.Config, job pipeline.Job, d time.Duration) error {
	g, err := pipeline.NewGroup([]pipeline.Backend{b}, cfg)
	if err != nil {
		return err
	}
	werr := g.Warm(ctx, job, d)
	if err := g.Close(); werr == nil {
		werr = err
	}
	return werr
}

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Warm keeps the group's devices busy for at least d (and one pass at
// least) with the job's device-side stages alone, as StageTimes runs them:
// its H2D copies and its kernels over every chunk, on every device at once.
// It writes only the group's own device slots, never the job's outputs,
// so a run after it is verified on its own. In auto mode it takes the
// host mode that the group's next run will take (registered for Go
// slices it has seen before, staged for new ones), without marking the
// slices seen, so that auto mode's choice for the runs after it is the
// one it would have made without it; a registered run then copies from
// the pages the warm-up copied from. (After a warm-up that staged them,
// on the H200, 4M elements in 256K chunks ran in 0.57-0.58 ms, and 0.53-
// 0.55 ms after one that registered them, bench/RESULTS.md, "Small whole
// jobs: the tuner probes what the runs do".) Slices that someone else
// holds registered are staged, all of them, where the run stages only
// those it cannot register.
//
// Why: an idle GPU lowers its clocks (an H200 idles at 345 MHz; its SMs
// run at up to 1980 MHz), and a run that starts on an idle GPU pays for
// the climb, which is much of a short job's time. On one H200 the
// README's 4M-element job took 0.60–0.62 ms back to back and 0.66–0.75 ms
// after 200 ms of idling (bench.BenchmarkReadmeJob), every stage slower.
// A timed run right after Warm measures the device at work, though not
// quite as a run back to back does: Warm issues no copies out, and on
// the H200 the first run after it was 25–59 µs slower than the one after
// that, with the output out of the CPU's caches both times
// (bench.RunOptions.Rehearse puts a run between them). The
// simulator's devices have no clocks to warm; there Warm only spends
// virtual time.
func (g *Group) Warm(ctx context.Context, job Job, d time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if d < 0 {
		return fmt.Errorf("pipeline: Warm for %v: want a duration of 0 or more", d)
	}
	if err := g.usable("Warm"); err != nil {
		return err
	}
	settled := false
	if job.Host == HostAuto {
		// The slices are read to find their mode: check them first, as
		// exclusive does, before warmHost takes the group's lock.
		if err := g.validate(job); err != nil {
			return err
		}
		job.Host, settled = g.warmHost(job)
	}
	plans, release, err := g.exclusive("Warm", job)
	if err != nil && settled && job.Host == HostRegistered && errors.Is(err, ErrRegistered) {
		// Registered by someone else: the next run stages what it cannot
		// register (each buffer on its own; the warm-up stages them all).
		job.Host = HostStaged
		plans, release, err = g.exclusive("Warm", job)
	}
	if err != nil {
		return err
	}
	defer release()
	lead := g.pipes[0]
	chunks := plans[0].chunks
	if chunks == 0 {
		return nil
	}
	k := len(g.pipes)
	even := make([]int, k)
	for i := range even {
		even[i] = chunks*(i+1)/k - chunks*i/k
	}
	start := lead.now()
	for {
		for _, st := range []Stage{StageH2D, StageCompute} {
			if _, err := g.timeStage(ctx, plans, st, even); err != nil {
				return fmt.Errorf("pipeline: warming up: %w", err)
			}
		}
		if lead.now()-start >= d {
			return nil
		}
	}
}

// warmHost is the host mode of a warm-up of job given in auto mode, and
// whether it is auto mode's own choice: the Config's mode when it names
// one, pinned when every buffer is pinned, else the mode the lead
// pipeline's next run of job will take in auto mode (settledMode), which
// Warm takes without marking anything seen. job is valid.
//
// A Config of pinned mode and a job of Go slices, which a run refuses, is
// warmed as auto mode would take the slices: a caller may warm the device
// with the job it runs its synchronous baseline on (pageable memory)
// before the pinned runs.
func (g *Group) warmHost(job Job) (HostMode, bool) {
	allPinned := true
	for _, bufs := range [2][]Buffer{job.Inputs, job.Outputs} {
		for _, b := range bufs {
			allPinned = allPinned && b.Pinned != nil
		}
	}
	lead := g.pipes[0]
	if m := lead.cfg.Host; m != HostAuto && (m != HostPinned || allPinned) {
		return m, false
	}
	if allPinned {
		return HostPinned, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	mode, _ := lead.settledMode(job, false)
	return mode, true
}

package pipeline

import (
	"context"
	"fmt"
	"time"
)

// Warm keeps the group's devices busy for at least d (and one pass at
// least) with the job's device-side stages alone, as StageTimes runs them:
// its H2D copies and its kernels over every chunk, on every device at once.
// It writes only the group's own device slots, never the job's outputs,
// so a run after it is verified on its own; and it stages a job in auto
// mode, so that auto mode's choice for the runs after it is the one it
// would have made without it.
//
// Why: an idle GPU lowers its clocks (an H200 idles at 345 MHz; its SMs
// run at up to 1980 MHz), and a run that starts on an idle GPU pays for
// the climb, which is much of a short job's time. On one H200 the
// README's 4M-element job took 0.60–0.62 ms back to back and 0.66–0.75 ms
// after 200 ms of idling (bench.BenchmarkReadmeJob), every stage slower.
// A timed run right after Warm measures the device at work. The
// simulator's devices have no clocks to warm; there Warm only spends
// virtual time.
func (g *Group) Warm(ctx context.Context, job Job, d time.Duration) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if d < 0 {
		return fmt.Errorf("pipeline: Warm for %v: want a duration of 0 or more", d)
	}
	if job.Host == HostAuto {
		job.Host = HostStaged
	}
	plans, release, err := g.exclusive("Warm", job)
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

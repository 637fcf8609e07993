package bench

import (
	"math"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
)

// The checks of the benchmarks' options, each made by its benchmark
// before it runs and callable on its own, so that a command can refuse
// its flags before it opens a GPU. Their errors are *OptionErrors.

// isSim reports whether b is the simulator, whose bounds on work are
// lower: it computes every element on the CPU.
func isSim(b pipeline.Backend) bool {
	_, ok := b.(*sim.Sim)
	return ok
}

// FitChunks is the sizes of chunks that fit in a job of elems elements,
// or the job itself as one chunk when none does: a sweep's chunks for a
// job smaller than some of them.
func FitChunks(chunks []int, elems int) []int {
	var out []int
	for _, c := range chunks {
		if c <= elems {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = []int{elems}
	}
	return out
}

// CheckSweep checks o as [Sweep] runs it on the simulator (sim) or a GPU:
// the job's size, each slot count (2 to 1024) and chunk (at most the
// job), the runs (at most 1000) and compute streams (at most 64), and
// that each pass can finish in reasonable time ([CheckWork],
// [CheckChunks]).
func CheckSweep(o SweepOptions, sim bool) error {
	if o.Elems < 0 {
		return optionErr("{Elems} %d: must not be negative", o.Elems)
	}
	for _, s := range o.Slots {
		if s < 2 || s > 1024 {
			return optionErr("{Slots} %d: want 2 to 1024", s)
		}
	}
	for _, c := range o.Chunks {
		if c > o.Elems {
			return optionErr("{Chunks} %d is larger than {Elems} %d", c, o.Elems)
		}
	}
	switch {
	case int64(o.Elems) > MaxElems:
		return optionErr("{Elems} %d: at most %d", o.Elems, int64(MaxElems))
	case o.Repeat < 0 || o.Repeat > 1000:
		return optionErr("{Repeat} %d: want 1 to 1000", o.Repeat)
	case o.ComputeStreams < 0 || o.ComputeStreams > 64:
		return optionErr("{ComputeStreams} %d: want 1 to 64", o.ComputeStreams)
	}
	for _, it := range o.Iters {
		if it < 0 {
			return optionErr("{Iters} %d: must not be negative", it)
		}
		if err := CheckWork(int64(o.Elems), it, sim); err != nil {
			return err
		}
	}
	for _, c := range o.Chunks {
		if c <= 0 {
			continue // the pipeline's default chunk, or its error
		}
		if err := CheckChunks(o.Elems, c, sim); err != nil {
			return err
		}
	}
	return nil
}

// CheckScaling checks o as [Scaling] runs it: with its defaults, the
// slots hold every compute stream, the chunk is not negative (0 is each
// size's own), and the seed kernel's iterations are not negative.
func CheckScaling(o ScalingOptions) error {
	o = o.WithDefaults()
	switch {
	case o.Slots < o.ComputeStreams:
		return optionErr("{Slots} %d: fewer than the %d compute streams", o.Slots, o.ComputeStreams)
	case o.ChunkElems < 0:
		return optionErr("{ChunkElems} %d: must not be negative", o.ChunkElems)
	case o.Iters < 0:
		return optionErr("{Iters} %d: must not be negative", o.Iters)
	}
	return nil
}

// CheckSmallJobs checks o as [SmallJobs] runs it, before its defaults:
// each job size (1 element to 256M) and worker count (1 to 256), the
// seed kernel's iterations, how long a cell runs (Jobs, at most 16M a
// worker, or Seconds, at most 60), the rounds (at most 100),
// the wait modes (none on the simulator) and DirectCalls (a GPU, and a
// binary built with them).
func CheckSmallJobs(o SmallJobsOptions) error {
	for _, n := range o.Sizes {
		switch {
		case n < 1:
			return optionErr("{Sizes} %d: want at least 1 element", n)
		case n > 1<<28:
			return optionErr("{Sizes} %d: at most %d per job", n, 1<<28)
		}
	}
	for _, w := range o.Workers {
		if w < 1 || w > 256 {
			return optionErr("{Workers} %d: want 1 to 256", w)
		}
	}
	switch {
	case o.Iters < 0 || o.Iters > math.MaxInt32:
		return optionErr("{Iters} %d: want 0 to %d", o.Iters, math.MaxInt32)
	case o.Seconds < 0 || o.Seconds > 60:
		return optionErr("{Seconds} %g: want more than 0, at most 60", o.Seconds)
	case o.Jobs < 0 || o.Jobs > 1<<24:
		return optionErr("{Jobs} %d: want 0 (run for {Seconds}) to %d", o.Jobs, 1<<24)
	case o.DirectCalls && o.Sim:
		return optionErr("{DirectCalls} needs a GPU, not {Sim}: the simulator makes no driver calls")
	case o.DirectCalls && !driver.DirectCallsAvailable():
		return optionErr("{DirectCalls} needs a linux/amd64 binary built with -tags overlap_directcalls (go build -tags overlap_directcalls ./cmd/overlap)")
	case o.Rounds < 0 || o.Rounds > 100:
		return optionErr("{Rounds} %d: rounds from 1 to 100", o.Rounds)
	}
	for _, w := range o.Waits {
		if o.Sim && w != driver.WaitDefault {
			return optionErr("{Waits} %s needs a GPU: the simulator has no host thread waiting on a driver", w)
		}
	}
	return nil
}

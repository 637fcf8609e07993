package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
)

// overlap bench small-jobs: many small jobs, each H2D, the seed kernel
// and D2H then a wait for it, from several goroutines with a pipeline each
// on one shared context, as a service offloading work per request does.

// waitFlag reads --wait: spin, yield, block, auto, default, or (when all is
// non-nil) all for spin, yield and block.
type waitFlag struct {
	w   *[]driver.Wait
	all bool
}

func (f waitFlag) String() string {
	if f.w == nil || len(*f.w) == 0 {
		return "default"
	}
	var s []string
	for _, w := range *f.w {
		s = append(s, w.String())
	}
	return strings.Join(s, ",")
}

func (f waitFlag) Set(s string) error {
	if s == "all" && f.all {
		*f.w = []driver.Wait{driver.WaitSpin, driver.WaitYield, driver.WaitBlock}
		return nil
	}
	w, err := driver.ParseWait(s)
	if err != nil {
		if f.all {
			return errors.New("want spin, yield, block, auto, default or all")
		}
		return errors.New("want spin, yield, block, auto or default")
	}
	*f.w = []driver.Wait{w}
	return nil
}

// checkSmallJobs finishes overlap bench small-jobs's flags: --elems is a
// list of job sizes, --iters one count; bench.CheckSmallJobs checks
// them, and the defaults are bench.SmallJobsOptions's.
func checkSmallJobs(o *benchOptions, elems, iters, workers string) error {
	s := &o.small
	var err error
	if o.set["elems"] {
		if s.Sizes, err = parseList("elems", elems, parseSize); err != nil {
			return err
		}
	}
	if o.set["workers"] {
		if s.Workers, err = parseList("workers", workers, strconv.Atoi); err != nil {
			return err
		}
	}
	s.Iters = 100
	if o.set["iters"] {
		n, err := strconv.Atoi(iters)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return fmt.Errorf("--iters %q: one count from 0 to %d", iters, math.MaxInt32)
		}
		s.Iters = n
	}
	// --repeat's bench default (3) suits a GPU, whose cells drift from
	// one run to the next; the simulator gives every round of a job count
	// the same (with --seconds, the jobs that fit in the wall time vary).
	s.Rounds = o.repeat
	if o.sim && !o.set["repeat"] {
		s.Rounds = 1
	}
	switch {
	case o.set["seconds"] && s.Seconds == 0:
		return errors.New("--seconds 0: want more than 0, at most 60")
	case o.set["repeat"] && s.Rounds == 0:
		return errors.New("--repeat 0: rounds from 1 to 100")
	case !o.set["seconds"] && !(o.set["jobs"] && s.Jobs == 0):
		s.Seconds = 0 // the library's: on --sim, a few jobs rather than seconds
	}
	s.Sim, s.Device = o.sim, o.device
	if err := bench.CheckSmallJobs(*s); err != nil {
		return flagError(err)
	}
	if s.Jobs > 0 && o.set["seconds"] {
		return errors.New("--jobs and --seconds both say how long a cell runs; give one")
	}
	*s = s.WithDefaults()
	return nil
}

// runSmallJobs runs the small-jobs table (bench.SmallJobs): every wait
// mode, size and worker count, and with --reference the C++ twin in the
// same cells.
func runSmallJobs(ctx context.Context, o *benchOptions, stdout, stderr io.Writer) error {
	s := o.small
	prog := newProgress(stderr, o.jsonOut)
	defer prog.done()
	if !o.sim {
		if err := driver.Load(); err != nil {
			return err
		}
	}
	if o.reference {
		dev, err := driver.DeviceAt(o.device)
		if err != nil {
			return err
		}
		if o.device != 0 {
			return usageError{errors.New("--reference runs on GPU 0; leave --device out")}
		}
		ref, remove, err := reference(ctx, dev, prog)
		if err != nil {
			return err
		}
		defer remove()
		s.Reference = ref
	}
	if !o.sim && intSize < 64 {
		return errNo32Bit
	}
	s.Progress = prog.line
	res, err := bench.SmallJobs(ctx, s)
	if err != nil {
		return benchError(err)
	}
	prog.done()
	if o.jsonOut {
		writeJSON(stdout, map[string]any{"simulated": o.sim, "backend": res.Backend, "iters": s.Iters,
			"direct_calls": s.DirectCalls, "seconds_per_cell": s.Seconds, "jobs_per_worker": s.Jobs, "results": res.Rows})
		return nil
	}
	printSmallJobs(stdout, res.Rows, o, res.Backend)
	return nil
}

func printSmallJobs(w io.Writer, rows []bench.SmallJobsRow, o *benchOptions, name string) {
	label, runs := "", fmt.Sprintf("%g s per cell", o.small.Seconds)
	rounds := 1
	if len(rows) > 0 {
		rounds = rows[0].Rounds
	}
	if o.sim {
		label = " [simulated: H200 profile; latencies on the simulator's clock]"
	}
	if o.small.DirectCalls {
		label += "; direct calls (--direct-calls)"
	}
	if o.small.Jobs > 0 {
		runs = fmt.Sprintf("%d jobs per goroutine", o.small.Jobs)
	}
	if rounds > 1 {
		runs += fmt.Sprintf("; each cell the median of %d rounds", rounds)
		if o.reference {
			runs += ", Go and C++ taking turns"
		}
	}
	fmt.Fprintf(w, "overlap bench small-jobs: seed kernel (%d iterations) on %s; each job H2D, kernel, D2H, wait; a pipeline per goroutine, pinned buffers; %s%s\n\n",
		o.small.Iters, name, runs, label)
	fmt.Fprintf(w, "%-7s %6s %4s %8s %10s %10s %10s %9s", "WAIT", "ELEMS", "GORS", "JOBS", "JOBS/s", "P50", "P99", "CPU/JOB")
	cpp := false
	for _, r := range rows {
		cpp = cpp || r.Cpp != nil
	}
	if cpp {
		fmt.Fprintf(w, " %10s %10s %9s %7s %7s %7s", "C++ JOBS/s", "C++ P99", "C++ CPU", "RATE", "P99", "CPU")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		cpu := "n/a"
		if r.CPUusPerJob >= 0 {
			cpu = fmt.Sprintf("%.1f µs", r.CPUusPerJob)
		}
		fmt.Fprintf(w, "%-7s %6s %4d %8d %10.0f %7.1f µs %7.1f µs %9s", r.Wait, humanElems(r.Elems), r.Workers, r.Jobs, r.JobsPerSec, r.P50us, r.P99us, cpu)
		if cpp {
			if c := r.Cpp; c != nil {
				ratio := func(v float64) string {
					if v <= 0 {
						return "-"
					}
					return fmt.Sprintf("%.2fx", v)
				}
				fmt.Fprintf(w, " %10.0f %7.1f µs %6.1f µs %7s %7s %7s", c.JobsPerSec, c.P99us, c.CPUusPerJob, ratio(r.RateRatio), ratio(r.P99Ratio), ratio(r.CPURatio))
			} else {
				fmt.Fprintf(w, " %10s %10s %9s %7s %7s %7s", "-", "-", "-", "-", "-", "-")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nGORS: goroutines, each with its own pipeline on one context; P50/P99: latency of one job; CPU/JOB: the process's CPU time over the jobs")
	if cpp {
		fmt.Fprintf(w, "; RATE: Go jobs/s over C++'s (≥ 1 is the target), P99 and CPU: Go's over C++'s")
		if rounds > 1 {
			fmt.Fprintf(w, " (the medians of the rounds' own)")
		}
	}
	fmt.Fprintf(w, "; every element of each goroutine's last job verified%s\n", label)
}

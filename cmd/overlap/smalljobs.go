package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
)

// overlap bench small-jobs: many small jobs, each H2D, the seed kernel
// and D2H then a wait for it, from several goroutines with a pipeline each
// on one shared context, as a service offloading work per request does.

// waitFlag reads --wait: spin, yield, block, auto, default, or (when all
// is set) a comma-separated list of those, or all for spin, yield and
// block.
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
	if !f.all || !strings.Contains(s, ",") {
		w, err := driver.ParseWait(strings.TrimSpace(s))
		if err != nil {
			if f.all {
				return errors.New("want spin, yield, block, auto, default, a comma-separated list of them, or all")
			}
			return errors.New("want spin, yield, block, auto or default")
		}
		*f.w = []driver.Wait{w}
		return nil
	}
	var ws []driver.Wait
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch name {
		case "all":
			return errors.New("all stands alone, not in a list")
		case "default":
			// The primary context keeps the flags that an earlier mode of
			// the list set, so default would run as that mode.
			return errors.New("default stands alone, not in a list: it is the primary context's mode as the driver has it, which the modes before it change")
		}
		w, err := driver.ParseWait(name)
		if err != nil {
			return fmt.Errorf("%q in the list is not a wait mode (want spin, yield, block or auto)", name)
		}
		if slices.Contains(ws, w) {
			return fmt.Errorf("%s is listed twice", w)
		}
		ws = append(ws, w)
	}
	*f.w = ws
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
		if s.Workers, err = parseList("workers", workers, parseCount); err != nil {
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
	return res.WriteTable(stdout, s, flagName)
}

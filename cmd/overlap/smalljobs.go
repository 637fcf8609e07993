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
	"sync"
	"time"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// overlap bench --small-jobs: many small jobs, each H2D, the seed kernel
// and D2H then a wait for it, from several goroutines with a pipeline each
// on one shared context, as a service offloading work per request does.

// smallJobsDefaults are the sweep of issue 14.
var (
	smallJobsSizes   = []int{4 << 10, 64 << 10, 1 << 20}
	smallJobsWorkers = []int{1, 4, 16}
)

// smallJobsWait is how the host waits on a GPU unless --wait says: yield.
// On the H200 host (bench/RESULTS.md, "Wait modes side by side") it kept
// every p99 within 0.92-1.21x of the C++ twin's, where spin and the
// driver's default (which spins there) let 16 goroutines reach up to 2.8x,
// at the same jobs per second and CPU time per job.
const smallJobsWait = driver.WaitYield

const (
	// smallJobsSeconds is each cell's run on a GPU: 3 sizes × 3 worker
	// counts, in Go and C++, take about 25 s a round of a wait mode.
	smallJobsSeconds = 0.5
	// smallJobsSimJobs is each simulated worker's job count: the CPU
	// computes every element.
	smallJobsSimJobs = 3
	// smallJobsWarmup jobs per worker run before the clock starts.
	smallJobsWarmup = 3
	// smallJobsMinJob bounds the latencies kept per worker: no job is
	// faster than this, so seconds/smallJobsMinJob slots hold them all.
	smallJobsMinJob = 2 * time.Microsecond
)

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

// smallJobsOptions are the flags that --small-jobs adds to overlap bench.
type smallJobsOptions struct {
	waits   []driver.Wait
	workers []int
	seconds float64
	jobs    int // per worker; 0: run for seconds
	// rounds is how many times each wait mode's cells run (--repeat), Go
	// and the C++ twin taking turns; each cell reports the median.
	rounds int
	// direct issues the jobs' copies and launches without the scheduler's
	// system-call transition (--direct-calls, pipeline.GPUOptions).
	direct bool
}

// checkSmallJobs finishes overlap bench --small-jobs's flags: --elems is a
// list of job sizes, --iters one count.
func checkSmallJobs(o *benchOptions, elems, iters, workers string) error {
	s := &o.small
	var err error
	o.sizes = smallJobsSizes
	if o.set["elems"] {
		if o.sizes, err = parseList("elems", elems, parseSize); err != nil {
			return err
		}
	}
	s.workers = smallJobsWorkers
	if o.set["workers"] {
		if s.workers, err = parseList("workers", workers, strconv.Atoi); err != nil {
			return err
		}
	}
	o.iters = []int{100}
	if o.set["iters"] {
		n, err := strconv.Atoi(iters)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return fmt.Errorf("--iters %q: with --small-jobs, one count from 0 to %d", iters, math.MaxInt32)
		}
		o.iters = []int{n}
	}
	why := map[string]string{
		"devices": "its goroutines share one GPU",
		"csv":     "its table is printed, or written as JSON with --json",
		"svg":     "it has no chunk sizes to plot",
	}
	for _, f := range []string{"devices", "chunks", "slots", "host", "compute-streams", "csv", "svg"} {
		if o.set[f] {
			reason, ok := why[f]
			if !ok {
				reason = "each job is one chunk, pinned, on the pipeline's smallest shape"
			}
			return fmt.Errorf("--%s does not apply to --small-jobs: %s", f, reason)
		}
	}
	for _, n := range o.sizes {
		if n > 1<<28 {
			return fmt.Errorf("--elems %d: with --small-jobs, at most %d per job", n, 1<<28)
		}
	}
	for _, w := range s.workers {
		if w < 1 || w > 256 {
			return fmt.Errorf("--workers %d: want 1 to 256", w)
		}
	}
	switch {
	case s.seconds <= 0 || s.seconds > 60:
		return fmt.Errorf("--seconds %g: want more than 0, at most 60", s.seconds)
	case s.jobs < 0 || s.jobs > 1<<24:
		return fmt.Errorf("--jobs %d: want 0 (run for --seconds) to %d", s.jobs, 1<<24)
	case o.sim && len(s.waits) > 0:
		return errors.New("--wait needs a GPU: the simulator has no host thread waiting on a driver")
	case s.jobs > 0 && o.set["seconds"]:
		return errors.New("--jobs and --seconds both say how long a cell runs; give one")
	case o.sim && !o.set["jobs"] && !o.set["seconds"]:
		s.jobs = smallJobsSimJobs
	}
	// --repeat's bench default (3) suits a GPU, whose cells drift from
	// one run to the next; the simulator gives every round of a job count
	// the same (with --seconds, the jobs that fit in the wall time vary).
	s.rounds = o.repeat
	if o.sim && !o.set["repeat"] {
		s.rounds = 1
	}
	if s.rounds < 1 || s.rounds > 100 {
		return fmt.Errorf("--repeat %d: with --small-jobs, rounds from 1 to 100", s.rounds)
	}
	if len(s.waits) == 0 {
		s.waits = []driver.Wait{smallJobsWait}
		if o.sim {
			s.waits = []driver.Wait{driver.WaitDefault} // nothing waits on a driver
		}
	}
	return nil
}

// smallJobsRow is one cell: a wait mode, a job size and a worker count.
type smallJobsRow struct {
	Wait       string  `json:"wait"`
	Elems      int     `json:"elems"`
	Workers    int     `json:"workers"`
	Jobs       int     `json:"jobs"`
	Seconds    float64 `json:"seconds"`
	JobsPerSec float64 `json:"jobs_per_s"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	// CPUusPerJob is the process's CPU time per job; -1 where unknown.
	CPUusPerJob float64 `json:"cpu_us_per_job"`
	// The C++ twin's figures, and Go's jobs/s and p99 over them.
	Cpp       *bench.RefSmallJobs `json:"cpp,omitempty"`
	RateRatio float64             `json:"go_over_cpp_jobs_per_s,omitempty"`
	P99Ratio  float64             `json:"go_over_cpp_p99,omitempty"`
	CPURatio  float64             `json:"go_over_cpp_cpu,omitempty"`
	// Rounds is how many rounds the figures above are the medians of
	// (Jobs and Seconds are their sums), and RoundJobsPerSec and
	// RoundRateRatios each round's own.
	Rounds          int       `json:"rounds"`
	RoundJobsPerSec []float64 `json:"round_jobs_per_s,omitempty"`
	RoundRateRatios []float64 `json:"round_go_over_cpp_jobs_per_s,omitempty"`
}

// smallEnv is one wait mode's machine: a context (or a simulated device)
// with the seed kernel.
type smallEnv struct {
	b      pipeline.Backend
	kernel *pipeline.Kernel
	close  func()
}

func openSmallEnv(o *benchOptions, w driver.Wait) (*smallEnv, error) {
	iters := float64(o.iters[0])
	if o.sim {
		b := sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(sim.BuiltinProfile())
		k, err := kernels.Seed.Pipeline(nil, iters)
		if err != nil {
			return nil, err
		}
		return &smallEnv{b: b, kernel: k, close: func() {}}, nil
	}
	if intSize < 64 {
		return nil, errNo32Bit
	}
	dev, err := driver.DeviceAt(o.device)
	if err != nil {
		return nil, err
	}
	ctx, err := driver.NewContextWith(dev, driver.ContextOptions{Wait: w})
	if err != nil {
		return nil, err
	}
	mods := new(kernels.Modules)
	closeAll := func() {
		mods.Close()
		ctx.Close()
	}
	k, err := kernels.Seed.Pipeline(mods, iters)
	if err == nil {
		_, err = mods.Function(ctx, kernels.Seed) // JIT now, not in a timed job
	}
	if err != nil {
		closeAll()
		return nil, err
	}
	return &smallEnv{b: pipeline.GPUWith(ctx, pipeline.GPUOptions{DirectCalls: o.small.direct}), kernel: k, close: closeAll}, nil
}

// runSmallJobs runs the small-jobs table: every wait mode, size and worker
// count, and with --reference the C++ twin in the same cells.
func runSmallJobs(ctx context.Context, o *benchOptions, stdout, stderr io.Writer) error {
	s := &o.small
	prog := newProgress(stderr, o.jsonOut)
	defer prog.done()
	if !o.sim {
		if err := driver.Load(); err != nil {
			return err
		}
	}
	var ref *bench.Reference
	if o.reference {
		prog.say("building the CUDA C++ reference…")
		dev, err := driver.DeviceAt(o.device)
		if err != nil {
			return err
		}
		if o.device != 0 {
			return usageError{errors.New("--reference runs on GPU 0; leave --device out")}
		}
		var remove func()
		if ref, remove, err = buildReference(ctx, dev); err != nil {
			return err
		}
		defer remove()
	}
	var rows []smallJobsRow
	name := ""
	for _, w := range s.waits {
		// rounds[r] is round r's cells, in the table's order.
		var rounds [][]smallJobsRow
		for r := 0; r < s.rounds; r++ {
			round, err := smallJobsRound(ctx, o, w, r, prog, &name)
			if err != nil {
				return err
			}
			if ref != nil {
				prog.say("C++ reference, wait %s%s…", w, roundNote(r, s.rounds))
				cpp, err := ref.RunSmallJobs(ctx, w.String(), o.iters[0], s.seconds, s.jobs, o.sizes, s.workers)
				if err != nil {
					return err
				}
				if err := attachCpp(round, cpp); err != nil {
					return err
				}
			}
			rounds = append(rounds, round)
		}
		for c := range rounds[0] {
			cell := make([]smallJobsRow, len(rounds))
			for r := range rounds {
				cell[r] = rounds[r][c]
			}
			rows = append(rows, mergeRounds(cell))
		}
	}
	prog.done()
	if o.jsonOut {
		writeJSON(stdout, map[string]any{"simulated": o.sim, "backend": name, "iters": o.iters[0],
			"direct_calls": s.direct, "seconds_per_cell": s.seconds, "jobs_per_worker": s.jobs, "results": rows})
		return nil
	}
	printSmallJobs(stdout, rows, o, name)
	return nil
}

// smallJobsRound runs one round of wait mode w's cells on a context of
// its own, which it releases before it returns: the C++ twin runs next,
// and the next mode must find the primary context inactive. It sets
// *name to the backend's.
func smallJobsRound(ctx context.Context, o *benchOptions, w driver.Wait, r int, prog *progress, name *string) ([]smallJobsRow, error) {
	s := &o.small
	e, err := openSmallEnv(o, w)
	if err != nil {
		return nil, fmt.Errorf("wait mode %s: %w", w, err)
	}
	defer e.close()
	*name = e.b.Name()
	var rows []smallJobsRow
	for _, n := range o.sizes {
		for _, k := range s.workers {
			prog.say("wait %s%s: %s-element jobs from %d goroutine(s)…", w, roundNote(r, s.rounds), humanElems(n), k)
			row, err := smallJobsCell(ctx, e, n, k, o.iters[0], s)
			if err != nil {
				return nil, fmt.Errorf("wait %s, %s-element jobs, %d goroutine(s): %w", w, humanElems(n), k, err)
			}
			row.Wait = w.String()
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// roundNote names round r of n for the progress line; nothing for one.
func roundNote(r, n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(", round %d of %d", r+1, n)
}

// mergeRounds makes one row of a cell's rounds: the median of each
// figure, Jobs and Seconds summed, the C++ twin's figures the medians of
// its rounds, and each ratio the median of the rounds' own ratios (each
// round's Go and C++ ran next to each other, so the machine's drift from
// round to round falls on both). A figure that a round lacks (CPU time,
// the C++ twin) is left out of all.
func mergeRounds(rs []smallJobsRow) smallJobsRow {
	out := rs[0]
	out.Rounds = len(rs)
	if len(rs) == 1 {
		return out
	}
	col := func(f func(smallJobsRow) float64) []float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return v
	}
	out.Jobs, out.Seconds = 0, 0
	for _, r := range rs {
		out.Jobs += r.Jobs
		out.Seconds += r.Seconds
	}
	out.RoundJobsPerSec = col(func(r smallJobsRow) float64 { return r.JobsPerSec })
	out.JobsPerSec = median(out.RoundJobsPerSec)
	out.P50us = median(col(func(r smallJobsRow) float64 { return r.P50us }))
	out.P99us = median(col(func(r smallJobsRow) float64 { return r.P99us }))
	cpu := col(func(r smallJobsRow) float64 { return r.CPUusPerJob })
	out.CPUusPerJob = -1
	if slices.Min(cpu) >= 0 {
		out.CPUusPerJob = median(cpu)
	}
	out.Cpp, out.RateRatio, out.P99Ratio, out.CPURatio = nil, 0, 0, 0
	for _, r := range rs {
		if r.Cpp == nil {
			return out
		}
	}
	c := *rs[0].Cpp
	c.Jobs, c.Seconds = 0, 0
	for _, r := range rs {
		c.Jobs += r.Cpp.Jobs
		c.Seconds += r.Cpp.Seconds
	}
	c.JobsPerSec = median(col(func(r smallJobsRow) float64 { return r.Cpp.JobsPerSec }))
	c.P50us = median(col(func(r smallJobsRow) float64 { return r.Cpp.P50us }))
	c.P99us = median(col(func(r smallJobsRow) float64 { return r.Cpp.P99us }))
	c.CPUusPerJob = median(col(func(r smallJobsRow) float64 { return r.Cpp.CPUusPerJob }))
	out.Cpp = &c
	out.RoundRateRatios = col(func(r smallJobsRow) float64 { return r.RateRatio })
	out.RateRatio = median(out.RoundRateRatios)
	out.P99Ratio = median(col(func(r smallJobsRow) float64 { return r.P99Ratio }))
	if slices.Min(col(func(r smallJobsRow) float64 { return r.CPURatio })) > 0 {
		out.CPURatio = median(col(func(r smallJobsRow) float64 { return r.CPURatio }))
	}
	return out
}

// attachCpp puts each C++ cell beside the Go row of the same wait mode,
// size and worker count, with Go's figures over C++'s. A C++ cell with
// wrong elements is an error.
func attachCpp(rows []smallJobsRow, cpp []bench.RefSmallJobs) error {
	for _, c := range cpp {
		if c.Mismatches != 0 {
			return fmt.Errorf("the C++ small-jobs reference gave %d wrong elements (%d-element jobs, %d workers)", c.Mismatches, c.Elems, c.Workers)
		}
		for i := range rows {
			r := &rows[i]
			if r.Wait != c.Wait || r.Elems != c.Elems || r.Workers != c.Workers {
				continue
			}
			r.Cpp = &c
			r.RateRatio = r.JobsPerSec / c.JobsPerSec
			if c.P99us > 0 {
				r.P99Ratio = r.P99us / c.P99us
			}
			if c.CPUusPerJob > 0 && r.CPUusPerJob >= 0 {
				r.CPURatio = r.CPUusPerJob / c.CPUusPerJob
			}
		}
	}
	return nil
}

// smallWorker is one goroutine's pipeline, pinned buffers and latencies.
type smallWorker struct {
	p       *pipeline.Pipeline
	in, out pipeline.PinnedMem
	job     pipeline.Job
	// rep takes each job's report: RunInto allocates nothing, as the C++
	// twin does not, so no collection runs while the cell is timed.
	rep   pipeline.Report
	lat   []time.Duration
	start time.Duration
	end   time.Duration
	err   error
}

func (w *smallWorker) close() {
	w.p.Close() // nil-safe
	for _, m := range []pipeline.PinnedMem{w.in, w.out} {
		if m != nil {
			m.Close()
		}
	}
}

// newSmallWorker builds a pipeline of one chunk of n elements on b, with
// pinned input and output buffers, the input holding the standard pattern.
func newSmallWorker(b pipeline.Backend, k *pipeline.Kernel, n int) (*smallWorker, error) {
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = n, 2, 1, pipeline.HostPinned
	w := &smallWorker{}
	var err error
	if w.p, err = pipeline.New(b, cfg); err != nil {
		return nil, err
	}
	if w.in, err = b.AllocPinned(4 * n); err == nil {
		w.out, err = b.AllocPinned(4 * n)
	}
	if err != nil {
		w.close()
		return nil, err
	}
	kernels.FillPattern(driver.View[float32](w.in.Bytes())[:n], 0)
	w.job = pipeline.Job{N: n, Kernel: k, Host: pipeline.HostPinned,
		Inputs: []pipeline.Buffer{pipeline.Pinned(w.in)}, Outputs: []pipeline.Buffer{pipeline.Pinned(w.out)}}
	return w, nil
}

// smallJobsCell runs k goroutines, each with its own pipeline, running
// n-element jobs back to back for s.seconds (or s.jobs each), and verifies
// every element of each goroutine's last job.
func smallJobsCell(ctx context.Context, e *smallEnv, n, k, iters int, s *smallJobsOptions) (smallJobsRow, error) {
	ws := make([]*smallWorker, k)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.close()
			}
		}
	}()
	room := s.jobs
	if room == 0 {
		room = int(time.Duration(s.seconds*float64(time.Second))/smallJobsMinJob) + 16
	}
	for i := range ws {
		w, err := newSmallWorker(e.b, e.kernel, n)
		if err != nil {
			return smallJobsRow{}, err
		}
		ws[i] = w
		w.lat = make([]time.Duration, 0, room)
		// A GPU's first jobs pay for first touches; the simulator's times
		// do not depend on them.
		for j := 0; j < smallJobsWarmup && s.jobs == 0 && !isSim(e.b); j++ {
			if err := w.p.RunInto(ctx, w.job, &w.rep); err != nil {
				return smallJobsRow{}, err
			}
		}
	}
	// On a GPU the job's own start time is checked against the deadline,
	// as the C++ twin checks its t0: one clock read less per job. The
	// simulator's clock is each goroutine's own, so there the deadline is
	// the wall clock's.
	var deadline time.Time
	var gpuDeadline time.Duration
	sdev := isSim(e.b)
	past := func(t0 time.Duration) bool {
		if s.jobs > 0 {
			return false
		}
		if sdev {
			return !time.Now().Before(deadline)
		}
		return t0 >= gpuDeadline
	}
	work := func(w *smallWorker) {
		w.start = pipeline.Now(e.b)
		for len(w.lat) < cap(w.lat) {
			t0 := pipeline.Now(e.b)
			if past(t0) {
				break
			}
			if err := w.p.RunInto(ctx, w.job, &w.rep); err != nil {
				w.err = err
				break
			}
			w.end = pipeline.Now(e.b)
			w.lat = append(w.lat, w.end-t0)
		}
	}
	run := time.Duration(s.seconds * float64(time.Second))
	if sdev {
		// Started with plain go statements, a worker that reached the
		// simulator first ran ahead in virtual time before the others
		// existed, and a cell of several goroutines gave a different rate
		// on each run (TestSmallJobsRoundsOnSim).
		deadline = time.Now().Add(run)
		e.b.(*sim.Sim).Host().GoTogether("small-jobs worker", len(ws), func(i int) { work(ws[i]) })
		return smallJobsResult(ws, n, iters, -1) // no CPU time on the simulator
	}
	var ready, wg sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(k)
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			work(w)
		}()
	}
	ready.Wait()
	cpu0, cpuOK := processCPU()
	deadline = time.Now().Add(run)
	gpuDeadline = pipeline.Now(e.b) + run
	close(gate)
	wg.Wait()
	cpu1, _ := processCPU()
	cpu := time.Duration(-1)
	if cpuOK {
		cpu = cpu1 - cpu0
	}
	return smallJobsResult(ws, n, iters, cpu)
}

// smallJobsResult makes a cell's row from its workers' latencies, after
// verifying every element of each worker's last job; cpu is the process's
// CPU time over the cell, negative when unknown.
func smallJobsResult(ws []*smallWorker, n, iters int, cpu time.Duration) (smallJobsRow, error) {
	row := smallJobsRow{Elems: n, Workers: len(ws), CPUusPerJob: -1}
	var all []time.Duration
	var first, last time.Duration = math.MaxInt64, 0
	for _, w := range ws {
		if w.err != nil {
			return row, w.err
		}
		all = append(all, w.lat...)
		first, last = min(first, w.start), max(last, w.end)
		in := driver.View[float32](w.in.Bytes())[:n]
		out := driver.View[float32](w.out.Bytes())[:n]
		if err := kernels.Seed.Verify([][]float32{in}, out, float64(iters)); err != nil {
			return row, err
		}
	}
	row.Jobs = len(all)
	if row.Jobs == 0 || last <= first {
		return row, errors.New("no job finished")
	}
	elapsed := last - first
	row.Seconds = elapsed.Seconds()
	row.JobsPerSec = float64(row.Jobs) / row.Seconds
	slices.Sort(all)
	row.P50us = us(percentile(all, 0.50))
	row.P99us = us(percentile(all, 0.99))
	if cpu >= 0 {
		row.CPUusPerJob = us(cpu) / float64(row.Jobs)
	}
	return row, nil
}

func isSim(b pipeline.Backend) bool {
	_, ok := b.(*sim.Sim)
	return ok
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// percentile is the nearest-rank p-quantile of sorted, as the C++ twin
// computes it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

func printSmallJobs(w io.Writer, rows []smallJobsRow, o *benchOptions, name string) {
	label, runs := "", fmt.Sprintf("%g s per cell", o.small.seconds)
	rounds := 1
	if len(rows) > 0 {
		rounds = rows[0].Rounds
	}
	if o.sim {
		label = " [simulated: H200 profile; latencies on the simulator's clock]"
	}
	if o.small.direct {
		label += "; direct calls (--direct-calls)"
	}
	if o.small.jobs > 0 {
		runs = fmt.Sprintf("%d jobs per goroutine", o.small.jobs)
	}
	if rounds > 1 {
		runs += fmt.Sprintf("; each cell the median of %d rounds", rounds)
		if o.reference {
			runs += ", Go and C++ taking turns"
		}
	}
	fmt.Fprintf(w, "overlap bench --small-jobs: seed kernel (%d iterations) on %s; each job H2D, kernel, D2H, wait; a pipeline per goroutine, pinned buffers; %s%s\n\n",
		o.iters[0], name, runs, label)
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

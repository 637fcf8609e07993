package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The small-jobs benchmark: many small jobs, each H2D, the seed kernel
// and D2H then a wait for it, from several goroutines with a pipeline
// each on one shared context, as a service offloading work per request
// does.

// SmallJobsWait is how the host waits on a GPU unless told otherwise:
// yield. On the H200 host (bench/RESULTS.md, "Wait modes side by side")
// it kept every p99 within 0.92-1.21x of the C++ twin's, where spin and
// the driver's default (which spins there) let 16 goroutines reach up to
// 2.8x, at the same jobs per second and CPU time per job.
const SmallJobsWait = driver.WaitYield

const (
	// SmallJobsSeconds is each cell's run on a GPU unless told otherwise:
	// 3 sizes × 3 worker counts, in Go and C++, take about 25 s a round
	// of a wait mode.
	SmallJobsSeconds = 0.5
	// SmallJobsSimJobs is each simulated worker's job count that overlap
	// bench --small-jobs --sim runs: the CPU computes every element.
	SmallJobsSimJobs = 3
	// smallJobsWarmup jobs per worker run before the clock starts.
	smallJobsWarmup = 3
	// smallJobsMinJob bounds the latencies kept per worker: no job is
	// faster than this, so seconds/smallJobsMinJob slots hold them all.
	smallJobsMinJob = 2 * time.Microsecond
)

// SmallJobsSizes are the job sizes (elements) of the default sweep: 4K,
// 64K and 1M. Each call returns a fresh slice.
func SmallJobsSizes() []int { return []int{4 << 10, 64 << 10, 1 << 20} }

// SmallJobsWorkers are the goroutine counts of the default sweep: 1, 4
// and 16. Each call returns a fresh slice.
func SmallJobsWorkers() []int { return []int{1, 4, 16} }

// SmallJobsOptions say what [SmallJobs] runs. The zero value runs the
// default sweep on GPU 0 for [SmallJobsSeconds] a cell (on the simulator,
// [SmallJobsSimJobs] jobs a worker), with the seed kernel at 0
// iterations, one round, waiting with [SmallJobsWait]; [CheckSmallJobs]
// says what it refuses.
type SmallJobsOptions struct {
	// Sim runs on a simulated H200 (the built-in profile) instead of a
	// GPU; Device is the GPU's index otherwise.
	Sim    bool
	Device int
	// Waits are the wait modes, each a table of its own (nil: SmallJobsWait
	// on a GPU, driver.WaitDefault on the simulator, where nothing waits on
	// a driver).
	Waits []driver.Wait
	// Sizes are the job sizes in elements (nil: SmallJobsSizes) and Workers
	// the goroutine counts (nil: SmallJobsWorkers).
	Sizes, Workers []int
	// Iters is the seed kernel's iterations.
	Iters int
	// Jobs is each goroutine's job count; 0 runs each cell for Seconds (0:
	// SmallJobsSeconds; on the simulator, with Jobs 0 too, SmallJobsSimJobs
	// jobs instead).
	Jobs    int
	Seconds float64
	// Rounds is how many times each wait mode's cells run (0: once), Go
	// and the C++ twin taking turns; each cell reports the median.
	Rounds int
	// DirectCalls issues the jobs' copies and launches without the
	// scheduler's system-call transition (pipeline.GPUOptions).
	DirectCalls bool
	// Reference, when not nil, runs the C++ twin in the same cells after
	// each round, and puts its figures beside Go's.
	Reference *Reference
	// Progress, when not nil, hears what runs next.
	Progress func(msg string)
}

// SmallJobsRow is one cell: a wait mode, a job size and a worker count.
type SmallJobsRow struct {
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
	Cpp       *RefSmallJobs `json:"cpp,omitempty"`
	RateRatio float64       `json:"go_over_cpp_jobs_per_s,omitempty"`
	P99Ratio  float64       `json:"go_over_cpp_p99,omitempty"`
	CPURatio  float64       `json:"go_over_cpp_cpu,omitempty"`
	// Rounds is how many rounds the figures above are the medians of
	// (Jobs and Seconds are their sums), and RoundJobsPerSec and
	// RoundRateRatios each round's own.
	Rounds          int       `json:"rounds"`
	RoundJobsPerSec []float64 `json:"round_jobs_per_s,omitempty"`
	RoundRateRatios []float64 `json:"round_go_over_cpp_jobs_per_s,omitempty"`
}

// SmallJobsResult is what [SmallJobs] measured: the backend's name and a
// row a cell, by wait mode, size and worker count.
type SmallJobsResult struct {
	Backend string
	Rows    []SmallJobsRow
}

// WithDefaults is o with its zero fields' defaults filled in, as
// [SmallJobs] runs it.
func (o SmallJobsOptions) WithDefaults() SmallJobsOptions {
	if o.Sizes == nil {
		o.Sizes = SmallJobsSizes()
	}
	if o.Workers == nil {
		o.Workers = SmallJobsWorkers()
	}
	if len(o.Waits) == 0 {
		o.Waits = []driver.Wait{SmallJobsWait}
		if o.Sim {
			o.Waits = []driver.Wait{driver.WaitDefault}
		}
	}
	if o.Sim && o.Jobs == 0 && o.Seconds == 0 {
		o.Jobs = SmallJobsSimJobs // the CPU computes every element
	}
	if o.Seconds <= 0 {
		o.Seconds = SmallJobsSeconds
	}
	o.Rounds = max(1, o.Rounds)
	return o
}

// SmallJobs runs the small-jobs table: every wait mode, size and worker
// count, each cell's goroutines started together behind a barrier with
// one shared deadline, and every element of each goroutine's last job
// verified. With Reference, the C++ twin runs in the same cells.
func SmallJobs(ctx context.Context, o SmallJobsOptions) (*SmallJobsResult, error) {
	if err := CheckSmallJobs(o); err != nil {
		return nil, &Error{Op: "SmallJobs", Err: err}
	}
	o = o.WithDefaults()
	if !o.Sim {
		if err := driver.Load(); err != nil {
			return nil, &Error{Op: "SmallJobs", Err: err}
		}
	}
	res := &SmallJobsResult{}
	for _, w := range o.Waits {
		// rounds[r] is round r's cells, in the table's order.
		var rounds [][]SmallJobsRow
		for r := 0; r < o.Rounds; r++ {
			round, err := smallJobsRound(ctx, o, w, r, &res.Backend)
			if err != nil {
				return nil, &Error{Op: "SmallJobs", Err: err}
			}
			if o.Reference != nil {
				say(o.Progress, "C++ reference, wait %s%s…", w, roundNote(r, o.Rounds))
				cpp, err := o.Reference.RunSmallJobs(ctx, w.String(), o.Iters, o.Seconds, o.Jobs, o.Sizes, o.Workers)
				if err != nil {
					return nil, &Error{Op: "SmallJobs", Err: err}
				}
				if err := AttachCpp(round, cpp); err != nil {
					return nil, &Error{Op: "SmallJobs", Err: err}
				}
			}
			rounds = append(rounds, round)
		}
		for c := range rounds[0] {
			cell := make([]SmallJobsRow, len(rounds))
			for r := range rounds {
				cell[r] = rounds[r][c]
			}
			res.Rows = append(res.Rows, MergeRounds(cell))
		}
	}
	return res, nil
}

// smallEnv is one wait mode's machine: a context (or a simulated device)
// with the seed kernel.
type smallEnv struct {
	b      pipeline.Backend
	kernel *pipeline.Kernel
	close  func()
}

func openSmallEnv(o SmallJobsOptions, w driver.Wait) (*smallEnv, error) {
	iters := float64(o.Iters)
	if o.Sim {
		b := sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(sim.BuiltinProfile())
		k, err := kernels.Seed.Pipeline(nil, iters)
		if err != nil {
			return nil, err
		}
		return &smallEnv{b: b, kernel: k, close: func() {}}, nil
	}
	dev, err := driver.DeviceAt(o.Device)
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
	return &smallEnv{b: pipeline.GPUWith(ctx, pipeline.GPUOptions{DirectCalls: o.DirectCalls}), kernel: k, close: closeAll}, nil
}

// smallJobsRound runs one round of wait mode w's cells on a context of
// its own, which it releases before it returns: the C++ twin runs next,
// and the next mode must find the primary context inactive. It sets
// *name to the backend's.
func smallJobsRound(ctx context.Context, o SmallJobsOptions, w driver.Wait, r int, name *string) ([]SmallJobsRow, error) {
	e, err := openSmallEnv(o, w)
	if err != nil {
		return nil, fmt.Errorf("wait mode %s: %w", w, err)
	}
	defer e.close()
	*name = e.b.Name()
	var rows []SmallJobsRow
	for _, n := range o.Sizes {
		for _, k := range o.Workers {
			say(o.Progress, "wait %s%s: %s-element jobs from %d goroutine(s)…", w, roundNote(r, o.Rounds), Elems(n), k)
			row, err := smallJobsCell(ctx, e, n, k, o)
			if err != nil {
				return nil, fmt.Errorf("wait %s, %s-element jobs, %d goroutine(s): %w", w, Elems(n), k, err)
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

// MergeRounds makes one row of a cell's rounds: the median of each
// figure, Jobs and Seconds summed, the C++ twin's figures the medians of
// its rounds, and each ratio the median of the rounds' own ratios (each
// round's Go and C++ ran next to each other, so the machine's drift from
// round to round falls on both). A figure that a round lacks (CPU time,
// the C++ twin) is left out of all. rs is left as it was; it must not be
// empty.
func MergeRounds(rs []SmallJobsRow) SmallJobsRow {
	out := rs[0]
	out.Rounds = len(rs)
	if len(rs) == 1 {
		return out
	}
	col := func(f func(SmallJobsRow) float64) []float64 {
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
	out.RoundJobsPerSec = col(func(r SmallJobsRow) float64 { return r.JobsPerSec })
	out.JobsPerSec = median(out.RoundJobsPerSec)
	out.P50us = median(col(func(r SmallJobsRow) float64 { return r.P50us }))
	out.P99us = median(col(func(r SmallJobsRow) float64 { return r.P99us }))
	cpu := col(func(r SmallJobsRow) float64 { return r.CPUusPerJob })
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
	c.JobsPerSec = median(col(func(r SmallJobsRow) float64 { return r.Cpp.JobsPerSec }))
	c.P50us = median(col(func(r SmallJobsRow) float64 { return r.Cpp.P50us }))
	c.P99us = median(col(func(r SmallJobsRow) float64 { return r.Cpp.P99us }))
	c.CPUusPerJob = median(col(func(r SmallJobsRow) float64 { return r.Cpp.CPUusPerJob }))
	out.Cpp = &c
	out.RoundRateRatios = col(func(r SmallJobsRow) float64 { return r.RateRatio })
	out.RateRatio = median(out.RoundRateRatios)
	out.P99Ratio = median(col(func(r SmallJobsRow) float64 { return r.P99Ratio }))
	if slices.Min(col(func(r SmallJobsRow) float64 { return r.CPURatio })) > 0 {
		out.CPURatio = median(col(func(r SmallJobsRow) float64 { return r.CPURatio }))
	}
	return out
}

// AttachCpp puts each C++ cell beside the Go row of the same wait mode,
// size and worker count, with Go's figures over C++'s. A C++ cell with
// wrong elements is an error.
func AttachCpp(rows []SmallJobsRow, cpp []RefSmallJobs) error {
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
// n-element jobs back to back for o.Seconds (or o.Jobs each), and
// verifies every element of each goroutine's last job.
func smallJobsCell(ctx context.Context, e *smallEnv, n, k int, o SmallJobsOptions) (SmallJobsRow, error) {
	ws := make([]*smallWorker, k)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.close()
			}
		}
	}()
	room := o.Jobs
	if room == 0 {
		room = int(time.Duration(o.Seconds*float64(time.Second))/smallJobsMinJob) + 16
	}
	// A backend that follows each host goroutine on a clock of its own
	// (the simulator) has virtual time: its workers start together
	// through it (pipeline.GoTogether), and the deadline is the wall
	// clock's.
	_, isSim := e.b.(pipeline.HostTracker)
	for i := range ws {
		w, err := newSmallWorker(e.b, e.kernel, n)
		if err != nil {
			return SmallJobsRow{}, err
		}
		ws[i] = w
		w.lat = make([]time.Duration, 0, room)
		// A GPU's first jobs pay for first touches; the simulator's times
		// do not depend on them.
		for j := 0; j < smallJobsWarmup && o.Jobs == 0 && !isSim; j++ {
			if err := w.p.RunInto(ctx, w.job, &w.rep); err != nil {
				return SmallJobsRow{}, err
			}
		}
	}
	// On a GPU the job's own start time is checked against the deadline,
	// as the C++ twin checks its t0: one clock read less per job. The
	// simulator's clock is each goroutine's own, so there the deadline is
	// the wall clock's.
	var deadline time.Time
	var gpuDeadline time.Duration
	past := func(t0 time.Duration) bool {
		if o.Jobs > 0 {
			return false
		}
		if isSim {
			return !time.Now().Before(deadline)
		}
		return t0 >= gpuDeadline
	}
	work := func(i int) {
		w := ws[i]
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
	run := time.Duration(o.Seconds * float64(time.Second))
	if isSim {
		// Started with plain go statements, a worker that reached the
		// simulator first ran ahead in virtual time before the others
		// existed, and a cell of several goroutines gave a different rate
		// on each run (TestSmallJobsRoundsOnSim).
		deadline = time.Now().Add(run)
		pipeline.GoTogether(e.b, "small-jobs worker", len(ws), work)
		return smallJobsResult(ws, n, o.Iters, -1) // no CPU time on the simulator
	}
	var cpu0 time.Duration
	var cpuOK bool
	together(k, func() {
		cpu0, cpuOK = processCPU()
		deadline = time.Now().Add(run)
		gpuDeadline = pipeline.Now(e.b) + run
	}, work)
	cpu1, _ := processCPU()
	cpu := time.Duration(-1)
	if cpuOK {
		cpu = cpu1 - cpu0
	}
	return smallJobsResult(ws, n, o.Iters, cpu)
}

// together runs work(i) for i in [0, k) on goroutines of their own,
// started together: every goroutine exists and waits behind a barrier
// before start runs (where the caller sets the one deadline that all
// share), and none calls work before start has returned. It returns when
// every work has.
func together(k int, start func(), work func(i int)) {
	var ready, wg sync.WaitGroup
	gate := make(chan struct{})
	ready.Add(k)
	for i := range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ready.Done()
			<-gate
			work(i)
		}()
	}
	ready.Wait()
	start()
	close(gate)
	wg.Wait()
}

// smallJobsResult makes a cell's row from its workers' latencies, after
// verifying every element of each worker's last job; cpu is the process's
// CPU time over the cell, negative when unknown.
func smallJobsResult(ws []*smallWorker, n, iters int, cpu time.Duration) (SmallJobsRow, error) {
	row := SmallJobsRow{Elems: n, Workers: len(ws), CPUusPerJob: -1}
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
	row.P50us = us(Percentile(all, 0.50))
	row.P99us = us(Percentile(all, 0.99))
	if cpu >= 0 {
		row.CPUusPerJob = us(cpu) / float64(row.Jobs)
	}
	return row, nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// Percentile is the nearest-rank p-quantile of sorted, as the C++ twin
// computes it; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(k, len(sorted)-1))]
}

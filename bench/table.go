package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/purecuda/overlap/internal/hostcpu"
	"github.com/purecuda/overlap/internal/textout"
	"github.com/purecuda/overlap/pipeline"
)

// The text tables of the benchmarks' results, as overlap prints them:
// a format of each result beside its JSON, CSV (WriteSweepFiles) and SVG
// (WriteTimelineSVG). Each writer returns w's first error. What a
// command says of its own flags (such as that --elems changes the
// simulator's smaller job) is the command's to print before the table.

// textWriter is textout.Writer.
type textWriter = textout.Writer

// orDash is format applied to v, or "-" where v is not positive (a
// figure that was not measured).
func orDash(format string, v float64) string {
	if v <= 0 {
		return "-"
	}
	return fmt.Sprintf(format, v)
}

// simLabel is " [simulated]" for a simulator's figures.
func simLabel(simulated bool) string {
	if simulated {
		return " [simulated]"
	}
	return ""
}

// cppColumns are a row's C++ time and Go's over it, or "-" and "-"
// where no reference ran.
func cppColumns(cppMs, ratio float64) (string, string) {
	if cppMs > 0 {
		return fmt.Sprintf("%.2f ms", cppMs), fmt.Sprintf("%.3f", ratio)
	}
	return "-", "-"
}

// RunSummary is what overlap run measured, as its table and as JSON: a
// [RunResult] with the job and the machine that it ran on.
type RunSummary struct {
	Simulated bool `json:"simulated"`
	// NoGPU says why a run that asked for no machine in particular ran
	// on the simulator: no driver was found. Note is a line for the top
	// of the table. WriteTable writes neither: they are the caller's.
	NoGPU string `json:"no_gpu,omitempty"`
	// Profile names the simulator's profile (for a simulated run).
	Profile        string    `json:"profile,omitempty"`
	Note           string    `json:"note,omitempty"`
	Backend        string    `json:"backend"`
	Kernel         string    `json:"kernel"`
	Iters          int       `json:"iters,omitempty"`
	Elems          int       `json:"elems"`
	Bytes          int64     `json:"bytes"`
	ChunkElems     int       `json:"chunk_elems"`
	ChunkChoice    string    `json:"chunk_choice,omitempty"`
	Slots          int       `json:"slots"`
	ComputeStreams int       `json:"compute_streams"`
	HostMode       string    `json:"host_mode"`
	Rows           []RunMode `json:"modes"`
	Stages         Stages    `json:"stage_bound"`
	// Devices are each GPU's part of the best run, for a group of several.
	Devices  []RunDevice `json:"devices,omitempty"`
	Verified string      `json:"verified"`
	// WarmUpMs is the untimed GPU work before each timed part (0 on the
	// simulator and with no warm-up).
	WarmUpMs float64 `json:"warm_up_ms,omitempty"`
	// Rehearsed says that each pipelined run followed an untimed run of
	// the job (RunOptions.Rehearse).
	Rehearsed bool `json:"rehearsed,omitempty"`
}

// WriteTable writes r as overlap run's table: the job, the
// configuration, a row a mode, each device's part, the stage bound, and
// a note for each row that beat its bound.
func (r *RunSummary) WriteTable(w io.Writer) error {
	if r == nil {
		return errors.New("bench: RunSummary.WriteTable: no summary")
	}
	t := &textWriter{W: w}
	label := ""
	if r.Simulated {
		label = fmt.Sprintf(" [simulated on the CPU: times predicted for %s]", r.Profile)
	}
	kernel := r.Kernel
	if r.Iters > 0 {
		kernel = fmt.Sprintf("%s (%d iterations)", r.Kernel, r.Iters)
	}
	t.Printf("overlap run: %s on %s, %d float32 elements (%s moved)%s\n", kernel, r.Backend, r.Elems, Bytes(r.Bytes), label)
	t.Printf("chunk %d elements, %d slots, %d compute stream(s), host memory %s\n", r.ChunkElems, r.Slots, r.ComputeStreams, r.HostMode)
	if r.ChunkChoice != "" {
		t.Printf("chunk auto: %s\n", r.ChunkChoice)
	}
	t.Printf("\n%-24s %10s %8s %8s %11s\n", "MODE", "TIME", "GB/s", "SPEEDUP", "EFFICIENCY")
	for _, row := range r.Rows {
		t.Printf("%-24s %7.2f ms %8.1f %8s %11s\n", row.Mode, row.Ms, row.GBps, orDash("%.2fx", row.Speedup), orDash("%.1f%%", 100*row.Efficiency))
	}
	t.Printf("\n")
	s := r.Stages
	stages := s.String()
	if len(r.Devices) > 0 {
		t.Printf("%-8s %-28s %7s %10s %7s %12s\n", "DEVICE", "NAME", "CHUNKS", "BUSY", "SHARE", "BOUND SHARE")
		for _, d := range r.Devices {
			t.Printf("%-8d %-28s %7d %7.2f ms %6.1f%% %11.1f%%\n", d.Device, d.Name, d.Chunks, d.BusyMs, 100*d.Share, 100*d.BoundShare)
		}
		t.Printf("\n")
	}
	t.Printf("stage bound (slowest stage alone, %s): %.2f ms (%s)\n", s.Slowest, s.BoundMs, stages)
	t.Printf("efficiency = stage bound / pipeline time; %s%s\n", r.Verified, label)
	if r.WarmUpMs > 0 {
		t.Printf("each timed part ran right after %.0f ms of untimed work on the GPU, which an idle GPU needs to raise its clocks\n", r.WarmUpMs)
	}
	if r.Rehearsed {
		t.Printf("each pipelined run came right after an untimed run of the job; the output and the device slots were filled with NaN before every checked run\n")
	}
	for _, row := range r.Rows {
		if row.Efficiency > 1 {
			t.Printf("note: %s beat its stage bound by %.1f%%: the %s stage ran faster inside the pipeline than alone, where it is timed from the host (issue and synchronisation included); the bound is then not a limit\n",
				row.Mode, 100*(row.Efficiency-1), s.Slowest)
		}
	}
	return t.Err
}

// SweepTable is what a sweep's table says of the run beside its rows:
// the backend's name, the job's elements, and whether it was simulated.
type SweepTable struct {
	Backend   string
	Elems     int
	Simulated bool
}

// WriteSweepTable writes rows, a [Sweep]'s, as overlap bench's table: a
// row a configuration with its C++ reference time where one ran, then
// the fastest configuration.
func WriteSweepTable(w io.Writer, rows []SweepRow, o SweepTable) error {
	t := &textWriter{W: w}
	label := simLabel(o.Simulated)
	t.Printf("overlap bench: seed kernel on %s, %d float32 elements%s\n\n", o.Backend, o.Elems, label)
	t.Printf("%6s %-11s %10s %5s %10s %8s %10s %6s %10s %7s\n", "ITERS", "HOST", "CHUNK", "SLOTS", "TIME", "GB/s", "BOUND", "EFF", "C++", "GO/C++")
	for _, r := range rows {
		cpp, ratio := cppColumns(r.CppMs, r.Ratio)
		t.Printf("%6d %-11s %10d %5d %7.2f ms %8.1f %7.2f ms %5.1f%% %10s %7s\n",
			r.Iters, r.Host, r.Chunk, r.Slots, r.Ms, r.GBps, r.BoundMs, 100*r.Efficiency, cpp, ratio)
	}
	// The best of each iteration count: each count is another job, whose
	// times are not to be compared (the fewest iterations were always
	// "best" of several).
	var order []int
	best := map[int]SweepRow{}
	for _, r := range rows {
		b, ok := best[r.Iters]
		if !ok {
			order = append(order, r.Iters)
		}
		if !ok || r.Ms < b.Ms {
			best[r.Iters] = r
		}
	}
	if len(order) > 0 {
		t.Printf("\n")
	}
	for _, iters := range order {
		b := best[iters]
		t.Printf("best: chunk %d, %d slots, host %s, iters %d: %.2f ms (%.1f%% of the stage bound)%s\n",
			b.Chunk, b.Slots, b.Host, b.Iters, b.Ms, 100*b.Efficiency, label)
	}
	return t.Err
}

// ScalingTable is what the scaling table says of the run beside its
// rows: the configuration that [Scaling] ran (Options, its defaults
// filled in by WithDefaults; a ChunkElems of 0 is each size's own, in
// the rows), the devices' names (Machine.Names) and indexes, and
// whether they were simulated (devices sharing a SimLinkGBps host
// link).
type ScalingTable struct {
	Options   ScalingOptions
	Backend   string
	Ordinals  []int
	Simulated bool
}

// WriteScalingTable writes rows, a [Scaling]'s, as overlap bench
// scaling's table: a row a size, host mode and device count, with its
// chunk and speedup over one device and the C++ reference where one ran,
// a note for each row that beat its bound, and what the bound is.
func WriteScalingTable(w io.Writer, rows []ScalingRow, o ScalingTable) error {
	t := &textWriter{W: w}
	s := o.Options
	label := ""
	if o.Simulated {
		label = fmt.Sprintf(" [simulated: H200 profile, the %d devices sharing a %d GB/s host link]", len(o.Ordinals), SimLinkGBps)
	}
	chunk := fmt.Sprintf("chunk %d", s.ChunkElems)
	if s.ChunkElems == 0 {
		chunk = "each size in overlap run's chunk for it (CHUNK)"
	}
	t.Printf("overlap bench scaling: seed kernel (%d iterations) on %s, GPUs %v; %s, %d slots, %d compute streams%s\n\n",
		s.Iters, o.Backend, o.Ordinals, chunk, s.Slots, s.ComputeStreams, label)
	t.Printf("%6s %7s %-19s %4s %10s %8s %10s %-12s %6s %8s %-13s %10s %7s\n",
		"ELEMS", "CHUNK", "HOST", "GPUS", "TIME", "GB/s", "BOUND", "SLOWEST", "EFF", "SPEEDUP", "CHUNKS", "C++", "GO/C++")
	for _, r := range rows {
		cpp, ratio := cppColumns(r.CppMs, r.Ratio)
		chunks := make([]string, len(r.Chunks))
		for i, c := range r.Chunks {
			chunks[i] = fmt.Sprint(c)
		}
		t.Printf("%6s %7s %-19s %4d %7.2f ms %8.1f %7.2f ms %-12s %5.1f%% %7.2fx %-13s %10s %7s\n",
			Elems(r.Elems), Elems(r.ChunkElems), r.Host, r.Devices, r.Ms, r.GBps, r.BoundMs, r.Slowest, 100*r.Efficiency, r.Speedup, strings.Join(chunks, "/"), cpp, ratio)
	}
	for _, r := range rows {
		if r.Efficiency > 1 {
			t.Printf("note: %s, %s, %d GPU(s) beat its bound by %.1f%%: the %s stage ran faster inside the pipeline than alone (the best of two timings, each issued from the host in one burst); the bound is then not a limit\n",
				Elems(r.Elems), r.Host, r.Devices, 100*(r.Efficiency-1), r.Slowest)
		}
	}
	t.Printf("\nBOUND: each stage alone, every device running it at once over its share (H2D+D2H: both directions at once); EFF = BOUND / TIME; every element of each configuration's last run verified%s\n", label)
	return t.Err
}

// WriteTable writes r as overlap bench small-jobs's table: a row a cell,
// with the C++ twin's figures and Go's over them where it ran. o is what
// [SmallJobs] ran, its defaults filled in (SmallJobsOptions.WithDefaults);
// field, when not nil, names an option field where the table's prose
// does ("direct calls (DirectCalls)"), as a command names its flag.
func (r *SmallJobsResult) WriteTable(w io.Writer, o SmallJobsOptions, field func(name string) string) error {
	if r == nil {
		return errors.New("bench: SmallJobsResult.WriteTable: no result")
	}
	if field == nil {
		field = func(name string) string { return name }
	}
	t := &textWriter{W: w}
	rows := r.Rows
	label, runs := "", fmt.Sprintf("%g s per cell", o.Seconds)
	rounds := 1
	if len(rows) > 0 {
		rounds = rows[0].Rounds
	}
	if o.Sim {
		label = " [simulated: H200 profile; latencies on the simulator's clock]"
	}
	if o.DirectCalls {
		label += "; direct calls (" + field("DirectCalls") + ")"
	}
	if o.Jobs > 0 {
		runs = fmt.Sprintf("%d jobs per goroutine", o.Jobs)
	}
	if rounds > 1 {
		runs += fmt.Sprintf("; each cell the median of %d rounds", rounds)
		if o.Reference != nil {
			runs += ", Go and C++ taking turns"
		}
	}
	t.Printf("overlap bench small-jobs: seed kernel (%d iterations) on %s; each job H2D, kernel, D2H, wait; a pipeline per goroutine, pinned buffers; %s%s\n\n",
		o.Iters, r.Backend, runs, label)
	t.Printf("%-7s %6s %4s %8s %10s %10s %10s %9s", "WAIT", "ELEMS", "GORS", "JOBS", "JOBS/s", "P50", "P99", "CPU/JOB")
	cpp := false
	for _, r := range rows {
		cpp = cpp || r.Cpp != nil
	}
	if cpp {
		t.Printf(" %10s %10s %9s %7s %7s %7s", "C++ JOBS/s", "C++ P99", "C++ CPU", "RATE", "P99", "CPU")
	}
	t.Printf("\n")
	for _, r := range rows {
		cpu := "n/a"
		if r.CPUusPerJob >= 0 {
			cpu = fmt.Sprintf("%.1f µs", r.CPUusPerJob)
		}
		t.Printf("%-7s %6s %4d %8d %10.0f %7.1f µs %7.1f µs %9s", r.Wait, Elems(r.Elems), r.Workers, r.Jobs, r.JobsPerSec, r.P50us, r.P99us, cpu)
		switch c := r.Cpp; {
		case c != nil:
			t.Printf(" %10.0f %7.1f µs %6.1f µs %7s %7s %7s", c.JobsPerSec, c.P99us, c.CPUusPerJob,
				orDash("%.2fx", r.RateRatio), orDash("%.2fx", r.P99Ratio), orDash("%.2fx", r.CPURatio))
		case cpp:
			t.Printf(" %10s %10s %9s %7s %7s %7s", "-", "-", "-", "-", "-", "-")
		}
		t.Printf("\n")
	}
	t.Printf("\nGORS: goroutines, each with its own pipeline on one context; P50/P99: latency of one job; CPU/JOB: the process's CPU time over the jobs")
	if cpp {
		t.Printf("; RATE: Go jobs/s over C++'s (≥ 1 is the target), P99 and CPU: Go's over C++'s")
		if rounds > 1 {
			t.Printf(" (the medians of the rounds' own)")
		}
	}
	t.Printf("; every element of each goroutine's last job verified%s\n", label)
	return t.Err
}

// simulatedStream labels a streaming run's table on the simulator: the
// stages' times, the host's reads and writes among them, are on its
// virtual clock (a reader that stalls for a second takes none of it).
// "rates are not GPU rates" let the reads and writes, in a column named
// MEASURED, pass for the host's (the trial).
const simulatedStream = " [simulated: every time is the simulator's clock, reads and writes too; no GPU or disk rate]"

// WriteTable writes r as overlap stream's table: the job, a row a stage
// with the one that bounds the run marked, the streaming run, and the
// bound measured beside it where there is one.
func (r *StreamResult) WriteTable(w io.Writer) error {
	if r == nil {
		return errors.New("bench: StreamResult.WriteTable: no result")
	}
	t := &textWriter{W: w}
	label := ""
	if r.Simulated {
		label = simulatedStream
	}
	kernel := r.Kernel
	if r.Iters > 0 {
		kernel = fmt.Sprintf("%s (%d iterations)", r.Kernel, r.Iters)
	}
	direct := ""
	if r.Direct {
		direct = ", inputs read with O_DIRECT"
	}
	if r.DirectOutput {
		direct += ", output written with O_DIRECT"
	}
	t.Printf("overlap stream: %s on %s, streaming %s → %s%s\n", kernel, r.Backend, strings.Join(r.Inputs, ","), r.Output, label)
	t.Printf("%d float32 elements (%s in, %s out); chunk %d elements, %d slots, %d compute stream(s)%s\n\n",
		r.Elems, Bytes(r.InBytes), Bytes(r.OutBytes), r.ChunkElems, r.Slots, r.ComputeStreams, direct)
	t.Printf("%-8s %10s %12s  %s\n", "STAGE", "GB/s", "TIME", "MEASURED")
	for _, s := range r.Stages {
		mark := ""
		if s.Stage == r.BoundStage {
			mark = "  ← bounds the run"
		}
		t.Printf("%-8s %10.1f %9.2f ms  %s%s\n", s.Stage, s.GBps, s.Ms, s.How, mark)
	}
	rss := "peak RSS (VmHWM) not available on this system"
	if r.PeakRSS > 0 {
		rss = "peak RSS (VmHWM) " + Bytes(r.PeakRSS)
	}
	rss += "; pinned slots " + Bytes(r.PinnedBytes)
	t.Printf("\nstreaming run (after an untimed warm-up over 2·slots chunks of zeros): %.2f ms, %.1f GB/s of input; %s\n",
		r.Ms, gbps(r.InBytes, time.Duration(r.Ms*float64(time.Millisecond))), rss)
	if b := r.Bound; b != nil {
		write := fmt.Sprintf("write the output %.2f ms", b.WriteMs)
		if !b.WriteMeasured {
			write = "the write not measured: the output is not a regular file"
		}
		t.Printf("bound, measured in this run (slowest alone): %.2f ms, %s (read the inputs into pinned memory %.2f ms, in-memory pinned pipeline %.2f ms, %s)\n",
			b.BoundMs, b.Slowest, b.ReadMs, b.PipelineMs, write)
		t.Printf("efficiency = bound / streaming time: %.1f%%\n", 100*b.Efficiency)
		if b.Efficiency > 1 {
			t.Printf("above 100%%: the %s stage alone (the faster of two passes before the run) took longer than the whole run; the host's rate for it varies from pass to pass, so this bound is not a floor\n", b.Slowest)
		}
	}
	t.Printf("%s%s\n", r.Verified, label)
	return t.Err
}

// TuneTable is what overlap tune's table says of the run beside a
// [TuneResult]: the workload's and the backend's names, the job's
// elements, the chosen candidate's host mode and runs (TuneOptions.Host
// and Repeat), and whether it was simulated.
type TuneTable struct {
	Workload, Backend string
	Elems             int
	Host              pipeline.HostMode
	Repeat            int
	Simulated         bool
}

// WriteTable writes r as overlap tune's table: the fitted model, the
// eight fastest candidates predicted, the chosen one first, and its
// measurement beside its prediction.
func (r *TuneResult) WriteTable(w io.Writer, o TuneTable) error {
	if r == nil || len(r.Candidates) == 0 {
		return errors.New("bench: TuneResult.WriteTable: no candidates")
	}
	t := &textWriter{W: w}
	label := simLabel(o.Simulated)
	t.Printf("overlap tune: %s on %s, %d elements, host memory %s%s\n", o.Workload, o.Backend, o.Elems, o.Host, label)
	t.Printf("per-chunk stage costs (fixed + per element), fitted to probes: %s\n\n", ModelText(r.Model))
	// The schedule tells apart candidates of the same chunk, slots and
	// streams (the trial saw 131072 4 4 twice).
	t.Printf("%10s %6s %8s %10s %11s\n", "CHUNK", "SLOTS", "STREAMS", "SCHEDULE", "PREDICTED")
	for i, c := range r.Candidates[:min(8, len(r.Candidates))] {
		mark := ""
		if i == 0 {
			mark = "  <- chosen"
		}
		t.Printf("%10d %6d %8d %10s %8.2f ms%s\n", c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, ms(c.Predicted), mark)
	}
	best := r.Candidates[0]
	checked := "not verified: no CPU reference for a user's kernel"
	if r.Verified {
		checked = "every element of the first run verified"
	}
	t.Printf("\nmeasured %.2f ms (best of %d; %s), predicted %.2f ms (%s)%s\n",
		ms(r.Measured), o.Repeat, checked, ms(best.Predicted), predictionText(r.Measured, best.Predicted), label)
	return t.Err
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

// ModelText writes a fitted cost model on one line: each stage's fixed
// cost and cost per element, and the least time a chunk takes.
func ModelText(m pipeline.Model) string {
	r := func(d time.Duration) time.Duration { return d.Round(time.Microsecond / 10) }
	floor := fmt.Sprintf("at least %v a chunk", r(m.PerChunk))
	if m.PerChunk <= 0 {
		// A job too small for more than one probe chunk size fits no
		// floor ("at least 0s a chunk" read as a measurement).
		floor = "no per-chunk floor fitted (the job is too small to probe one)"
	}
	s := fmt.Sprintf("H2D %v+%.3f ns/elem, compute %v+%.3f ns/elem, D2H %v+%.3f ns/elem, %s",
		r(m.H2D.Fixed), m.H2D.PerElem, r(m.Compute.Fixed), m.Compute.PerElem, r(m.D2H.Fixed), m.D2H.PerElem, floor)
	if m.PerChunkInStream > 0 {
		s += fmt.Sprintf(" (in-stream %v)", r(m.PerChunkInStream))
	}
	return s
}

// String says what c chose and why, on one line: its configuration and
// predicted time (and measured, where it ran), and either the cache that
// held it or the model that chose it.
func (c AutoChunk) String() string {
	times := fmt.Sprintf("predicted %.2f ms", ms(c.Predicted))
	if c.Measured > 0 {
		times = fmt.Sprintf("predicted %.2f ms, measured %.2f ms", ms(c.Predicted), ms(c.Measured))
	}
	if c.Cached {
		return fmt.Sprintf("chunk %d, %d slots, %d compute stream(s), %s, cached in %s (%s)",
			c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, c.CachePath, times)
	}
	return fmt.Sprintf("chunk %d, %d slots, %d compute stream(s), %s: %s; per-chunk costs %s",
		c.ChunkElems, c.Slots, c.ComputeStreams, c.Schedule, times, ModelText(c.Model))
}

// WriteDevicesTable writes devs as overlap devices's table, aligned
// columns a GPU a row: its name, compute capability, memory, SMs, copy
// engines, whether it runs kernels concurrently, its PCI bus, NUMA node
// and local CPUs ("-" where the host does not say).
func WriteDevicesTable(w io.Writer, devs []DeviceInfo) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	t := &textWriter{W: tw}
	t.Printf("GPU\tNAME\tCC\tMEMORY\tSMs\tCOPY ENGINES\tCONCURRENT KERNELS\tPCI BUS\tNUMA\tLOCAL CPUS\n")
	for _, d := range devs {
		numa, cpus := localityColumns(d)
		t.Printf("%d\t%s\t%d.%d\t%.1f GiB\t%d\t%d\t%v\t%s\t%s\t%s\n", d.Ordinal, d.Name, d.Major, d.Minor,
			float64(d.Memory)/(1<<30), d.Multiprocessors, d.CopyEngines, d.ConcurrentKernels, d.PCIBusID, numa, cpus)
	}
	if t.Err != nil {
		return t.Err
	}
	return tw.Flush()
}

// localityColumns gives a GPU's NUMA node and the CPUs local to it, or "-"
// where the host does not say (no sysfs entry, a system other than Linux,
// a single-node host reporting -1).
func localityColumns(info DeviceInfo) (numa, cpus string) {
	if !info.Located {
		return "-", "-"
	}
	numa = "-"
	if info.NUMANode >= 0 {
		numa = fmt.Sprint(info.NUMANode)
	}
	return numa, hostcpu.FormatCPUList(info.LocalCPUs)
}

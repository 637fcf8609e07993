package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// result is what overlap run measured, as printed and as JSON.
type result struct {
	Simulated bool `json:"simulated"`
	// NoGPU says why a run that asked for no machine in particular ran
	// on the simulator: no driver was found.
	NoGPU          string     `json:"no_gpu,omitempty"`
	Profile        string     `json:"profile,omitempty"`
	Note           string     `json:"note,omitempty"`
	Backend        string     `json:"backend"`
	Kernel         string     `json:"kernel"`
	Iters          int        `json:"iters,omitempty"`
	Elems          int        `json:"elems"`
	Bytes          int64      `json:"bytes"`
	ChunkElems     int        `json:"chunk_elems"`
	ChunkChoice    string     `json:"chunk_choice,omitempty"`
	Slots          int        `json:"slots"`
	ComputeStreams int        `json:"compute_streams"`
	HostMode       string     `json:"host_mode"`
	Rows           []modeRow  `json:"modes"`
	Stages         stagesJSON `json:"stage_bound"`
	// Devices are each GPU's part of the best run, for a group of several.
	Devices  []groupDeviceRow `json:"devices,omitempty"`
	Verified string           `json:"verified"`
	// WarmUpMs is the untimed GPU work before each timed part (0 on the
	// simulator and with --warm 0).
	WarmUpMs float64 `json:"warm_up_ms,omitempty"`
}

// groupDeviceRow is one device's part of a group's run (bench.RunDevice).
type groupDeviceRow = bench.RunDevice

// modeRow is one way of running the job (bench.RunMode).
type modeRow = bench.RunMode

// stagesJSON are the stages alone and their bound (bench.Stages).
type stagesJSON = bench.Stages

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// runRun runs overlap run once its flags are checked.
func runRun(o *runOptions, stdout, stderr io.Writer) int {
	ctx, stop := signalContext()
	defer stop()
	res, err := execute(ctx, o, stdout, stderr)
	if err != nil {
		return reportError("run", stoppedBy(ctx, err), stderr)
	}
	switch {
	case o.jsonOut:
		writeJSON(stdout, res)
	case o.quiet && o.noGPU != "":
		fmt.Fprintln(stderr, "overlap run: "+o.noGPU) // that the times are predicted, not measured
	case !o.quiet:
		printTable(stdout, res)
	}
	return exitOK
}

// intSize is strconv.IntSize, a variable for the test of 32-bit builds.
var intSize = strconv.IntSize

// errNo32Bit refuses the GPU on a 32-bit build: NVIDIA ships no 32-bit
// driver API. Such a build compiles and runs the simulator.
var errNo32Bit = errors.New("this is a 32-bit build, and NVIDIA's driver API is 64-bit only: build for amd64 or arm64, or use --sim")

// loadDriver loads the driver; a variable for the tests.
var loadDriver = driver.Load

// noGPU says why this process can use no GPU at all: no driver library
// was found, the operating system has none, or the build is 32-bit. It
// is empty where a driver loads, and where one was found but failed (too
// old, say): that is an error to report, not a reason to simulate.
func noGPU() string {
	if intSize < 64 {
		return "this is a 32-bit build, and NVIDIA's driver API is 64-bit only"
	}
	err := loadDriver()
	if errors.Is(err, loader.ErrNoDriver) || errors.Is(err, loader.ErrUnsupported) {
		return strings.TrimPrefix(noDriverLine(err), "overlap: ")
	}
	return ""
}

// maxSimDevices bounds --sim --devices: each simulated device is a
// simulator of its own, with its goroutines and its memory, on one CPU.
const maxSimDevices = 16

// env is the machine a run uses: GPU contexts or simulated devices. Most
// commands use one device, backend; overlap run uses every one of
// backends, as a group.
type env struct {
	backend  pipeline.Backend
	backends []pipeline.Backend
	ctx      *driver.Context // the first GPU's
	sim      *sim.Sim        // the first simulated device
	// ordinals are the GPU indexes of backends (0, 1, … on the simulator).
	ordinals []int
	// mods loads the embedded kernels on each context; nil on the simulator.
	mods *kernels.Modules
	// userFn and userIns are a user's --ptx kernel, loaded on every
	// context, and its input count.
	userFn  func(*driver.Context) (*driver.Function, error)
	userIns int
	closers []func() error
}

func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

// simLinkGBps bounds the copies of several simulated devices together:
// the host link measured on a two-H200 host (bench/RESULTS.md; each GPU 55
// GB/s one way, but both GPUs copying both ways at once 148 GB/s in all).
const simLinkGBps = 148

// openSimEnv opens the simulated machine of --sim: one simulated device
// for each of --devices (at least one), on --profile or the built-in
// profile; timingOnly devices move no bytes and compute nothing.
func openSimEnv(o *runOptions, timingOnly bool) (*env, error) {
	prof := sim.BuiltinProfile()
	if o.profile != "" {
		var err error
		if prof, err = sim.ReadProfile(o.profile); err != nil {
			return nil, usageError{fmt.Errorf("--profile: %w", err)}
		}
	}
	k := max(1, len(o.devices))
	if k > maxSimDevices {
		return nil, usageError{fmt.Errorf("--devices: %d simulated devices; at most %d", k, maxSimDevices)}
	}
	opts := sim.HostOptions{Seed: 1, TimingOnly: timingOnly}
	if k > 1 {
		opts.LinkGBps = simLinkGBps
	}
	host := sim.NewHost(opts)
	e := &env{}
	for d := 0; d < k; d++ {
		sdev := host.NewDevice(prof)
		if d == 0 {
			e.sim = sdev
		}
		e.backends = append(e.backends, sdev)
		e.ordinals = append(e.ordinals, d)
	}
	e.backend = e.backends[0]
	return e, nil
}

func openEnv(o *runOptions) (*env, error) {
	if o.sim {
		return openSimEnv(o, false)
	}
	e := &env{}
	if intSize < 64 {
		return nil, errNo32Bit
	}
	if err := loadDriver(); err != nil {
		return nil, err
	}
	n, err := driver.DeviceCount()
	if err != nil {
		return nil, err
	}
	switch {
	case o.allDevices:
		for d := 0; d < n; d++ {
			e.ordinals = append(e.ordinals, d)
		}
	case o.devices != nil:
		for _, d := range o.devices {
			if d >= n {
				return nil, usageError{fmt.Errorf("--devices: GPU %d is out of range (%d GPU(s) present)", d, n)}
			}
		}
		e.ordinals = o.devices
	default:
		if o.device >= n {
			return nil, usageError{fmt.Errorf("--device %d: out of range (%d GPU(s) present)", o.device, n)}
		}
		e.ordinals = []int{o.device}
	}
	if len(e.ordinals) == 0 {
		return nil, errors.New("no GPU is present")
	}
	var builtin *kernels.Kernel
	if o.cuFile != "" {
		// Before any context: an absent NVRTC names what was looked for.
		if err := nvrtc.Load(); err != nil {
			return nil, fmt.Errorf("--cu %s: %w", o.cuFile, err)
		}
	}
	if !o.userKernel() {
		if builtin, err = kernels.ByName(o.kernel); err != nil {
			return nil, err
		}
		e.mods = new(kernels.Modules)
	}
	userFns := map[*driver.Context]*driver.Function{}
	fail := func(err error) (*env, error) {
		if e.mods != nil {
			e.mods.Close() // before the contexts close
		}
		e.close()
		return nil, err
	}
	for _, d := range e.ordinals {
		dev, err := driver.DeviceAt(d)
		if err != nil {
			return fail(err)
		}
		ctx, err := driver.NewContextWith(dev, driver.ContextOptions{Wait: o.wait})
		if err != nil {
			return fail(err)
		}
		e.closers = append(e.closers, ctx.Close)
		if e.ctx == nil {
			e.ctx = ctx
		}
		e.backends = append(e.backends, pipeline.GPU(ctx))
		if o.userKernel() {
			prog, err := loadUserKernel(ctx, o)
			if err == nil {
				e.closers = append(e.closers, prog.Close)
				e.userIns, err = elementwiseShape(prog.Entry)
			}
			if err != nil {
				return fail(err)
			}
			userFns[ctx] = prog.Function
			continue
		}
		// Load the kernel now: a JIT error is reported before any run.
		if _, err := e.mods.Function(ctx, builtin); err != nil {
			return fail(err)
		}
	}
	if e.mods != nil {
		e.closers = append(e.closers, e.mods.Close) // closed first, before the contexts
	}
	e.backend = e.backends[0]
	if o.userKernel() {
		e.userFn = func(ctx *driver.Context) (*driver.Function, error) {
			if fn, ok := userFns[ctx]; ok {
				return fn, nil
			}
			return nil, fmt.Errorf("the --%s kernel was not loaded on this context", o.userFlag())
		}
	}
	return e, nil
}

// loadUserKernel loads the user's --ptx kernel on ctx, or compiles the
// --cu file with NVRTC for ctx's GPU and loads the PTX it gives.
func loadUserKernel(ctx *driver.Context, o *runOptions) (*ptx.Program, error) {
	if o.cuFile == "" {
		return ptx.LoadFile(ctx, o.ptxFile, o.entry, driver.ModuleOptions{})
	}
	res, err := nvrtc.CompileKernelFile(o.cuFile, o.entry, nvrtc.Options{Device: ctx.Device()})
	if err != nil {
		return nil, err
	}
	return ptx.Load(ctx, o.cuFile, res.PTX, o.entry, driver.ModuleOptions{})
}

// elementwiseShape checks that a user's kernel is (out, in..., n) with
// 64-bit pointers and a 32-bit count, and returns its number of inputs.
func elementwiseShape(e ptx.Entry) (int, error) {
	ps := e.Params
	if len(ps) < 2 || ps[len(ps)-1].Size != 4 {
		return 0, fmt.Errorf("kernel %s must take (float *out, const float *in..., unsigned n); it has %d parameters", e.Name, len(ps))
	}
	for _, p := range ps[:len(ps)-1] {
		if p.Size != 8 {
			return 0, fmt.Errorf("kernel %s: parameter %s is %d bytes; every parameter but the last must be a pointer", e.Name, p.Name, p.Size)
		}
	}
	return len(ps) - 2, nil
}

func (e *env) allocPinned(n int) (pipeline.PinnedMem, error) { return e.backend.AllocPinned(n) }

// deviceNames names the devices, "NVIDIA H200 ×2" for two alike.
func (e *env) deviceNames() string { return pipeline.Names(e.backends) }

// progress prints status lines on a terminal and nothing when piped.
type progress struct {
	w  io.Writer
	on bool
}

func newProgress(stderr io.Writer, quiet bool) *progress {
	f, ok := stderr.(*os.File)
	on := false
	if ok && !quiet {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			on = true
		}
	}
	return &progress{w: stderr, on: on}
}

func (p *progress) say(format string, args ...any) {
	if p.on {
		fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	}
}

func (p *progress) done() {
	if p.on {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// defaultWarm is how long `overlap run` keeps the GPU busy before each
// timed part unless --warm says otherwise. On the H200 host (2026-11-30,
// bench/RESULTS.md) the README's 4M-element job took 0.72-0.82 ms with no
// warm-up, 0.63-0.76 ms after 50 ms, 0.66-0.70 ms after 200 ms and
// 0.63-0.66 ms after 500 ms, against 0.60-0.62 ms back to back: an idle
// GPU and host take a few hundred milliseconds of work to reach their
// clocks. A run warms up --repeat + 2 times (five by default: 2.5 s);
// --warm 0 skips them.
const defaultWarm = 500 * time.Millisecond

func execute(ctx context.Context, o *runOptions, stdout, stderr io.Writer) (*result, error) {
	e, err := openEnv(o)
	if err != nil {
		return nil, err
	}
	defer e.close()
	w, err := newWorkload(o, e)
	if err != nil {
		return nil, err
	}
	defer w.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()

	res := &result{Simulated: o.sim, NoGPU: o.noGPU, Backend: e.backend.Name(), Kernel: w.name, Elems: o.elems, HostMode: o.host.String()}
	if e.sim != nil {
		res.Profile = profileLabel(o, e.sim.Profile())
		if o.simSmaller {
			res.Note = simSmallerNote(o.elems)
		}
	}
	if !o.userKernel() && hasScalar(o.kernel, "iters") {
		res.Iters = o.iters
	}
	cfg := w.cfg
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host, cfg.Schedule = o.chunk, o.slots, o.computeStreams, o.host, o.schedule
	cfg.Timing = o.trace != "" || o.svg != ""
	if o.chunkAuto {
		prog.say("tuning the chunk size…")
		choice, why, err := tuneChunk(ctx, e, w, o)
		if err != nil {
			return nil, err
		}
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Schedule = choice.ChunkElems, choice.Slots, choice.ComputeStreams, choice.Schedule
		res.ChunkChoice = why
		o.chunk, o.chunkAuto = choice.ChunkElems, false
		if err := checkTimed(o); err != nil { // before the long runs
			return nil, usageError{err}
		}
	}
	if len(e.backends) > 1 {
		res.Backend = fmt.Sprintf("%d devices (%s)", len(e.backends), e.deviceNames())
	}
	ropts := bench.RunOptions{Config: cfg, Job: w.job, Output: w.outputs[0], Verify: w.verify, Repeat: o.repeat,
		NoBaseline: o.noBaseline, Ordinals: e.ordinals, Progress: prog.line}
	// The simulator's profile describes a warm device: it skips the
	// warm-ups.
	if !o.sim {
		res.WarmUpMs = ms(o.warm)
		ropts.Warm = o.warm
	}
	if o.sim && !o.noBaseline {
		// The simulated GPU's whole-array buffers are host memory too.
		if err := checkHostMemory(bench.JobBytes(cfg, o.elems), "the synchronous baseline's simulated device arrays (--no-baseline skips them)"); err != nil {
			return nil, err
		}
	}
	rr, err := bench.Run(ctx, e.backends, ropts)
	if err != nil {
		return nil, benchError(err)
	}
	if err := writeTimeline(o, rr.Last, res); err != nil {
		return nil, err
	}
	res.Bytes, res.Rows, res.Stages, res.Devices = rr.Bytes, rr.Rows, rr.Stages, rr.Devices
	res.ChunkElems, res.Slots, res.ComputeStreams, res.HostMode = rr.ChunkElems, rr.Slots, rr.ComputeStreams, rr.HostMode
	switch {
	case w.verify == nil:
		res.Verified = "not verified: no CPU reference for a user's kernel"
	default:
		res.Verified = fmt.Sprintf("every element of all %d runs matched the CPU reference (tolerance %s)", rr.Verified, w.tolerance)
	}
	return res, nil
}

func gbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds() / 1e9
}

// profileLabel says which profile a simulation predicts from.
func profileLabel(o *runOptions, p *sim.Profile) string {
	if o.profile != "" {
		return fmt.Sprintf("%s (%s)", p.Device, o.profile)
	}
	return p.Device + " (built-in profile)"
}

func printTable(w io.Writer, r *result) {
	label := ""
	if r.Simulated {
		label = fmt.Sprintf(" [simulated on the CPU: times predicted for %s]", r.Profile)
	}
	if r.NoGPU != "" {
		fmt.Fprintln(w, "overlap run: "+r.NoGPU)
	}
	if r.Note != "" {
		fmt.Fprintln(w, r.Note)
	}
	kernel := r.Kernel
	if r.Iters > 0 {
		kernel = fmt.Sprintf("%s (%d iterations)", r.Kernel, r.Iters)
	}
	fmt.Fprintf(w, "overlap run: %s on %s, %d float32 elements (%s moved)%s\n", kernel, r.Backend, r.Elems, humanBytes(r.Bytes), label)
	fmt.Fprintf(w, "chunk %d elements, %d slots, %d compute stream(s), host memory %s\n", r.ChunkElems, r.Slots, r.ComputeStreams, r.HostMode)
	if r.ChunkChoice != "" {
		fmt.Fprintf(w, "chunk auto: %s\n", r.ChunkChoice)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-24s %10s %8s %8s %11s\n", "MODE", "TIME", "GB/s", "SPEEDUP", "EFFICIENCY")
	for _, row := range r.Rows {
		sp, eff := "-", "-"
		if row.Speedup > 0 {
			sp = fmt.Sprintf("%.2fx", row.Speedup)
		}
		if row.Efficiency > 0 {
			eff = fmt.Sprintf("%.1f%%", 100*row.Efficiency)
		}
		fmt.Fprintf(w, "%-24s %7.2f ms %8.1f %8s %11s\n", row.Mode, row.Ms, row.GBps, sp, eff)
	}
	fmt.Fprintln(w)
	stages := fmt.Sprintf("H2D %.2f ms, compute %.2f ms, D2H %.2f ms", r.Stages.H2DMs, r.Stages.ComputeMs, r.Stages.D2HMs)
	if r.Stages.StageInMs > 0 || r.Stages.StageOutMs > 0 {
		stages = fmt.Sprintf("stage-in %.2f ms, %s, stage-out %.2f ms", r.Stages.StageInMs, stages, r.Stages.StageOutMs)
	}
	if r.Stages.CopiesMs > 0 {
		stages += fmt.Sprintf(", H2D+D2H at once %.2f ms", r.Stages.CopiesMs)
	}
	if r.Stages.StagingMs > 0 {
		stages += fmt.Sprintf(", stage-in+out at once %.2f ms", r.Stages.StagingMs)
	}
	if len(r.Devices) > 0 {
		fmt.Fprintf(w, "%-8s %-28s %7s %10s %7s %12s\n", "DEVICE", "NAME", "CHUNKS", "BUSY", "SHARE", "BOUND SHARE")
		for _, d := range r.Devices {
			fmt.Fprintf(w, "%-8d %-28s %7d %7.2f ms %6.1f%% %11.1f%%\n", d.Device, d.Name, d.Chunks, d.BusyMs, 100*d.Share, 100*d.BoundShare)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "stage bound (slowest stage alone, %s): %.2f ms (%s)\n", r.Stages.Slowest, r.Stages.BoundMs, stages)
	fmt.Fprintf(w, "efficiency = stage bound / pipeline time; %s%s\n", r.Verified, label)
	if r.WarmUpMs > 0 {
		fmt.Fprintf(w, "each timed part ran right after %.0f ms of untimed work on the GPU, which an idle GPU needs to raise its clocks\n", r.WarmUpMs)
	}
	for _, row := range r.Rows {
		if row.Efficiency > 1 {
			fmt.Fprintf(w, "note: %s beat its stage bound by %.1f%%: the %s stage ran faster inside the pipeline than alone, where it is timed from the host (issue and synchronisation included); the bound is then not a limit\n",
				row.Mode, 100*(row.Efficiency-1), r.Stages.Slowest)
		}
	}
}

func humanBytes(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

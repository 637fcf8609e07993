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
type result = bench.RunSummary

// runRun runs overlap run once its flags are checked.
func runRun(o *runOptions, stdout, stderr io.Writer) int {
	ctx, stop := signalContext("run", stderr)
	defer stop()
	res, err := execute(ctx, o, stdout, stderr)
	stop()
	if err := stoppedBy(ctx, err); err != nil {
		return reportError("run", err, stderr)
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

// maxSimDevices bounds --sim --devices (bench.MaxSimDevices).
const maxSimDevices = bench.MaxSimDevices

// env is the machine a run uses (a bench.Machine), by the names the
// commands use. Most commands use one device, backend; overlap run uses
// every one of backends, as a group. closers close, last first, before the
// machine does.
type env struct {
	m        *bench.Machine
	backend  pipeline.Backend
	backends []pipeline.Backend
	ctx      *driver.Context  // the first GPU's
	sim      *sim.Sim         // the first simulated device
	ordinals []int            // the GPU indexes of backends (0, 1, … on the simulator)
	mods     *kernels.Modules // nil on the simulator and for a user's kernel
	userIns  int              // a user's kernel's inputs
	closers  []func() error
}

func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
	e.m.Close()
}

// deviceNames names the devices, "NVIDIA H200 ×2" for two alike.
func (e *env) deviceNames() string { return e.m.Names() }

// openSimEnv opens the simulated machine of --sim: one simulated device
// for each of --devices (at least one), on --profile or the built-in
// profile; timingOnly devices move no bytes and compute nothing.
func openSimEnv(o *runOptions, timingOnly bool) (*env, error) {
	mo := bench.MachineOptions{Sim: true, SimDevices: len(o.devices), TimingOnly: timingOnly, Kernel: o.kernel}
	if o.profile != "" {
		var err error
		if mo.Profile, err = sim.ReadProfile(o.profile); err != nil {
			return nil, usageError{fmt.Errorf("--profile: %w", err)}
		}
	}
	if k := len(o.devices); k > maxSimDevices {
		return nil, usageError{fmt.Errorf("--devices: %d simulated devices; at most %d", k, maxSimDevices)}
	}
	return newEnv(mo, o)
}

// openEnv opens the machine that o's flags choose, with o's kernel loaded
// on each GPU.
func openEnv(o *runOptions) (*env, error) {
	if o.sim {
		return openSimEnv(o, false)
	}
	if intSize < 64 {
		return nil, errNo32Bit
	}
	if o.cuFile != "" {
		// Before any context: an absent NVRTC names what was looked for.
		if err := nvrtc.Load(); err != nil {
			return nil, fmt.Errorf("--cu %s: %w", o.cuFile, err)
		}
	}
	mo := bench.MachineOptions{AllDevices: o.allDevices, Ordinals: o.devices, Wait: o.wait, Kernel: o.kernel, PTXFile: o.ptxFile, CUFile: o.cuFile, Entry: o.entry}
	if !o.allDevices && o.devices == nil {
		mo.Ordinals = []int{o.device}
	}
	return newEnv(mo, o)
}

// newEnv opens the machine, and says which flag a GPU out of range is.
func newEnv(mo bench.MachineOptions, o *runOptions) (*env, error) {
	m, err := bench.OpenMachine(mo)
	var nd *bench.NoDeviceError
	switch {
	case errors.As(err, &nd) && o.devices != nil:
		return nil, usageError{fmt.Errorf("--devices: GPU %d is out of range (%d GPU(s) present)", nd.Ordinal, nd.Count)}
	case errors.As(err, &nd):
		return nil, usageError{fmt.Errorf("--device %d: out of range (%d GPU(s) present)", nd.Ordinal, nd.Count)}
	case err != nil:
		return nil, benchError(err)
	}
	return &env{m: m, backend: m.Backends[0], backends: m.Backends, ctx: m.Context, sim: m.Sim, ordinals: m.Ordinals, mods: m.Modules, userIns: m.UserInputs}, nil
}

// elementwiseShape checks a user's kernel's parameters and returns its
// number of inputs (bench.ElementwiseInputs).
func elementwiseShape(e ptx.Entry) (int, error) {
	n, err := bench.ElementwiseInputs(e)
	return n, benchError(err)
}

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
// clocks. A run warms up --repeat + 3 times on a GPU (six by default: 3
// s: the baseline, the checked first run, each timed run and the stages),
// and once more before --chunk auto's probes; --warm 0 skips them.
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
	defer w.Close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()

	res := &result{Simulated: o.sim, NoGPU: o.noGPU, Backend: e.backend.Name(), Kernel: w.Name, Elems: o.elems, HostMode: o.host.String()}
	if e.sim != nil {
		res.Profile = profileLabel(o, e.sim.Profile())
		if o.simSmaller {
			res.Note = simSmallerNote(o.elems)
		}
	}
	if !o.userKernel() && hasScalar(o.kernel, "iters") {
		res.Iters = o.iters
	}
	cfg := w.Config
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host, cfg.Schedule = o.chunk, o.slots, o.computeStreams, o.host, o.schedule
	cfg.Timing = o.trace != "" || o.svg != ""
	if o.chunkAuto {
		prog.say("tuning the chunk size…")
		choice, why, err := tuneChunk(ctx, e, w, o, prog.line)
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
	ropts := bench.RunOptions{Config: cfg, Job: w.Job, Output: w.Outputs[0], Verify: w.Verify, Repeat: o.repeat,
		NoBaseline: o.noBaseline, Ordinals: e.ordinals, Progress: prog.line}
	// The simulator's profile describes a warm device: it skips the
	// warm-ups.
	if !o.sim {
		res.WarmUpMs = float64(o.warm) / float64(time.Millisecond)
		ropts.Warm = o.warm
		// The first run after a warm-up pays for the copies out that the
		// warm-up does not issue: a run of the job comes between them
		// (bench.RunOptions.Rehearse).
		ropts.Rehearse, res.Rehearsed = true, true
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
	case w.Verify == nil:
		res.Verified = "not verified: no CPU reference for a user's kernel"
	default:
		res.Verified = fmt.Sprintf("every element of all %d runs matched the CPU reference (tolerance %s)", rr.Verified, w.Tolerance)
	}
	return res, nil
}

// checkSimBaseline refuses, as its flags are checked, a simulated run
// whose synchronous baseline needs more host memory than there is: the
// simulated GPU's whole-array buffers are host memory too, as much again
// as the job's own arrays, and finding that out only after building
// those took as long as the arrays are large. The job's own arrays are
// checked first, so that the hint to skip the baseline comes only where
// skipping it would do.
func checkSimBaseline(o *runOptions) error {
	if !o.sim || o.userKernel() { // a user's kernel cannot run on the simulator
		return nil
	}
	k, err := kernels.ByName(o.kernel)
	if err != nil {
		return nil // checkJobOptions has refused it
	}
	arrays := int64(o.elems) * 4 * int64(k.Inputs+k.Outputs)
	what := fmt.Sprintf("--elems %d: the job's %d input and output arrays", o.elems, k.Inputs+k.Outputs)
	if err := checkHostMemory(arrays, what); err != nil || o.noBaseline {
		return err
	}
	return checkHostMemory(2*arrays, what+" and as many simulated device arrays for the synchronous baseline (--no-baseline skips those)")
}

// profileLabel says which profile a simulation predicts from.
func profileLabel(o *runOptions, p *sim.Profile) string {
	if o.profile != "" {
		return fmt.Sprintf("%s (%s)", p.Device, o.profile)
	}
	return p.Device + " (built-in profile)"
}

// printTable prints overlap run's notes, then r's table.
func printTable(w io.Writer, r *result) {
	if r.NoGPU != "" {
		fmt.Fprintln(w, "overlap run: "+r.NoGPU)
	}
	if r.Note != "" {
		fmt.Fprintln(w, r.Note)
	}
	r.WriteTable(w)
}

// humanBytes is bench.Bytes: 1.5 GiB, 12.0 MiB, 12 B.
func humanBytes(b int64) string { return bench.Bytes(b) }

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// result is what overlap run measured, as printed and as JSON.
type result struct {
	Simulated      bool       `json:"simulated"`
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
	Verified       string     `json:"verified"`
}

type modeRow struct {
	Mode       string  `json:"mode"`
	Ms         float64 `json:"ms"`
	GBps       float64 `json:"gb_per_s"`
	Speedup    float64 `json:"speedup"`
	Efficiency float64 `json:"efficiency,omitempty"`
}

type stagesJSON struct {
	StageInMs  float64 `json:"stage_in_ms,omitempty"`
	H2DMs      float64 `json:"h2d_ms"`
	ComputeMs  float64 `json:"compute_ms"`
	D2HMs      float64 `json:"d2h_ms"`
	StageOutMs float64 `json:"stage_out_ms,omitempty"`
	BoundMs    float64 `json:"bound_ms"`
	Slowest    string  `json:"slowest"`
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func cmdRun(args []string, stdout, stderr io.Writer) int {
	if isStreamRun(args) { // overlap run --in FILE --out FILE: stream.go
		return cmdRunStream(args, stdout, stderr)
	}
	o, err := parseRunFlags(args, stdout)
	if code, done := flagFailure("run", err, stderr); done {
		return code
	}
	if o.ptxFile != "" {
		if st, err := os.Stat(o.ptxFile); err != nil {
			fmt.Fprintf(stderr, "overlap run: --ptx %s: no such file\n", o.ptxFile)
			return exitUsage
		} else if st.IsDir() {
			fmt.Fprintf(stderr, "overlap run: --ptx %s: is a directory\n", o.ptxFile)
			return exitUsage
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := execute(ctx, o, stdout, stderr)
	if err != nil {
		return reportError("run", err, stderr)
	}
	if o.jsonOut {
		writeJSON(stdout, res)
	} else if !o.quiet {
		printTable(stdout, res)
	}
	return exitOK
}

// intSize is strconv.IntSize, a variable for the test of 32-bit builds.
var intSize = strconv.IntSize

// errNo32Bit refuses the GPU on a 32-bit build: NVIDIA ships no 32-bit
// driver API. Such a build compiles and runs the simulator.
var errNo32Bit = errors.New("this is a 32-bit build, and NVIDIA's driver API is 64-bit only: build for amd64 or arm64, or use --sim")

// env is the machine a run uses: a GPU context or the simulator.
type env struct {
	backend pipeline.Backend
	ctx     *driver.Context
	sim     *pipeline.Sim
	// mods loads the embedded kernels on the context; nil on the simulator.
	mods *kernels.Modules
	// userFn and userIns are a user's --ptx kernel and its input count.
	userFn  func(*driver.Context) (*driver.Function, error)
	userIns int
	closers []func() error
}

func (e *env) close() {
	for i := len(e.closers) - 1; i >= 0; i-- {
		e.closers[i]()
	}
}

func openEnv(o *runOptions) (*env, error) {
	e := &env{}
	if o.sim {
		prof := pipeline.BuiltinProfile()
		if o.profile != "" {
			var err error
			if prof, err = pipeline.ReadProfile(o.profile); err != nil {
				return nil, usageError{fmt.Errorf("--profile: %w", err)}
			}
		}
		e.sim = pipeline.NewSimHost(pipeline.SimHostOptions{Seed: 1}).NewDevice(prof)
		e.backend = e.sim
		return e, nil
	}
	if intSize < 64 {
		return nil, errNo32Bit
	}
	if err := driver.Load(); err != nil {
		return nil, err
	}
	n, err := driver.DeviceCount()
	if err != nil {
		return nil, err
	}
	if o.device >= n {
		return nil, usageError{fmt.Errorf("--device %d: out of range (%d GPU(s) present)", o.device, n)}
	}
	dev, err := driver.DeviceAt(o.device)
	if err != nil {
		return nil, err
	}
	if e.ctx, err = driver.NewContext(dev); err != nil {
		return nil, err
	}
	e.closers = append(e.closers, e.ctx.Close)
	e.backend = pipeline.GPU(e.ctx)
	if o.ptxFile != "" {
		prog, err := ptx.LoadFile(e.ctx, o.ptxFile, o.entry, driver.ModuleOptions{})
		if err == nil {
			e.closers = append(e.closers, prog.Close)
			e.userIns, err = elementwiseShape(prog.Entry)
		}
		if err != nil {
			e.close()
			return nil, err
		}
		e.userFn = pipeline.FunctionOn(e.ctx, prog.Function)
		return e, nil
	}
	e.mods = new(kernels.Modules)
	e.closers = append(e.closers, e.mods.Close)
	// Load the kernel now: a JIT error is reported before any run.
	k, err := kernels.ByName(o.kernel)
	if err == nil {
		_, err = e.mods.Function(e.ctx, k)
	}
	if err != nil {
		e.close()
		return nil, err
	}
	return e, nil
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

	res := &result{Simulated: o.sim, Backend: e.backend.Name(), Kernel: w.name, Elems: o.elems, HostMode: o.host.String()}
	if e.sim != nil {
		res.Profile = profileLabel(o, e.sim.Profile())
		if o.simSmaller {
			res.Note = fmt.Sprintf("simulated: %s elements, not the GPU default of 128M, because the CPU computes and verifies every element (--elems changes it)", humanElems(o.elems))
		}
	}
	if o.ptxFile == "" && hasScalar(o.kernel, "iters") {
		res.Iters = o.iters
	}
	cfg := w.cfg
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = o.chunk, o.slots, o.computeStreams, o.host
	cfg.Timing = o.trace != "" || o.svg != ""
	if o.chunkAuto {
		prog.say("tuning the chunk size…")
		choice, why, err := tuneChunk(ctx, e, w, o)
		if err != nil {
			return nil, err
		}
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = choice.ChunkElems, choice.Slots, choice.ComputeStreams
		res.ChunkChoice = why
		o.chunk, o.chunkAuto = choice.ChunkElems, false
		if err := checkTimed(o); err != nil { // before the long runs
			return nil, usageError{err}
		}
	}
	job := w.job
	res.Bytes = jobBytes(cfg, o.elems)
	verified := 0

	var baseline time.Duration
	if !o.noBaseline {
		prog.say("synchronous baseline…")
		baseline, err = pipeline.Synchronous(ctx, e.backend, cfg, job)
		if err != nil {
			return nil, fmt.Errorf("synchronous baseline: %w", err)
		}
		if w.verify != nil {
			if err := w.verify(w.outputs[0]); err != nil {
				return nil, fmt.Errorf("synchronous baseline gave wrong results: %w", err)
			}
			verified++
		}
		clear(w.outputs[0])
		res.Rows = append(res.Rows, modeRow{Mode: "synchronous", Ms: ms(baseline), GBps: gbps(res.Bytes, baseline), Speedup: 1})
	}

	p, err := pipeline.New(e.backend, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	pc := p.Config()
	res.ChunkElems, res.Slots, res.ComputeStreams = pc.ChunkElems, pc.Slots, pc.ComputeStreams

	var best *pipeline.Report
	for r := 0; r < o.repeat; r++ {
		prog.say("pipeline run %d of %d…", r+1, o.repeat)
		clear(w.outputs[0])
		rep, err := p.Run(ctx, job)
		if err != nil {
			return nil, err
		}
		if w.verify != nil {
			prog.say("verifying run %d of %d…", r+1, o.repeat)
			if err := w.verify(w.outputs[0]); err != nil {
				return nil, fmt.Errorf("pipeline run %d gave wrong results: %w", r+1, err)
			}
			verified++
		}
		res.HostMode = rep.Mode.String()
		if best == nil || rep.Elapsed < best.Elapsed {
			best = rep
		}
		if r == o.repeat-1 {
			if err := writeTimeline(o, rep, res); err != nil {
				return nil, err
			}
		}
	}
	// The stages alone, in the host mode of the best run (auto mode stages
	// a slice the first time and registers it from the second).
	prog.say("timing each stage alone…")
	stJob := job
	stJob.Host = best.Mode
	st, err := p.StageTimes(ctx, stJob)
	if err != nil {
		return nil, fmt.Errorf("stage timing: %w", err)
	}
	res.Stages = stagesJSON{StageInMs: ms(st.In), H2DMs: ms(st.H2D), ComputeMs: ms(st.Compute), D2HMs: ms(st.D2H),
		StageOutMs: ms(st.Out), BoundMs: ms(st.Bound()), Slowest: st.Slowest().String()}
	row := modeRow{Mode: "pipeline (" + best.Mode.String() + ")", Ms: ms(best.Elapsed), GBps: gbps(res.Bytes, best.Elapsed)}
	if baseline > 0 {
		row.Speedup = float64(baseline) / float64(best.Elapsed)
	}
	if st.Bound() > 0 {
		row.Efficiency = float64(st.Bound()) / float64(best.Elapsed)
	}
	res.Rows = append(res.Rows, row)
	switch {
	case w.verify == nil:
		res.Verified = "not verified: no CPU reference for a user's kernel"
	default:
		res.Verified = fmt.Sprintf("every element of all %d runs matched the CPU reference (tolerance %s)", verified, w.tolerance)
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
func profileLabel(o *runOptions, p *pipeline.Profile) string {
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
	fmt.Fprintf(w, "stage bound (slowest stage alone, %s): %.2f ms (%s)\n", r.Stages.Slowest, r.Stages.BoundMs, stages)
	fmt.Fprintf(w, "efficiency = stage bound / pipeline time; %s%s\n", r.Verified, label)
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

// jobBytes is the host data a job moves: every input and output once.
func jobBytes(cfg pipeline.Config, n int) int64 {
	var per int64
	for _, s := range append(append([]int(nil), cfg.Inputs...), cfg.Outputs...) {
		per += int64(s)
	}
	return per * int64(n)
}

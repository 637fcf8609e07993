package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
)

// benchOptions are the flags of overlap bench and of its subcommands,
// small-jobs (smalljobs.go) and scaling.
type benchOptions struct {
	elems               int // the largest of sizes
	sizes               []int
	iters, chunks, slot []int
	hosts               []pipeline.HostMode
	repeat              int
	computeStreams      int
	reference           bool
	csvPath, svgPath    string
	jsonOut             bool
	sim                 bool
	device              int
	// devices are the GPUs of overlap bench scaling, whose sizes, from
	// --elems, may be a list.
	devices    []int
	allDevices bool
	// scaling is overlap bench scaling's configuration, with its defaults.
	scaling bench.ScalingOptions
	// small are overlap bench small-jobs's options.
	small bench.SmallJobsOptions
	// set records which of the flags were given.
	set map[string]bool
}

// optionFlags are the flags of package bench's option fields: an
// *bench.OptionError names a field, and overlap its flag (flagError).
var optionFlags = map[string]string{"Elems": "--elems", "Sizes": "--elems", "Iters": "--iters", "Chunks": "--chunks", "ChunkElems": "--chunk",
	"Slots": "--slots", "Repeat": "--repeat", "Rounds": "--repeat", "ComputeStreams": "--compute-streams", "Workers": "--workers",
	"Seconds": "--seconds", "Jobs": "--jobs", "DirectCalls": "--direct-calls", "Sim": "--sim", "Waits": "--wait", "Inputs": "--in",
	"Output": "--out", "Kernel": "--kernel", "Readers": "--readers", "Writers": "--writers", "PieceBytes": "--piece", "Direct": "--direct",
	"DirectOutput": "--direct-out", "Preallocate": "--preallocate", "Verify": "--verify", "Bound": "--bound"}

// parseList reads a comma-separated list of values, each by parse, and
// refuses one listed twice, which would only run its rows twice; the
// error names the flag.
func parseList[T comparable](name, s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--%s: %v", name, err)
		}
		if slices.Contains(out, v) {
			return nil, fmt.Errorf("--%s %s: %v is listed twice", name, s, v)
		}
		out = append(out, v)
	}
	return out, nil
}

// benchCmd is overlap bench: the sweep, and the group of its
// subcommands.
var benchCmd = &command{
	name:      "bench",
	usageLine: "overlap bench [flags]",
	short:     "sweep chunk sizes, slots, host modes and intensity; --reference compares with the CUDA C++ pipeline",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o, check := benchFlags(fs)
		return benchBody("bench", check, func(ctx context.Context, stdout, stderr io.Writer) error {
			rows, err := runBench(ctx, o, stdout, stderr)
			if err == nil {
				err = benchError(bench.WriteSweepFiles(rows, o.sim, o.csvPath, o.svgPath))
			}
			return err
		})
	},
}

// smallJobsCmd is overlap bench small-jobs (overlap bench --small-jobs in
// earlier releases).
var smallJobsCmd = &command{
	name:      "small-jobs",
	usageLine: "overlap bench small-jobs [flags]",
	short:     "many small jobs, each H2D, the seed kernel and D2H then a wait, from --workers goroutines on one GPU: jobs per second, latency and CPU per job",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o, check := smallJobsFlags(fs)
		return benchBody("bench small-jobs", check, func(ctx context.Context, stdout, stderr io.Writer) error {
			return runSmallJobs(ctx, o, stdout, stderr)
		})
	},
}

// scalingCmd is overlap bench scaling (overlap bench --devices in earlier
// releases).
var scalingCmd = &command{
	name:      "scaling",
	usageLine: "overlap bench scaling [--devices all|0,1,...] [flags]",
	short:     "the seed job over 1 to k GPUs, each group beside its stage bound; --reference compares with the CUDA C++ multi-GPU pipeline",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o, check := scalingFlags(fs)
		return benchBody("bench scaling", check, func(ctx context.Context, stdout, stderr io.Writer) error {
			return runScaling(ctx, o, stdout, stderr)
		})
	},
}

// checkedRun is what a command runs once its flags are parsed: check
// them (a failure is a usage error), then run.
func checkedRun(name string, check func() error, run func(stdout, stderr io.Writer) int) func(stdout, stderr io.Writer) int {
	return func(stdout, stderr io.Writer) int {
		if err := check(); err != nil {
			return reportError(name, usageError{err}, stderr)
		}
		return run(stdout, stderr)
	}
}

// benchBody is checkedRun for a measuring command, which runs with a
// context that a signal stops.
func benchBody(name string, check func() error, run func(ctx context.Context, stdout, stderr io.Writer) error) func(stdout, stderr io.Writer) int {
	return checkedRun(name, check, func(stdout, stderr io.Writer) int {
		ctx, stop := signalContext(name, stderr)
		defer stop()
		err := run(ctx, stdout, stderr)
		stop()
		if err := stoppedBy(ctx, err); err != nil {
			return reportError(name, err, stderr)
		}
		return exitOK
	})
}

// benchLists are the comma-separated lists of the bench commands, as
// given; read reads them once parsed.
type benchLists struct {
	elems, iters, chunks, slots, hosts, workers *string
}

// addBenchFlags registers the flags that every bench command takes, with
// each command's words for them.
func addBenchFlags(fs *flag.FlagSet, o *benchOptions, elems, elemsHelp, itersHelp, repeatHelp string) *benchLists {
	o.elems = 128 << 20
	l := &benchLists{}
	l.elems = fs.String("elems", elems, elemsHelp)
	l.iters = fs.String("iters", "100", itersHelp)
	fs.IntVar(&o.repeat, "repeat", 3, repeatHelp)
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON instead of the table")
	return l
}

// addConfigFlags registers the pipeline's shape flags of the sweep and
// the scaling table.
func addConfigFlags(fs *flag.FlagSet, o *benchOptions, l *benchLists) {
	l.chunks = fs.String("chunks", "1M,4M,16M,32M", "comma-separated chunk sizes (unset: those no larger than --elems)")
	l.slots = fs.String("slots", "2,3", "comma-separated slot counts")
	fs.IntVar(&o.computeStreams, "compute-streams", 1, "streams for kernels (1 matches the C++ reference's design)")
}

// addScalingConfigFlags registers bench scaling's configuration flags:
// one value each, unset the chunk that overlap run takes for each size
// and the slots and streams of a group of several devices (the sweep's
// lists, whose defaults its help showed, were refused).
func addScalingConfigFlags(fs *flag.FlagSet, o *benchOptions, l *benchLists) {
	l.chunks = fs.String("chunks", "", "one chunk `size` for every row (unset: for each size, the chunk overlap run takes for it)")
	l.slots = fs.String("slots", "", "one slot `count` (unset: the compute streams + 2 on every device count, the pipeline's default for several devices)")
	fs.IntVar(&o.computeStreams, "compute-streams", 0, fmt.Sprintf("streams for kernels (unset: the pipeline's default, %d)", pipeline.DefaultComputeStreams))
}

// benchFlags registers overlap bench's flags (the sweep) on fs.
func benchFlags(fs *flag.FlagSet) (*benchOptions, func() error) {
	o := &benchOptions{}
	var m machine
	l := addBenchFlags(fs, o, "128M", "elements per input; sizes take K, M, G; 4M with --sim unless set",
		"comma-separated seed kernel iterations", "runs per configuration (the best counts)")
	addConfigFlags(fs, o, l)
	l.hosts = fs.String("host", "pinned", "comma-separated host modes: pinned, staged, registered")
	fs.BoolVar(&o.reference, "reference", false, "build and run the CUDA C++ reference pipeline (needs nvcc)")
	fs.StringVar(&o.csvPath, "csv", "", "write results as CSV to `FILE`")
	fs.StringVar(&o.svgPath, "svg", "", "plot time against chunk size to `FILE`")
	m.addMachineFlags(fs, flagSim|flagDevice, map[string]string{"sim": "run on the CPU simulator instead of a GPU"})
	return o, func() error {
		if err := readBenchFlags(fs, o, &m, l, false); err != nil {
			return err
		}
		if o.reference && o.sim {
			return errors.New("--reference needs a GPU, not --sim")
		}
		return checkOutputFiles([]namedFile{{"csv", o.csvPath}, {"svg", o.svgPath}}, nil)
	}
}

// scalingFlags registers overlap bench scaling's flags on fs.
func scalingFlags(fs *flag.FlagSet) (*benchOptions, func() error) {
	o := &benchOptions{}
	var m machine
	l := addBenchFlags(fs, o, "128M", "elements per input, a comma-separated list of sizes (a row for each); sizes take K, M, G; 4M with --sim unless set",
		"the seed kernel's iterations", "runs per configuration (the best counts)")
	addScalingConfigFlags(fs, o, l)
	fs.BoolVar(&o.reference, "reference", false, "build and run the CUDA C++ multi-GPU reference pipeline (needs nvcc)")
	m.addMachineFlags(fs, flagSim|flagDevices, map[string]string{
		"sim":     "run on the CPU simulator instead of GPUs",
		"devices": "the GPUs to scale over, 1 to k of them: all, or indexes such as 0,1 (with --sim, a list: 0,1 simulates two H200s)"})
	return o, func() error {
		if m.sim && m.allDevices {
			return errors.New("--sim --devices needs a list, such as 0,1 for two simulated H200s")
		}
		if o.reference && m.sim {
			return errors.New("--reference needs a GPU, not --sim")
		}
		return readBenchFlags(fs, o, &m, l, true)
	}
}

// smallJobsFlags registers overlap bench small-jobs's flags on fs.
func smallJobsFlags(fs *flag.FlagSet) (*benchOptions, func() error) {
	o := &benchOptions{}
	var m machine
	l := addBenchFlags(fs, o, "4K,64K,1M", "comma-separated job sizes in elements; sizes take K, M, G", "the seed kernel's iterations, one count",
		"rounds of every cell, Go and --reference's C++ taking turns, each cell's median counting (1 with --sim unless set)")
	fs.BoolVar(&o.reference, "reference", false, "build and run the CUDA C++ twin in the same cells (needs nvcc)")
	m.addMachineFlags(fs, flagSim|flagDevice|flagWaitAll, map[string]string{
		"sim":  "run on the CPU simulator instead of a GPU",
		"wait": "how the host waits for the GPU: spin, yield, block, auto, default (the driver's as left), a comma-separated list of them, or all for spin, yield and block (unset: yield on a GPU, the mode with the shortest tail measured; --sim waits on no driver)"})
	fs.BoolVar(&o.small.DirectCalls, "direct-calls", false, "issue each job's copies and launch without the Go scheduler's system-call transition (faster; a call that blocks in the driver holds up garbage collection)")
	l.workers = fs.String("workers", "1,4,16", "comma-separated goroutine counts")
	fs.Float64Var(&o.small.Seconds, "seconds", bench.SmallJobsSeconds, "seconds per cell")
	fs.IntVar(&o.small.Jobs, "jobs", 0, "jobs per goroutine instead of --seconds (on --sim, 3 unless --seconds is given)")
	return o, func() error {
		if err := readMachine(fs, o, &m); err != nil {
			return err
		}
		if o.reference && o.sim {
			return errors.New("--reference needs a GPU, not --sim")
		}
		o.small.Waits = m.waits
		return checkSmallJobs(o, *l.elems, *l.iters, *l.workers)
	}
}

// readBenchFlags reads and checks the sweep's and the scaling table's
// flags (bench.CheckSweep); scaling takes a list of sizes, and one
// configuration (bench.CheckScaling).
func readBenchFlags(fs *flag.FlagSet, o *benchOptions, m *machine, l *benchLists, scaling bool) error {
	if err := readMachine(fs, o, m); err != nil {
		return err
	}
	nonNeg := func(s string) (int, error) {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%q is not a count", s)
		}
		return v, nil
	}
	var err error
	if o.sizes, err = parseList("elems", *l.elems, parseSize); err != nil {
		return err
	}
	if len(o.sizes) > 1 && !scaling {
		return errors.New("--elems takes one size, or a list with overlap bench scaling")
	}
	if o.sim && !o.set["elems"] {
		// The simulator computes and verifies every element of every run
		// of every row: 128M would take many minutes on a laptop (the
		// sweep's eight configurations, over an hour).
		o.sizes = []int{simDefaultElems}
	}
	o.elems = slices.Max(o.sizes)
	if o.iters, err = parseList("iters", *l.iters, nonNeg); err != nil {
		return err
	}
	// Scaling's configuration flags are empty unless set (unset, each
	// size's chunk is overlap run's, and the slots and streams a group's).
	if !scaling || o.set["chunks"] {
		if o.chunks, err = parseList("chunks", *l.chunks, parseSize); err != nil {
			return err
		}
	}
	if !scaling || o.set["slots"] {
		if o.slot, err = parseList("slots", *l.slots, nonNeg); err != nil {
			return err
		}
	}
	if l.hosts != nil {
		for _, h := range strings.Split(*l.hosts, ",") {
			m, err := pipeline.ParseHostMode(strings.TrimSpace(h))
			if err != nil || m == pipeline.HostAuto {
				return fmt.Errorf("--host %q: want pinned, staged or registered", h)
			}
			if slices.Contains(o.hosts, m) {
				return fmt.Errorf("--host %s: %s is listed twice", *l.hosts, m)
			}
			o.hosts = append(o.hosts, m)
		}
	}
	if !o.set["chunks"] && !scaling {
		o.chunks = bench.FitChunks(o.chunks, o.elems)
	}
	sweep := bench.SweepOptions{Elems: o.elems, Iters: o.iters, Chunks: o.chunks, Slots: o.slot, Repeat: o.repeat, ComputeStreams: o.computeStreams}
	if scaling && !o.set["chunks"] {
		sweep.Chunks = nil // the pipeline's default for every size
	}
	for _, c := range sweep.Chunks {
		if c > o.elems && o.sim && !o.set["elems"] {
			return fmt.Errorf("--chunks %d is larger than the simulator's default --elems %d: give a larger --elems", c, o.elems)
		}
	}
	switch {
	case o.repeat == 0:
		return errors.New("--repeat 0: want 1 to 1000")
	case o.computeStreams == 0 && (!scaling || o.set["compute-streams"]):
		return errors.New("--compute-streams 0: want 1 to 64")
	}
	if err := bench.CheckSweep(sweep, o.sim); err != nil {
		return flagError(err)
	}
	if scaling {
		return scalingConfig(o)
	}
	return nil
}

// readMachine checks the machine flags of a bench command and records
// which flags were given.
func readMachine(fs *flag.FlagSet, o *benchOptions, m *machine) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := m.check(fs, false, false); err != nil {
		return err
	}
	o.sim, o.device, o.devices, o.allDevices = m.sim, m.device, m.devices, m.allDevices
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	return nil
}

// scalingConfig is overlap bench scaling's configuration for every row:
// what the flags name, and bench.ScalingOptions' defaults otherwise
// (each size in overlap run's chunk for it).
func scalingConfig(o *benchOptions) error {
	s := bench.ScalingOptions{Sizes: o.sizes, Iters: 100, Repeat: o.repeat}
	for _, f := range []struct {
		name string
		list []int
		v    *int
	}{{"iters", o.iters, &s.Iters}, {"chunks", o.chunks, &s.ChunkElems}, {"slots", o.slot, &s.Slots}} {
		if !o.set[f.name] {
			continue
		}
		if len(f.list) != 1 {
			return fmt.Errorf("--%s: give one value: the table scales one configuration", f.name)
		}
		*f.v = f.list[0]
	}
	if o.set["compute-streams"] {
		s.ComputeStreams = o.computeStreams
	}
	if err := bench.CheckScaling(s); err != nil {
		return flagError(err)
	}
	o.scaling = s.WithDefaults()
	return nil
}

func runBench(ctx context.Context, o *benchOptions, stdout, stderr io.Writer) ([]bench.SweepRow, error) {
	ro := &runOptions{elems: o.elems, kernel: "seed", machine: machine{device: o.device, sim: o.sim}, host: pipeline.HostPinned}
	e, err := openEnv(ro)
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, false)
	defer prog.done()
	if err := checkHostMemory(int64(o.elems)*4*2, fmt.Sprintf("--elems %d: the job's 2 input and output arrays", o.elems)); err != nil {
		return nil, err
	}
	so := bench.SweepOptions{Elems: o.elems, Iters: o.iters, Hosts: o.hosts, Chunks: o.chunks, Slots: o.slot,
		ComputeStreams: o.computeStreams, Repeat: o.repeat, Modules: e.mods, Progress: prog.line}
	if o.reference {
		ref, remove, err := reference(ctx, e.ctx.Device(), prog)
		if err != nil {
			return nil, err
		}
		defer remove()
		so.Reference = ref
	}
	rows, err := bench.Sweep(ctx, e.backend, so)
	if err != nil {
		return nil, benchError(err)
	}
	prog.done()
	if o.jsonOut {
		if rows == nil {
			rows = []bench.SweepRow{}
		}
		writeJSON(stdout, map[string]any{"simulated": o.sim, "backend": e.backend.Name(), "elems": o.elems, "results": rows})
	} else {
		printBench(stdout, rows, e.backend.Name(), o)
	}
	return rows, nil
}

// printBench prints the simulator's note, then the sweep's table.
func printBench(w io.Writer, rows []bench.SweepRow, backend string, o *benchOptions) {
	if o.sim && !o.set["elems"] {
		fmt.Fprintln(w, simSmallerNote(o.elems))
	}
	bench.WriteSweepTable(w, rows, bench.SweepTable{Backend: backend, Elems: o.elems, Simulated: o.sim})
}

func humanElems(n int) string { return bench.Elems(n) }

// reference builds the CUDA C++ reference programs for dev
// in a temporary folder (bench.BuildReference); remove deletes it, as
// does the grace exit of a command a signal stopped (atGraceExit), during
// the build too.
func reference(ctx context.Context, dev driver.Device, prog *progress) (ref *bench.Reference, remove func(), err error) {
	arch, err := bench.ReferenceArch(dev)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "overlap-reference-")
	if err != nil {
		return nil, nil, err
	}
	remove = atGraceExit(func() { os.RemoveAll(dir) })
	prog.say("building the CUDA C++ reference…")
	if ref, err = bench.BuildReference(ctx, dir, arch); err != nil {
		remove()
		return nil, nil, err
	}
	return ref, remove, nil
}

// runScaling measures the seed job over 1 to k devices for each size and
// host mode (bench.Scaling), with each group's stage bound measured beside
// it, and with --reference the CUDA C++ multi-GPU reference (static
// split, a host thread per GPU) on the same devices.
func runScaling(ctx context.Context, o *benchOptions, stdout, stderr io.Writer) error {
	ro := &runOptions{elems: o.elems, kernel: "seed", host: pipeline.HostPinned,
		machine: machine{sim: o.sim, devices: o.devices, allDevices: o.allDevices}}
	e, err := openEnv(ro)
	if err != nil {
		return err
	}
	defer e.close()
	prog := newProgress(stderr, o.jsonOut)
	defer prog.done()
	opts := o.scaling
	opts.Modules, opts.Progress = e.mods, prog.line
	if o.reference {
		// The C++ reference drives GPUs 0 to k-1: it stands beside the Go
		// figures only when those are the devices.
		for i, d := range e.ordinals {
			if d != i {
				return usageError{fmt.Errorf("--reference runs on GPUs 0 to k-1; --devices must list them in order")}
			}
		}
		ref, remove, err := reference(ctx, e.ctx.Device(), prog)
		if err != nil {
			return err
		}
		defer remove()
		opts.Reference = ref
	}
	// Each size's input and output arrays.
	for _, n := range o.sizes {
		if err := checkHostMemory(8*int64(n), fmt.Sprintf("--elems %d: the job's 2 input and output arrays", n)); err != nil {
			return err
		}
	}
	rows, err := bench.Scaling(ctx, e.backends, opts)
	if err != nil {
		return benchError(err)
	}
	prog.done()
	if o.jsonOut {
		out := map[string]any{"simulated": o.sim, "backend": e.deviceNames(), "devices": e.ordinals,
			"iters": opts.Iters, "slots": opts.Slots, "compute_streams": opts.ComputeStreams, "results": rows}
		if opts.ChunkElems > 0 { // else each row's own, in its chunk_elems
			out["chunk_elems"] = opts.ChunkElems
		}
		writeJSON(stdout, out)
		return nil
	}
	if o.sim && !o.set["elems"] {
		fmt.Fprintln(stdout, simSmallerNote(simDefaultElems))
	}
	return bench.WriteScalingTable(stdout, rows, bench.ScalingTable{Options: opts, Backend: e.deviceNames(), Ordinals: e.ordinals, Simulated: o.sim})
}

// The measuring commands call package bench; these are the seams.

// line is a progress callback for package bench: it shows msg as the
// status line.
func (p *progress) line(msg string) { p.say("%s", msg) }

// benchError is err as overlap printed it before the measuring moved to
// package bench: a *bench.Error's cause, without its "bench: Op: ".
func benchError(err error) error {
	var be *bench.Error
	if errors.As(err, &be) {
		return be.Err
	}
	return err
}

// streamError is a streaming run's error as overlap prints it: a file
// that cannot be opened is a usage error of --in or --out, and a failure
// with output written says what the output holds (partialOutput).
func streamError(err error) error {
	err = benchError(err)
	var oe *bench.OpenError
	if errors.As(err, &oe) {
		flag := "--in"
		if oe.Output {
			flag = "--out"
		}
		return usageError{fmt.Errorf("%s: %w", flag, oe.Err)}
	}
	var po *bench.PartialOutput
	if errors.As(err, &po) {
		return &partialOutput{err: po.Err, name: po.Name, bytes: po.Bytes, complete: po.Complete}
	}
	return err
}

// flagWords says in flags what package bench's prose says in options:
// "(Verify reads …)" is "(--verify reads …)" here.
var flagWords = strings.NewReplacer("(Verify ", "(--verify ", "(TimingOnly)", "(--timing-only)").Replace

// flagError is err with a *bench.OptionError's fields named by their
// flags (optionFlags).
func flagError(err error) error {
	var oe *bench.OptionError
	if !errors.As(err, &oe) {
		return err
	}
	return errors.New(oe.Text(flagName))
}

// flagName is the flag of package bench's option field (optionFlags).
func flagName(field string) string { return optionFlags[field] }

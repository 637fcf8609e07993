package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
)

// benchOptions are the flags of overlap bench and of its subcommands,
// small-jobs (smalljobs.go) and scaling (scaling.go).
type benchOptions struct {
	elems               int
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
	sizes      []int
	// small are overlap bench small-jobs's own flags.
	small smallJobsOptions
	// set records which of the flags were given.
	set map[string]bool
}

func parseList(name, s string, parse func(string) (int, error)) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("--%s: %v", name, err)
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
				err = writeBenchFiles(o, rows)
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

// benchBody is what a bench command runs once its flags are parsed:
// check them, then run with a context that a signal stops.
func benchBody(name string, check func() error, run func(ctx context.Context, stdout, stderr io.Writer) error) func(stdout, stderr io.Writer) int {
	return func(stdout, stderr io.Writer) int {
		if err := check(); err != nil {
			return reportError(name, usageError{err}, stderr)
		}
		ctx, stop := signalContext()
		defer stop()
		if err := run(ctx, stdout, stderr); err != nil {
			return reportError(name, stoppedBy(ctx, err), stderr)
		}
		return exitOK
	}
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
		outs := []namedFile{{"csv", o.csvPath}, {"svg", o.svgPath}}
		if err := checkOutputs(outs, nil); err != nil {
			return err
		}
		for _, f := range outs {
			if err := checkWritable(f.flag, f.path); err != nil {
				return err
			}
		}
		return nil
	}
}

// scalingFlags registers overlap bench scaling's flags on fs.
func scalingFlags(fs *flag.FlagSet) (*benchOptions, func() error) {
	o := &benchOptions{}
	var m machine
	l := addBenchFlags(fs, o, "128M", "elements per input, a comma-separated list of sizes (a row for each); sizes take K, M, G; 4M with --sim unless set",
		"the seed kernel's iterations", "runs per configuration (the best counts)")
	addConfigFlags(fs, o, l)
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
		"wait": "how the host waits for the GPU: spin, yield, block, auto, default (the driver's as left), or all for spin, yield and block (unset: yield, the mode with the shortest tail measured)"})
	fs.BoolVar(&o.small.direct, "direct-calls", false, "issue each job's copies and launch without the Go scheduler's system-call transition (faster; a call that blocks in the driver holds up garbage collection)")
	l.workers = fs.String("workers", "1,4,16", "comma-separated goroutine counts")
	fs.Float64Var(&o.small.seconds, "seconds", smallJobsSeconds, "seconds per cell")
	fs.IntVar(&o.small.jobs, "jobs", 0, "jobs per goroutine instead of --seconds (on --sim, 3 unless --seconds is given)")
	return o, func() error {
		if fs.NArg() > 0 {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		if err := m.check(fs, false, false); err != nil {
			return err
		}
		o.sim, o.device, o.small.waits = m.sim, m.device, m.waits
		o.set = map[string]bool{}
		fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
		switch {
		case o.reference && o.sim:
			return errors.New("--reference needs a GPU, not --sim")
		case o.small.direct && o.sim:
			return errors.New("--direct-calls needs a GPU, not --sim: the simulator makes no driver calls")
		case o.small.direct && !driver.DirectCallsAvailable():
			return errors.New("--direct-calls needs a linux/amd64 binary built with -tags overlap_directcalls (go build -tags overlap_directcalls ./cmd/overlap)")
		}
		return checkSmallJobs(o, *l.elems, *l.iters, *l.workers)
	}
}

// readBenchFlags reads and checks the sweep's and the scaling table's
// flags; scaling takes a list of sizes.
func readBenchFlags(fs *flag.FlagSet, o *benchOptions, m *machine, l *benchLists, scaling bool) error {
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if err := m.check(fs, false, false); err != nil {
		return err
	}
	o.sim, o.device, o.devices, o.allDevices = m.sim, m.device, m.devices, m.allDevices
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
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
	o.elems = o.sizes[0]
	for _, n := range o.sizes {
		o.elems = max(o.elems, n)
	}
	nonNeg := func(s string) (int, error) {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%q is not a count", s)
		}
		return v, nil
	}
	if o.iters, err = parseList("iters", *l.iters, nonNeg); err != nil {
		return err
	}
	if o.chunks, err = parseList("chunks", *l.chunks, parseSize); err != nil {
		return err
	}
	if o.slot, err = parseList("slots", *l.slots, nonNeg); err != nil {
		return err
	}
	for _, s := range o.slot {
		if s < 2 || s > 1024 {
			return fmt.Errorf("--slots %d: want 2 to 1024", s)
		}
	}
	if !o.set["chunks"] && !scaling {
		o.chunks = defaultChunksFor(o.chunks, o.elems)
	}
	for _, c := range o.chunks {
		if c > o.elems && (!scaling || o.set["chunks"]) {
			if o.sim && !o.set["elems"] {
				return fmt.Errorf("--chunks %d is larger than the simulator's default --elems %d: give a larger --elems", c, o.elems)
			}
			return fmt.Errorf("--chunks %d is larger than --elems %d", c, o.elems)
		}
	}
	if l.hosts != nil {
		for _, h := range strings.Split(*l.hosts, ",") {
			m, err := pipeline.ParseHostMode(strings.TrimSpace(h))
			if err != nil || m == pipeline.HostAuto {
				return fmt.Errorf("--host %q: want pinned, staged or registered", h)
			}
			o.hosts = append(o.hosts, m)
		}
	}
	switch {
	case int64(o.elems) > maxElems:
		return fmt.Errorf("--elems %d: at most %d", o.elems, int64(maxElems))
	case o.repeat < 1 || o.repeat > 1000:
		return fmt.Errorf("--repeat %d: want 1 to 1000", o.repeat)
	case o.computeStreams < 1 || o.computeStreams > 64:
		return fmt.Errorf("--compute-streams %d: want 1 to 64", o.computeStreams)
	}
	for _, it := range o.iters {
		if err := checkJobWork(o.elems, it, o.sim); err != nil {
			return err
		}
	}
	for _, c := range o.chunks {
		if err := checkChunks(o.elems, c, o.sim); err != nil {
			return err
		}
	}
	return nil
}

// defaultChunksFor is the default chunk list for a job of elems: the
// sizes that fit in it, or the job itself as one chunk when none does. A
// chunk larger than the job is refused only when the user asked for it.
func defaultChunksFor(chunks []int, elems int) []int {
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
		prog.say("building the CUDA C++ reference…")
		ref, remove, err := buildReference(ctx, e.ctx.Device())
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

func printBench(w io.Writer, rows []bench.SweepRow, backend string, o *benchOptions) {
	label := ""
	if o.sim {
		label = " [simulated]"
	}
	if o.sim && !o.set["elems"] {
		fmt.Fprintln(w, simSmallerNote(o.elems))
	}
	fmt.Fprintf(w, "overlap bench: seed kernel on %s, %d float32 elements%s\n\n", backend, o.elems, label)
	fmt.Fprintf(w, "%6s %-11s %10s %5s %10s %8s %10s %6s %10s %7s\n", "ITERS", "HOST", "CHUNK", "SLOTS", "TIME", "GB/s", "BOUND", "EFF", "C++", "GO/C++")
	for _, r := range rows {
		cpp, ratio := "-", "-"
		if r.CppMs > 0 {
			cpp, ratio = fmt.Sprintf("%.2f ms", r.CppMs), fmt.Sprintf("%.3f", r.Ratio)
		}
		fmt.Fprintf(w, "%6d %-11s %10d %5d %7.2f ms %8.1f %7.2f ms %5.1f%% %10s %7s\n",
			r.Iters, r.Host, r.Chunk, r.Slots, r.Ms, r.GBps, r.BoundMs, 100*r.Efficiency, cpp, ratio)
	}
	if len(rows) > 0 {
		best := rows[0]
		for _, r := range rows {
			if r.Ms < best.Ms {
				best = r
			}
		}
		fmt.Fprintf(w, "\nbest: chunk %d, %d slots, host %s, iters %d: %.2f ms (%.1f%% of the stage bound)%s\n",
			best.Chunk, best.Slots, best.Host, best.Iters, best.Ms, 100*best.Efficiency, label)
	}
}

func writeBenchFiles(o *benchOptions, rows []bench.SweepRow) error {
	if o.csvPath != "" {
		f, err := os.Create(o.csvPath)
		if err != nil {
			return err
		}
		if err := bench.WriteSweepCSV(f, rows, o.sim); err != nil {
			f.Close()
			return benchError(err)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if o.svgPath != "" {
		return os.WriteFile(o.svgPath, []byte(bench.SweepSVG(rows, o.sim)), 0o644)
	}
	return nil
}

func humanElems(n int) string { return bench.Elems(n) }

// buildReference builds the CUDA C++ reference programs for dev's
// architecture in a temporary folder; remove deletes it.
func buildReference(ctx context.Context, dev driver.Device) (ref *bench.Reference, remove func(), err error) {
	major, minor, err := dev.ComputeCapability()
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp("", "overlap-reference-")
	if err != nil {
		return nil, nil, err
	}
	remove = func() { os.RemoveAll(dir) }
	if ref, err = bench.BuildReference(ctx, dir, fmt.Sprintf("sm_%d%d", major, minor)); err != nil {
		remove()
		return nil, nil, err
	}
	return ref, remove, nil
}

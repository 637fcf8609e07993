package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// runOptions are the parsed flags of overlap run.
type runOptions struct {
	elems          int
	chunk          int  // -1 until --chunk is given; see chunkAuto
	chunkAuto      bool // --chunk auto
	slots          int
	computeStreams int
	iters          int
	kernel         string
	ptxFile        string
	cuFile         string // --cu: CUDA C compiled by NVRTC on the GPU's context
	entry          string
	host           pipeline.HostMode
	repeat         int
	jsonOut        bool
	trace          string
	svg            string
	quiet          bool
	simSmaller     bool // --sim chose a smaller default job
	noBaseline     bool
	schedule       pipeline.Schedule
	// machine is what the machine flags chose (machine.go).
	machine
}

// simDefaultElems is --sim's job when --elems is not given: the CPU
// computes and verifies every element, and the seed kernel's 100
// iterations over 128M elements would take minutes on a laptop.
const simDefaultElems = 4 << 20

// simSmallerNote is the line that says --sim chose a smaller job.
func simSmallerNote(elems int) string {
	return fmt.Sprintf("simulated: %s elements, not the GPU default of 128M, because the CPU computes and verifies every element (--elems changes it)", humanElems(elems))
}

// parseCount reads a whole number such as a goroutine count; the checks
// of its range are the caller's.
func parseCount(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%q is not a whole number", s)
	}
	return v, nil
}

// parseSize reads a positive element count such as 134217728, 128M, 64K
// or 1G (binary multiples).
func parseSize(s string) (int, error) {
	t := strings.TrimSpace(s)
	mult := 1
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			mult, t = 1<<10, t[:n-1]
		case 'm', 'M':
			mult, t = 1<<20, t[:n-1]
		case 'g', 'G':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a size (use a number, optionally with K, M or G)", s)
	}
	if v <= 0 {
		return 0, fmt.Errorf("%q: must be positive", s)
	}
	if v > (1<<40)/int64(mult) || v > math.MaxInt/int64(mult) { // the second on 32-bit platforms
		return 0, fmt.Errorf("%q is too large", s)
	}
	return int(v) * mult, nil
}

// sizeFlag is a flag.Value for sizes.
type sizeFlag struct {
	v    *int
	auto *bool // when non-nil, "auto" is accepted
}

func (f sizeFlag) String() string {
	if f.v == nil || *f.v <= 0 {
		return ""
	}
	return formatSize(*f.v)
}

func (f sizeFlag) Set(s string) error {
	if f.auto != nil && s == "auto" {
		*f.auto = true
		return nil
	}
	n, err := parseSize(s)
	if err != nil {
		return err
	}
	if f.auto != nil {
		*f.auto = false
	}
	*f.v = n
	return nil
}

// The bounds of a job's size (bench.MaxElems and the others say why).
const (
	maxElems       = bench.MaxElems
	minStreamChunk = bench.MinStreamChunk
	// maxWarm bounds --warm: a run warms up before each timed part.
	maxWarm = time.Minute
)

// runCmd is overlap run.
var runCmd = &command{
	name:      "run",
	usageLine: "overlap run [flags]",
	short:     "run the synchronous baseline and the overlapped pipeline, verify every element, and print times",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o, check := runFlags(fs)
		return checkedRun("run", check, func(stdout, stderr io.Writer) int { return runRun(o, stdout, stderr) })
	},
}

// tuneCmd is overlap tune.
var tuneCmd = &command{
	name:      "tune",
	usageLine: "overlap tune [flags]",
	short:     "fit a cost model to probes, pick chunk, slots and streams, and measure the choice against the prediction",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o, check := tuneFlags(fs)
		return checkedRun("tune", check, func(stdout, stderr io.Writer) int { return runTune(o, stdout, stderr) })
	},
}

// addJobFlags registers the flags that say what job runs where: the ones
// overlap run and overlap tune share.
func addJobFlags(fs *flag.FlagSet, o *runOptions, host *string) {
	fs.Var(sizeFlag{v: &o.elems}, "elems", "elements per input; sizes take K, M, G; 4M with --sim unless set")
	fs.IntVar(&o.iters, "iters", o.iters, "the seed kernel's iterations (its intensity)")
	fs.StringVar(&o.kernel, "kernel", o.kernel, "embedded kernel: "+oneOf(kernels.Pipelinable()))
	fs.StringVar(&o.ptxFile, "ptx", "", "a PTX `FILE` with your own element-wise kernel (out, in..., n)")
	fs.StringVar(&o.cuFile, "cu", "", "a CUDA C `FILE` with your own extern \"C\" element-wise kernel, compiled with NVRTC")
	fs.StringVar(&o.entry, "entry", "", "the kernel's entry `NAME` in --ptx or --cu")
	fs.StringVar(host, "host", *host, "host memory: pinned, staged, registered or auto")
	fs.IntVar(&o.repeat, "repeat", o.repeat, "pipeline runs (the best is reported)")
}

func defaultRunOptions() *runOptions {
	return &runOptions{elems: 128 << 20, chunk: -1, iters: 100, kernel: "seed", repeat: 3, computeStreams: pipeline.DefaultComputeStreams, machine: machine{warm: defaultWarm}}
}

// runFlags registers overlap run's flags on fs, writing into the options
// it returns; check checks them once parsed. Errors are one line.
func runFlags(fs *flag.FlagSet) (o *runOptions, check func() error) {
	o = defaultRunOptions()
	host := "auto"
	addJobFlags(fs, o, &host)
	o.addMachineFlags(fs, flagSim|flagGPU|flagDevice|flagDevices|flagProfile|flagWait|flagWarm, nil)
	fs.Var(sizeFlag{v: &o.chunk, auto: &o.chunkAuto}, "chunk", "elements per chunk, or auto to fit a cost model to probes, which chooses --slots, --compute-streams and --schedule too (default 1M; for --elems under 16M, --elems/16 and at least 128K, at most --elems)")
	fs.IntVar(&o.slots, "slots", 0, "buffer slots, at least 2 and at least --compute-streams (default compute-streams+2; for chunks under 1 MiB on one GPU, room for six coalesced copies of 4 MiB, at most 48)")
	fs.IntVar(&o.computeStreams, "compute-streams", o.computeStreams, "streams for kernels")
	fs.Func("schedule", "how chunks' stages are ordered: auto, events or in-stream (default auto: in-stream for at most 16 chunks and at least 2 a stream on 3 or more compute streams)", func(v string) (err error) {
		o.schedule, err = pipeline.ParseSchedule(v)
		return err
	})
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON")
	fs.StringVar(&o.trace, "trace", "", "write a Chrome trace of the last run to `FILE`")
	fs.StringVar(&o.svg, "svg", "", "write an SVG timeline of the last run to `FILE`")
	fs.BoolVar(&o.quiet, "quiet", false, "print only errors")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "skip the synchronous baseline")
	return o, func() error {
		// The fallback: with no machine asked for, no driver runs the
		// simulator.
		if err := o.check(fs, true, o.userKernel()); err != nil {
			return err
		}
		return checkRunOptions(fs, o, host)
	}
}

// checkRunOptions checks overlap run's parsed flags.
func checkRunOptions(fs *flag.FlagSet, o *runOptions, host string) error {
	if err := checkJobOptions(fs, o, host); err != nil {
		return err
	}
	if err := refuse([]refusal{
		{!o.chunkAuto && o.chunk > o.elems, fmt.Sprintf("--chunk %d is larger than --elems %d", o.chunk, o.elems)},
		{o.computeStreams < 1 || o.computeStreams > 64, fmt.Sprintf("--compute-streams %d: want 1 to 64", o.computeStreams)},
		{(o.slots != 0 || isSet(fs, "slots")) && o.slots < 2, fmt.Sprintf("--slots %d: at least 2 are needed to overlap anything", o.slots)},
		{o.slots != 0 && o.slots < o.computeStreams, fmt.Sprintf("--slots %d: fewer than --compute-streams %d", o.slots, o.computeStreams)},
		{o.slots > 1024, fmt.Sprintf("--slots %d: at most 1024", o.slots)},
		// The tuner chooses all four together, and would write over a
		// choice of the user's without a word.
		{o.chunkAuto && len(autoChosen(fs, o)) > 0, fmt.Sprintf("--chunk auto chooses the slots, compute streams and schedule too, so %s would be ignored: drop %s, or give --chunk a size",
			joinAnd(autoChosen(fs, o)), oneOrThem(len(autoChosen(fs, o))))},
	}); err != nil {
		return err
	}
	if err := checkTimed(o); err != nil {
		return err
	}
	if err := checkSimBaseline(o); err != nil {
		return err
	}
	if !o.chunkAuto {
		if err := bench.CheckChunks(o.elems, o.chunk, o.sim); err != nil {
			return flagError(err) // more chunks than one pass can issue in reasonable time
		}
	}
	if err := checkOutputFiles([]namedFile{{"trace", o.trace}, {"svg", o.svg}}, []namedFile{{"ptx", o.ptxFile}, {"cu", o.cuFile}, {"profile", o.profile}}); err != nil {
		return err
	}
	o.quiet = o.quiet && !o.jsonOut // JSON is the requested output
	return nil
}

// autoChosen lists the flags set on fs that --chunk auto chooses itself;
// --schedule auto, which leaves the choice to it, is not one.
func autoChosen(fs *flag.FlagSet, o *runOptions) []string {
	var set []string
	for _, name := range []string{"slots", "compute-streams", "schedule"} {
		if isSet(fs, name) && !(name == "schedule" && o.schedule == pipeline.ScheduleAuto) {
			set = append(set, "--"+name)
		}
	}
	return set
}

// joinAnd joins words as a list in prose: "a", "a and b", "a, b and c".
func joinAnd(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// oneOrThem is "it" for one flag and "them" for more.
func oneOrThem(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

// checkTimed refuses --trace and --svg on more chunks than per-chunk
// timing can record; with --chunk auto it is checked once the chunk is
// chosen.
func checkTimed(o *runOptions) error {
	if o.trace == "" && o.svg == "" || o.chunkAuto {
		return nil
	}
	if chunks := (o.elems + o.chunk - 1) / o.chunk; chunks > pipeline.MaxTimedChunks {
		return fmt.Errorf("--trace and --svg time every chunk, at most %d; --elems %d in chunks of %d makes %d: use a larger --chunk",
			pipeline.MaxTimedChunks, o.elems, o.chunk, chunks)
	}
	return nil
}

// tuneFlags registers overlap tune's flags on fs: the job's, without
// the chunk, slots and streams that tune chooses.
func tuneFlags(fs *flag.FlagSet) (o *runOptions, check func() error) {
	o = defaultRunOptions()
	host := "auto"
	addJobFlags(fs, o, &host)
	o.addMachineFlags(fs, flagSim|flagDevice|flagWarm, map[string]string{
		"warm": "untimed GPU work before the probes, so that an idle GPU and host reach their clocks; 0 turns it off",
	})
	return o, func() error {
		if err := o.check(fs, false, false); err != nil {
			return err
		}
		return checkJobOptions(fs, o, host)
	}
}

// checkJobOptions checks the flags that addJobFlags registers.
func checkJobOptions(fs *flag.FlagSet, o *runOptions, host string) error {
	if o.sim && !isSet(fs, "elems") {
		// The simulator computes every element of every run (and of
		// every probe of overlap tune), and 128M takes minutes.
		o.elems, o.simSmaller = simDefaultElems, true
	}
	if o.chunk == -1 { // not given (tune takes none): the default for the job's size
		o.chunk = pipeline.DefaultChunkFor(o.elems)
	}
	var hostErr error
	o.host, hostErr = pipeline.ParseHostMode(host)
	if err := refuse([]refusal{
		{fs.NArg() > 0, fmt.Sprintf("unexpected argument %q", fs.Arg(0))},
		{hostErr != nil, fmt.Sprintf("--host %q: want pinned, staged, registered or auto", host)},
		{int64(o.elems) > maxElems, fmt.Sprintf("--elems %d: at most %d", o.elems, int64(maxElems))},
		{o.iters < 0, fmt.Sprintf("--iters %d: must not be negative", o.iters)},
		{o.iters > math.MaxInt32, fmt.Sprintf("--iters %d: at most %d", o.iters, math.MaxInt32)},
		{o.repeat < 1 || o.repeat > 1000, fmt.Sprintf("--repeat %d: want 1 to 1000", o.repeat)},
		{o.ptxFile != "" && o.cuFile != "", "--ptx and --cu both name a kernel; give one"},
		{o.userKernel() && o.entry == "", fmt.Sprintf("--%s needs --entry NAME", o.userFlag())},
		{!o.userKernel() && o.entry != "", "--entry needs --ptx FILE or --cu FILE"},
		{o.ptxFile != "" && o.sim, "--ptx cannot run on --sim: the simulator has no CPU version of your kernel"},
		{o.cuFile != "" && o.sim, "--cu cannot run on --sim: a CUDA C file needs NVRTC and a GPU, and the simulator has no CPU version of your kernel"},
		{o.userKernel() && isSet(fs, "kernel"), fmt.Sprintf("--kernel and --%s both name a kernel; give one", o.userFlag())},
	}); err != nil {
		return err
	}
	if o.userKernel() {
		if isSet(fs, "iters") {
			return fmt.Errorf("--iters is the seed kernel's; your --%s kernel takes no scalars", o.userFlag())
		}
		if o.cuFile != "" {
			return checkCUFile(o.cuFile)
		}
		return checkPTXEntry(o.ptxFile, o.entry)
	}
	k, err := kernels.ByName(o.kernel)
	if err != nil {
		return fmt.Errorf("--kernel %q: unknown (have %s)", o.kernel, strings.Join(kernels.Pipelinable(), ", "))
	}
	if k.Inputs+k.Outputs == 0 {
		return fmt.Errorf("--kernel %s has no inputs or outputs to pipeline; pick %s", o.kernel, oneOf(kernels.Pipelinable()))
	}
	if isSet(fs, "iters") && !hasScalar(o.kernel, "iters") {
		return fmt.Errorf("--iters is the seed kernel's; %s takes no iterations", o.kernel)
	}
	if hasScalar(o.kernel, "iters") { // a seed job that one pass could not finish in reasonable time
		return flagError(bench.CheckWork(int64(o.elems), o.iters, o.sim))
	}
	return nil
}

// checkPTXEntry reads a --ptx file without a GPU and checks that it
// defines entry as an element-wise kernel, so that a wrong name or shape
// is refused before any driver is loaded.
func checkPTXEntry(path, entry string) error {
	src, err := readPTXFile(path)
	if err != nil {
		return fmt.Errorf("--ptx %v", err)
	}
	f, err := ptx.Parse(src)
	if err != nil {
		return fmt.Errorf("--ptx %s: %v", path, err)
	}
	e, ok := f.Entry(entry)
	switch {
	case !ok && len(f.Entries) == 0:
		return fmt.Errorf("--ptx %s defines no .entry (kernel) at all, so %q cannot be launched", path, entry)
	case !ok:
		return fmt.Errorf("--ptx %s has no entry %q; its entries are: %s", path, entry, strings.Join(f.EntryNames(), ", "))
	}
	if _, err := elementwiseShape(e); err != nil {
		return fmt.Errorf("--ptx %s: %v", path, err)
	}
	return nil
}

// userKernel reports whether the job is a user's kernel, --ptx or --cu.
func (o *runOptions) userKernel() bool { return o.ptxFile != "" || o.cuFile != "" }

// userFlag names the flag that gave the user's kernel: "ptx" or "cu".
func (o *runOptions) userFlag() string {
	if o.cuFile != "" {
		return "cu"
	}
	return "ptx"
}

// checkCUFile checks, without a GPU or NVRTC, that a --cu file is there
// to be read; NVRTC checks the rest once a GPU's context is open.
func checkCUFile(path string) error {
	st, err := statInput("cu", path)
	if err == nil && !st.Mode().IsRegular() {
		return fmt.Errorf("--cu %s: not a regular file (a FIFO or device is not a kernel's source)", path)
	}
	return err
}

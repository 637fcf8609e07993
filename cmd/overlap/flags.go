package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/pipeline"
)

// runOptions are the parsed flags of overlap run.
type runOptions struct {
	elems          int
	chunk          int // 0 means auto
	chunkAuto      bool
	slots          int
	computeStreams int
	iters          int
	kernel         string
	ptxFile        string
	entry          string
	host           pipeline.HostMode
	device         int
	repeat         int
	jsonOut        bool
	trace          string
	svg            string
	quiet          bool
	sim            bool
	profile        string // --profile FILE for --sim
	simSmaller     bool   // --sim chose a smaller default job
	noBaseline     bool
}

// simDefaultElems is --sim's job when --elems is not given: the CPU
// computes and verifies every element, and the seed kernel's 100
// iterations over 128M elements would take minutes on a laptop.
const simDefaultElems = 4 << 20

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
	if v > (1<<40)/int64(mult) {
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
	if f.v == nil || *f.v < 0 {
		return ""
	}
	return strconv.Itoa(*f.v)
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

// maxElems bounds --elems: 2^32-1 is the kernels' unsigned count.
const maxElems = 1<<32 - 1

// parseRunFlags parses and checks overlap run's flags. Errors are one line.
func parseRunFlags(args []string, stderr io.Writer) (*runOptions, error) {
	o := &runOptions{elems: 128 << 20, chunk: -1, iters: 100, kernel: "seed", repeat: 3}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Var(sizeFlag{v: &o.elems}, "elems", "elements per input (128M)")
	fs.Var(sizeFlag{v: &o.chunk, auto: &o.chunkAuto}, "chunk", "elements per chunk, or auto (1M)")
	fs.IntVar(&o.slots, "slots", 0, "buffer slots, at least 2 and at least --compute-streams (default compute-streams+2)")
	fs.IntVar(&o.computeStreams, "compute-streams", pipeline.DefaultComputeStreams, "streams for kernels")
	fs.IntVar(&o.iters, "iters", 100, "seed kernel iterations (its intensity)")
	fs.StringVar(&o.kernel, "kernel", "seed", "embedded kernel: seed, saxpy or lerp")
	fs.StringVar(&o.ptxFile, "ptx", "", "a PTX file with your own element-wise kernel (out, in..., n)")
	fs.StringVar(&o.entry, "entry", "", "the kernel's entry name in --ptx")
	host := fs.String("host", "auto", "host memory: pinned, staged, registered or auto")
	fs.IntVar(&o.device, "device", 0, "GPU index")
	fs.IntVar(&o.repeat, "repeat", 3, "pipeline runs (the best is reported)")
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON")
	fs.StringVar(&o.trace, "trace", "", "write a Chrome trace of the last run to this file")
	fs.StringVar(&o.svg, "svg", "", "write an SVG timeline of the last run to this file")
	fs.BoolVar(&o.quiet, "quiet", false, "print only errors")
	fs.BoolVar(&o.sim, "sim", false, "run on the CPU simulator instead of a GPU (times predicted from a device profile; 4M elements unless --elems)")
	fs.StringVar(&o.profile, "profile", "", "with --sim: the device profile (JSON from overlap profile) to predict times from (default: the built-in H200 profile)")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "skip the synchronous baseline")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.PrintDefaults()
			return nil, flag.ErrHelp
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	elemsSet := false
	fs.Visit(func(f *flag.Flag) { elemsSet = elemsSet || f.Name == "elems" })
	if o.sim && !elemsSet {
		o.elems, o.simSmaller = simDefaultElems, true
	}
	if o.profile != "" && !o.sim {
		return nil, errors.New("--profile needs --sim: a GPU measures its own times")
	}
	if o.chunk == -1 { // not given: the default, capped at the job
		o.chunk = min(pipeline.DefaultChunkElems, o.elems)
	}
	var err error
	if o.host, err = pipeline.ParseHostMode(*host); err != nil {
		return nil, fmt.Errorf("invalid value %q for flag -host: want pinned, staged, registered or auto", *host)
	}
	switch {
	case o.elems > maxElems:
		return nil, fmt.Errorf("--elems %d: at most %d", o.elems, maxElems)
	case !o.chunkAuto && o.chunk > o.elems:
		return nil, fmt.Errorf("--chunk %d is larger than --elems %d", o.chunk, o.elems)
	case o.computeStreams < 1 || o.computeStreams > 64:
		return nil, fmt.Errorf("--compute-streams %d: want 1 to 64", o.computeStreams)
	case o.slots != 0 && o.slots < 2:
		return nil, fmt.Errorf("--slots %d: at least 2 are needed to overlap anything", o.slots)
	case o.slots != 0 && o.slots < o.computeStreams:
		return nil, fmt.Errorf("--slots %d: fewer than --compute-streams %d", o.slots, o.computeStreams)
	case o.slots > 1024:
		return nil, fmt.Errorf("--slots %d: at most 1024", o.slots)
	case o.iters < 0:
		return nil, fmt.Errorf("--iters %d: must not be negative", o.iters)
	case o.repeat < 1 || o.repeat > 1000:
		return nil, fmt.Errorf("--repeat %d: want 1 to 1000", o.repeat)
	case o.device < 0:
		return nil, fmt.Errorf("--device %d: must not be negative", o.device)
	case o.ptxFile != "" && o.entry == "":
		return nil, errors.New("--ptx needs --entry NAME")
	case o.ptxFile == "" && o.entry != "":
		return nil, errors.New("--entry needs --ptx FILE")
	case o.ptxFile != "" && o.sim:
		return nil, errors.New("--ptx cannot run on --sim: the simulator has no CPU version of your kernel")
	}
	if o.ptxFile == "" {
		switch o.kernel {
		case "seed", "saxpy", "lerp":
		case "empty":
			return nil, errors.New("--kernel empty has no inputs or outputs to pipeline; pick seed, saxpy or lerp")
		default:
			return nil, fmt.Errorf("--kernel %q: unknown (have seed, saxpy, lerp)", o.kernel)
		}
	}
	if o.quiet && o.jsonOut {
		o.quiet = false // JSON is the requested output
	}
	return o, nil
}

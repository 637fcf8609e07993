package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// stdin is what --in - reads; tests replace it.
var stdin io.Reader = os.Stdin

// streamOptions are the flags of overlap stream.
type streamOptions struct {
	ins, outs      []string
	kernel         string
	iters          int
	chunk          int
	slots          int
	computeStreams int
	readers        int
	writers        int
	piece          int
	direct         bool
	directOut      bool
	preallocate    bool
	verify         bool
	bound          bool
	sim            bool
	device         int
	jsonOut        bool
	quiet          bool
}

// streamCmd is overlap stream (overlap run --in in earlier releases).
var streamCmd = &command{
	name:      "stream",
	usageLine: "overlap stream --in FILE[,FILE] --out FILE [flags]",
	short:     "stream raw float32 files (- for stdin/stdout) through a kernel with bounded memory",
	long:      "Streams raw little-endian float32 files (- for stdin/stdout) through a kernel with memory bounded by the pinned slots.",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o := &streamOptions{kernel: "seed", iters: 100, chunk: pipeline.DefaultChunkElems, computeStreams: pipeline.DefaultComputeStreams, piece: 1 << 20}
		check := streamFlags(fs, o)
		return func(stdout, stderr io.Writer) int {
			if err := check(stdout); err != nil {
				return reportError("stream", usageError{err}, stderr)
			}
			return runStream(o, stdout, stderr)
		}
	},
}

// streamFlags registers overlap stream's flags on fs, writing into o;
// check checks them once parsed (stdout is what --out - writes to).
func streamFlags(fs *flag.FlagSet, o *streamOptions) (check func(stdout io.Writer) error) {
	var m machine
	m.addMachineFlags(fs, flagSim|flagDevice, map[string]string{"sim": "run on the CPU simulator instead of a GPU"})
	in := fs.String("in", "", "input files, comma-separated, one per kernel input (- for stdin)")
	out := fs.String("out", "", "output file (- for stdout; the report then goes to stderr)")
	fs.StringVar(&o.kernel, "kernel", "seed", "embedded kernel: seed or axpb (1 input), saxpy or lerp (2 inputs)")
	fs.IntVar(&o.iters, "iters", 100, "seed kernel iterations")
	fs.Var(sizeFlag{v: &o.chunk}, "chunk", "elements per chunk (at least 1K)")
	fs.IntVar(&o.slots, "slots", 0, "buffer slots (default compute-streams+2)")
	fs.IntVar(&o.computeStreams, "compute-streams", pipeline.DefaultComputeStreams, "streams for kernels")
	fs.IntVar(&o.readers, "readers", 0, "goroutines reading file inputs with pread (default: one per CPU)")
	fs.IntVar(&o.writers, "writers", 0, "goroutines writing a file output with pwrite (default 1: buffered writes to one file serialise in the kernel)")
	fs.Var(sizeFlag{v: &o.piece}, "piece", "bytes per pread or pwrite")
	fs.BoolVar(&o.direct, "direct", false, "open input files with O_DIRECT (Linux; chunks must be whole 4 KiB pages)")
	fs.BoolVar(&o.directOut, "direct-out", false, "write the output file with O_DIRECT, straight from the pinned slots (Linux; chunks must be whole 4 KiB pages)")
	fs.BoolVar(&o.preallocate, "preallocate", false, "allocate the output file's final size before the first write (fallocate; best effort, skipped where the file system cannot)")
	fs.BoolVar(&o.verify, "verify", false, "read the inputs and the output file back and check every element against the CPU reference")
	fs.BoolVar(&o.bound, "bound", false, "measure the bound in the same run: reading the inputs and writing as much output alone (to a scratch file beside a regular output file; each twice, the faster kept), and the in-memory pinned pipeline for the same N (allocates N elements of pinned memory per input and output)")
	fs.BoolVar(&o.jsonOut, "json", false, "print results as JSON")
	fs.BoolVar(&o.quiet, "quiet", false, "print only errors")
	return func(stdout io.Writer) error {
		if err := m.check(fs, false, false); err != nil {
			return err
		}
		o.sim, o.device = m.sim, m.device
		return checkStreamOptions(fs, o, *in, *out, stdout)
	}
}

// streamKernels names the embedded kernels that a streaming run takes:
// those with inputs and one output.
func streamKernels() []string {
	var names []string
	for _, name := range kernels.Pipelinable() {
		if k, err := kernels.ByName(name); err == nil && k.Inputs > 0 && k.Outputs == 1 {
			names = append(names, name)
		}
	}
	return names
}

// checkStreamOptions checks overlap run --in's parsed flags and, before
// any file is opened for writing, its files: each input exists, is not a
// directory and holds whole elements, files are as long as each other,
// the output is none of the inputs under any name, and what --verify and
// --bound read back can be read. stdout is what --out - writes to.
func checkStreamOptions(fs *flag.FlagSet, o *streamOptions, in, out string, stdout io.Writer) error {
	if in != "" {
		o.ins = strings.Split(in, ",")
	}
	if out != "" {
		o.outs = strings.Split(out, ",")
	}
	wantIns := 0
	if slices.Contains(streamKernels(), o.kernel) {
		k, _ := kernels.ByName(o.kernel)
		wantIns = k.Inputs
	}
	dashes := 0
	for _, f := range o.ins {
		if f == "-" {
			dashes++
		}
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case wantIns == 0:
		return fmt.Errorf("--kernel %q: unknown (have %s)", o.kernel, strings.Join(streamKernels(), ", "))
	case len(o.ins) != wantIns:
		return fmt.Errorf("--in: kernel %s takes %d input(s), got %d", o.kernel, wantIns, len(o.ins))
	case len(o.outs) != 1:
		return fmt.Errorf("--out: kernel %s has 1 output, got %d", o.kernel, len(o.outs))
	case dashes > 1:
		return errors.New("--in: stdin (-) can be only one input")
	case o.iters < 0:
		return fmt.Errorf("--iters %d: must not be negative", o.iters)
	case isSet(fs, "iters") && !hasScalar(o.kernel, "iters"):
		return fmt.Errorf("--iters is the seed kernel's; %s takes no iterations", o.kernel)
	case o.chunk < minStreamChunk:
		return fmt.Errorf("--chunk %d: a streaming run's chunks are at least %d elements (%d KiB): each costs a read, a write and several driver calls",
			o.chunk, minStreamChunk, 4*minStreamChunk/1024)
	case o.computeStreams < 1 || o.computeStreams > 64:
		return fmt.Errorf("--compute-streams %d: want 1 to 64", o.computeStreams)
	case (o.slots != 0 || isSet(fs, "slots")) && (o.slots < 2 || o.slots < o.computeStreams || o.slots > 1024):
		return fmt.Errorf("--slots %d: want 2 to 1024, and at least --compute-streams %d", o.slots, o.computeStreams)
	case o.readers < 0 || o.writers < 0 || o.readers > 1024 || o.writers > 1024:
		return errors.New("--readers and --writers: want 0 (the default) to 1024")
	case o.piece > 1<<30:
		return fmt.Errorf("--piece %d: at most 1G", o.piece)
	case o.direct && (o.chunk*4)%pipeline.DirectAlign != 0:
		return fmt.Errorf("--direct: a chunk of %d float32 is not a whole number of %d-byte pages", o.chunk, pipeline.DirectAlign)
	case o.directOut && (o.chunk*4)%pipeline.DirectAlign != 0:
		return fmt.Errorf("--direct-out: a chunk of %d float32 is not a whole number of %d-byte pages", o.chunk, pipeline.DirectAlign)
	case (o.directOut || o.preallocate) && o.outs[0] == "-":
		return errors.New("--direct-out and --preallocate write to a file: they cannot write stdout (--out -)")
	case o.preallocate && dashes > 0:
		return errors.New("--preallocate takes the output's size from the inputs' files: it cannot read stdin (--in -)")
	case o.verify && o.outs[0] == "-":
		return errors.New("--verify reads the output back from its file: it cannot read stdout (--out -)")
	case o.verify && dashes > 0:
		return errors.New("--verify reads the inputs back from their files: it cannot read stdin (--in -)")
	case o.bound && dashes > 0:
		return errors.New("--bound reads the inputs alone: it needs files, not stdin (--in -)")
	}
	// The inputs: each one readable, not a directory, whole elements, and
	// files as long as each other (a pipe's length shows only as it is
	// read, and the run then stops where it ends).
	elems := int64(-1)
	first := ""
	for _, f := range o.ins {
		if f == "" {
			return errors.New("--in: empty file name")
		}
		if f == "-" {
			continue
		}
		n, regular, err := inputFile(f)
		if err != nil {
			return err
		}
		if !regular {
			continue
		}
		if elems >= 0 && n != elems {
			return fmt.Errorf("--in: %s holds %d elements and %s %d; the inputs must be as long", first, elems, f, n)
		}
		elems, first = n, f
	}
	// The output: none of the inputs, under any name, nor the file that
	// stdin reads or stdout writes.
	for _, f := range o.ins {
		var same bool
		switch {
		case f == "-" && o.outs[0] == "-":
			continue // a pipe through: nothing is overwritten
		case f == "-":
			same = sameAsOpen(o.outs[0], stdin)
		case o.outs[0] == "-":
			same = sameAsOpen(f, stdout)
		default:
			same = sameFile(o.outs[0], f)
		}
		if same {
			return fmt.Errorf("--out %s is the input %s (the same file): writing it would destroy the input as it is read", o.outs[0], f)
		}
	}
	if o.verify && !bench.RegularOrNew(o.outs[0]) {
		return fmt.Errorf("--verify reads the output back from its file: %s is not a regular file", o.outs[0])
	}
	if hasScalar(o.kernel, "iters") {
		// Over the input files' elements; from stdin, whose length is not
		// known, over one chunk, which alone must be able to finish.
		n, what, lower := int64(o.chunk), fmt.Sprintf("one chunk of %d elements", o.chunk), "--iters or --chunk"
		if elems >= 0 {
			n, what, lower = elems, fmt.Sprintf("the %d elements of %s", elems, first), "--iters"
		}
		if err := checkWork(n, o.iters, o.sim, what, lower); err != nil {
			return err
		}
	}
	if o.outs[0] != "-" {
		if err := checkWritable("out", o.outs[0]); err != nil {
			return err
		}
	}
	if o.quiet && o.jsonOut {
		o.quiet = false
	}
	return nil
}

// inputFile checks that an --in file exists, is not a directory and, when
// it is a regular file, can be opened and holds whole elements; it
// returns its length in elements then. A pipe or a device is not opened
// here: opening a named pipe would start its writer, and closing it again
// would end that writer's stream.
func inputFile(name string) (elems int64, regular bool, err error) {
	st, err := os.Stat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, false, fmt.Errorf("--in %s: no such file", name)
	case err != nil:
		return 0, false, fmt.Errorf("--in: %w", err)
	case st.IsDir():
		return 0, false, fmt.Errorf("--in %s: is a directory", name)
	case !st.Mode().IsRegular():
		return 0, false, nil
	case st.Size()%4 != 0:
		return 0, false, fmt.Errorf("--in %s: %d bytes is not a whole number of float32 elements (4 bytes each)", name, st.Size())
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, false, fmt.Errorf("--in %s: cannot be read: %v", name, unwrapPath(err))
	}
	f.Close()
	return st.Size() / 4, true, nil
}

// runStream runs overlap stream once its flags are checked.
func runStream(o *streamOptions, stdout, stderr io.Writer) int {
	ctx, stop := signalContext()
	defer stop()
	report := stdout
	if o.outs[0] == "-" {
		report = stderr
	}
	res, err := executeStream(ctx, o, stdout, stderr)
	if err != nil {
		return reportError("stream", stoppedBy(ctx, err), stderr)
	}
	if o.jsonOut {
		writeJSON(report, res)
	} else if !o.quiet {
		printStream(report, res)
	}
	return exitOK
}

// streamResult is what a streaming run measured (bench.StreamResult).
type (
	streamResult = bench.StreamResult
	streamBound  = bench.StreamBound
)

// executeStream runs overlap stream on the machine that the flags
// choose (bench.Stream).
func executeStream(ctx context.Context, o *streamOptions, stdout, stderr io.Writer) (*streamResult, error) {
	e, err := openEnv(&runOptions{machine: machine{sim: o.sim, device: o.device}, kernel: o.kernel})
	if err != nil {
		return nil, err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	res, err := bench.Stream(ctx, e.backend, bench.StreamOptions{Inputs: o.ins, Output: o.outs[0], Stdin: stdin, Stdout: stdout,
		Kernel: o.kernel, Iters: o.iters, Modules: e.mods, ChunkElems: o.chunk, Slots: o.slots, ComputeStreams: o.computeStreams,
		Readers: o.readers, Writers: o.writers, PieceBytes: o.piece, Direct: o.direct, DirectOutput: o.directOut, Preallocate: o.preallocate, Verify: o.verify, Bound: o.bound, Progress: prog.line})
	if err != nil {
		return nil, streamError(err)
	}
	res.Verified = flagWords(res.Verified)
	return res, nil
}

func printStream(w io.Writer, r *streamResult) {
	label := ""
	if r.Simulated {
		label = " [simulated: CPU simulator, not a GPU; rates are not GPU rates]"
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
	fmt.Fprintf(w, "overlap stream: %s on %s, streaming %s → %s%s\n", kernel, r.Backend, strings.Join(r.Inputs, ","), r.Output, label)
	fmt.Fprintf(w, "%d float32 elements (%s in, %s out); chunk %d elements, %d slots, %d compute stream(s)%s\n",
		r.Elems, humanBytes(r.InBytes), humanBytes(r.OutBytes), r.ChunkElems, r.Slots, r.ComputeStreams, direct)
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%-8s %10s %12s  %s\n", "STAGE", "GB/s", "TIME", "MEASURED")
	for _, s := range r.Stages {
		mark := ""
		if s.Stage == r.BoundStage {
			mark = "  ← bounds the run"
		}
		fmt.Fprintf(w, "%-8s %10.1f %9.2f ms  %s%s\n", s.Stage, s.GBps, s.Ms, s.How, mark)
	}
	fmt.Fprintln(w)
	rss := "peak RSS (VmHWM) not available on this system"
	if r.PeakRSS > 0 {
		rss = "peak RSS (VmHWM) " + humanBytes(r.PeakRSS)
	}
	rss += "; pinned slots " + humanBytes(r.PinnedBytes)
	fmt.Fprintf(w, "streaming run (after an untimed warm-up over 2·slots chunks of zeros): %.2f ms, %.1f GB/s of input; %s\n", r.Ms, gbps(r.InBytes, time.Duration(r.Ms*float64(time.Millisecond))), rss)
	if b := r.Bound; b != nil {
		write := fmt.Sprintf("write the output %.2f ms", b.WriteMs)
		if !b.WriteMeasured {
			write = "the write not measured: the output is not a regular file"
		}
		fmt.Fprintf(w, "bound, measured in this run (slowest alone): %.2f ms, %s (read the inputs into pinned memory %.2f ms, in-memory pinned pipeline %.2f ms, %s)\n",
			b.BoundMs, b.Slowest, b.ReadMs, b.PipelineMs, write)
		fmt.Fprintf(w, "efficiency = bound / streaming time: %.1f%%\n", 100*b.Efficiency)
		if b.Efficiency > 1 {
			fmt.Fprintf(w, "above 100%%: the %s stage alone (the faster of two passes before the run) took longer than the whole run; the host's rate for it varies from pass to pass, so this bound is not a floor\n", b.Slowest)
		}
	}
	fmt.Fprintf(w, "%s%s\n", r.Verified, label)
}

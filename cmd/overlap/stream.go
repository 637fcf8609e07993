package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/pipeline"
)

// stdin is what --in - reads; tests replace it.
var stdin io.Reader = os.Stdin

// streamOptions are the flags of overlap stream: bench.Stream's options,
// and the machine and the report.
type streamOptions struct {
	bench.StreamOptions
	sim            bool
	device         int
	jsonOut, quiet bool
}

// streamCmd is overlap stream (overlap run --in in earlier releases).
var streamCmd = &command{
	name:      "stream",
	usageLine: "overlap stream --in FILE[,FILE] --out FILE [flags]",
	short:     "stream raw float32 files (- for stdin/stdout) through a kernel with bounded memory",
	long:      "Streams raw little-endian float32 files (- for stdin/stdout) through a kernel with memory bounded by the pinned slots.",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o := &streamOptions{}
		check := streamFlags(fs, o)
		return func(stdout, stderr io.Writer) int {
			return benchBody("stream", func() error { return check(stdout) }, func(ctx context.Context, stdout, stderr io.Writer) error {
				return runStream(ctx, o, stdout, stderr)
			})(stdout, stderr)
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
	o.ChunkElems, o.PieceBytes = pipeline.DefaultChunkElems, 1<<20
	fs.StringVar(&o.Kernel, "kernel", "seed", "embedded kernel: seed or axpb (1 input), saxpy or lerp (2 inputs)")
	fs.IntVar(&o.Iters, "iters", 100, "seed kernel iterations")
	fs.Var(sizeFlag{v: &o.ChunkElems}, "chunk", "elements per chunk (at least 1K)")
	fs.IntVar(&o.Slots, "slots", 0, "buffer slots (default compute-streams+2)")
	fs.IntVar(&o.ComputeStreams, "compute-streams", pipeline.DefaultComputeStreams, "streams for kernels")
	fs.IntVar(&o.Readers, "readers", 0, "goroutines reading file inputs with pread (default: one per CPU)")
	fs.IntVar(&o.Writers, "writers", 0, "goroutines writing a file output with pwrite (default 1: buffered writes to one file serialise in the kernel)")
	fs.Var(sizeFlag{v: &o.PieceBytes}, "piece", "bytes per pread or pwrite")
	fs.BoolVar(&o.Direct, "direct", false, "open input files with O_DIRECT (Linux; chunks must be whole 4 KiB pages)")
	fs.BoolVar(&o.DirectOutput, "direct-out", false, "write the output file with O_DIRECT, straight from the pinned slots (Linux; chunks must be whole 4 KiB pages)")
	fs.BoolVar(&o.Preallocate, "preallocate", false, "allocate the output file's final size before the first write (fallocate; best effort, skipped where the file system cannot)")
	fs.BoolVar(&o.Verify, "verify", false, "read the inputs and the output file back and check every element against the CPU reference")
	fs.BoolVar(&o.Bound, "bound", false, "measure the bound in the same run: reading the inputs and writing as much output alone (to a scratch file beside a regular output file; each twice, the faster kept), and the in-memory pinned pipeline for the same N (allocates N elements of pinned memory per input and output)")
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

// checkStreamOptions checks overlap stream's parsed flags and, before
// any file is opened for writing, its files (bench.CheckStream). stdout
// is what --out - writes to.
func checkStreamOptions(fs *flag.FlagSet, o *streamOptions, in, out string, stdout io.Writer) error {
	if in != "" {
		o.Inputs = strings.Split(in, ",")
	}
	var outs []string
	if out != "" {
		outs = strings.Split(out, ",")
	}
	o.Output, o.Stdin, o.Stdout = "", stdin, stdout
	if len(outs) == 1 {
		o.Output = outs[0]
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case len(outs) > 1:
		return fmt.Errorf("--out: kernel %s has 1 output, got %d", o.Kernel, len(outs))
	case isSet(fs, "compute-streams") && o.ComputeStreams == 0:
		return errors.New("--compute-streams 0: want 1 to 64")
	case isSet(fs, "slots") && o.Slots == 0:
		return fmt.Errorf("--slots 0: want 2 to 1024, and at least --compute-streams %d", o.ComputeStreams)
	}
	if err := bench.CheckStream(o.StreamOptions, o.sim); err != nil {
		return flagError(err)
	}
	if isSet(fs, "iters") && !hasScalar(o.Kernel, "iters") {
		return fmt.Errorf("--iters is the seed kernel's; %s takes no iterations", o.Kernel)
	}
	if o.Output != "-" {
		if err := checkWritable("out", o.Output); err != nil {
			return err
		}
	}
	if err := checkStreamRoom(o.Inputs, o.Output); err != nil {
		return err
	}
	if o.quiet && o.jsonOut {
		o.quiet = false
	}
	return nil
}

// checkEndless refuses an input that is a character device other than
// the null device, which need not end: /dev/zero does not, and a stream of
// it wrote until the disk was full. Stdin (-) is the caller's to bound.
func checkEndless(inputs []string) error {
	for _, in := range inputs {
		if in == "-" || in == os.DevNull {
			continue
		}
		if st, err := os.Stat(in); err == nil && st.Mode()&os.ModeCharDevice != 0 && !sameFile(in, os.DevNull) {
			return fmt.Errorf("--in %s is a character device, which need not end: give a file, or pipe as much as you mean through --in - (head -c SIZE %s | overlap ... --in -)", in, in)
		}
	}
	return nil
}

// checkStreamRoom refuses what checkEndless refuses, and an output file
// whose file system has less room than the input files say it will take:
// each input's length is the output's (one float32 in, one out), and the
// inputs are as long as each other.
func checkStreamRoom(inputs []string, output string) error {
	if err := checkEndless(inputs); err != nil {
		return err
	}
	if output == "-" {
		return nil
	}
	for _, in := range inputs {
		st, err := os.Stat(in)
		if in == "-" || err != nil || !st.Mode().IsRegular() {
			continue // stdin's length shows only as it is read; CheckStream has refused a missing file
		}
		if free, where, short := roomShort(output, st.Size()); short {
			return fmt.Errorf("--out %s would take %s, the length of --in %s, more than the %s free on the file system of %s", output, humanBytes(st.Size()), in, humanBytes(free), where)
		}
		return nil
	}
	return nil
}

// runStream runs overlap stream once its flags are checked
// (bench.Stream) on the machine that they choose; the report goes to
// stderr when the output is stdout.
func runStream(ctx context.Context, o *streamOptions, stdout, stderr io.Writer) error {
	e, err := openEnv(&runOptions{machine: machine{sim: o.sim, device: o.device}, kernel: o.Kernel})
	if err != nil {
		return err
	}
	defer e.close()
	prog := newProgress(stderr, o.quiet || o.jsonOut)
	defer prog.done()
	so := o.StreamOptions
	so.Modules, so.Progress = e.mods, prog.line
	res, err := bench.Stream(ctx, e.backend, so)
	if err != nil {
		return streamError(err)
	}
	prog.done()
	res.Verified = flagWords(res.Verified)
	report := stdout
	if o.Output == "-" {
		report = stderr
	}
	if o.jsonOut {
		writeJSON(report, res)
	} else if !o.quiet {
		return res.WriteTable(report)
	}
	return nil
}

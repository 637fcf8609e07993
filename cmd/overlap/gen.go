package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/overlap/bench"
)

// genCmd is overlap gen: it writes an input file for streaming runs,
// --size bytes of little-endian float32 elements of overlap's standard
// pattern.
var genCmd = &command{
	name:      "gen",
	usageLine: "overlap gen --size BYTES --out FILE [--offset N]",
	short:     "write an input file of the standard pattern",
	long:      "Writes little-endian float32 of overlap's standard input pattern.",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		var o genOptions
		fs.Var(sizeFlag{v: &o.size}, "size", "bytes to write, a multiple of 4 (K, M, G are binary)")
		fs.IntVar(&o.offset, "offset", 0, "pattern index of the first element (a second input uses another)")
		fs.StringVar(&o.out, "out", "", "the file to write, or - for stdout")
		return func(stdout, stderr io.Writer) int { return runGen(fs, &o, stdout, stderr) }
	},
}

// genOptions are overlap gen's flags.
type genOptions struct {
	size, offset int
	out          string
}

func runGen(fs *flag.FlagSet, o *genOptions, stdout, stderr io.Writer) int {
	size, offset, out := o.size, o.offset, &o.out
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "overlap gen: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	case size == 0:
		fmt.Fprintln(stderr, "overlap gen: --size is required")
		return exitUsage
	case size%4 != 0:
		fmt.Fprintf(stderr, "overlap gen: --size %d is not a multiple of 4 bytes (one float32)\n", size)
		return exitUsage
	case *out == "":
		fmt.Fprintln(stderr, "overlap gen: --out FILE is required (- for stdout)")
		return exitUsage
	case offset < 0:
		fmt.Fprintf(stderr, "overlap gen: --offset %d: must not be negative\n", offset)
		return exitUsage
	}
	if *out == "-" {
		if err := genSequential(stdout, size/4, offset); err != nil {
			fmt.Fprintf(stderr, "overlap gen: writing stdout: %v\n", err)
			return exitFail
		}
		return exitOK
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintf(stderr, "overlap gen: %v\n", err)
		return exitFail
	}
	err = genParallel(f, size/4, offset)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "overlap gen: %v\n", err)
		return exitFail
	}
	return exitOK
}

// genSequential writes n elements of the pattern from offset to w, in
// order (bench.WritePattern).
func genSequential(w io.Writer, n, offset int) error {
	return benchError(bench.WritePattern(w, n, offset))
}

// genParallel writes them to f with one goroutine per CPU
// (bench.WritePatternAt).
func genParallel(f *os.File, n, offset int) error {
	return benchError(bench.WritePatternAt(f, n, offset))
}

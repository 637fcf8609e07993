package main

import (
	"cmp"
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
	err := refuse([]refusal{
		{fs.NArg() > 0, fmt.Sprintf("unexpected argument %q", fs.Arg(0))},
		{o.size == 0, "--size is required"},
		{o.size%4 != 0, fmt.Sprintf("--size %d is not a multiple of 4 bytes (one float32)", o.size)},
		{o.out == "", "--out FILE is required (- for stdout)"},
		{o.offset < 0, fmt.Sprintf("--offset %d: must not be negative", o.offset)},
	})
	if err != nil {
		return reportError("gen", usageError{err}, stderr)
	}
	// In order to stdout (bench.WritePattern); to a file with one
	// goroutine per CPU (bench.WritePatternAt).
	if o.out == "-" {
		if err = benchError(bench.WritePattern(stdout, o.size/4, o.offset)); err != nil {
			err = fmt.Errorf("writing stdout: %w", err)
		}
	} else {
		var f *os.File
		if f, err = os.Create(o.out); err == nil {
			err = cmp.Or(benchError(bench.WritePatternAt(f, o.size/4, o.offset)), f.Close())
		}
	}
	if err != nil {
		return reportError("gen", err, stderr)
	}
	return exitOK
}

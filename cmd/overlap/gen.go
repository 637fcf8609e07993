package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/purecuda/overlap/bench"
	"github.com/purecuda/overlap/internal/procfs"
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
	if err == nil && o.out != "-" {
		err = checkWritable("out", o.out)
		if err == nil {
			err = checkFreeSpace(o.out, int64(o.size))
		}
	}
	if err != nil {
		return reportError("gen", usageError{err}, stderr)
	}
	ctx, stop := signalContext("gen", stderr)
	defer stop()
	// In order to stdout (bench.WritePattern); to a file with one
	// goroutine per CPU (bench.WritePatternAt). Each block's write looks
	// at ctx first, so that a signal stops the writing.
	if o.out == "-" {
		if err = benchError(bench.WritePattern(ctx, stdout, o.size/4, o.offset)); err != nil {
			err = fmt.Errorf("writing stdout: %w", err)
		}
	} else {
		var f *os.File
		if f, err = os.Create(o.out); err == nil {
			err = cmp.Or(benchError(bench.WritePatternAt(ctx, f, o.size/4, o.offset)), f.Close())
			if st, serr := os.Lstat(o.out); err != nil && serr == nil && st.Mode().IsRegular() {
				// A part of the pattern is no input anyone wants: the
				// file goes, a regular one (not /dev/null, say).
				os.Remove(o.out)
			}
		}
	}
	stop()
	if err := stoppedBy(ctx, err); err != nil {
		return reportError("gen", err, stderr)
	}
	return exitOK
}

// freeSpace is procfs.FreeSpace, which a test replaces.
var freeSpace = procfs.FreeSpace

// checkFreeSpace refuses a file of size bytes at path where the file
// system that would hold it has less room, as far as it says: a new
// file's folder's, or an existing regular file's own (through a link, its
// target's), its present size counted as room, since it is truncated
// first. Anything else (/dev/null, a FIFO) takes what it takes.
func checkFreeSpace(path string, size int64) error {
	if free, where, short := roomShort(path, size); short {
		return fmt.Errorf("--size %d (%s): more than the %s free on the file system of %s", size, humanBytes(size), humanBytes(free), where)
	}
	return nil
}

// roomShort reports whether a file of size bytes at path would not fit,
// as checkFreeSpace judges it, with the room there is and where.
func roomShort(path string, size int64) (free int64, where string, short bool) {
	where = filepath.Dir(path)
	var have int64
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		return 0, "", false
	case err == nil:
		where, have = path, st.Size()
	}
	free, ok := freeSpace(where)
	if !ok {
		return 0, "", false
	}
	free += have
	return free, where, size > free
}

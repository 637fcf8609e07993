package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx/kernels"
)

// genBlock is the elements one goroutine of overlap gen fills and writes
// at a time.
const genBlock = 1 << 20

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

func genSequential(w io.Writer, n, offset int) error {
	buf := make([]float32, min(n, genBlock))
	for done := 0; done < n; {
		b := buf[:min(len(buf), n-done)]
		kernels.FillPattern(b, offset+done)
		if _, err := w.Write(driver.Bytes(b)); err != nil {
			return err
		}
		done += len(b)
	}
	return nil
}

// genParallel fills and writes blocks with one goroutine per CPU.
func genParallel(f *os.File, n, offset int) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, runtime.GOMAXPROCS(0))
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, genBlock)
			for {
				lo := int(next.Add(genBlock)) - genBlock
				if lo >= n {
					return
				}
				b := buf[:min(genBlock, n-lo)]
				for i := range b {
					b[i] = kernels.PatternValue(offset + lo + i)
				}
				if _, err := f.WriteAt(driver.Bytes(b), int64(lo)*4); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

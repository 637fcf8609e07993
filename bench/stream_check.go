package bench

import (
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// StreamKernels names the embedded kernels that [Stream] takes: those
// with inputs and one output.
func StreamKernels() []string {
	var names []string
	for _, name := range kernels.Pipelinable() {
		if k, err := kernels.ByName(name); err == nil && k.Inputs > 0 && k.Outputs == 1 {
			names = append(names, name)
		}
	}
	return names
}

// CheckStream checks o as [Stream] will run it, on the simulator (sim)
// or a GPU, before any file is opened for writing: the kernel and its
// inputs, the pipeline's shape, and the files: each input exists, is not
// a directory and holds whole elements, input files are as long as each
// other, the output is none of the inputs under any name (nor the file
// that Stdin reads or Stdout writes), what Verify and Bound read back
// can be read, and the seed kernel's work over the inputs (over one
// chunk from stdin, whose length is not known) can finish. Its errors
// are *[OptionError]s, inside an *[OpenError] for an input that cannot be
// opened; Stream makes the same checks.
func CheckStream(o StreamOptions, sim bool) error {
	kernel := o.Kernel
	if kernel == "" {
		kernel = "seed"
	}
	wantIns := 0
	if slices.Contains(StreamKernels(), kernel) {
		k, _ := kernels.ByName(kernel)
		wantIns = k.Inputs
	}
	dashes := 0
	for _, f := range o.Inputs {
		if f == "-" {
			dashes++
		}
	}
	chunk, streams := cmp0(o.ChunkElems, pipeline.DefaultChunkElems), cmp0(o.ComputeStreams, pipeline.DefaultComputeStreams)
	switch {
	case wantIns == 0:
		return optionErr("{Kernel} %q: unknown (have %s)", kernel, strings.Join(StreamKernels(), ", "))
	case len(o.Inputs) != wantIns:
		return optionErr("{Inputs}: kernel %s takes %d input(s), got %d", kernel, wantIns, len(o.Inputs))
	case o.Output == "":
		return optionErr("{Output}: kernel %s has 1 output, got 0", kernel)
	case dashes > 1:
		return optionErr("{Inputs}: stdin (-) can be only one input")
	case o.Iters < 0:
		return optionErr("{Iters} %d: must not be negative", o.Iters)
	case chunk < MinStreamChunk:
		return optionErr("{ChunkElems} %d: a streaming run's chunks are at least %d elements (%d KiB): each costs a read, a write and several driver calls",
			chunk, MinStreamChunk, 4*MinStreamChunk/1024)
	case streams < 1 || streams > 64:
		return optionErr("{ComputeStreams} %d: want 1 to 64", streams)
	case o.Slots != 0 && (o.Slots < 2 || o.Slots < streams || o.Slots > 1024):
		return optionErr("{Slots} %d: want 2 to 1024, and at least {ComputeStreams} %d", o.Slots, streams)
	case o.Readers < 0 || o.Writers < 0 || o.Readers > 1024 || o.Writers > 1024:
		return optionErr("{Readers} and {Writers}: want 0 (the default) to 1024")
	case o.PieceBytes < 0:
		return optionErr("{PieceBytes} %d: must not be negative", o.PieceBytes)
	case o.PieceBytes > 1<<30:
		return optionErr("{PieceBytes} %d: at most 1G", o.PieceBytes)
	case o.Direct && (chunk*4)%pipeline.DirectAlign != 0:
		return optionErr("{Direct}: a chunk of %d float32 is not a whole number of %d-byte pages", chunk, pipeline.DirectAlign)
	case o.DirectOutput && (chunk*4)%pipeline.DirectAlign != 0:
		return optionErr("{DirectOutput}: a chunk of %d float32 is not a whole number of %d-byte pages", chunk, pipeline.DirectAlign)
	case (o.DirectOutput || o.Preallocate) && o.Output == "-":
		return optionErr("{DirectOutput} and {Preallocate} write to a file: they cannot write stdout ({Output} -)")
	case o.Preallocate && dashes > 0:
		return optionErr("{Preallocate} takes the output's size from the inputs' files: it cannot read stdin ({Inputs} -)")
	case o.Verify && o.Output == "-":
		return optionErr("{Verify} reads the output back from its file: it cannot read stdout ({Output} -)")
	case o.Verify && dashes > 0:
		return optionErr("{Verify} reads the inputs back from their files: it cannot read stdin ({Inputs} -)")
	case o.Bound && dashes > 0:
		return optionErr("{Bound} reads the inputs alone: it needs files, not stdin ({Inputs} -)")
	}
	// The inputs: each one readable, not a directory, whole elements, and
	// files as long as each other (a pipe's length shows only as it is
	// read, and the run then stops where it ends).
	elems, first := int64(-1), ""
	for _, f := range o.Inputs {
		if f == "" {
			return optionErr("{Inputs}: empty file name")
		}
		if f == "-" {
			continue
		}
		n, regular, err := checkInputFile(f)
		if err != nil {
			return err
		}
		if !regular {
			continue
		}
		if elems >= 0 && n != elems {
			return optionErr("{Inputs}: %s holds %d elements and %s %d; the inputs must be as long", first, elems, f, n)
		}
		elems, first = n, f
	}
	// The output: none of the inputs, under any name, nor the file that
	// stdin reads or stdout writes.
	for _, f := range o.Inputs {
		var a, b any = o.Output, f
		switch {
		case f == "-" && o.Output == "-":
			continue // a pipe through: nothing is overwritten
		case f == "-":
			b = o.Stdin
		case o.Output == "-":
			a = o.Stdout
		}
		if sameFileOrOpen(a, b) {
			return optionErr("{Output} %s is the input %s (the same file): writing it would destroy the input as it is read", o.Output, f)
		}
	}
	if o.Verify && !RegularOrNew(o.Output) {
		return optionErr("{Verify} reads the output back from its file: %s is not a regular file", o.Output)
	}
	if kernel != "seed" {
		return nil
	}
	if elems >= 0 {
		return checkWork(elems, o.Iters, sim, "the "+strconv.FormatInt(elems, 10)+" elements of "+first, "{Iters}")
	}
	return checkWork(int64(chunk), o.Iters, sim, "one chunk of "+strconv.Itoa(chunk)+" elements", "{Iters} or {ChunkElems}")
}

// checkInputFile checks that an input file exists, is not a directory
// and, when it is a regular file, can be opened and holds whole
// elements; it returns its length in elements then. A pipe or a device
// is not opened here: opening a named pipe would start its writer, and
// closing it again would end that writer's stream.
func checkInputFile(name string) (elems int64, regular bool, err error) {
	st, err := os.Stat(name)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return 0, false, &OpenError{Err: optionErr("{Inputs} %s: no such file", name)}
	case err != nil:
		return 0, false, optionErr("{Inputs}: %v", err)
	case st.IsDir():
		return 0, false, optionErr("{Inputs} %s: is a directory", name)
	case !st.Mode().IsRegular():
		return 0, false, nil
	case st.Size()%4 != 0:
		return 0, false, optionErr("{Inputs} %s: %d bytes is not a whole number of float32 elements (4 bytes each)", name, st.Size())
	}
	f, err := os.Open(name)
	if err != nil {
		return 0, false, &OpenError{Err: optionErr("{Inputs} %s: cannot be read: %v", name, unwrapPath(err))}
	}
	f.Close()
	return st.Size() / 4, true, nil
}

// sameFileOrOpen reports whether a and b, each a path or the stdin or
// stdout that a run was given, are one file (os.SameFile: through every
// spelling, symbolic and hard links included). An open file counts only
// where it is on a regular file; a path that does not exist is no file.
func sameFileOrOpen(a, b any) bool {
	stat := func(v any) os.FileInfo {
		switch f := v.(type) {
		case string:
			if st, err := os.Stat(f); err == nil {
				return st
			}
		case *os.File:
			if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
				return st
			}
		}
		return nil
	}
	sa, sb := stat(a), stat(b)
	return sa != nil && sb != nil && os.SameFile(sa, sb)
}

// unwrapPath drops an *os.PathError's repetition of the path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// cmp0 is v, or def where v is 0.
func cmp0(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

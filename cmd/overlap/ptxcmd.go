package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/purecuda/overlap/ptx"
)

// ptxCmd is overlap ptx, the group of ptx describe; its usage is its
// subcommands'.
var ptxCmd = &command{
	name:  "ptx",
	short: "read a PTX file (no GPU needed)",
}

// ptxDescribeCmd is overlap ptx describe FILE: it reads a PTX file
// without a GPU and prints its header and each entry's parameters.
var ptxDescribeCmd = &command{
	name:      "describe",
	usageLine: ptxUsage,
	short:     "read a PTX file (no GPU needed): version, target, entries and their parameters",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		jsonOut := fs.Bool("json", false, "print the description as JSON")
		return func(stdout, stderr io.Writer) int { return runPTXDescribe(fs, jsonOut, stdout, stderr) }
	},
}

const ptxUsage = "overlap ptx describe [--json] FILE"

func runPTXDescribe(fs *flag.FlagSet, jsonOut *bool, stdout, stderr io.Writer) int {
	// Flags may follow the file, as in "describe k.ptx --json".
	var rest []string
	for fs.NArg() > 0 {
		rest = append(rest, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			fmt.Fprintf(stderr, "overlap ptx: %v\n", err)
			return exitUsage
		}
	}
	switch {
	case len(rest) > 1:
		// Name what is extra, as the other commands do.
		fmt.Fprintf(stderr, "overlap ptx: unexpected argument %q: describe reads one FILE\n", rest[1])
		return exitUsage
	case len(rest) == 0:
		fmt.Fprintf(stderr, "overlap ptx: usage: %s\n", ptxUsage)
		return exitUsage
	case rest[0] == "":
		fmt.Fprintf(stderr, "overlap ptx: describe: an empty file name\n")
		return exitUsage
	}
	path := rest[0]
	src, err := readPTXFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "overlap ptx: %v\n", err)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, ptx.ErrNotPTX) {
			return exitUsage
		}
		return exitFail
	}
	f, err := ptx.Parse(src)
	if err != nil {
		fmt.Fprintf(stderr, "overlap ptx: %s: %v\n", path, err)
		return exitFail
	}
	if *jsonOut {
		writeJSON(stdout, ptx.Describe(f))
		return exitOK
	}
	fmt.Fprintf(stdout, "%s: PTX ISA %s, target %v, %d-bit addresses\n", path, f.Version, f.Targets, f.AddressSize)
	if len(f.Funcs) > 0 {
		fmt.Fprintf(stdout, "device functions: %v\n", f.Funcs)
	}
	if len(f.Entries) == 0 {
		fmt.Fprintln(stdout, "no entries (kernels)")
	}
	for _, e := range f.Entries {
		fmt.Fprintf(stdout, "entry %s (line %d), %d parameter(s):\n", e.Name, e.Line, len(e.Params))
		for i, l := range ptx.Layout(e.Params) {
			p := e.Params[i]
			fmt.Fprintf(stdout, "  %-24s %-6s size %-4d align %-3d offset %d\n", p.Name, p.Type, p.Size, p.Align, l.Offset)
		}
	}
	return exitOK
}

// readPTXFile reads a user's PTX file (ptx.ReadFile), its errors in the
// words of the flags: without ptx's prefix.
func readPTXFile(path string) ([]byte, error) {
	src, err := ptx.ReadFile(path)
	if err != nil {
		return nil, &fileError{strings.TrimPrefix(err.Error(), "ptx: "), err}
	}
	return src, nil
}

// fileError is a message about a file that wraps the reason.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

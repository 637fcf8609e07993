package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/overlap/ptx"
)

// ptxCmd is overlap ptx, the group of ptx describe.
var ptxCmd = &command{
	name:      "ptx",
	usageLine: "overlap ptx describe [--json] FILE",
	short:     "read a PTX file (no GPU needed)",
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
	if len(rest) != 1 {
		fmt.Fprintf(stderr, "overlap ptx: usage: %s\n", ptxUsage)
		return exitUsage
	}
	path := rest[0]
	src, err := readPTXFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "overlap ptx: %v\n", err)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, errNotPTX) {
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
		type param struct {
			Name   string `json:"name"`
			Type   string `json:"type"`
			Size   int    `json:"size"`
			Align  int    `json:"align"`
			Offset int    `json:"offset"`
		}
		type entry struct {
			Name   string  `json:"name"`
			Line   int     `json:"line"`
			Params []param `json:"params"`
		}
		out := struct {
			Version     string   `json:"version"`
			Targets     []string `json:"targets"`
			AddressSize int      `json:"address_size"`
			Entries     []entry  `json:"entries"`
			Funcs       []string `json:"funcs"`
		}{Version: f.Version.String(), Targets: nonNil(f.Targets), AddressSize: f.AddressSize, Entries: []entry{}, Funcs: nonNil(f.Funcs)}
		for _, e := range f.Entries {
			en := entry{Name: e.Name, Line: e.Line, Params: []param{}}
			for i, l := range ptx.Layout(e.Params) {
				p := e.Params[i]
				en.Params = append(en.Params, param{p.Name, p.Type, p.Size, p.Align, l.Offset})
			}
			out.Entries = append(out.Entries, en)
		}
		writeJSON(stdout, out)
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

// nonNil makes an absent list encode as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// fileError is a message about a file that wraps the reason's sentinel.
type fileError struct {
	msg string
	err error
}

func (e *fileError) Error() string { return e.msg }
func (e *fileError) Unwrap() error { return e.err }

// errNotPTX marks a path that cannot be a PTX module.
var errNotPTX = errors.New("not a PTX file")

// readPTXFile reads a user's PTX file, at most ptx.MaxFileSize bytes of
// it, whatever the file says its size is (/dev/zero says 0 and never
// ends).
func readPTXFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, &fileError{path + ": no such file", os.ErrNotExist}
		}
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, &fileError{path + ": is a directory", errNotPTX}
	}
	src, err := io.ReadAll(io.LimitReader(f, ptx.MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, unwrapPath(err))
	}
	if len(src) > ptx.MaxFileSize {
		return nil, &fileError{fmt.Sprintf("%s: larger than %d MiB: not a PTX module", path, ptx.MaxFileSize>>20), errNotPTX}
	}
	return src, nil
}

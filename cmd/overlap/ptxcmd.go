package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/purecuda/overlap/ptx"
)

// cmdPTX handles overlap ptx describe FILE: it reads a PTX file without a
// GPU and prints its header and each entry's parameters.
func cmdPTX(args []string, stdout, stderr io.Writer) int {
	jsonOut := false
	var rest []string
	for _, a := range args {
		if a == "--json" || a == "-json" {
			jsonOut = true
			continue
		}
		rest = append(rest, a)
	}
	if len(rest) != 2 || rest[0] != "describe" {
		fmt.Fprintln(stderr, "overlap ptx: usage: overlap ptx describe [--json] FILE")
		return exitUsage
	}
	path := rest[1]
	st, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(stderr, "overlap ptx: %s: no such file\n", path)
		return exitUsage
	}
	if st.IsDir() || st.Size() > ptx.MaxFileSize {
		fmt.Fprintf(stderr, "overlap ptx: %s: not a PTX file (a directory, or larger than %d MiB)\n", path, ptx.MaxFileSize>>20)
		return exitUsage
	}
	src, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(stderr, "overlap ptx: %v\n", err)
		return exitFail
	}
	f, err := ptx.Parse(src)
	if err != nil {
		fmt.Fprintf(stderr, "overlap ptx: %s: %v\n", path, err)
		return exitFail
	}
	if jsonOut {
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
		}{Version: f.Version.String(), Targets: f.Targets, AddressSize: f.AddressSize, Funcs: f.Funcs}
		for _, e := range f.Entries {
			en := entry{Name: e.Name, Line: e.Line, Params: []param{}}
			for i, l := range ptx.Layout(e.Params) {
				p := e.Params[i]
				en.Params = append(en.Params, param{p.Name, p.Type, p.Size, p.Align, l.Offset})
			}
			out.Entries = append(out.Entries, en)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(out)
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

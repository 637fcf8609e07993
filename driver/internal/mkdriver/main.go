// Command mkdriver generates package driver's raw layer from its prototype
// list, driver/prototypes.go: one line per driver entry point, as
// golang.org/x/sys/unix's mksyscall reads its //sys lines. It writes
//
//   - zsymbols.go: the symID constants and the symbol table;
//   - zcalls.go: one unexported typed wrapper per entry point, which packs
//     its arguments into uintptrs (every unsafe.Pointer conversion of a
//     driver call is there) and calls the checked call machinery of
//     raw.go;
//   - ../internal/fakecuda/src/zexports.h: the entry points that the fake
//     driver must export, which its libcuda.c includes into its
//     cuGetProcAddress_v2 table.
//
// Run it through go generate in package driver (go generate ./driver). With
// -check it writes nothing, and fails, naming them, when the files on disk
// differ from what it would write: make generate-check, in make test, runs
// it so.
//
// A prototype line reads
//
//	//cuda NAME(PARAMS) = EXPORT VERSION [MARK]
//
// NAME is the entry point's plain CUDA name, the one cuGetProcAddress
// takes, and the name of its wrapper; PARAMS its C parameters as Go
// parameters; EXPORT the name the library exports (cuda.h maps plain names
// to versioned ones: cuMemAlloc is exported as cuMemAlloc_v2); VERSION the
// CUDA version, 1000*major + 10*minor, whose ABI the binding asks
// cuGetProcAddress for. MARK picks the call path; see prototypes.go.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/types"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The files mkdriver reads and writes, relative to package driver's
// directory.
const (
	protoFile   = "prototypes.go"
	symbolsFile = "zsymbols.go"
	callsFile   = "zcalls.go"
	exportsFile = "../internal/fakecuda/src/zexports.h"
)

// maxScratchArgs is the size of driver.scratch's argument block: the most
// arguments a hot or direct call can take.
const maxScratchArgs = 11

// The call paths a prototype's mark picks.
const (
	markCall   = ""       // call: purego.SyscallN, checked
	markHot    = "hot"    // callScratch: the caller's scratch, checked
	markDirect = "direct" // callScratchOn: as hot, direct when asked for
	markRaw    = "raw"    // syscallN on an entry point the caller resolved, unchecked
	markNoWrap = "nowrap" // in the table, no wrapper: another package calls it
)

// integers are the parameter types passed as uintptr(x): Go's integers and
// package driver's named integer types. A pointer type is passed as
// uintptr(unsafe.Pointer(x)), uintptr as it is; any other type is an error.
var integers = map[string]bool{
	"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "byte": true, "uint16": true, "uint32": true, "uint64": true,
	"DevicePtr": true, "Result": true, "DeviceAttribute": true, "FunctionAttribute": true,
}

// reserved are the names of the parameters that wrappers add.
var reserved = map[string]bool{"sc": true, "direct": true, "entry": true}

type param struct{ name, typ string }

// proto is one prototype line.
type proto struct {
	line    int
	name    string
	params  []param
	export  string
	version int
	mark    string
}

// symID returns the name of p's symID constant: symMemAlloc for cuMemAlloc.
func (p *proto) symID() string { return "sym" + strings.TrimPrefix(p.name, "cu") }

var lineRE = regexp.MustCompile(`^//cuda\s+(\w+)\((.*)\)\s*=\s*(\w+)\s+(\d+)(?:\s+(\w+))?\s*$`)

// parse reads the prototype lines of src, the text of prototypes.go, and
// checks them.
func parse(src string) ([]*proto, error) {
	var out []*proto
	var errs []error
	names := map[string]int{}
	for i, line := range strings.Split(src, "\n") {
		line = strings.TrimRight(line, " \t\r")
		if !strings.HasPrefix(line, "//cuda") {
			continue
		}
		p, err := parseLine(i+1, line)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, ok := names[p.name]; ok {
			errs = append(errs, fmt.Errorf("%s:%d: %s already declared on line %d", protoFile, p.line, p.name, prev))
			continue
		}
		names[p.name] = p.line
		out = append(out, p)
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no //cuda lines", protoFile))
	}
	return out, errors.Join(errs...)
}

func parseLine(n int, line string) (*proto, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%s:%d: %s", protoFile, n, fmt.Sprintf(format, args...))
	}
	m := lineRE.FindStringSubmatch(line)
	if m == nil {
		return nil, fail("want //cuda NAME(PARAMS) = EXPORT VERSION [MARK], got %q", line)
	}
	p := &proto{line: n, name: m[1], export: m[3], mark: m[5]}
	if !strings.HasPrefix(p.name, "cu") || len(p.name) < 3 {
		return nil, fail("%s: a driver entry point's name starts with cu", p.name)
	}
	if !strings.HasPrefix(p.export, p.name) {
		return nil, fail("%s: export %s must extend the name", p.name, p.export)
	}
	v, err := strconv.Atoi(m[4])
	if err != nil || v < 2000 || v%10 != 0 {
		return nil, fail("%s: version %s: want 1000*major + 10*minor, 2000 or later", p.name, m[4])
	}
	p.version = v
	switch p.mark {
	case markCall, markHot, markDirect, markRaw, markNoWrap:
	default:
		return nil, fail("%s: unknown mark %q: want hot, direct, raw or nowrap", p.name, p.mark)
	}
	expr, err := parser.ParseExpr("func(" + m[2] + ")")
	ft, ok := expr.(*ast.FuncType)
	if err != nil || !ok {
		return nil, fail("%s: parameters %q do not parse as Go parameters", p.name, m[2])
	}
	for _, f := range ft.Params.List {
		typ := types.ExprString(f.Type)
		if len(f.Names) == 0 {
			return nil, fail("%s: parameter of type %s has no name", p.name, typ)
		}
		if !strings.HasPrefix(typ, "*") && typ != "uintptr" && typ != "unsafe.Pointer" && !integers[typ] {
			return nil, fail("%s: parameter type %s: want uintptr, a pointer, unsafe.Pointer or an integer type known to mkdriver", p.name, typ)
		}
		for _, id := range f.Names {
			if reserved[id.Name] {
				return nil, fail("%s: parameter name %s is the wrapper's own", p.name, id.Name)
			}
			p.params = append(p.params, param{id.Name, typ})
		}
	}
	if (p.mark == markHot || p.mark == markDirect) && len(p.params) > maxScratchArgs {
		return nil, fail("%s: %d parameters: a %s call takes at most %d", p.name, len(p.params), p.mark, maxScratchArgs)
	}
	return p, nil
}

// arg returns the expression that passes q as a uintptr.
func (q param) arg() string {
	switch {
	case q.typ == "uintptr":
		return q.name
	case strings.HasPrefix(q.typ, "*"):
		return "uintptr(unsafe.Pointer(" + q.name + "))"
	}
	return "uintptr(" + q.name + ")"
}

const header = "// Code generated by mkdriver from prototypes.go; DO NOT EDIT.\n\n"

// symbolsGo returns zsymbols.go.
func symbolsGo(ps []*proto) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package driver\n\nimport \"github.com/purecuda/overlap/loader\"\n\n")
	b.WriteString("// The symID of each entry point in prototypes.go, in its order.\nconst (\n")
	for i, p := range ps {
		if i == 0 {
			fmt.Fprintf(&b, "\t%s symID = iota\n", p.symID())
		} else {
			fmt.Fprintf(&b, "\t%s\n", p.symID())
		}
	}
	b.WriteString("\tnumSymbols\n)\n\n")
	b.WriteString("// symbols is the symbol table, one row per line of prototypes.go.\n")
	b.WriteString("var symbols = [numSymbols]symbol{\n")
	for _, p := range ps {
		fmt.Fprintf(&b, "\t%s: {loader.Symbol{Name: %q, Version: %d, Export: %q}, %d, %t},\n",
			p.symID(), p.name, p.version, p.export, len(p.params), p.mark == markDirect)
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}

// callsGo returns zcalls.go.
func callsGo(ps []*proto) ([]byte, error) {
	var body bytes.Buffer
	usesUnsafe := false
	for _, p := range ps {
		if p.mark == markNoWrap {
			continue
		}
		var sig, args []string
		for _, q := range p.params {
			sig = append(sig, q.name+" "+q.typ)
			args = append(args, q.arg())
			usesUnsafe = usesUnsafe || strings.Contains(q.arg(), "unsafe.") || strings.Contains(q.typ, "unsafe.")
		}
		switch p.mark {
		case markCall:
			fmt.Fprintf(&body, "\n// %s calls %s.\n", p.name, p.export)
			fmt.Fprintf(&body, "func %s(%s) error {\n", p.name, strings.Join(sig, ", "))
			fmt.Fprintf(&body, "\treturn call(%s)\n}\n", strings.Join(append([]string{p.symID()}, args...), ", "))
		case markRaw:
			fmt.Fprintf(&body, "\n// %s calls %s at entry and returns its CUresult unchecked.\n", p.name, p.export)
			fmt.Fprintf(&body, "func %s(%s) Result {\n", p.name, strings.Join(append([]string{"entry uintptr"}, sig...), ", "))
			fmt.Fprintf(&body, "\treturn syscallN(%s)\n}\n", strings.Join(append([]string{"entry"}, args...), ", "))
		case markHot, markDirect:
			lead, helper, tail := "sc *scratch", "callScratch", ""
			fmt.Fprintf(&body, "\n// %s calls %s with sc's argument block", p.name, p.export)
			if p.mark == markDirect {
				lead, helper, tail = "sc *scratch, direct bool", "callScratchOn", ", direct"
				body.WriteString(",\n// directly when direct is set")
			}
			body.WriteString(".\n")
			fmt.Fprintf(&body, "func %s(%s) error {\n", p.name, strings.Join(append([]string{lead}, sig...), ", "))
			// The whole block, unused slots zeroed: the cheapest to inline,
			// and no stale argument reaches the driver.
			fmt.Fprintf(&body, "\tsc.args = [%d]uintptr{%s}\n", maxScratchArgs, strings.Join(args, ", "))
			fmt.Fprintf(&body, "\treturn %s(%s, sc, %d%s)\n}\n", helper, p.symID(), len(args), tail)
		}
	}
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("package driver\n\n")
	if usesUnsafe {
		b.WriteString("import \"unsafe\"\n\n")
	}
	b.WriteString("// The typed wrappers of the driver's entry points, one per line of\n")
	b.WriteString("// prototypes.go: every conversion of a driver call's arguments to uintptr\n")
	b.WriteString("// is here.\n")
	b.Write(body.Bytes())
	return format.Source(b.Bytes())
}

// exportsH returns zexports.h.
func exportsH(ps []*proto) []byte {
	var b bytes.Buffer
	b.WriteString("/* Code generated by mkdriver from driver/prototypes.go; DO NOT EDIT. */\n\n")
	b.WriteString("/* The driver entry points that package driver binds, for the table of\n")
	b.WriteString(" * cuGetProcAddress_v2 in libcuda.c: E(plain name, the function the library\n")
	b.WriteString(" * exports, its number of parameters). The fake must define each function\n")
	b.WriteString(" * under its export name, with that many parameters, or #define the export\n")
	b.WriteString(" * as NULL to lack it on purpose. */\n")
	for _, p := range ps {
		fmt.Fprintf(&b, "E(%q, %s, %d),\n", p.name, p.export, len(p.params))
	}
	return b.Bytes()
}

// generate returns each output file's path, relative to package driver's
// directory, and contents.
func generate(src string) (map[string][]byte, error) {
	ps, err := parse(src)
	if err != nil {
		return nil, err
	}
	syms, err := symbolsGo(ps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", symbolsFile, err)
	}
	calls, err := callsGo(ps)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", callsFile, err)
	}
	return map[string][]byte{symbolsFile: syms, callsFile: calls, exportsFile: exportsH(ps)}, nil
}

// stale returns the output files under dir that differ from want.
func stale(dir string, want map[string][]byte) []string {
	var out []string
	for _, name := range []string{symbolsFile, callsFile, exportsFile} {
		have, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(have, want[name]) {
			out = append(out, filepath.Join(dir, name))
		}
	}
	return out
}

func run(dir string, check bool) error {
	src, err := os.ReadFile(filepath.Join(dir, protoFile))
	if err != nil {
		return err
	}
	files, err := generate(string(src))
	if err != nil {
		return err
	}
	if check {
		if s := stale(dir, files); len(s) > 0 {
			return fmt.Errorf("generated files out of date with %s: %s; run go generate ./driver",
				filepath.Join(dir, protoFile), strings.Join(s, ", "))
		}
		return nil
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	dir := flag.String("dir", ".", "package driver's directory")
	check := flag.Bool("check", false, "write nothing; fail if the generated files are stale")
	flag.Parse()
	if err := run(*dir, *check); err != nil {
		fmt.Fprintln(os.Stderr, "mkdriver:", err)
		os.Exit(1)
	}
}

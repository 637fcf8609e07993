package ptx

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// File is what Parse reads from PTX text.
type File struct {
	// Version is the PTX ISA version, such as {7, 0}.
	Version Version
	// Targets are the .target names, such as ["sm_75"].
	Targets []string
	// AddressSize is 32 or 64 (64 when the directive is absent).
	AddressSize int
	// Entries are the kernels (.entry), in order.
	Entries []Entry
	// Funcs names the device functions (.func) defined or declared.
	Funcs []string
}

// Version is a PTX ISA version.
type Version struct{ Major, Minor int }

// String renders "7.0".
func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less reports whether v is older than w.
func (v Version) Less(w Version) bool {
	return v.Major < w.Major || v.Major == w.Major && v.Minor < w.Minor
}

// Entry is one kernel.
type Entry struct {
	Name   string
	Params []Param
	// Line is where the entry is declared.
	Line int
}

// Param is one kernel parameter.
type Param struct {
	Name string
	// Type is the PTX type, such as ".u64" or ".b8".
	Type string
	// Size is the parameter's size in bytes (element size × array length).
	Size int
	// Align is its alignment in bytes.
	Align int
	// PointeeAlign is the alignment that a ".ptr .align N" attribute
	// promises for the memory the parameter points to (0 when absent). It
	// does not move the parameter itself, which keeps its type's alignment
	// (PTX ISA, "Kernel Function Parameter Attributes").
	PointeeAlign int
}

// Entry returns the entry called name.
func (f *File) Entry(name string) (Entry, bool) {
	for _, e := range f.Entries {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// EntryNames lists the entries' names.
func (f *File) EntryNames() []string {
	out := make([]string, len(f.Entries))
	for i, e := range f.Entries {
		out[i] = e.Name
	}
	return out
}

// Target returns the SM target, such as "sm_75", or "" if none is named.
func (f *File) Target() string {
	for _, t := range f.Targets {
		if strings.HasPrefix(t, "sm_") {
			return t
		}
	}
	return ""
}

// SyntaxError reports where PTX text stops making sense.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("ptx: line %d: %s", e.Line, e.Msg) }

// maxParseSize bounds the text Parse accepts; real modules are far smaller.
const maxParseSize = 256 << 20

var typeSizes = map[string]int{
	".b8": 1, ".u8": 1, ".s8": 1, ".pred": 1,
	".b16": 2, ".u16": 2, ".s16": 2, ".f16": 2, ".bf16": 2,
	".b32": 4, ".u32": 4, ".s32": 4, ".f32": 4, ".f16x2": 4, ".bf16x2": 4,
	".b64": 8, ".u64": 8, ".s64": 8, ".f64": 8,
	".b128": 16,
}

// Parse reads PTX text. It checks the module's shape (the .version,
// .target and .address_size header, entries and their parameters, and
// balanced bodies) but not instructions, which the driver's JIT checks. It
// returns a *SyntaxError naming the line for text it cannot read, and never
// panics.
func Parse(src []byte) (*File, error) {
	if len(src) > maxParseSize {
		return nil, fmt.Errorf("ptx: %d bytes is larger than any PTX module this parser accepts (%d)", len(src), maxParseSize)
	}
	if len(bytes.TrimSpace(bytes.TrimRight(src, "\x00"))) == 0 {
		return nil, &SyntaxError{Line: 1, Msg: "empty PTX"}
	}
	if i := bytes.IndexByte(bytes.TrimRight(src, "\x00"), 0); i >= 0 {
		return nil, &SyntaxError{Line: 1 + bytes.Count(src[:i], []byte("\n")), Msg: fmt.Sprintf("NUL byte at offset %d: binary data, not PTX text", i)}
	}
	if !utf8.Valid(src) {
		return nil, &SyntaxError{Line: 1, Msg: "not UTF-8 text: binary data, not PTX"}
	}
	p := &parser{lx: lexer{src: src, line: 1}}
	return p.file()
}

type parser struct {
	lx  lexer
	tok token
	f   File
}

func (p *parser) next() { p.tok = p.lx.next() }

func (p *parser) errf(format string, args ...any) error {
	return &SyntaxError{Line: p.tok.line, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) expect(text string) error {
	if p.tok.text != text {
		return p.errf("expected %q, found %s", text, p.tok.describe())
	}
	p.next()
	return nil
}

func (p *parser) file() (*File, error) {
	p.f.AddressSize = 64
	p.next()
	if p.tok.kind == tokError {
		return nil, p.errf("%s", p.tok.text)
	}
	if p.tok.text != ".version" {
		return nil, p.errf("PTX must begin with a .version directive, found %s", p.tok.describe())
	}
	p.next()
	v, err := p.version()
	if err != nil {
		return nil, err
	}
	p.f.Version = v
	sawTarget := false
	for {
		switch p.tok.kind {
		case tokEOF:
			if !sawTarget {
				return nil, p.errf("missing .target directive")
			}
			return &p.f, nil
		case tokError:
			return nil, p.errf("%s", p.tok.text)
		}
		switch p.tok.text {
		case ".target":
			sawTarget = true
			p.next()
			for {
				if p.tok.kind != tokIdent {
					return nil, p.errf("expected a target name, found %s", p.tok.describe())
				}
				p.f.Targets = append(p.f.Targets, p.tok.text)
				p.next()
				if p.tok.text != "," {
					break
				}
				p.next()
			}
		case ".address_size":
			p.next()
			n, err := strconv.Atoi(p.tok.text)
			if err != nil || (n != 32 && n != 64) {
				return nil, p.errf("address size must be 32 or 64, found %s", p.tok.describe())
			}
			p.f.AddressSize = n
			p.next()
		case ".visible", ".extern", ".weak", ".common":
			p.next()
		case ".entry":
			if !sawTarget {
				return nil, p.errf(".entry before .target")
			}
			if err := p.entry(); err != nil {
				return nil, err
			}
		case ".func":
			if err := p.function(); err != nil {
				return nil, err
			}
		case ".file":
			if err := p.fileDirective(); err != nil {
				return nil, err
			}
		case ".loc":
			if err := p.locDirective(); err != nil {
				return nil, err
			}
		case ".section":
			if err := p.section(); err != nil {
				return nil, err
			}
		case ".global", ".const", ".shared", ".local", ".tex", ".surfref", ".texref", ".samplerref", ".pragma", ".alias":
			if err := p.skipStatement(); err != nil {
				return nil, err
			}
		default:
			return nil, p.errf("unexpected %s at top level", p.tok.describe())
		}
	}
}

func (p *parser) version() (Version, error) {
	if p.tok.kind != tokNumber {
		return Version{}, p.errf("expected a version number such as 7.0, found %s", p.tok.describe())
	}
	major, minor, ok := strings.Cut(p.tok.text, ".")
	a, err1 := strconv.Atoi(major)
	b, err2 := strconv.Atoi(minor)
	if !ok || err1 != nil || err2 != nil || a < 1 || a > 99 || b < 0 || b > 99 {
		return Version{}, p.errf("malformed version %q", p.tok.text)
	}
	p.next()
	return Version{a, b}, nil
}

// skipStatement skips to the end of a declaration: a ';' at depth 0, or a
// balanced {...} initialiser followed by ';'.
func (p *parser) skipStatement() error {
	depth := 0
	for {
		switch p.tok.kind {
		case tokEOF:
			return p.errf("unexpected end of file inside a declaration")
		case tokError:
			return p.errf("%s", p.tok.text)
		}
		switch p.tok.text {
		case "{":
			depth++
		case "}":
			depth--
			if depth < 0 {
				return p.errf("unbalanced '}'")
			}
		case ";":
			if depth == 0 {
				p.next()
				return nil
			}
		}
		p.next()
	}
}

// fileDirective reads the debug directive
//
//	.file index "name" [, timestamp, size]
//
// that nvcc writes with -lineinfo and -G. It ends at its line, without a ';'.
func (p *parser) fileDirective() error {
	p.next()
	if p.tok.kind != tokNumber {
		return p.errf("expected a file index after .file, found %s", p.tok.describe())
	}
	p.next()
	if p.tok.kind != tokString {
		return p.errf("expected a file name after .file, found %s", p.tok.describe())
	}
	p.next()
	for i := 0; i < 2 && p.tok.text == ","; i++ { // timestamp, then size
		p.next()
		if p.tok.kind != tokNumber {
			return p.errf("expected a number in .file, found %s", p.tok.describe())
		}
		p.next()
	}
	return nil
}

// locDirective reads a source-line directive outside a body:
//
//	.loc file line column [, function_name label [+ offset], inlined_at file line column]
//
// It has no ';' and ends with its line.
func (p *parser) locDirective() error {
	line := p.tok.line
	p.next()
	for i := 0; i < 3; i++ {
		if p.tok.kind != tokNumber || p.tok.line != line {
			return p.errf(".loc needs a file index, a line and a column, found %s", p.tok.describe())
		}
		p.next()
	}
	for p.tok.line == line && p.tok.kind != tokEOF && p.tok.kind != tokError {
		p.next()
	}
	return nil
}

// section skips a debug section, ".section .debug_info { ... }", whose
// data lines have no ';'.
func (p *parser) section() error {
	p.next()
	if p.tok.kind != tokDirective && p.tok.kind != tokIdent {
		return p.errf("expected a section name after .section, found %s", p.tok.describe())
	}
	p.next()
	if p.tok.text != "{" {
		return p.errf("expected '{' to open the section, found %s", p.tok.describe())
	}
	return p.skipBody()
}

// skipBody skips a balanced { ... } body; the current token is '{'.
func (p *parser) skipBody() error {
	start := p.tok.line
	depth := 0
	for {
		switch p.tok.kind {
		case tokEOF:
			return &SyntaxError{Line: start, Msg: "body opened here is never closed (truncated PTX?)"}
		case tokError:
			return p.errf("%s", p.tok.text)
		}
		switch p.tok.text {
		case "{":
			depth++
		case "}":
			depth--
			if depth == 0 {
				p.next()
				return nil
			}
		}
		p.next()
	}
}

func (p *parser) entry() error {
	line := p.tok.line
	p.next()
	if p.tok.kind != tokIdent {
		return p.errf("expected a kernel name after .entry, found %s", p.tok.describe())
	}
	e := Entry{Name: p.tok.text, Line: line}
	p.next()
	if p.tok.text == "(" {
		params, err := p.params()
		if err != nil {
			return err
		}
		e.Params = params
	}
	// Performance directives (.maxntid 256, 1, 1 and the like) until the body.
	for p.tok.text != "{" && p.tok.text != ";" {
		if p.tok.kind == tokEOF || p.tok.kind == tokError {
			return p.errf("expected the body of %s, found %s", e.Name, p.tok.describe())
		}
		p.next()
	}
	if p.tok.text == ";" {
		p.next()
	} else if err := p.skipBody(); err != nil {
		return err
	}
	for _, old := range p.f.Entries {
		if old.Name == e.Name {
			return &SyntaxError{Line: line, Msg: fmt.Sprintf("entry %s defined twice", e.Name)}
		}
	}
	p.f.Entries = append(p.f.Entries, e)
	return nil
}

func (p *parser) params() ([]Param, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []Param
	if p.tok.text == ")" {
		p.next()
		return out, nil
	}
	for {
		if p.tok.text != ".param" && p.tok.text != ".reg" {
			return nil, p.errf("expected .param, found %s", p.tok.describe())
		}
		p.next()
		prm := Param{}
		ptr := false
		for p.tok.kind == tokDirective {
			switch {
			case p.tok.text == ".align":
				p.next()
				n, err := strconv.Atoi(p.tok.text)
				if err != nil || n <= 0 || n > 4096 || n&(n-1) != 0 {
					return nil, p.errf("alignment must be a power of two, found %s", p.tok.describe())
				}
				if ptr {
					prm.PointeeAlign = n // .ptr [.space] .align N: the pointee's
				} else {
					prm.Align = n
				}
			case typeSizes[p.tok.text] > 0:
				prm.Type = p.tok.text
			case p.tok.text == ".ptr":
				ptr = true
			case p.tok.text == ".global", p.tok.text == ".const", p.tok.text == ".shared", p.tok.text == ".local":
				// the pointee's state space, after .ptr
			default:
				return nil, p.errf("unknown parameter attribute %s", p.tok.describe())
			}
			p.next()
		}
		if prm.Type == "" {
			return nil, p.errf("parameter has no type")
		}
		if p.tok.kind != tokIdent {
			return nil, p.errf("expected a parameter name, found %s", p.tok.describe())
		}
		prm.Name = p.tok.text
		p.next()
		count := 1
		if p.tok.text == "[" {
			p.next()
			n, err := strconv.Atoi(p.tok.text)
			if err != nil || n <= 0 || n > 1<<20 {
				return nil, p.errf("array length must be a positive number, found %s", p.tok.describe())
			}
			count = n
			p.next()
			if err := p.expect("]"); err != nil {
				return nil, err
			}
		}
		elem := typeSizes[prm.Type]
		prm.Size = elem * count
		if prm.Align == 0 {
			prm.Align = elem
		}
		out = append(out, prm)
		if p.tok.text == ")" {
			p.next()
			return out, nil
		}
		if err := p.expect(","); err != nil {
			return nil, err
		}
	}
}

func (p *parser) function() error {
	p.next()
	if p.tok.text == "(" { // return parameters
		if _, err := p.params(); err != nil {
			return err
		}
	}
	if p.tok.kind != tokIdent {
		return p.errf("expected a function name after .func, found %s", p.tok.describe())
	}
	p.f.Funcs = append(p.f.Funcs, p.tok.text)
	p.next()
	if p.tok.text == "(" {
		if _, err := p.params(); err != nil {
			return err
		}
	}
	for p.tok.text != "{" && p.tok.text != ";" {
		if p.tok.kind == tokEOF || p.tok.kind == tokError {
			return p.errf("expected a function body, found %s", p.tok.describe())
		}
		p.next()
	}
	if p.tok.text == ";" {
		p.next()
		return nil
	}
	return p.skipBody()
}

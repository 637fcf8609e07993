package nvrtc

import (
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
)

// nvrtcResult codes (nvrtc.h, enum nvrtcResult), for error names.
var resultNames = map[int]string{
	0:  "NVRTC_SUCCESS",
	1:  "NVRTC_ERROR_OUT_OF_MEMORY",
	2:  "NVRTC_ERROR_PROGRAM_CREATION_FAILURE",
	3:  "NVRTC_ERROR_INVALID_INPUT",
	4:  "NVRTC_ERROR_INVALID_PROGRAM",
	5:  "NVRTC_ERROR_INVALID_OPTION",
	6:  "NVRTC_ERROR_COMPILATION",
	7:  "NVRTC_ERROR_BUILTIN_OPERATION_FAILURE",
	8:  "NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION",
	9:  "NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION",
	10: "NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID",
	11: "NVRTC_ERROR_INTERNAL_ERROR",
	12: "NVRTC_ERROR_TIME_FILE_WRITE_FAILED",
	13: "NVRTC_ERROR_NO_PCH_CREATE_ATTEMPTED",
	14: "NVRTC_ERROR_PCH_CREATE_HEAP_EXHAUSTED",
	15: "NVRTC_ERROR_PCH_CREATE",
	16: "NVRTC_ERROR_CANCELLED",
	17: "NVRTC_ERROR_TIME_TRACE_FILE_WRITE_FAILED",
}

// codeCompilation is NVRTC_ERROR_COMPILATION (nvrtc.h).
const codeCompilation = 6

var (
	// ErrCompilation reports source that NVRTC could not compile; the
	// *Error's Log says why. errors.Is(err, ErrCompilation) holds for it.
	ErrCompilation = errors.New("nvrtc: compilation failed")
	// ErrInvalidArgument reports an argument refused before NVRTC sees it.
	ErrInvalidArgument = errors.New("nvrtc: invalid argument")
)

// Error is a failed NVRTC call: the entry point, its nvrtcResult, the
// program's name and, for a compilation, the compiler's log.
type Error struct {
	Op      string // the entry point, such as "nvrtcCompileProgram"
	Code    int    // the nvrtcResult
	Program string // the program's name, "" outside a compilation
	Log     string // the compile log, for nvrtcCompileProgram
}

// Name returns the code's name in nvrtc.h, such as
// "NVRTC_ERROR_COMPILATION".
func (e *Error) Name() string {
	if n, ok := resultNames[e.Code]; ok {
		return n
	}
	return "unknown nvrtcResult"
}

// Error reads "nvrtc: scale.cu: nvrtcCompileProgram:
// NVRTC_ERROR_COMPILATION (6)", then the log on the lines after.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("nvrtc: ")
	if e.Program != "" {
		b.WriteString(e.Program + ": ")
	}
	fmt.Fprintf(&b, "%s: %s (%d)", e.Op, e.Name(), e.Code)
	if log := strings.TrimSpace(e.Log); log != "" {
		b.WriteString(":\n" + log)
	}
	return b.String()
}

// Is reports whether target is ErrCompilation and e a compilation error.
func (e *Error) Is(target error) bool { return target == ErrCompilation && e.Code == codeCompilation }

// lib is NVRTC's entry points in one opened library.
type lib struct {
	path                              string
	version, create, destroy, compile uintptr
	ptxSize, ptx, logSize, log        uintptr
	cubinSize, cubin                  uintptr // 0 in NVRTC older than 11.1
	major, minor                      int
}

var defaultLib = sync.OnceValues(func() (*lib, error) {
	l, err := loader.OpenOptional(loader.NVRTC)
	if err != nil {
		return nil, err
	}
	return bind(l)
})

// bind resolves NVRTC's entry points in l and reads its version.
func bind(l *loader.OptionalLibrary) (*lib, error) {
	b := &lib{path: l.Path()}
	for _, s := range []struct {
		name string
		p    *uintptr
	}{
		{"nvrtcVersion", &b.version},
		{"nvrtcCreateProgram", &b.create},
		{"nvrtcDestroyProgram", &b.destroy},
		{"nvrtcCompileProgram", &b.compile},
		{"nvrtcGetPTXSize", &b.ptxSize},
		{"nvrtcGetPTX", &b.ptx},
		{"nvrtcGetProgramLogSize", &b.logSize},
		{"nvrtcGetProgramLog", &b.log},
	} {
		p, err := l.Symbol(s.name)
		if err != nil {
			return nil, fmt.Errorf("nvrtc: %w", err)
		}
		*s.p = p
	}
	// nvrtcGetCUBIN came in NVRTC 11.1; without it, a real architecture
	// gives PTX only.
	b.cubinSize, _ = l.Symbol("nvrtcGetCUBINSize")
	b.cubin, _ = l.Symbol("nvrtcGetCUBIN")
	if b.cubinSize == 0 || b.cubin == 0 {
		b.cubinSize, b.cubin = 0, 0
	}
	var major, minor int32
	if r := b.call(b.version, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor))); r != 0 {
		return nil, &Error{Op: "nvrtcVersion", Code: r}
	}
	b.major, b.minor = int(major), int(minor)
	return b, nil
}

// call calls fn with args and returns the nvrtcResult. Go memory passed
// in args is converted in the call's own argument list, which purego's
// SyscallN (go:uintptrescapes) keeps alive and in place for the call;
// memory that args point to indirectly is pinned by the caller. This
// directive extends that to call's own arguments, so that callers
// convert their pointers in the call to call.
//
//go:uintptrescapes
func (b *lib) call(fn uintptr, args ...uintptr) int {
	r, _, _ := purego.SyscallN(fn, args...)
	return int(int32(r))
}

// Load opens NVRTC: the library in OVERLAP_NVRTC_LIBRARY when set, else
// the first found in the places loader.NVRTC lists. Every function that
// needs NVRTC calls it, so calling it yourself is optional; it is the
// way to learn early whether NVRTC is present. When it is not, the error
// names the library files looked for and every path tried, and
// errors.Is(err, loader.ErrNoLibrary) holds.
func Load() error {
	_, err := defaultLib()
	return err
}

// LibraryPath returns the path of the NVRTC library that was opened, or
// "" when none could be.
func LibraryPath() string {
	if l, err := defaultLib(); err == nil {
		return l.path
	}
	return ""
}

// Version returns NVRTC's version (nvrtcVersion), such as 13, 0.
func Version() (major, minor int, err error) {
	l, err := defaultLib()
	if err != nil {
		return 0, 0, err
	}
	return l.major, l.minor, nil
}

// Header is a header that the source may #include by Name, given as its
// text instead of a file.
type Header struct {
	Name   string
	Source string
}

// Options are a compilation's choices; the zero value compiles for
// compute_80.
type Options struct {
	// Arch is the architecture: a virtual one (compute_90) gives PTX,
	// which the driver JIT-compiles for the GPU it loads on; a real one
	// (sm_90) gives a CUBIN for that GPU as well, where NVRTC has
	// nvrtcGetCUBIN. Empty: Device's compute capability, as compute_XY.
	Arch string
	// Device, when Arch is empty and Device is not the zero Device, sets
	// the architecture to its compute capability (compute_90 on an H200).
	// Without either, the architecture is compute_80.
	Device driver.Device
	// DefaultDevice passes -default-device: functions without an
	// execution space are __device__ functions.
	DefaultDevice bool
	// Flags are passed to NVRTC after the options above, such as
	// "-use_fast_math", "-DN=4" or "-lineinfo".
	Flags []string
	// Headers are headers the source includes, by name.
	Headers []Header
}

// DefaultArch is the architecture of a compilation whose Options name
// neither an Arch nor a Device.
const DefaultArch = "compute_80"

var archRE = regexp.MustCompile(`^(compute|sm)_[0-9]{2,3}[af]?$`)

// arch returns the architecture that o asks for.
func (o Options) arch() (string, error) {
	if o.Arch != "" {
		if !archRE.MatchString(o.Arch) {
			return "", fmt.Errorf("%w: Arch %q: want compute_XY (PTX) or sm_XY (CUBIN), such as compute_90", ErrInvalidArgument, o.Arch)
		}
		return o.Arch, nil
	}
	if o.Device == (driver.Device{}) {
		return DefaultArch, nil
	}
	major, minor, err := o.Device.ComputeCapability()
	if err != nil {
		return "", fmt.Errorf("nvrtc: reading %s's compute capability: %w", o.Device, err)
	}
	return fmt.Sprintf("compute_%d%d", major, minor), nil
}

// options returns the command line that o gives NVRTC for arch.
func (o Options) options(arch string) []string {
	opts := []string{"--gpu-architecture=" + arch}
	if o.DefaultDevice {
		opts = append(opts, "-default-device")
	}
	return append(opts, o.Flags...)
}

// Result is what a compilation produced.
type Result struct {
	// PTX is the PTX text, without a trailing NUL.
	PTX []byte
	// CUBIN is the binary for a real architecture (Options.Arch sm_XY),
	// or nil.
	CUBIN []byte
	// Log is the compiler's log: warnings, or empty.
	Log string
	// Arch is the architecture compiled for.
	Arch string
}

// Image returns what to give driver.Context.LoadModule: the CUBIN when
// there is one, else the PTX.
func (r *Result) Image() []byte {
	if r == nil {
		return nil
	}
	if len(r.CUBIN) > 0 {
		return r.CUBIN
	}
	return r.PTX
}

// Compile compiles CUDA C++ source, named name in messages (kernel.cu
// when empty), with NVRTC (nvrtcCreateProgram, nvrtcCompileProgram,
// nvrtcGetPTX, nvrtcGetCUBIN, nvrtcGetProgramLog). A compilation error is
// an *Error whose Log says why, and errors.Is(err, ErrCompilation)
// holds. The program is destroyed before Compile returns, whatever
// happened.
//
// A kernel that the driver is to find by name must be declared extern
// "C", or its name is C++-mangled.
func Compile(source, name string, opts Options) (*Result, error) {
	l, err := defaultLib()
	if err != nil {
		return nil, err
	}
	return l.compileSource(source, name, opts)
}

// cstrings holds the C strings and arrays of one call, pinned until done.
type cstrings struct{ pin runtime.Pinner }

// str returns s as a pinned NUL-terminated C string.
func (c *cstrings) str(s string) uintptr {
	b := make([]byte, len(s)+1)
	copy(b, s)
	c.pin.Pin(&b[0])
	return uintptr(unsafe.Pointer(&b[0]))
}

// array returns a pinned array of C strings, or 0 for none.
func (c *cstrings) array(ss []string) uintptr {
	if len(ss) == 0 {
		return 0
	}
	a := make([]uintptr, len(ss))
	for i, s := range ss {
		a[i] = c.str(s)
	}
	c.pin.Pin(&a[0])
	return uintptr(unsafe.Pointer(&a[0]))
}

func (c *cstrings) done() { c.pin.Unpin() }

// noNUL refuses a string that C would cut short.
func noNUL(what, s string) error {
	if strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%w: %s contains a NUL byte", ErrInvalidArgument, what)
	}
	return nil
}

func (l *lib) compileSource(source, name string, opts Options) (*Result, error) {
	if name == "" {
		name = "kernel.cu"
	}
	if strings.TrimSpace(source) == "" {
		return nil, fmt.Errorf("%w: %s: empty source", ErrInvalidArgument, name)
	}
	arch, err := opts.arch()
	if err != nil {
		return nil, err
	}
	args := opts.options(arch)
	checks := [][2]string{{"the source", source}, {"the name", name}}
	for _, a := range args {
		checks = append(checks, [2]string{"option " + a, a})
	}
	var hdrSrc, hdrName []string
	for i, h := range opts.Headers {
		if h.Name == "" {
			return nil, fmt.Errorf("%w: header %d has no name", ErrInvalidArgument, i)
		}
		checks = append(checks, [2]string{"header " + h.Name, h.Source}, [2]string{"a header's name", h.Name})
		hdrSrc, hdrName = append(hdrSrc, h.Source), append(hdrName, h.Name)
	}
	for _, c := range checks {
		if err := noNUL(c[0], c[1]); err != nil {
			return nil, err
		}
	}

	var cs cstrings
	defer cs.done()
	prog := new(uintptr) // nvrtcProgram, written by nvrtcCreateProgram
	cs.pin.Pin(prog)
	if r := l.call(l.create, uintptr(unsafe.Pointer(prog)), cs.str(source), cs.str(name),
		uintptr(len(hdrSrc)), cs.array(hdrSrc), cs.array(hdrName)); r != 0 {
		return nil, &Error{Op: "nvrtcCreateProgram", Code: r, Program: name}
	}
	if *prog == 0 {
		return nil, &Error{Op: "nvrtcCreateProgram", Code: 2, Program: name} // NVRTC_ERROR_PROGRAM_CREATION_FAILURE
	}
	res := &Result{Arch: arch}
	err = l.build(*prog, name, args, &cs, res)
	// nvrtcDestroyProgram takes the handle's address and clears it.
	if r := l.call(l.destroy, uintptr(unsafe.Pointer(prog))); r != 0 && err == nil {
		err = &Error{Op: "nvrtcDestroyProgram", Code: r, Program: name}
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// build compiles prog and reads its log, PTX and CUBIN into res.
func (l *lib) build(prog uintptr, name string, args []string, cs *cstrings, res *Result) error {
	rc := l.call(l.compile, prog, uintptr(len(args)), cs.array(args))
	log, logErr := l.output(prog, name, "nvrtcGetProgramLogSize", l.logSize, "nvrtcGetProgramLog", l.log)
	if rc != 0 {
		return &Error{Op: "nvrtcCompileProgram", Code: rc, Program: name, Log: string(log)}
	}
	if logErr != nil {
		return logErr
	}
	res.Log = strings.TrimRight(string(log), "\n")
	if strings.HasPrefix(res.Arch, "sm_") && l.cubinSize != 0 {
		cubin, err := l.output(prog, name, "nvrtcGetCUBINSize", l.cubinSize, "nvrtcGetCUBIN", l.cubin)
		if err != nil {
			return err
		}
		res.CUBIN = cubin
	}
	ptx, err := l.output(prog, name, "nvrtcGetPTXSize", l.ptxSize, "nvrtcGetPTX", l.ptx)
	if err != nil {
		if res.CUBIN != nil {
			return nil // a real architecture's CUBIN without PTX
		}
		return err
	}
	res.PTX = ptx
	return nil
}

// output reads one of a program's outputs through its size and copy
// calls, without the C string's trailing NUL; nil for an empty one.
func (l *lib) output(prog uintptr, name, sizeOp string, sizeFn uintptr, getOp string, getFn uintptr) ([]byte, error) {
	n := new(uintptr) // size_t
	if r := l.call(sizeFn, prog, uintptr(unsafe.Pointer(n))); r != 0 {
		return nil, &Error{Op: sizeOp, Code: r, Program: name}
	}
	if *n == 0 {
		return nil, nil
	}
	if *n > 1<<31 {
		return nil, fmt.Errorf("nvrtc: %s: %s reports %d bytes: not believable", name, sizeOp, *n)
	}
	buf := make([]byte, *n)
	if r := l.call(getFn, prog, uintptr(unsafe.Pointer(&buf[0]))); r != 0 {
		return nil, &Error{Op: getOp, Code: r, Program: name}
	}
	runtime.KeepAlive(buf)
	if getOp != "nvrtcGetCUBIN" {
		buf = []byte(strings.TrimRight(string(buf), "\x00"))
	}
	if len(buf) == 0 {
		return nil, nil
	}
	return buf, nil
}

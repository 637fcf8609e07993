package driver

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/purecuda/overlap/loader"
)

// The raw layer: one cached entry point per row of the symbol table, and
// calls through purego.SyscallN (callScratch: through callC, the faster
// path on linux/amd64) with no reflection and no allocation. Outside
// tests, the typed wrappers of zcalls.go, generated from prototypes.go,
// are the only callers of call, callScratch, callScratchOn and syscallN
// (TestCallsThroughWrappers).

var procs [numSymbols]atomic.Uintptr

var libState struct {
	once  sync.Once
	lib   *loader.Library
	err   error
	ready atomic.Bool
}

// openLibrary loads the driver library once per process, checks its
// version and calls cuInit.
func openLibrary() (*loader.Library, error) {
	libState.once.Do(func() {
		lib, err := loader.Open()
		if err != nil {
			libState.err = err
			return
		}
		if err := lib.CheckVersion(loader.MinDriverVersion); err != nil {
			libState.err = err
			return
		}
		p, err := lib.Resolve(symbols[symInit].Symbol)
		if err != nil {
			libState.err = err
			return
		}
		if r := cuInit(p, 0); r != 0 {
			libState.err = newError(symInit, r)
			return
		}
		procs[symInit].Store(p)
		libState.lib = lib
		libState.ready.Store(true)
	})
	return libState.lib, libState.err
}

func libraryReady() bool { return libState.ready.Load() }

// Load opens the driver library and initialises the driver. Every function
// that needs the driver calls it, so calling it yourself is optional; it is
// the way to learn early whether a driver is present. Its error wraps
// loader.ErrNoDriver when none is found.
func Load() error {
	_, err := openLibrary()
	return err
}

// LibraryPath returns the path of the driver library that was opened, or ""
// before a successful [Load].
func LibraryPath() string {
	if lib, err := openLibrary(); err == nil {
		return lib.Path()
	}
	return ""
}

// DriverVersion returns the driver's CUDA version, such as 13000 for 13.0
// (cuDriverGetVersion).
func DriverVersion() (int, error) {
	lib, err := openLibrary()
	if err != nil {
		return 0, err
	}
	return lib.DriverVersion()
}

// proc returns the cached entry point of id, resolving it on first use.
func proc(id symID) (uintptr, error) {
	if p := procs[id].Load(); p != 0 {
		return p, nil
	}
	if _, err := openLibrary(); err != nil {
		return 0, err
	}
	p, err := libState.lib.Resolve(symbols[id].Symbol)
	if err != nil {
		return 0, err
	}
	procs[id].Store(p)
	return p, nil
}

// syscallN calls the C function at p and returns its CUresult.
//
//go:uintptrescapes
func syscallN(p uintptr, args ...uintptr) Result {
	r, _, _ := purego.SyscallN(p, args...)
	return Result(int32(r))
}

// call resolves id and calls it, turning a non-zero CUresult into *Error.
//
//go:uintptrescapes
func call(id symID, args ...uintptr) error {
	p := procs[id].Load()
	if p == 0 {
		var err error
		if p, err = proc(id); err != nil {
			return err
		}
	}
	r, _, _ := purego.SyscallN(p, args...)
	if r := Result(int32(r)); r != 0 {
		return newError(id, r)
	}
	return nil
}

// scratch holds the argument block and out-parameters of hot calls, so that
// they allocate nothing: purego.SyscallN's variadic slice would otherwise
// escape to the heap on every call. Where ccall is built (linux/amd64) it
// is also the trampoline's frame: fn, args and r are laid out as
// ccall_linux_amd64.s reads them (TestScratchLayout).
type scratch struct {
	fn   uintptr // ccall: the C function
	args [11]uintptr
	r    uintptr // ccall: its result
	out  [2]uintptr
}

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// getScratch takes a scratch from the pool, for a hot call that has none
// of its own; putScratch gives it back.
func getScratch() *scratch  { return scratchPool.Get().(*scratch) }
func putScratch(s *scratch) { scratchPool.Put(s) }

// outFloat32 is s.out[0] as the float that a driver call writes there.
func (s *scratch) outFloat32() *float32 { return (*float32)(unsafe.Pointer(&s.out[0])) }

// callScratch calls id with s.args[:n]. Pointers in s.args must point to
// memory that outlives the call (s itself, pinned or C memory), and s must
// not move: heap or pinned memory.
func callScratch(id symID, s *scratch, n int) error { return callScratchOn(id, s, n, false) }

// callScratchOn is callScratch, through callCDirect, without
// runtime.cgocall, when direct: only for calls that do not block, of a
// Bound that asked for it (BindOptions.DirectCalls).
func callScratchOn(id symID, s *scratch, n int, direct bool) error {
	p := procs[id].Load()
	if p == 0 {
		var err error
		if p, err = proc(id); err != nil {
			return err
		}
	}
	var r uintptr
	if direct {
		r = callCDirect(p, s)
	} else {
		r = callC(p, s, n)
	}
	if r := Result(int32(r)); r != 0 {
		return newError(id, r)
	}
	return nil
}

//go:build linux && amd64 && overlap_directcalls

package driver

import "unsafe"

// The direct call path (BindOptions.DirectCalls), built only with the
// overlap_directcalls build tag: it links runtime.asmcgocall, which the
// runtime does not mark for linkname (go1.26's linker lets it through as
// an ABI wrapper, a loophole its own comments mean to close). Behind the
// tag, a toolchain that closes it breaks only the builds that asked for
// direct calls.

// runtime_asmcgocall is runtime.asmcgocall: the switch to the system stack
// and the call into C that runtime.cgocall makes after entersyscall.
//
//go:linkname runtime_asmcgocall runtime.asmcgocall
func runtime_asmcgocall(fn uintptr, arg unsafe.Pointer) int32

// haveDirectCalls: callCDirect skips runtime.cgocall here.
const haveDirectCalls = true

// callCDirect is callC without runtime.cgocall: the trampoline on the
// system stack, and nothing else. The goroutine keeps its P and stays
// running while C runs, so a call that blocks delays every stop-the-world
// until it returns; only non-blocking calls of a Bound that asked for
// direct calls come here (BindOptions.DirectCalls).
func callCDirect(p uintptr, s *scratch) uintptr {
	s.fn = p
	runtime_asmcgocall(ccallTrampoline, unsafe.Pointer(s))
	return s.r
}

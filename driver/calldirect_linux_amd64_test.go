//go:build linux && amd64

package driver

import "unsafe"

// runtime_asmcgocall is runtime.asmcgocall: the switch to the system
// stack and the call into C that runtime.cgocall makes after entersyscall.
// It links from a cgo-free binary (go1.26). Tests only: it measures what
// the scheduler's bookkeeping around a call costs (BenchmarkLaunchPaired,
// BenchmarkFake/CallCDirect). A call made this way that blocks holds its
// P and delays every stop-the-world until it returns, so the binding
// does not use it.
//
//go:linkname runtime_asmcgocall runtime.asmcgocall
func runtime_asmcgocall(fn uintptr, arg unsafe.Pointer) int32

// haveCallDirect: callCDirect skips runtime.cgocall here.
const haveCallDirect = true

// callCDirect is callC without runtime.cgocall: the trampoline on the
// system stack, and nothing else.
func callCDirect(p uintptr, s *scratch) uintptr {
	s.fn = p
	runtime_asmcgocall(ccallTrampoline, unsafe.Pointer(s))
	return s.r
}

//go:build linux && amd64

package driver

import "unsafe"

// The hot calls' fast path on linux/amd64, where the binding's own cost per
// call matters for many small jobs. purego.SyscallN
// copies its arguments twice into 32-slot arrays, takes a 58-word block
// from a sync.Pool, fills it and defers its return, around the one thing
// that matters, runtime.cgocall. ccall keeps runtime.cgocall, so a call
// is exactly as safe as through purego (the goroutine enters a system
// call, the C function runs on the system stack, a blocking call lets the
// scheduler hand its P on), and drops the rest: the frame is the caller's
// scratch, which is heap or pinned memory, and the trampoline
// (ccall_linux_amd64.s) passes eleven integer arguments by the System V
// ABI, six in registers and five on the stack. No floating-point
// arguments: no hot call has any. purego's fakecgo (CGO_ENABLED=0), or
// cgo itself, makes runtime.cgocall usable, as it does for purego.

// runtime_cgocall is runtime.cgocall, which the runtime exports for
// linkname (purego uses it the same way).
//
//go:linkname runtime_cgocall runtime.cgocall
func runtime_cgocall(fn uintptr, arg unsafe.Pointer) int32

// ccallTrampoline is the address of the ABI0 trampoline.
var ccallTrampoline uintptr

// callC calls the C function p with s.args (n of them used) and returns
// its result register.
func callC(p uintptr, s *scratch, _ int) uintptr {
	s.fn = p
	runtime_cgocall(ccallTrampoline, unsafe.Pointer(s))
	return s.r
}

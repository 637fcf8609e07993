//go:build !(linux && amd64)

package driver

import "github.com/ebitengine/purego"

// callC calls the C function p with s.args[:n] through purego.SyscallN:
// the path everywhere but linux/amd64 (ccall_linux_amd64.go).
func callC(p uintptr, s *scratch, n int) uintptr {
	r, _, _ := purego.SyscallN(p, s.args[:n]...)
	return r
}

// haveDirectCalls: there is no trampoline here to call without
// runtime.cgocall, so BindOptions.DirectCalls changes nothing.
const haveDirectCalls = false

// callCDirect is callC where there is no trampoline to call without
// runtime.cgocall.
func callCDirect(p uintptr, s *scratch) uintptr { return callC(p, s, len(s.args)) }

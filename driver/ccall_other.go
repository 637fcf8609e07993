//go:build !(linux && amd64)

package driver

import "github.com/ebitengine/purego"

// callC calls the C function p with s.args[:n] through purego.SyscallN:
// the path everywhere but linux/amd64 (ccall_linux_amd64.go).
func callC(p uintptr, s *scratch, n int) uintptr {
	r, _, _ := purego.SyscallN(p, s.args[:n]...)
	return r
}

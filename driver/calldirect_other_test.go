//go:build !(linux && amd64)

package driver

// callCDirect is callC where there is no ccall trampoline to call
// without runtime.cgocall (see calldirect_linux_amd64_test.go).
func callCDirect(p uintptr, s *scratch) uintptr { return callC(p, s, len(s.args)) }

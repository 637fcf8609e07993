//go:build !(linux && amd64)

package driver

// haveCallDirect: there is no ccall trampoline here to call without
// runtime.cgocall, so callCDirect is callC, and benchmarks leave it out.
const haveCallDirect = false

// callCDirect is callC where there is no ccall trampoline to call
// without runtime.cgocall (see calldirect_linux_amd64_test.go).
func callCDirect(p uintptr, s *scratch) uintptr { return callC(p, s, len(s.args)) }

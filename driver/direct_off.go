//go:build !(linux && amd64 && overlap_directcalls)

package driver

// haveDirectCalls: this build has no direct call path (it needs
// linux/amd64 and the overlap_directcalls build tag; direct_on.go), so
// BindOptions.DirectCalls changes nothing.
const haveDirectCalls = false

// callCDirect is callC where there is no direct call path.
func callCDirect(p uintptr, s *scratch) uintptr { return callC(p, s, len(s.args)) }

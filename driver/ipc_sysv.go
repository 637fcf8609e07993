//go:build amd64 && !windows

package driver

import (
	"encoding/binary"
	"runtime"
)

// byValue64 lays out the arguments that follow a C function's first one
// when its second is a 64-byte struct passed by value (a CUipcMemHandle
// or CUipcEventHandle) and its third, if any, is the integer after. The
// System V AMD64 ABI passes such a struct in memory, on the stack, where
// the seventh integer argument would go, and gives the integer after it
// the second register: so after, four unused registers, then the
// struct's eight words.
func byValue64(h *[64]byte, after uintptr, _ *runtime.Pinner) (w [13]uintptr) {
	w[0] = after
	for i := range 8 {
		w[5+i] = uintptr(binary.LittleEndian.Uint64(h[8*i:]))
	}
	return w
}

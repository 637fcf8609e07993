//go:build !amd64 || windows

package driver

import (
	"runtime"
	"unsafe"
)

// byValue64 lays out the arguments that follow a C function's first one
// when its second is a 64-byte struct passed by value (a CUipcMemHandle
// or CUipcEventHandle) and its third, if any, is the integer after. The
// AArch64 and Windows x64 ABIs pass a struct that large by reference: the
// caller's copy's address, then the integer after; the rest is unused.
// The copy is pinned with pin, for the call.
func byValue64(h *[64]byte, after uintptr, pin *runtime.Pinner) (w [13]uintptr) {
	c := new([64]byte)
	*c = *h
	pin.Pin(c)
	w[0] = uintptr(unsafe.Pointer(c))
	w[1] = after
	return w
}

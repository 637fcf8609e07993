//go:build windows

package loader

import (
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

const platformSupported = true

// kernel32 is a known DLL, always loaded from System32.
var loadLibraryExW = syscall.NewLazyDLL("kernel32.dll").NewProc("LoadLibraryExW")

func dlopen(path string) (uintptr, error) {
	p, err := syscall.UTF16PtrFromString(path)
	if err != nil {
		return 0, err
	}
	if err := loadLibraryExW.Find(); err != nil {
		return 0, err
	}
	h, _, callErr := loadLibraryExW.Call(uintptr(unsafe.Pointer(p)), 0, uintptr(windowsLoadFlags(path)))
	if h == 0 {
		return 0, callErr
	}
	return h, nil
}

func dlsym(h uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(h), name)
}

func dlclose(h uintptr) { _ = syscall.FreeLibrary(syscall.Handle(h)) }

// call calls the C function fn with args and returns its result.
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

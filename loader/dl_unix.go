//go:build linux

package loader

import (
	"errors"
	"runtime"

	"github.com/ebitengine/purego"
)

const platformSupported = true

// dlopen opens path. dlerror's message is the calling thread's: purego
// calls dlopen and then dlerror, so the goroutine stays on its thread
// between them, or the message can come back empty (seen once in CI).
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	runtime.UnlockOSThread()
	if err != nil {
		return 0, err
	}
	if h == 0 {
		return 0, errors.New("dlopen returned no handle")
	}
	return h, nil
}

// dlsym looks name up in h, on one thread for dlerror as dlopen does.
func dlsym(h uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(h, name)
}

func dlclose(h uintptr) { _ = purego.Dlclose(h) }

// call calls the C function fn with args and returns its result.
func call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

//go:build !linux && !windows

package loader

// Elsewhere (FreeBSD, macOS, …) there is no CUDA driver to load: NVIDIA
// ships its CUDA driver library for Linux and Windows. Open returns an
// error wrapping ErrUnsupported, and the package imports no purego, so
// that it builds wherever Go does.

const platformSupported = false

func dlopen(string) (uintptr, error)         { return 0, ErrUnsupported }
func dlsym(uintptr, string) (uintptr, error) { return 0, ErrUnsupported }
func dlclose(uintptr)                        {}
func call(uintptr, ...uintptr) uintptr       { return 0 }

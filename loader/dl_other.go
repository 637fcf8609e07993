//go:build !linux && !windows

package loader

const platformSupported = false

func dlopen(string) (uintptr, error)         { return 0, ErrUnsupported }
func dlsym(uintptr, string) (uintptr, error) { return 0, ErrUnsupported }
func dlclose(uintptr)                        {}

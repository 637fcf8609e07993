//go:build windows

package loader

import "syscall"

const platformSupported = true

func dlopen(path string) (uintptr, error) {
	h, err := syscall.LoadLibrary(path)
	if err != nil {
		return 0, err
	}
	return uintptr(h), nil
}

func dlsym(h uintptr, name string) (uintptr, error) {
	return syscall.GetProcAddress(syscall.Handle(h), name)
}

func dlclose(h uintptr) { _ = syscall.FreeLibrary(syscall.Handle(h)) }

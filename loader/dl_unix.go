//go:build linux

package loader

import (
	"errors"

	"github.com/ebitengine/purego"
)

const platformSupported = true

func dlopen(path string) (uintptr, error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return 0, err
	}
	if h == 0 {
		return 0, errors.New("dlopen returned no handle")
	}
	return h, nil
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

func dlclose(h uintptr) { _ = purego.Dlclose(h) }

//go:build !linux

package pipeline

import (
	"errors"
	"fmt"
	"os"
)

// DirectAlign is the alignment O_DIRECT reads need on Linux.
const DirectAlign = 4096

// OpenDirect reports that O_DIRECT is supported on Linux only.
func OpenDirect(name string) (*os.File, error) {
	return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("pipeline: O_DIRECT is supported on Linux only")}
}

// directHint returns err: O_DIRECT is Linux only.
func directHint(err error) error { return err }

// CreateDirect reports that O_DIRECT is supported on Linux only.
func CreateDirect(name string) (*os.File, error) {
	return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("pipeline: O_DIRECT is supported on Linux only")}
}

// Preallocate allocates nothing: fallocate is Linux's. It reports false.
func Preallocate(f *os.File, off, size int64) (bool, error) {
	if f == nil || off < 0 || size <= 0 {
		return false, fmt.Errorf("pipeline: Preallocate: no file, or a negative offset or no size (%d bytes at %d)", size, off)
	}
	return false, nil
}

// isDirect reports false: O_DIRECT is Linux only.
func isDirect(f *os.File) bool { return false }

// writeUnaligned is never called where isDirect is false.
func writeUnaligned(f *os.File, b []byte, off int64) (int, error) { return f.WriteAt(b, off) }

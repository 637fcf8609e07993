//go:build !linux

package pipeline

import (
	"errors"
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

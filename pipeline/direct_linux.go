//go:build linux

package pipeline

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// DirectAlign is the alignment O_DIRECT reads need: of the file offset,
// the length and the memory. Pinned slots are page-aligned; a streaming
// run reads O_DIRECT files correctly when every input's chunk
// (ChunkElems × element size) and its starting offset are multiples of it.
const DirectAlign = 4096

// OpenDirect opens name for reading with O_DIRECT, so that reads bypass
// the page cache and go from the disk straight into the pinned slots. It
// is supported on Linux only, and only by file systems that allow it
// (tmpfs does not: the open fails with EINVAL).
func OpenDirect(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_RDONLY|syscall.O_DIRECT, 0)
}

// directHint says what O_DIRECT needs when a positional read fails with
// EINVAL, the error a misaligned O_DIRECT read gives.
func directHint(err error) error {
	if errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("%w (a file opened with O_DIRECT needs the offset, the length and the memory aligned to %d bytes)", err, DirectAlign)
	}
	return err
}

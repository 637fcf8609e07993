//go:build linux

package pipeline

import (
	"errors"
	"fmt"
	"io"
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

// CreateDirect creates (or truncates) name for writing with O_DIRECT, mode
// 0o644, so that a streaming run's positional writes go from the pinned
// slots straight to the disk, past the page cache. As for reading, every
// chunk's output bytes (ChunkElems × element size) and the output's
// starting offset must be multiples of [DirectAlign]; the run's last,
// partial chunk may end anywhere, and the file ends exactly there. It is
// supported on Linux only, and only by file systems that allow it (tmpfs
// does not: the open fails with EINVAL).
func CreateDirect(name string) (*os.File, error) {
	return os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_DIRECT, 0o644)
}

// Preallocate allocates size bytes of f from offset off (fallocate, mode
// 0: the file grows to off+size if it was shorter), so that writes there
// neither extend the file nor allocate as they go. It reports whether it
// allocated: a file system that cannot (EOPNOTSUPP) is not an error, and
// allocates nothing.
func Preallocate(f *os.File, off, size int64) (bool, error) {
	if f == nil || off < 0 || size <= 0 {
		return false, fmt.Errorf("pipeline: Preallocate: no file, or a negative offset or no size (%d bytes at %d)", size, off)
	}
	var ferr error
	if err := control(f, func(fd uintptr) {
		for {
			if ferr = syscall.Fallocate(int(fd), 0, off, size); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	switch {
	case ferr == nil:
		return true, nil
	case errors.Is(ferr, syscall.EOPNOTSUPP), errors.Is(ferr, syscall.ENOSYS):
		return false, nil
	}
	return false, &os.PathError{Op: "fallocate", Path: f.Name(), Err: ferr}
}

// control runs do on f's descriptor.
func control(f *os.File, do func(fd uintptr)) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	return rc.Control(do)
}

// fileFlags is f's file status flags (fcntl F_GETFL).
func fileFlags(fd uintptr) (int, error) {
	fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	if e != 0 {
		return 0, e
	}
	return int(fl), nil
}

// isDirect reports whether f was opened with O_DIRECT.
func isDirect(f *os.File) bool {
	direct := false
	_ = control(f, func(fd uintptr) {
		fl, err := fileFlags(fd)
		direct = err == nil && fl&syscall.O_DIRECT != 0
	})
	return direct
}

// writeUnaligned writes b at off to f, a file opened with O_DIRECT, with
// O_DIRECT cleared on f's open file description for the one write and set
// again after it: the last piece of a run, whose length is not a multiple
// of DirectAlign, goes through the page cache, and the file ends exactly
// where it does. A write of another goroutine to the same file during it
// goes through the page cache too, which is as correct.
func writeUnaligned(f *os.File, b []byte, off int64) (int, error) {
	var n int
	var werr error
	if err := control(f, func(fd uintptr) {
		fl, err := fileFlags(fd)
		if err != nil {
			werr = fmt.Errorf("fcntl F_GETFL: %w", err)
			return
		}
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, uintptr(fl&^syscall.O_DIRECT)); e != 0 {
			werr = fmt.Errorf("fcntl F_SETFL clearing O_DIRECT: %w", e)
			return
		}
		for n < len(b) {
			k, err := syscall.Pwrite(int(fd), b[n:], off+int64(n))
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				werr = &os.PathError{Op: "write", Path: f.Name(), Err: err}
				break
			}
			if k == 0 {
				werr = io.ErrShortWrite
				break
			}
			n += k
		}
		if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETFL, uintptr(fl)); e != 0 && werr == nil {
			werr = fmt.Errorf("fcntl F_SETFL setting O_DIRECT again: %w", e)
		}
	}); err != nil {
		return 0, err
	}
	return n, werr
}

package pipeline

import (
	"fmt"
	"unsafe"
)

// HostAccess lets the host itself write (when write) or read n bytes of
// the simulator's pinned memory h at off, outside any copy: do gets a
// buffer standing for those bytes and returns how many it filled or used.
// The access is recorded for the hazard detector, and the bytes move
// under the simulator's data lock from or to a private buffer, so that a
// wrong schedule is reported as a hazard rather than racing in Go. The
// streaming run reads into slots and writes out of them this way.
func (s *Sim) HostAccess(h HostMemory, off, n int, write bool, what string, do func(b []byte) (int, error)) (int, error) {
	sh, err := simHostOf(h)
	if err != nil {
		return 0, err
	}
	if off < 0 || n < 0 || n > len(sh.data)-off {
		return 0, fmt.Errorf("pipeline: sim: host access of %d bytes at %d does not fit %d", n, off, len(sh.data))
	}
	// The private buffer is page-aligned, as pinned memory is, so that
	// files opened with O_DIRECT can be read into it.
	raw := make([]byte, n+4096)
	pad := int((4096 - uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4096) % 4096)
	buf := raw[pad : pad+n : pad+n]
	// The access is recorded when the bytes move: before do for a read of
	// the pinned memory, after it for a write.
	sp := span{mem: sh.id, name: sh.name(), lo: off, hi: off + n, write: write}
	if !write {
		s.host(what, sp)
		s.dataMu.Lock()
		copy(buf, sh.data[off:off+n])
		s.dataMu.Unlock()
		return do(buf)
	}
	k, err := do(buf)
	s.host(what, sp)
	s.dataMu.Lock()
	copy(sh.data[off:off+k], buf[:k])
	s.dataMu.Unlock()
	return k, err
}

package pipeline

import (
	"errors"
	"unsafe"
)

// HostAccess lets the host itself write (when write) or read n bytes of
// the simulator's pinned memory h at off, outside any copy: do gets a
// buffer standing for those bytes and returns how many it filled or used.
// The access is recorded for the hazard detector, and the bytes move
// under the simulator's data lock from or to a private buffer, so that a
// wrong schedule is reported as a hazard rather than racing in Go. The
// streaming run reads into slots and writes out of them this way.
//
// On the virtual clock the access costs what a staging copy of the bytes
// it moves costs (the profile's staging rate for that size, shared with
// other staging copies at the time); do itself (the file's read or
// write) takes no virtual time.
func (s *Sim) HostAccess(h HostMemory, off, n int, write bool, what string, do func(b []byte) (int, error)) (int, error) {
	switch {
	case !s.usable():
		return 0, errNoSim
	case do == nil:
		return 0, errors.New("pipeline: sim: HostAccess: nil do")
	}
	sh, err := simHostOf(h)
	if err != nil {
		return 0, err
	}
	if off < 0 || n < 0 || n > len(sh.data)-off {
		return 0, s.hostCopy(what, sh.id, sh.name(), sh.data, off, n, write, nil)
	}
	// The private buffer is page-aligned, as pinned memory is, so that
	// files opened with O_DIRECT can be read into it.
	raw := make([]byte, n+4096)
	pad := int((4096 - uintptr(unsafe.Pointer(unsafe.SliceData(raw)))%4096) % 4096)
	buf := raw[pad : pad+n : pad+n]
	// The access is recorded when the bytes move: before do for a read of
	// the pinned memory, after it for a write.
	if !write {
		if err := s.hostCopy(what, sh.id, sh.name(), sh.data, off, n, false, func(mem []byte) { copy(buf, mem) }); err != nil {
			return 0, err
		}
		return do(buf)
	}
	k, err := do(buf)
	k = max(0, min(k, n))
	if cerr := s.hostCopy(what, sh.id, sh.name(), sh.data, off, k, true, func(mem []byte) { copy(mem, buf[:k]) }); cerr != nil {
		return 0, cerr
	}
	return k, err
}

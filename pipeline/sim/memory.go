package sim

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/units"
	"github.com/purecuda/overlap/pipeline"
)

type simDevice struct {
	sim    *Sim
	id     int
	base   driver.DevicePtr
	data   []byte
	size   int
	closed bool
}

func (d *simDevice) Len() int { return d.size }

func (d *simDevice) Ptr() driver.DevicePtr { return d.base }

func (d *simDevice) name() string { return fmt.Sprintf("device buffer %d", d.id) }

func (d *simDevice) Close() error {
	s := d.sim
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	if !d.closed {
		d.closed = true
		s.live["device"]--
		s.used -= int64(d.size)
		delete(s.mems, d.base)
	}
	return nil
}

type simHost struct {
	sim    *Sim
	id     int
	kind   string
	data   []byte
	closed bool
}

func (m *simHost) Bytes() []byte {
	if m.closed {
		return nil
	}
	return m.data
}

func (m *simHost) name() string { return fmt.Sprintf("%s host memory %d", m.kind, m.id) }

func (m *simHost) Close() error {
	s := m.sim
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	if !m.closed {
		m.closed = true
		s.live[m.kind]--
		for i, r := range s.regs {
			if r == m {
				s.regs = append(s.regs[:i], s.regs[i+1:]...)
				break
			}
		}
	}
	return nil
}

func (s *Sim) AllocDevice(n int) (pipeline.DeviceMem, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	if n <= 0 {
		return nil, fmt.Errorf("sim: device allocation of %d bytes", n)
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	if mem := s.prof.deviceMemory(); int64(n) > mem-s.used {
		return nil, fmt.Errorf("sim: device allocation of %s with %s of the device's %s in use: %w",
			sizeString(int64(n)), sizeString(s.used), sizeString(mem), driver.ErrOutOfMemory)
	}
	if h.nextMem+1 >= simMaxID {
		return nil, fmt.Errorf("sim: more than %d allocations on one simulated host", simMaxID-1)
	}
	h.nextMem++
	d := &simDevice{sim: s, id: h.nextMem, base: simAddr(h.nextMem), size: n}
	if !h.timingOnly {
		d.data = make([]byte, n)
	}
	s.mems[d.base] = d
	s.live["device"]++
	s.used += int64(n)
	return d, nil
}

// Device memory lies at simBase + id·simSpacing for the buffer of memory
// id (Host.nextMem), so that an address tells its buffer: simSpacing
// is more than any device's memory, and ids stay below simMaxID.
const (
	simBase    = 0x7f00_0000_0000
	simSpacing = 1 << 40
	simMaxID   = (1<<64 - simBase) / simSpacing
)

func simAddr(id int) driver.DevicePtr { return driver.DevicePtr(simBase + uint64(id)*simSpacing) }

// deviceAt is the live buffer of this device that ptr points into and
// ptr's offset in it, or nil: a kernel may be handed an address inside a
// buffer (the pipeline's slots are parts of one buffer). h.mu held.
func (s *Sim) deviceAt(ptr driver.DevicePtr) (*simDevice, int) {
	v := uint64(ptr)
	if v < simBase+simSpacing {
		return nil, 0
	}
	d := s.mems[simAddr(int((v-simBase)/simSpacing))]
	if d == nil || v-uint64(d.base) >= uint64(d.size) {
		return nil, 0
	}
	return d, int(v - uint64(d.base))
}

// FreeMemory is the profile's device memory less what is allocated.
func (s *Sim) FreeMemory() (free, total int64, err error) {
	if !s.usable() {
		return 0, 0, errNoSim
	}
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	total = s.prof.deviceMemory()
	return total - s.used, total, nil
}

func (s *Sim) AllocPinned(n int) (pipeline.PinnedMem, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	if n <= 0 {
		return nil, fmt.Errorf("sim: pinned allocation of %d bytes", n)
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	h.nextMem++
	s.live["pinned"]++
	return &simHost{sim: s, id: h.nextMem, kind: "pinned", data: make([]byte, n)}, nil
}

// Register stands in for page-locking: the memory is used in place, and
// the caller's clock pays the profile's registration cost.
func (s *Sim) Register(mem []byte) (pipeline.PinnedMem, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	if len(mem) == 0 {
		return nil, errors.New("sim: registering empty memory")
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	// Like the driver, refuse to register memory twice.
	lo := uintptr(unsafe.Pointer(&mem[0]))
	for _, r := range s.regs {
		if !r.closed && lo < uintptr(unsafe.Pointer(&r.data[0]))+uintptr(len(r.data)) && uintptr(unsafe.Pointer(&r.data[0])) < lo+uintptr(len(mem)) {
			return nil, pipeline.ErrRegistered
		}
	}
	h.spend(h.self(), time.Duration(s.prof.RegisterMsPerGiB*float64(time.Millisecond)*float64(len(mem))/(1<<30)))
	h.nextMem++
	s.live["registered"]++
	m := &simHost{sim: s, id: h.nextMem, kind: "registered", data: mem}
	s.regs = append(s.regs, m)
	return m, nil
}

func simHostOf(m pipeline.HostMemory) (*simHost, error) {
	sh, ok := m.(*simHost)
	if !ok || sh.closed {
		return nil, fmt.Errorf("sim: host memory %T is not live simulator memory", m)
	}
	return sh, nil
}

func simDevOf(d pipeline.DeviceMem) (*simDevice, error) {
	sd, ok := d.(*simDevice)
	if !ok || sd.closed {
		return nil, fmt.Errorf("sim: device memory %T is not live simulator memory", d)
	}
	return sd, nil
}

func (s *Sim) StageIn(dst pipeline.HostMemory, dstOff int, src []byte) error {
	if !s.usable() {
		return errNoSim
	}
	m, err := simHostOf(dst)
	if err != nil {
		return err
	}
	return s.hostCopy("host stage-in", m.id, m.name(), m.data, dstOff, len(src), true, func(mem []byte) { copy(mem, src) })
}

func (s *Sim) StageOut(dst []byte, src pipeline.HostMemory, srcOff int) error {
	if !s.usable() {
		return errNoSim
	}
	m, err := simHostOf(src)
	if err != nil {
		return err
	}
	return s.hostCopy("host stage-out", m.id, m.name(), m.data, srcOff, len(dst), false, func(mem []byte) { copy(dst, mem) })
}

// hostCopy is a staging copy by the calling goroutine: it records the
// access, moves the bytes, and takes the virtual time of n bytes at the
// profile's staging rate, shared with other staging copies at the same
// time; by a run's staging goroutine, at the profile's in-run rate where
// it has one.
func (s *Sim) hostCopy(what string, id int, name string, data []byte, off, n int, write bool, do func(mem []byte)) error {
	if off < 0 || n < 0 || n > len(data)-off {
		return fmt.Errorf("sim: %s of %d bytes at %d does not fit %d", what, n, off, len(data))
	}
	h := s.host
	h.mu.Lock()
	a := h.self()
	h.hostAccess(a, what, memSpan{mem: id, name: name, lo: off, hi: off + n, write: write})
	h.mu.Unlock()
	if !h.timingOnly {
		h.dataMu.Lock()
		do(data[off : off+n])
		h.dataMu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	solo, pair := s.prof.stagingRate(n)
	finished := false
	act := &activity{class: actMemcpy, dev: s, remaining: float64(n), solo: solo, pair: pair, bytes: n, done: func() { finished = true }}
	if a.stager {
		a.staged = n
		act.inRun, act.boost = s.prof.stagingInRun(n, write), s.prof.StagingAloneBoost(n)
	}
	h.at(a.now, func() { h.start(act) })
	h.blockUntil(a, 0, func() bool { return finished })
	return nil
}

func (s *Sim) CopyToDeviceSync(dst pipeline.DeviceMem, off int, src []byte) error {
	if !s.usable() {
		return errNoSim
	}
	d, err := simDevOf(dst)
	if err != nil {
		return err
	}
	return s.syncCopy("synchronous copy to device", d, off, len(src), true, func(mem []byte) { copy(mem, src) })
}

func (s *Sim) CopyToHostSync(dst []byte, src pipeline.DeviceMem, off int) error {
	if !s.usable() {
		return errNoSim
	}
	d, err := simDevOf(src)
	if err != nil {
		return err
	}
	return s.syncCopy("synchronous copy to host", d, off, len(dst), false, func(mem []byte) { copy(dst, mem) })
}

// syncCopy is a blocking copy from or to pageable memory: like the
// driver's, it waits for every stream first, then moves n bytes at the
// profile's pageable rate through a copy engine.
func (s *Sim) syncCopy(what string, d *simDevice, off, n int, toDevice bool, do func(mem []byte)) error {
	if off < 0 || n < 0 || n > d.size-off {
		return fmt.Errorf("sim: %s of %d bytes at %d does not fit %d", what, n, off, d.size)
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	// Wait for every stream of the device, as the legacy default stream does.
	var lasts []*simOp
	for _, st := range s.streams {
		if st.last != nil {
			lasts = append(lasts, st.last)
		}
	}
	h.blockUntil(a, 0, func() bool {
		for _, op := range lasts {
			if !op.done {
				return false
			}
		}
		return true
	})
	for _, op := range lasts {
		a.vc = a.vc.merge(op.vc)
	}
	h.hostAccess(a, what, memSpan{mem: d.id, name: d.name(), lo: off, hi: off + n, write: toDevice})
	if !h.timingOnly {
		h.dataMu.Lock()
		do(d.data[off : off+n])
		h.dataMu.Unlock()
	}
	dir, rate := actD2H, s.prof.PageableD2HGBps
	if toDevice {
		dir, rate = actH2D, s.prof.PageableH2DGBps
	}
	finished := false
	h.at(a.now, func() {
		s.acquire(dir, func() {
			h.start(&activity{class: dir, dev: s, remaining: float64(n), solo: rate, done: func() {
				s.release(dir)
				finished = true
			}})
		})
	})
	h.blockUntil(a, time.Duration(s.prof.SyncNs), func() bool { return finished })
	return nil
}

// acquire runs fn when a copy engine of direction dir is free. h.mu held.
func (s *Sim) acquire(dir int, fn func()) {
	e := &s.engines[dir]
	capacity := s.prof.CopyEngines
	if dir == actKernel {
		capacity = 1
	}
	if e.busy < capacity {
		e.busy++
		fn()
		return
	}
	e.queue = append(e.queue, fn)
}

// release frees a copy engine and starts the next copy waiting. h.mu held.
func (s *Sim) release(dir int) {
	e := &s.engines[dir]
	if len(e.queue) > 0 {
		fn := e.queue[0]
		e.queue = e.queue[1:]
		fn()
		return
	}
	e.busy--
}

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
func (s *Sim) HostAccess(h pipeline.HostMemory, off, n int, write bool, what string, do func(b []byte) (int, error)) (int, error) {
	switch {
	case !s.usable():
		return 0, errNoSim
	case do == nil:
		return 0, errors.New("sim: HostAccess: nil do")
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

// sizeString is b bytes in the largest binary unit that fits, as the
// engine's errors write them.
func sizeString(b int64) string { return units.Short(b) }

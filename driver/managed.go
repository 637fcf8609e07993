package driver

import (
	"fmt"
	"unsafe"
)

// Location is where memory lives, or is advised or prefetched to: the
// host, or a device (CUmemLocation). The zero Location names neither.
type Location struct {
	// Host names the host; Device is then ignored.
	Host bool
	// Device names a device, when Host is false.
	Device Device
}

// CUmemLocationType values.
const (
	memLocationDevice = 1 // CU_MEM_LOCATION_TYPE_DEVICE
	memLocationHost   = 2 // CU_MEM_LOCATION_TYPE_HOST
)

// cu returns the location as the CUmemLocation that the driver takes by
// value, {int type; int id}: 8 bytes, which every 64-bit ABI the binding
// supports passes in one integer register, type in the low half.
func (l Location) cu(op string) (uint64, error) {
	switch {
	case l.Host:
		return memLocationHost, nil
	case l.Device.valid:
		return memLocationDevice | uint64(uint32(l.Device.cu()))<<32, nil
	}
	return 0, argError(op, "zero Location: set Host or Device")
}

func (l Location) String() string {
	switch {
	case l.Host:
		return "host"
	case l.Device.valid:
		return fmt.Sprintf("GPU %d", l.Device.ordinal)
	}
	return "no location"
}

// Advice is a CUmem_advise value for [ManagedBuffer.Advise].
type Advice int32

// The advices (CU_MEM_ADVISE_*).
const (
	// AdviseReadMostly: the memory is mostly read, so each reader may
	// keep a copy; the Location is ignored.
	AdviseReadMostly        Advice = 1
	AdviseUnsetReadMostly   Advice = 2
	AdvisePreferredLocation Advice = 3
	AdviseUnsetPreferred    Advice = 4
	// AdviseAccessedBy: the Location's device accesses the memory, so
	// keep it mapped there.
	AdviseAccessedBy      Advice = 5
	AdviseUnsetAccessedBy Advice = 6
)

// ManagedOptions configure [Context.AllocManaged]. The zero value gives
// memory that every stream and the host may access (CU_MEM_ATTACH_GLOBAL).
type ManagedOptions struct {
	// HostAttached attaches the memory to the host (CU_MEM_ATTACH_HOST):
	// the device may access it only from a stream it is attached to.
	HostAttached bool
}

const (
	memAttachGlobal = 0x1 // CU_MEM_ATTACH_GLOBAL
	memAttachHost   = 0x2 // CU_MEM_ATTACH_HOST
)

// ManagedBuffer is managed (unified) memory from cuMemAllocManaged: one
// address that the host and the device both access, pages migrating on
// demand. The caller owns it and must Close it; closing its Context
// closes it too. [ManagedBuffer.Buffer] gives the same memory as a
// DeviceBuffer, for copies and kernels.
//
// Its view ([ManagedBuffer.Bytes]) points into memory that the garbage
// collector cannot see, so, as with a [HostBuffer], only Close (of the
// buffer or of its Context) frees it: one dropped without Close stays
// allocated until its Context is closed. The host must not touch the view
// while device work that uses the memory may run.
type ManagedBuffer struct {
	dev *DeviceBuffer
}

// AllocManaged allocates n bytes of managed memory (cuMemAllocManaged),
// only when asked: nothing else in the binding does. n must be positive
// and no more than the device's free memory (cuMemGetInfo_v2): a larger
// request is refused with an error that matches ErrOutOfMemory, rather
// than left to oversubscribe the device.
func (c *Context) AllocManaged(n int, opts ManagedOptions) (*ManagedBuffer, error) {
	const op = "Context.AllocManaged"
	if n <= 0 {
		return nil, argError(op, "size %d: must be positive", n)
	}
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	info := new([2]uint64)
	if err := cuMemGetInfo(&info[0], &info[1]); err != nil {
		return nil, err
	}
	if uint64(n) > info[0] {
		return nil, fmt.Errorf("cuda: %s: %d bytes asked for, more than the %d bytes free on GPU %d: %w",
			op, n, info[0], k.dev.ordinal, ErrOutOfMemory)
	}
	var flags uint32 = memAttachGlobal
	if opts.HostAttached {
		flags = memAttachHost
	}
	var p DevicePtr
	if err := cuMemAllocManaged(&p, uintptr(n), flags); err != nil {
		return nil, err
	}
	r, err := k.adopt(op, kindManagedMemory, uintptr(p), nil)
	if err != nil {
		return nil, err
	}
	d := &DeviceBuffer{size: n}
	own(d, &d.owned, c, r, false) // no cleanup: views point into it
	return &ManagedBuffer{dev: d}, nil
}

// Buffer returns the memory as a DeviceBuffer, for copies and kernels:
// the same object each time, closed with m (and closing it closes m).
func (m *ManagedBuffer) Buffer() *DeviceBuffer {
	if m == nil {
		return nil
	}
	return m.dev
}

// Len returns the size in bytes.
func (m *ManagedBuffer) Len() int { return m.Buffer().Len() }

// Ptr returns the memory's address, or 0 once closed.
func (m *ManagedBuffer) Ptr() DevicePtr { return m.Buffer().Ptr() }

// Bytes views the memory from the host; nil once closed. The view is
// valid until m or its Context is closed.
func (m *ManagedBuffer) Bytes() []byte {
	p := uintptr(m.Ptr())
	if p == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), m.dev.size)
}

// Close frees the memory (cuMemFree_v2). A second Close returns nil.
func (m *ManagedBuffer) Close() error {
	if m == nil || m.dev == nil {
		return nil
	}
	return m.dev.Close()
}

// lock read-locks m for a call and returns its address; the caller must
// call m.dev.done().
func (m *ManagedBuffer) lock(op string) (DevicePtr, error) {
	if m == nil || m.dev == nil {
		return 0, argError(op, "nil *ManagedBuffer")
	}
	h, err := m.dev.use(op)
	return DevicePtr(h), err
}

// Advise gives the driver a for the whole buffer, about where
// (cuMemAdvise_v2). The read-mostly advices apply to every processor; for
// them a zero where stands for the buffer's own device, since the driver
// refuses a zero location even there.
func (m *ManagedBuffer) Advise(a Advice, where Location) error {
	const op = "ManagedBuffer.Advise"
	if a < AdviseReadMostly || a > AdviseUnsetAccessedBy {
		return argError(op, "advice %d: not a CUmem_advise", a)
	}
	readMostly := a == AdviseReadMostly || a == AdviseUnsetReadMostly
	if !readMostly {
		if _, err := where.cu(op); err != nil {
			return err
		}
	}
	p, err := m.lock(op)
	if err != nil {
		return err
	}
	defer m.dev.done()
	// The read-mostly advice applies to every processor, but the driver
	// still checks its location (CUDA_ERROR_INVALID_VALUE for a zero one,
	// on the H200's 580 driver): a zero Location stands for the buffer's
	// own device.
	if readMostly && !where.Host && !where.Device.valid {
		where = Location{Device: m.dev.res.core.dev}
	}
	loc, err := where.cu(op)
	if err != nil {
		return err
	}
	if err := m.dev.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	return cuMemAdvise(p, uintptr(m.dev.size), int32(a), loc)
}

// Prefetch queues on s the migration of the whole buffer to where
// (cuMemPrefetchAsync_v2). s must belong to the buffer's context.
func (m *ManagedBuffer) Prefetch(s *Stream, where Location) error {
	const op = "ManagedBuffer.Prefetch"
	loc, err := where.cu(op)
	if err != nil {
		return err
	}
	if s == nil || s.res == nil {
		return argError(op, "nil *Stream")
	}
	p, err := m.lock(op)
	if err != nil {
		return err
	}
	defer m.dev.done()
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	if err := sameContext(op, m.dev.res.core, s.res.core); err != nil {
		return err
	}
	sc, err := s.issuing(op, via{})
	if err != nil {
		return err
	}
	err = cuMemPrefetchAsync(p, uintptr(m.dev.size), loc, 0, h)
	via{}.issued(sc)
	if c := s.capt.Load(); c != nil && err == nil {
		c.add(m.dev.res, m.dev, false)
	}
	return err
}

// CUmem_range_attribute values, and the locations they answer.
const (
	rangeReadMostly         = 1  // CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY
	rangePreferredLocation  = 2  // CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION
	rangeLastPrefetch       = 4  // CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION
	deviceCPU               = -1 // CU_DEVICE_CPU
	deviceInvalid           = -2 // CU_DEVICE_INVALID
	rangeAttributeValueSize = 4
)

// rangeAttribute reads a 32-bit attribute of the whole buffer
// (cuMemRangeGetAttribute).
func (m *ManagedBuffer) rangeAttribute(op string, attr int32) (int32, error) {
	p, err := m.lock(op)
	if err != nil {
		return 0, err
	}
	defer m.dev.done()
	if err := m.dev.res.core.enter(op); err != nil {
		return 0, err
	}
	defer leave()
	v := new(int32)
	err = cuMemRangeGetAttribute(v, rangeAttributeValueSize, attr, p, uintptr(m.dev.size))
	return *v, err
}

// ReadMostly reports whether the whole buffer is advised read-mostly
// (cuMemRangeGetAttribute, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY).
func (m *ManagedBuffer) ReadMostly() (bool, error) {
	v, err := m.rangeAttribute("ManagedBuffer.ReadMostly", rangeReadMostly)
	return v != 0, err
}

// PreferredLocation returns the whole buffer's preferred location; false
// when it has none, or its pages disagree (cuMemRangeGetAttribute,
// CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION).
func (m *ManagedBuffer) PreferredLocation() (Location, bool, error) {
	return m.location("ManagedBuffer.PreferredLocation", rangePreferredLocation)
}

// LastPrefetch returns where the whole buffer was last prefetched to;
// false when it never was, or its pages disagree (cuMemRangeGetAttribute,
// CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION).
func (m *ManagedBuffer) LastPrefetch() (Location, bool, error) {
	return m.location("ManagedBuffer.LastPrefetch", rangeLastPrefetch)
}

func (m *ManagedBuffer) location(op string, attr int32) (Location, bool, error) {
	v, err := m.rangeAttribute(op, attr)
	switch {
	case err != nil || v == deviceInvalid:
		return Location{}, false, err
	case v == deviceCPU:
		return Location{Host: true}, true, nil
	case v < 0:
		return Location{}, false, fmt.Errorf("cuda: %s: the driver answered location %d", op, v)
	}
	return Location{Device: Device{ordinal: int(v), valid: true}}, true, nil
}

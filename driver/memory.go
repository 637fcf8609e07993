package driver

import (
	"runtime"
	"unsafe"
)

// DevicePtr is a CUdeviceptr: an address in device memory.
type DevicePtr uint64

// Element is the set of fixed-size, pointer-free types that may be viewed
// as raw bytes and copied to and from the device.
type Element interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// Bytes views s as its raw bytes, without copying.
func Bytes[T Element](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(z)))
}

// View views b as a slice of T, without copying. len(b) need not be a
// multiple of T's size; the tail is left out.
func View[T Element](b []byte) []T {
	var z T
	size := int(unsafe.Sizeof(z))
	if len(b) < size {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/size)
}

// DeviceBuffer is device memory from cuMemAlloc_v2. The caller owns it and
// must Close it; closing its Context closes it too.
type DeviceBuffer struct {
	owned
	size int
}

// Alloc allocates n bytes of device memory (cuMemAlloc_v2). n must be
// positive.
func (c *Context) Alloc(n int) (*DeviceBuffer, error) {
	if n <= 0 {
		return nil, argError("Alloc", "size %d: must be positive", n)
	}
	if err := c.enter("Alloc"); err != nil {
		return nil, err
	}
	defer leave()
	p := new(uint64)
	if err := call(symMemAlloc, uintptr(unsafe.Pointer(p)), uintptr(n)); err != nil {
		return nil, err
	}
	b := &DeviceBuffer{size: n}
	own(b, &b.owned, c.track(kindDeviceMemory, uintptr(*p)))
	return b, nil
}

// Len returns the buffer's size in bytes.
func (b *DeviceBuffer) Len() int {
	if b == nil {
		return 0
	}
	return b.size
}

// Ptr returns the buffer's device address, or 0 once closed.
func (b *DeviceBuffer) Ptr() DevicePtr {
	if b == nil || b.res == nil {
		return 0
	}
	return DevicePtr(b.res.handle.Load())
}

// Close frees the memory (cuMemFree_v2). A second Close returns nil.
func (b *DeviceBuffer) Close() error {
	if b == nil {
		return nil
	}
	return b.close()
}

// span checks that [off, off+n) lies inside b and returns its address.
func (b *DeviceBuffer) span(op, role string, off, n int) (uintptr, error) {
	if b == nil {
		return 0, argError(op, "nil %s *DeviceBuffer", role)
	}
	h, err := b.handleFor(op)
	if err != nil {
		return 0, err
	}
	if err := checkSpan(op, role, off, n, b.size); err != nil {
		return 0, err
	}
	return h + uintptr(off), nil
}

func checkSpan(op, role string, off, n, size int) error {
	if off < 0 || n < 0 || off > size || n > size-off {
		return lengthError(op, role, off, n, size)
	}
	return nil
}

// Memset sets every byte of the buffer to v (cuMemsetD8_v2) and returns
// when done.
func (b *DeviceBuffer) Memset(v byte) error {
	p, err := b.span("Memset", "destination", 0, b.Len())
	if err != nil {
		return err
	}
	if err := b.res.ctx.enter("Memset"); err != nil {
		return err
	}
	defer leave()
	return call(symMemsetD8, p, uintptr(v), uintptr(b.size))
}

// CopyFromHost copies src into the buffer at byte offset off and returns
// when done (cuMemcpyHtoD_v2). src may be any Go memory.
func (b *DeviceBuffer) CopyFromHost(off int, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	p, err := b.span("CopyFromHost", "destination", off, len(src))
	if err != nil {
		return err
	}
	if err := b.res.ctx.enter("CopyFromHost"); err != nil {
		return err
	}
	defer leave()
	err = call(symMemcpyHtoD, p, uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
	runtime.KeepAlive(src)
	return err
}

// CopyToHost copies len(dst) bytes from byte offset off of the buffer into
// dst and returns when done (cuMemcpyDtoH_v2).
func (b *DeviceBuffer) CopyToHost(dst []byte, off int) error {
	if len(dst) == 0 {
		return nil
	}
	p, err := b.span("CopyToHost", "source", off, len(dst))
	if err != nil {
		return err
	}
	if err := b.res.ctx.enter("CopyToHost"); err != nil {
		return err
	}
	defer leave()
	err = call(symMemcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), p, uintptr(len(dst)))
	runtime.KeepAlive(dst)
	return err
}

// CopyFromDevice copies n bytes from src at srcOff into the buffer at off
// and returns when done (cuMemcpyDtoD_v2).
func (b *DeviceBuffer) CopyFromDevice(off int, src *DeviceBuffer, srcOff, n int) error {
	if n == 0 {
		return nil
	}
	d, err := b.span("CopyFromDevice", "destination", off, n)
	if err != nil {
		return err
	}
	s, err := src.span("CopyFromDevice", "source", srcOff, n)
	if err != nil {
		return err
	}
	if err := b.res.ctx.enter("CopyFromDevice"); err != nil {
		return err
	}
	defer leave()
	return call(symMemcpyDtoD, d, s, uintptr(n))
}

// HostMemory is page-locked host memory that asynchronous copies may use:
// a [*HostBuffer] or a [*HostRegistration]. Ordinary Go slices are not
// HostMemory, because the driver reads them after the call returns.
type HostMemory interface {
	// Bytes views the memory as bytes; nil once closed.
	Bytes() []byte
	hostSpan(op, role string, off, n int) (uintptr, error)
}

// HostAllocOptions are the cuMemHostAlloc flags. The zero value asks for
// plain pinned memory.
type HostAllocOptions struct {
	// Portable makes the memory pinned for every context, not only this one.
	Portable bool
	// WriteCombined makes host writes and device reads faster and host
	// reads very slow. Use it only for memory the host fills and never reads.
	WriteCombined bool
	// Mapped maps the memory into the device's address space.
	Mapped bool
}

func (o HostAllocOptions) flags() uintptr {
	var f uintptr
	if o.Portable {
		f |= 0x01
	}
	if o.Mapped {
		f |= 0x02
	}
	if o.WriteCombined {
		f |= 0x04
	}
	return f
}

// HostBuffer is page-locked ("pinned") host memory from cuMemHostAlloc:
// the fast path for copies, and safe for asynchronous ones. The caller owns
// it and must Close it; slices obtained from it must not be used after that.
type HostBuffer struct {
	owned
	size  int
	flags HostAllocOptions
}

// AllocHost allocates n bytes of pinned host memory (cuMemHostAlloc).
func (c *Context) AllocHost(n int, opts HostAllocOptions) (*HostBuffer, error) {
	if n <= 0 {
		return nil, argError("AllocHost", "size %d: must be positive", n)
	}
	if err := c.enter("AllocHost"); err != nil {
		return nil, err
	}
	defer leave()
	p := new(uintptr)
	if err := call(symMemHostAlloc, uintptr(unsafe.Pointer(p)), uintptr(n), opts.flags()); err != nil {
		return nil, err
	}
	h := &HostBuffer{size: n, flags: opts}
	own(h, &h.owned, c.track(kindHostMemory, *p))
	return h, nil
}

// Len returns the size in bytes.
func (h *HostBuffer) Len() int {
	if h == nil {
		return 0
	}
	return h.size
}

// Options returns the flags the buffer was allocated with.
func (h *HostBuffer) Options() HostAllocOptions { return h.flags }

// Bytes views the pinned memory as a byte slice; nil once closed.
func (h *HostBuffer) Bytes() []byte {
	if h == nil || h.res == nil {
		return nil
	}
	p := h.res.handle.Load()
	if p == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), h.size)
}

// Float32s views the pinned memory as float32s.
func (h *HostBuffer) Float32s() []float32 { return View[float32](h.Bytes()) }

// Close frees the memory (cuMemFreeHost). A second Close returns nil.
func (h *HostBuffer) Close() error {
	if h == nil {
		return nil
	}
	return h.close()
}

func (h *HostBuffer) hostSpan(op, role string, off, n int) (uintptr, error) {
	if h == nil {
		return 0, argError(op, "nil %s *HostBuffer", role)
	}
	p, err := h.handleFor(op)
	if err != nil {
		return 0, err
	}
	if err := checkSpan(op, role, off, n, h.size); err != nil {
		return 0, err
	}
	return p + uintptr(off), nil
}

// RegisterOptions are the cuMemHostRegister flags. The zero value asks for
// plain page-locking.
type RegisterOptions struct {
	Portable bool
	Mapped   bool
	// ReadOnly promises the device will only read the memory.
	ReadOnly bool
}

// HostRegistration is ordinary Go memory page-locked in place with
// cuMemHostRegister, so that copies from it run at pinned speed. While
// registered, the memory is kept alive and pinned with runtime.Pinner.
type HostRegistration struct {
	owned
	mem []byte
}

// RegisterHost page-locks mem in place (cuMemHostRegister_v2). The caller
// owns the result and must Close it, which unregisters the memory
// (cuMemHostUnregister). Registering costs milliseconds per hundred MiB:
// register once and reuse.
func (c *Context) RegisterHost(mem []byte, opts RegisterOptions) (*HostRegistration, error) {
	if len(mem) == 0 {
		return nil, argError("RegisterHost", "empty memory")
	}
	var flags uintptr
	if opts.Portable {
		flags |= 0x01
	}
	if opts.Mapped {
		flags |= 0x02
	}
	if opts.ReadOnly {
		flags |= 0x08
	}
	pin := new(runtime.Pinner)
	pin.Pin(&mem[0])
	if err := c.enter("RegisterHost"); err != nil {
		pin.Unpin()
		return nil, err
	}
	defer leave()
	if err := call(symMemHostRegister, uintptr(unsafe.Pointer(&mem[0])), uintptr(len(mem)), flags); err != nil {
		pin.Unpin()
		return nil, err
	}
	r := &HostRegistration{mem: mem}
	res := c.track(kindRegistration, uintptr(unsafe.Pointer(&mem[0])))
	res.pinner = pin
	own(r, &r.owned, res)
	return r, nil
}

// Bytes returns the registered memory; nil once closed.
func (r *HostRegistration) Bytes() []byte {
	if r == nil || r.res == nil || r.res.handle.Load() == 0 {
		return nil
	}
	return r.mem
}

// Len returns the registered length in bytes.
func (r *HostRegistration) Len() int {
	if r == nil {
		return 0
	}
	return len(r.mem)
}

// Close unregisters the memory and unpins it. A second Close returns nil.
func (r *HostRegistration) Close() error {
	if r == nil {
		return nil
	}
	return r.close()
}

func (r *HostRegistration) hostSpan(op, role string, off, n int) (uintptr, error) {
	if r == nil {
		return 0, argError(op, "nil %s *HostRegistration", role)
	}
	p, err := r.handleFor(op)
	if err != nil {
		return 0, err
	}
	if err := checkSpan(op, role, off, n, len(r.mem)); err != nil {
		return 0, err
	}
	return p + uintptr(off), nil
}

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
		return nil, argError("Context.Alloc", "size %d: must be positive", n)
	}
	k, err := c.begin("Context.Alloc")
	if err != nil {
		return nil, err
	}
	defer k.end()
	var p DevicePtr
	if err := cuMemAlloc(&p, uintptr(n)); err != nil {
		return nil, err
	}
	r, err := k.adopt("Context.Alloc", kindDeviceMemory, uintptr(p), nil)
	if err != nil {
		return nil, err
	}
	b := &DeviceBuffer{size: n}
	own(b, &b.owned, c, r, true)
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
	if b == nil {
		return 0
	}
	return DevicePtr(b.liveHandle())
}

// Close frees the memory (cuMemFree_v2). A buffer from a memory pool
// ([Stream.AllocAsync]) is freed only after all of its context's work is
// done (cuCtxSynchronize first); [Stream.FreeAsync] is the cheap way to free
// one. A second Close returns nil.
func (b *DeviceBuffer) Close() error {
	if b == nil {
		return nil
	}
	return b.close()
}

// lockSpan checks that [off, off+n) lies inside b, read-locks b and returns
// the span's address. On success the caller must call b.done().
func (b *DeviceBuffer) lockSpan(op, role string, off, n int) (uintptr, error) {
	if b == nil {
		return 0, argError(op, "nil %s *DeviceBuffer", role)
	}
	if err := checkSpan(op, role, off, n, b.size); err != nil {
		return 0, err
	}
	h, err := b.use(op)
	if err != nil {
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
	return b.memset("DeviceBuffer.Memset", 1, func(d DevicePtr, n uintptr) error { return cuMemsetD8(d, v, n) })
}

// Memset16 sets every 16-bit element of the buffer to v (cuMemsetD16_v2)
// and returns when done. The buffer's length must be a multiple of 2.
func (b *DeviceBuffer) Memset16(v uint16) error {
	return b.memset("DeviceBuffer.Memset16", 2, func(d DevicePtr, n uintptr) error { return cuMemsetD16(d, v, n) })
}

// Memset32 sets every 32-bit element of the buffer to v (cuMemsetD32_v2)
// and returns when done: math.Float32bits(x) sets float32s to x. The
// buffer's length must be a multiple of 4.
func (b *DeviceBuffer) Memset32(v uint32) error {
	return b.memset("DeviceBuffer.Memset32", 4, func(d DevicePtr, n uintptr) error { return cuMemsetD32(d, v, n) })
}

// memset sets the whole buffer through set, which gets the buffer's
// address and its number of elements of width bytes.
func (b *DeviceBuffer) memset(op string, width int, set func(d DevicePtr, n uintptr) error) error {
	p, err := b.lockSpan(op, "destination", 0, b.Len())
	if err != nil {
		return err
	}
	defer b.done()
	if b.size%width != 0 {
		return argError(op, "buffer of %d bytes: not a whole number of %d-byte elements", b.size, width)
	}
	k := b.res.core
	if err := k.enter(op); err != nil {
		return err
	}
	defer leave()
	return set(DevicePtr(p), uintptr(b.size/width))
}

// CopyFromHost copies src into the buffer at byte offset off and returns
// when done (cuMemcpyHtoD_v2). src may be any Go memory; an empty src
// copies nothing.
func (b *DeviceBuffer) CopyFromHost(off int, src []byte) error {
	if b == nil || b.res == nil {
		return argError("DeviceBuffer.CopyFromHost", "nil *DeviceBuffer")
	}
	if len(src) == 0 {
		return nil
	}
	p, err := b.lockSpan("DeviceBuffer.CopyFromHost", "destination", off, len(src))
	if err != nil {
		return err
	}
	defer b.done()
	if err := b.res.core.enter("DeviceBuffer.CopyFromHost"); err != nil {
		return err
	}
	defer leave()
	err = cuMemcpyHtoD(DevicePtr(p), &src[0], uintptr(len(src)))
	runtime.KeepAlive(src)
	return err
}

// CopyToHost copies len(dst) bytes from byte offset off of the buffer into
// dst and returns when done (cuMemcpyDtoH_v2); an empty dst copies nothing.
func (b *DeviceBuffer) CopyToHost(dst []byte, off int) error {
	if b == nil || b.res == nil {
		return argError("DeviceBuffer.CopyToHost", "nil *DeviceBuffer")
	}
	if len(dst) == 0 {
		return nil
	}
	p, err := b.lockSpan("DeviceBuffer.CopyToHost", "source", off, len(dst))
	if err != nil {
		return err
	}
	defer b.done()
	if err := b.res.core.enter("DeviceBuffer.CopyToHost"); err != nil {
		return err
	}
	defer leave()
	err = cuMemcpyDtoH(&dst[0], DevicePtr(p), uintptr(len(dst)))
	runtime.KeepAlive(dst)
	return err
}

// CopyFromDevice copies n bytes from src at srcOff into the buffer at off
// and returns when done (cuMemcpyDtoD_v2). Both buffers must belong to the
// same context.
func (b *DeviceBuffer) CopyFromDevice(off int, src *DeviceBuffer, srcOff, n int) error {
	const op = "DeviceBuffer.CopyFromDevice"
	if b == nil || b.res == nil || src == nil || src.res == nil {
		return argError(op, "nil *DeviceBuffer")
	}
	if err := usePair(op, &b.owned, &src.owned); err != nil {
		return err
	}
	defer donePair(&b.owned, &src.owned)
	if n == 0 {
		return nil
	}
	if err := sameContext(op, b.res.core, src.res.core); err != nil {
		return err
	}
	if err := checkSpan(op, "destination", off, n, b.size); err != nil {
		return err
	}
	if err := checkSpan(op, "source", srcOff, n, src.size); err != nil {
		return err
	}
	d, s := b.Ptr()+DevicePtr(off), src.Ptr()+DevicePtr(srcOff)
	if err := b.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	return cuMemcpyDtoD(d, s, uintptr(n))
}

// HostMemory is page-locked host memory that asynchronous copies may use:
// a [*HostBuffer] or a [*HostRegistration]. Ordinary Go slices are not
// HostMemory, because the driver reads them after the call returns.
type HostMemory interface {
	// Bytes views the memory as bytes; nil once closed.
	Bytes() []byte
	// lockSpan read-locks the memory and returns the address of [off,
	// off+n), its resource (to unlock and to count the copy) and the owner
	// to keep reachable until the copy is done.
	lockSpan(op, role string, off, n int) (p uintptr, mem *resource, keep any, err error)
}

// Flags of cuMemHostAlloc (CU_MEMHOSTALLOC_*) and cuMemHostRegister
// (CU_MEMHOSTREGISTER_*).
const (
	memHostAllocPortable      = 0x01
	memHostAllocDeviceMap     = 0x02
	memHostAllocWriteCombined = 0x04
	memHostRegisterPortable   = 0x01
	memHostRegisterDeviceMap  = 0x02
	memHostRegisterReadOnly   = 0x08
)

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

func (o HostAllocOptions) flags() uint32 {
	var f uint32
	if o.Portable {
		f |= memHostAllocPortable
	}
	if o.Mapped {
		f |= memHostAllocDeviceMap
	}
	if o.WriteCombined {
		f |= memHostAllocWriteCombined
	}
	return f
}

// HostBuffer is page-locked ("pinned") host memory from cuMemHostAlloc:
// the fast path for copies, and safe for asynchronous ones. The caller owns
// it and must Close it.
//
// Its views ([HostBuffer.Bytes], [HostBuffer.Float32s]) point into memory
// that the garbage collector cannot see, so a view does not keep the buffer
// alive. That is why a HostBuffer is never freed by the garbage collector:
// only Close, of the buffer or of its Context, frees it, and a view must not
// be used after that. A HostBuffer dropped without Close stays allocated
// until its Context is closed (or, if the Context is dropped too, until the
// process ends), so a view taken from a temporary buffer is safe, but a
// leak.
type HostBuffer struct {
	owned
	size  int
	flags HostAllocOptions
}

// AllocHost allocates n bytes of pinned host memory (cuMemHostAlloc).
func (c *Context) AllocHost(n int, opts HostAllocOptions) (*HostBuffer, error) {
	if n <= 0 {
		return nil, argError("Context.AllocHost", "size %d: must be positive", n)
	}
	k, err := c.begin("Context.AllocHost")
	if err != nil {
		return nil, err
	}
	defer k.end()
	var p uintptr
	if err := cuMemHostAlloc(&p, uintptr(n), opts.flags()); err != nil {
		return nil, err
	}
	r, err := k.adopt("Context.AllocHost", kindHostMemory, p, nil)
	if err != nil {
		return nil, err
	}
	r.portable = opts.Portable
	h := &HostBuffer{size: n, flags: opts}
	own(h, &h.owned, c, r, false)
	return h, nil
}

// Len returns the size in bytes.
func (h *HostBuffer) Len() int {
	if h == nil {
		return 0
	}
	return h.size
}

// Options returns the flags the buffer was allocated with; the zero
// options for a nil HostBuffer.
func (h *HostBuffer) Options() HostAllocOptions {
	if h == nil {
		return HostAllocOptions{}
	}
	return h.flags
}

// Bytes views the pinned memory as a byte slice; nil once closed. The view
// is valid until the buffer or its Context is closed.
func (h *HostBuffer) Bytes() []byte {
	if h == nil {
		return nil
	}
	p := h.liveHandle()
	if p == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), h.size)
}

// Float32s views the pinned memory as float32s, like [HostBuffer.Bytes].
func (h *HostBuffer) Float32s() []float32 { return View[float32](h.Bytes()) }

// Close frees the memory (cuMemFreeHost), after any queued copy that uses
// it has completed. A second Close returns nil.
func (h *HostBuffer) Close() error {
	if h == nil {
		return nil
	}
	return h.close()
}

func (h *HostBuffer) lockSpan(op, role string, off, n int) (uintptr, *resource, any, error) {
	if h == nil {
		return 0, nil, nil, argError(op, "nil %s *HostBuffer", role)
	}
	if err := checkSpan(op, role, off, n, h.size); err != nil {
		return 0, nil, nil, err
	}
	p, err := h.use(op)
	if err != nil {
		return 0, nil, nil, err
	}
	return p + uintptr(off), h.res, h, nil
}

// RegisterOptions are the cuMemHostRegister flags. The zero value asks for
// plain page-locking.
type RegisterOptions struct {
	Portable bool
	Mapped   bool
	// ReadOnly promises the device will only read the memory.
	ReadOnly bool
}

func (o RegisterOptions) flags() uint32 {
	var f uint32
	if o.Portable {
		f |= memHostRegisterPortable
	}
	if o.Mapped {
		f |= memHostRegisterDeviceMap
	}
	if o.ReadOnly {
		f |= memHostRegisterReadOnly
	}
	return f
}

// HostRegistration is ordinary Go memory page-locked in place with
// cuMemHostRegister, so that copies from it run at pinned speed. While
// registered, the memory is kept alive and pinned with runtime.Pinner.
// The memory is Go's own, so a slice of it stays valid after the
// registration is closed or collected; it is then simply no longer pinned.
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
		return nil, argError("Context.RegisterHost", "empty memory")
	}
	k, err := c.begin("Context.RegisterHost")
	if err != nil {
		return nil, err
	}
	defer k.end()
	pin := new(runtime.Pinner)
	pin.Pin(&mem[0])
	if err := cuMemHostRegister(&mem[0], uintptr(len(mem)), opts.flags()); err != nil {
		pin.Unpin()
		return nil, err
	}
	r, err := k.adopt("Context.RegisterHost", kindRegistration, uintptr(unsafe.Pointer(&mem[0])), pin)
	if err != nil {
		return nil, err
	}
	r.portable = opts.Portable
	reg := &HostRegistration{mem: mem}
	own(reg, &reg.owned, c, r, true)
	return reg, nil
}

// Bytes returns the registered memory; nil once closed.
func (r *HostRegistration) Bytes() []byte {
	if r == nil || r.liveHandle() == 0 {
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

// Close unregisters the memory and unpins it, after any queued copy that
// uses it has completed. A second Close returns nil.
func (r *HostRegistration) Close() error {
	if r == nil {
		return nil
	}
	return r.close()
}

func (r *HostRegistration) lockSpan(op, role string, off, n int) (uintptr, *resource, any, error) {
	if r == nil {
		return 0, nil, nil, argError(op, "nil %s *HostRegistration", role)
	}
	if err := checkSpan(op, role, off, n, len(r.mem)); err != nil {
		return 0, nil, nil, err
	}
	p, err := r.use(op)
	if err != nil {
		return 0, nil, nil, err
	}
	return p + uintptr(off), r.res, r, nil
}

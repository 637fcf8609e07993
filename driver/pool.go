package driver

import (
	"math"
	"unsafe"
)

// Stream-ordered allocation: memory that a stream allocates and frees in
// its own order, from the device's default memory pool or from a pool made
// with [Context.NewMemPool], without the device-wide synchronisation that
// cuMemAlloc and cuMemFree imply.

// CUmemPool_attribute values (cuda.h, CUDA 13.0).
const memPoolAttrReleaseThreshold = 4 // CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, a cuuint64_t

// memPoolProps is CUmemPoolProps as cuda.h of CUDA 12.6 to 13.0 lays it out
// on 64-bit hosts; the reference file of this project lacks it, so it is
// taken from cudarc's bindgen output of cuda.h (github.com/coreylowman/cudarc,
// src/driver/sys/mod.rs, CUmemPoolProps_st for cuda-12060..cuda-13000):
//
//	CUmemAllocationType allocType;          // offset 0, enum (4 bytes)
//	CUmemAllocationHandleType handleTypes;  // offset 4, enum
//	CUmemLocation location;                 // offset 8: {CUmemLocationType type; int id;}
//	void *win32SecurityAttributes;          // offset 16
//	size_t maxSize;                         // offset 24
//	unsigned short usage;                   // offset 32
//	unsigned char reserved[54];             // offset 34, 88 bytes in all
//
// Older headers (11.2 to 12.5) have the same first 24 bytes and 64 reserved
// bytes after them: the same 88-byte size, with the later fields zero.
type memPoolProps struct {
	allocType    int32  // CU_MEM_ALLOCATION_TYPE_PINNED = 1
	handleTypes  int32  // CU_MEM_HANDLE_TYPE_NONE = 0
	locationType int32  // CU_MEM_LOCATION_TYPE_DEVICE = 1
	locationID   int32  // the device ordinal
	win32        uint64 // a pointer on 64-bit hosts, the only ones CUDA supports
	maxSize      uint64 // 0: the driver's default
	usage        uint16
	reserved     [54]byte
}

const (
	memAllocationTypePinned = 1
	memLocationTypeDevice   = 1
)

var _ [88 - unsafe.Sizeof(memPoolProps{})]struct{}
var _ [unsafe.Sizeof(memPoolProps{}) - 88]struct{}

// MemPoolOptions configure [Context.NewMemPool]. The zero value gives a
// pool of the context's device that hands all of its unused memory back to
// the device at every synchronisation, as CUDA's default does.
type MemPoolOptions struct {
	// ReleaseThreshold is how many bytes of freed memory the pool may keep
	// reserved across a synchronisation (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
	// instead of returning them to the device. A pool that is allocated
	// from and freed to in a loop wants it at least as high as the loop's
	// peak use, so that it never goes back to the device for memory;
	// math.MaxUint64 keeps everything.
	ReleaseThreshold uint64
}

// MemPool is a stream-ordered memory pool of the context's device
// (cuMemPoolCreate). The caller owns it and must Close it. Allocate from
// it with [Stream.AllocFromPool].
type MemPool struct {
	owned
}

// NewMemPool creates a memory pool of pinned device memory on the context's
// device and sets its release threshold.
func (c *Context) NewMemPool(opts MemPoolOptions) (*MemPool, error) {
	const op = "Context.NewMemPool"
	k, err := c.begin(op)
	if err != nil {
		return nil, err
	}
	defer k.end()
	props := &memPoolProps{
		allocType:    memAllocationTypePinned,
		locationType: memLocationTypeDevice,
		locationID:   k.dev.cu(),
	}
	var h uintptr
	if err := cuMemPoolCreate(&h, props); err != nil {
		return nil, err
	}
	if opts.ReleaseThreshold != 0 {
		if err := setPoolThreshold(h, opts.ReleaseThreshold); err != nil {
			_ = cuMemPoolDestroy(h)
			return nil, err
		}
	}
	r, err := k.adopt(op, kindMemPool, h, nil)
	if err != nil {
		return nil, err
	}
	p := &MemPool{}
	own(p, &p.owned, c, r, true)
	return p, nil
}

func setPoolThreshold(h uintptr, n uint64) error {
	return cuMemPoolSetAttribute(h, memPoolAttrReleaseThreshold, &n)
}

func poolThreshold(h uintptr) (uint64, error) {
	var v uint64
	err := cuMemPoolGetAttribute(h, memPoolAttrReleaseThreshold, &v)
	return v, err
}

// ReleaseThreshold returns the pool's release threshold in bytes, as the
// driver reports it (cuMemPoolGetAttribute).
func (p *MemPool) ReleaseThreshold() (uint64, error) {
	const op = "MemPool.ReleaseThreshold"
	if p == nil {
		return 0, argError(op, "nil *MemPool")
	}
	h, err := p.use(op)
	if err != nil {
		return 0, err
	}
	defer p.done()
	if err := p.res.core.enter(op); err != nil {
		return 0, err
	}
	defer leave()
	return poolThreshold(h)
}

// SetReleaseThreshold sets the pool's release threshold in bytes
// (cuMemPoolSetAttribute).
func (p *MemPool) SetReleaseThreshold(n uint64) error {
	const op = "MemPool.SetReleaseThreshold"
	if p == nil {
		return argError(op, "nil *MemPool")
	}
	h, err := p.use(op)
	if err != nil {
		return err
	}
	defer p.done()
	if err := p.res.core.enter(op); err != nil {
		return err
	}
	defer leave()
	return setPoolThreshold(h, n)
}

// Close destroys the pool (cuMemPoolDestroy). Buffers still allocated from
// it stay valid until they are freed; the driver releases the pool's memory
// then. A second Close returns nil.
func (p *MemPool) Close() error {
	if p == nil {
		return nil
	}
	return p.close()
}

// defaultPool returns the default memory pool of k's device; the caller
// has k current. The handle is the device's own: never destroyed.
func (k *ctxCore) defaultPool() (uintptr, error) {
	var h uintptr
	err := cuDeviceGetDefaultMemPool(&h, k.dev.cu())
	return h, err
}

// DefaultPoolReleaseThreshold returns the release threshold of the default
// memory pool of the context's device, which [Stream.AllocAsync] uses.
func (c *Context) DefaultPoolReleaseThreshold() (uint64, error) {
	k, err := c.begin("Context.DefaultPoolReleaseThreshold")
	if err != nil {
		return 0, err
	}
	defer k.end()
	h, err := k.defaultPool()
	if err != nil {
		return 0, err
	}
	return poolThreshold(h)
}

// SetDefaultPoolReleaseThreshold sets the release threshold of the default
// memory pool of the context's device. The pool is the device's, shared by
// every context and library in the process that uses it.
func (c *Context) SetDefaultPoolReleaseThreshold(n uint64) error {
	k, err := c.begin("Context.SetDefaultPoolReleaseThreshold")
	if err != nil {
		return err
	}
	defer k.end()
	h, err := k.defaultPool()
	if err != nil {
		return err
	}
	return setPoolThreshold(h, n)
}

// KeepAll is the release threshold that keeps every freed byte in a pool.
const KeepAll = math.MaxUint64

// AllocAsync allocates n bytes from the default memory pool of the stream's
// device, in the stream's order (cuMemAllocAsync): work queued on s after
// it may use the buffer, and work on other streams must first wait for s
// (an event). The result is a [DeviceBuffer] like any other; free it with
// [Stream.FreeAsync], which is cheap. Its Close, or its Context's, frees it
// too, but first waits for all of the context's work.
func (s *Stream) AllocAsync(n int) (*DeviceBuffer, error) {
	return s.allocAsync("Stream.AllocAsync", nil, n)
}

// AllocFromPool is [Stream.AllocAsync] from the pool p
// (cuMemAllocFromPoolAsync). The pool must belong to the stream's context.
func (s *Stream) AllocFromPool(p *MemPool, n int) (*DeviceBuffer, error) {
	const op = "Stream.AllocFromPool"
	if p == nil {
		return nil, argError(op, "nil *MemPool")
	}
	return s.allocAsync(op, p, n)
}

func (s *Stream) allocAsync(op string, pool *MemPool, n int) (*DeviceBuffer, error) {
	if n <= 0 {
		return nil, argError(op, "size %d: must be positive", n)
	}
	var ph uintptr
	if pool != nil {
		var err error
		if ph, err = pool.use(op); err != nil {
			return nil, err
		}
		defer pool.done()
	}
	h, err := s.lock(op)
	if err != nil {
		return nil, err
	}
	defer s.done()
	k := s.res.core
	if pool != nil {
		if err := sameContext(op, pool.res.core, k); err != nil {
			return nil, err
		}
	}
	if s.capturing() {
		return nil, argError(op, "the stream is capturing a graph; allocate before the capture")
	}
	if err := k.alive(op); err != nil {
		return nil, err
	}
	defer k.life.RUnlock()
	if err := k.enter(op); err != nil {
		return nil, err
	}
	defer leave()
	var p DevicePtr
	if pool != nil {
		err = cuMemAllocFromPoolAsync(&p, uintptr(n), ph, h)
	} else {
		err = cuMemAllocAsync(&p, uintptr(n), h)
	}
	if err != nil {
		return nil, err
	}
	r, err := k.adopt(op, kindAsyncMemory, uintptr(p), nil)
	if err != nil {
		return nil, err
	}
	b := &DeviceBuffer{size: n}
	own(b, &b.owned, s.ctx, r, true)
	return b, nil
}

// FreeAsync frees b in the stream's order (cuMemFreeAsync): the memory goes
// back to its pool once the work queued on s before the call is done, and
// may then be reused by later allocations in that order. Work on other
// streams that uses b must be ordered before the free (an event that s
// waits for). b must come from [Stream.AllocAsync] or
// [Stream.AllocFromPool], on any stream of the same context. After
// FreeAsync, b is closed: every use of it returns ErrClosed, and its Close
// returns nil. FreeAsync waits for calls that are using b to return.
func (s *Stream) FreeAsync(b *DeviceBuffer) error {
	const op = "Stream.FreeAsync"
	if b == nil || b.res == nil {
		return argError(op, "nil *DeviceBuffer")
	}
	r := b.res
	if r.kind != kindAsyncMemory {
		return argError(op, "the buffer is not from AllocAsync or AllocFromPool: Close it instead")
	}
	// The buffer first, then the stream, as every call locks memory.
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.handle.Load()
	if p == 0 {
		return closedError(op)
	}
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	k := s.res.core
	if err := sameContext(op, r.core, k); err != nil {
		return err
	}
	if s.capturing() {
		return argError(op, "the stream is capturing a graph; free after the capture")
	}
	if err := k.enter(op); err != nil {
		return err
	}
	err = cuMemFreeAsync(DevicePtr(p), h)
	leave()
	if err != nil {
		return err
	}
	r.handle.Store(0)
	k.mu.Lock()
	delete(k.objects, r)
	k.mu.Unlock()
	b.cleanup.Stop()
	return nil
}

package driver

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Context is a retained reference to a device's primary context, the
// context that the CUDA runtime, cudarc and cuda-python share. Every object
// made from it (buffers, streams, events, modules) belongs to it.
//
// Every method may be called from any goroutine: each one locks its OS
// thread, makes the context current unless it already is, calls the driver
// and unlocks.
type Context struct {
	dev     Device
	handle  atomic.Uintptr // CUcontext; 0 once closed
	mu      sync.Mutex
	objects map[*resource]struct{}
	cleanup runtime.Cleanup
}

// NewContext retains dev's primary context (cuDevicePrimaryCtxRetain). The
// caller owns the result and must Close it; Close releases the retain and
// first closes every object still open on the context.
func NewContext(dev Device) (*Context, error) {
	if err := dev.check("NewContext"); err != nil {
		return nil, err
	}
	h := new(uintptr)
	if err := call(symDevicePrimaryCtxRetain, uintptr(unsafe.Pointer(h)), uintptr(dev.ordinal)); err != nil {
		return nil, err
	}
	c := &Context{dev: dev, objects: map[*resource]struct{}{}}
	c.handle.Store(*h)
	c.cleanup = runtime.AddCleanup(c, func(ordinal int) {
		_ = call(symDevicePrimaryCtxRelease, uintptr(ordinal))
	}, dev.ordinal)
	return c, nil
}

// Device returns the device the context belongs to.
func (c *Context) Device() Device { return c.dev }

// Handle returns the raw CUcontext, for interoperation with other CUDA code.
// It is borrowed: never destroy it.
func (c *Context) Handle() uintptr { return c.handle.Load() }

// enter locks the calling goroutine to its OS thread and makes c current
// there, skipping cuCtxSetCurrent when it already is. On success the caller
// must call runtime.UnlockOSThread (leave) when its driver call is done.
func (c *Context) enter(op string) error {
	if c == nil {
		return argError(op, "nil *Context")
	}
	h := c.handle.Load()
	if h == 0 {
		return closedError(op)
	}
	runtime.LockOSThread()
	s := scratchPool.Get().(*scratch)
	s.out[0] = 0
	s.args[0] = uintptr(unsafe.Pointer(&s.out[0]))
	err := callScratch(symCtxGetCurrent, s, 1)
	cur := s.out[0]
	scratchPool.Put(s)
	if err == nil && cur != h {
		err = hot(symCtxSetCurrent, 1, h, 0, 0, 0)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

func leave() { runtime.UnlockOSThread() }

// Bound is a goroutine locked to its OS thread with a context current, for
// loops that issue many calls in a row (the pipeline's issue loop). Its
// methods skip the per-call context check for objects of that context.
// A Bound belongs to the goroutine that made it: never share it.
type Bound struct {
	ctx *Context
}

// Bind locks the calling goroutine to its OS thread and makes c current
// there. Call Release, from the same goroutine, when done.
func (c *Context) Bind() (*Bound, error) {
	if err := c.enter("Bind"); err != nil {
		return nil, err
	}
	return &Bound{ctx: c}, nil
}

// Release unlocks the goroutine from its thread. A second Release does
// nothing.
func (b *Bound) Release() {
	if b != nil && b.ctx != nil {
		b.ctx = nil
		leave()
	}
}

// Launch is [Function.Launch] without the context check.
func (b *Bound) Launch(f *Function, s *Stream, cfg LaunchConfig, args *Args) error {
	return f.launch(b.context(), s, cfg, args)
}

// CopyToDevice is [Stream.CopyToDevice] without the context check.
func (b *Bound) CopyToDevice(s *Stream, dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, n int) error {
	return s.copyToDevice(b.context(), dst, dstOff, src, srcOff, n)
}

// CopyToHost is [Stream.CopyToHost] without the context check.
func (b *Bound) CopyToHost(s *Stream, dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	return s.copyToHost(b.context(), dst, dstOff, src, srcOff, n)
}

// Record is [Event.Record] without the context check.
func (b *Bound) Record(e *Event, s *Stream) error { return e.record(b.context(), s) }

// WaitEvent is [Stream.WaitEvent] without the context check.
func (b *Bound) WaitEvent(s *Stream, e *Event) error { return s.waitEvent(b.context(), e) }

// context returns the bound context, or nil (full checks) after Release.
func (b *Bound) context() *Context {
	if b == nil {
		return nil
	}
	return b.ctx
}

// Synchronize blocks until all work on the context is done (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	if err := c.enter("Synchronize"); err != nil {
		return err
	}
	defer leave()
	return call(symCtxSynchronize)
}

// MemoryInfo returns the free and total device memory in bytes, as seen by
// this context (cuMemGetInfo_v2).
func (c *Context) MemoryInfo() (free, total uint64, err error) {
	if err := c.enter("MemoryInfo"); err != nil {
		return 0, 0, err
	}
	defer leave()
	out := new([2]uint64)
	err = call(symMemGetInfo, uintptr(unsafe.Pointer(&out[0])), uintptr(unsafe.Pointer(&out[1])))
	return out[0], out[1], err
}

// OpenObjects returns how many objects made from c are still open. It is
// meant for leak checks in tests.
func (c *Context) OpenObjects() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.objects)
}

// Close closes every object still open on the context, then releases the
// primary context (cuDevicePrimaryCtxRelease_v2). Calling Close again
// returns nil. The first error met is returned; closing goes on regardless.
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	objs := make([]*resource, 0, len(c.objects))
	for r := range c.objects {
		objs = append(objs, r)
	}
	c.mu.Unlock()
	var first error
	for _, r := range objs {
		if err := r.release(); err != nil && first == nil {
			first = err
		}
	}
	if c.handle.Swap(0) == 0 {
		return first
	}
	c.cleanup.Stop()
	if err := call(symDevicePrimaryCtxRelease, uintptr(c.dev.ordinal)); err != nil && first == nil {
		first = err
	}
	return first
}

// resourceKind says how to destroy a resource.
type resourceKind int

const (
	kindDeviceMemory resourceKind = iota
	kindHostMemory
	kindRegistration
	kindStream
	kindEvent
	kindModule
)

var destroyOf = [...]symID{
	kindDeviceMemory: symMemFree,
	kindHostMemory:   symMemFreeHost,
	kindRegistration: symMemHostUnregister,
	kindStream:       symStreamDestroy,
	kindEvent:        symEventDestroy,
	kindModule:       symModuleUnload,
}

// resource is the part of an owned object that the context's registry and
// the object's cleanup share. It never points back at the object, so a
// dropped object can still be collected and cleaned up.
type resource struct {
	ctx    *Context
	kind   resourceKind
	handle atomic.Uintptr // 0 once released
	pinner *runtime.Pinner
}

// track registers a new resource with c.
func (c *Context) track(kind resourceKind, handle uintptr) *resource {
	r := &resource{ctx: c, kind: kind}
	r.handle.Store(handle)
	c.mu.Lock()
	c.objects[r] = struct{}{}
	c.mu.Unlock()
	return r
}

// release destroys the resource once; later calls return nil.
func (r *resource) release() error {
	h := r.handle.Swap(0)
	if h == 0 {
		return nil
	}
	c := r.ctx
	c.mu.Lock()
	delete(c.objects, r)
	c.mu.Unlock()
	var err error
	if e := c.enter("Close"); e != nil {
		err = e
	} else {
		err = call(destroyOf[r.kind], h)
		leave()
	}
	if r.pinner != nil {
		r.pinner.Unpin()
	}
	if err != nil {
		return fmt.Errorf("cuda: closing %s: %w", r.kind, err)
	}
	return nil
}

func (k resourceKind) String() string {
	switch k {
	case kindDeviceMemory:
		return "device buffer"
	case kindHostMemory:
		return "host buffer"
	case kindRegistration:
		return "host registration"
	case kindStream:
		return "stream"
	case kindEvent:
		return "event"
	case kindModule:
		return "module"
	}
	return "object"
}

// owned is embedded in every owning type: its resource and the cleanup that
// releases it if the object is dropped without Close.
type owned struct {
	res     *resource
	cleanup runtime.Cleanup
}

// own wires obj's owned part to r and registers the safety-net cleanup.
func own[T any](obj *T, o *owned, r *resource) {
	o.res = r
	o.cleanup = runtime.AddCleanup(obj, releaseQuietly, r)
}

func releaseQuietly(r *resource) { _ = r.release() }

// handleFor returns the live handle or ErrClosed.
func (o *owned) handleFor(op string) (uintptr, error) {
	if o == nil || o.res == nil {
		return 0, argError(op, "nil object")
	}
	h := o.res.handle.Load()
	if h == 0 {
		return 0, closedError(op)
	}
	return h, nil
}

// close releases the resource and stops the cleanup.
func (o *owned) close() error {
	if o == nil || o.res == nil {
		return nil
	}
	o.cleanup.Stop()
	return o.res.release()
}

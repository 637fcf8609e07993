package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Context is a retained reference to a device's primary context, the
// context that the CUDA runtime, cudarc and cuda-python share. Every object
// made from it (buffers, streams, events, modules) belongs to it, and keeps
// it reachable for as long as the object is.
//
// Every method may be called from any goroutine: each one locks its OS
// thread, makes the context current unless it already is, calls the driver
// and unlocks.
type Context struct {
	core    *ctxCore
	cleanup runtime.Cleanup
}

// ctxCore is the part of a Context that its objects' resources and its
// cleanup share. It never points back at the Context, so that a dropped
// Context can be collected and cleaned up.
type ctxCore struct {
	dev    Device
	handle atomic.Uintptr // CUcontext; 0 once released

	// life is read-held by every call that needs the context alive and is
	// not already covered by one of its objects' locks: creating an object,
	// Synchronize, MemoryInfo, destroying an object. Close write-holds it to
	// release the context, so none of those can run on a released context.
	life sync.RWMutex

	mu      sync.Mutex // guards objects and closing
	objects map[*resource]struct{}
	closing bool
	closed  chan struct{} // closed when Close has finished
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
	core := &ctxCore{dev: dev, objects: map[*resource]struct{}{}, closed: make(chan struct{})}
	core.handle.Store(*h)
	c := &Context{core: core}
	c.cleanup = runtime.AddCleanup(c, collectContext, core)
	return c, nil
}

// collectContext is the safety net for a Context dropped without Close. It
// releases everything except pinned host buffers, whose views the garbage
// collector cannot see: when any are left, the context stays retained, and
// they stay allocated, until the process ends.
func collectContext(k *ctxCore) { _ = k.close(false) }

// Device returns the device the context belongs to; the zero Device for a
// nil or zero Context.
func (c *Context) Device() Device {
	if c == nil || c.core == nil {
		return Device{}
	}
	return c.core.dev
}

// Handle returns the raw CUcontext, for interoperation with other CUDA code.
// It is borrowed: never destroy it. It is 0 once the context is released,
// and for a nil or zero Context.
func (c *Context) Handle() uintptr {
	if c == nil || c.core == nil {
		return 0
	}
	return c.core.handle.Load()
}

// enter locks the calling goroutine to its OS thread and makes k current
// there, skipping cuCtxSetCurrent when it already is. On success the caller
// must call leave when its driver call is done. The caller guarantees that
// k is not released meanwhile: it holds k.life or a lock on one of k's
// objects.
func (k *ctxCore) enter(op string) error {
	s := scratchPool.Get().(*scratch)
	err := k.enterWith(op, s)
	scratchPool.Put(s)
	return err
}

// enterWith is enter with the caller's scratch, which must not move (heap
// or pinned memory): the driver writes the current context into it.
func (k *ctxCore) enterWith(op string, s *scratch) error {
	h := k.handle.Load()
	if h == 0 {
		return closedError(op)
	}
	runtime.LockOSThread()
	s.out[0] = 0
	s.args[0] = uintptr(unsafe.Pointer(&s.out[0]))
	err := callScratch(symCtxGetCurrent, s, 1)
	if err == nil && s.out[0] != h {
		s.args[0] = h
		err = callScratch(symCtxSetCurrent, s, 1)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	return nil
}

func leave() { runtime.UnlockOSThread() }

// alive read-locks k.life for a context-level call and checks that k is
// open. On success the caller must call k.life.RUnlock.
func (k *ctxCore) alive(op string) error {
	k.life.RLock()
	if k.handle.Load() == 0 {
		k.life.RUnlock()
		return closedError(op)
	}
	return nil
}

// begin makes c current for a context-level call: it read-locks c's life,
// locks the OS thread and sets the context. end undoes it.
func (c *Context) begin(op string) (*ctxCore, error) {
	if c == nil || c.core == nil {
		return nil, argError(op, "nil *Context")
	}
	k := c.core
	if err := k.alive(op); err != nil {
		return nil, err
	}
	if err := k.enter(op); err != nil {
		k.life.RUnlock()
		return nil, err
	}
	return k, nil
}

func (k *ctxCore) end() {
	leave()
	k.life.RUnlock()
}

// Synchronize blocks until all work on the context is done (cuCtxSynchronize).
// Host memory that copies on the context's streams were keeping alive is
// let go.
func (c *Context) Synchronize() error {
	k, err := c.begin("Synchronize")
	if err != nil {
		return err
	}
	defer k.life.RUnlock()
	marks := k.streamMarks()
	err = call(symCtxSynchronize)
	leave()
	if err == nil {
		for _, m := range marks {
			m.q.complete(m.seq)
		}
	}
	return err
}

// streamMark is how far a stream's queue of host-memory uses had got.
type streamMark struct {
	q   *hostUses
	seq uint64
}

// streamMarks notes every open stream's position, before a context-wide
// synchronisation.
func (k *ctxCore) streamMarks() []streamMark {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []streamMark
	for r := range k.objects {
		if r.kind == kindStream {
			out = append(out, streamMark{q: &r.uses, seq: r.uses.mark()})
		}
	}
	return out
}

// MemoryInfo returns the free and total device memory in bytes, as seen by
// this context (cuMemGetInfo_v2).
func (c *Context) MemoryInfo() (free, total uint64, err error) {
	k, err := c.begin("MemoryInfo")
	if err != nil {
		return 0, 0, err
	}
	defer k.end()
	out := new([2]uint64)
	err = call(symMemGetInfo, uintptr(unsafe.Pointer(&out[0])), uintptr(unsafe.Pointer(&out[1])))
	return out[0], out[1], err
}

// OpenObjects returns how many objects made from c are still open, 0 for a
// nil or zero Context. It is meant for leak checks in tests.
func (c *Context) OpenObjects() int {
	if c == nil || c.core == nil {
		return 0
	}
	c.core.mu.Lock()
	defer c.core.mu.Unlock()
	return len(c.core.objects)
}

// Close waits for the work queued on the context, closes every object still
// open on it, then releases the primary context
// (cuDevicePrimaryCtxRelease_v2). Objects made while Close runs are closed
// at once and their maker gets ErrClosed. Calling Close again, or from
// several goroutines, returns nil once the first Close has finished. The
// first error met is returned; closing goes on regardless.
func (c *Context) Close() error {
	if c == nil || c.core == nil {
		return nil
	}
	c.cleanup.Stop()
	return c.core.close(true)
}

// close is Close's body. With all false (the cleanup), pinned host buffers
// are left allocated and the context retained, since views into them may
// still be in use.
func (k *ctxCore) close(all bool) error {
	k.mu.Lock()
	if k.closing {
		k.mu.Unlock()
		<-k.closed
		return nil
	}
	k.closing = true
	objs := make([]*resource, 0, len(k.objects))
	for r := range k.objects {
		objs = append(objs, r)
	}
	k.mu.Unlock()
	defer close(k.closed)

	var first error
	note := func(err error) {
		if err != nil && first == nil {
			first = err
		}
	}
	// Let queued work finish first, so that no copy is pending on host
	// memory about to be freed and no stream is destroyed mid-work. The
	// streams' marks are taken before the wait: a copy queued while it
	// runs is not covered by it, and its memory's Close waits for it.
	if len(objs) > 0 && k.alive("Close") == nil {
		marks := k.streamMarks()
		if k.enter("Close") == nil {
			err := call(symCtxSynchronize)
			note(err)
			leave()
			if err == nil {
				for _, m := range marks {
					m.q.complete(m.seq)
				}
			}
		}
		k.life.RUnlock()
	}
	keep := false
	for _, r := range objs {
		if !all && r.kind == kindHostMemory {
			keep = true
			continue
		}
		note(r.release())
	}
	if keep {
		return first
	}
	k.life.Lock()
	h := k.handle.Swap(0)
	if h != 0 {
		note(call(symDevicePrimaryCtxRelease, uintptr(k.dev.ordinal)))
	}
	k.life.Unlock()
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
	kindAsyncMemory // device memory from a stream-ordered pool (pool.go)
	kindMemPool
	kindGraph
	kindGraphExec
)

var destroyOf = [...]symID{
	kindDeviceMemory: symMemFree,
	kindHostMemory:   symMemFreeHost,
	kindRegistration: symMemHostUnregister,
	kindStream:       symStreamDestroy,
	kindEvent:        symEventDestroy,
	kindModule:       symModuleUnload,
	kindAsyncMemory:  symMemFree, // after a context synchronisation: see release
	kindMemPool:      symMemPoolDestroy,
	kindGraph:        symGraphDestroy,
	kindGraphExec:    symGraphExecDestroy,
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
	case kindAsyncMemory:
		return "pool buffer"
	case kindMemPool:
		return "memory pool"
	case kindGraph:
		return "graph"
	case kindGraphExec:
		return "graph exec"
	}
	return "object"
}

// resource is the part of an owned object that the context's registry and
// the object's cleanup share. It never points back at the object, so a
// dropped object can still be collected and cleaned up.
//
// Every call that uses the handle read-holds mu for the call's duration,
// and release write-holds it, so that a handle is never destroyed while a
// call uses it, by Close, by Context.Close or by the cleanup.
type resource struct {
	core   *ctxCore
	kind   resourceKind
	mu     sync.RWMutex
	handle atomic.Uintptr // set under mu held for writing; 0 once released
	pinner *runtime.Pinner
	// portable host memory may be used with every context's streams.
	portable bool

	// inflight counts asynchronous copies queued on streams that use this
	// host memory and that the host has not yet seen complete.
	inflight atomic.Int64
	// uses is a stream's list of host memory its queued copies use.
	uses hostUses

	// capture is a stream's: Stream.Capture read-holds it from before the
	// capture begins to after its graph is adopted or destroyed, and
	// release write-holds it before anything else, so that a stream is
	// never destroyed mid-capture, nor its context released with the
	// capture's graph untracked (graph.go).
	capture sync.RWMutex
	// capturing is set while a capture may be under way on the stream:
	// a wait for its work then synchronises the context, since the
	// capture forbids waiting for the stream itself.
	capturing atomic.Bool
}

// track creates the resource for a new handle. It fails, and the caller
// must destroy the handle, when the context is closing.
func (k *ctxCore) track(kind resourceKind, handle uintptr, pinner *runtime.Pinner) (*resource, bool) {
	r := &resource{core: k, kind: kind, pinner: pinner}
	r.handle.Store(handle)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closing {
		return nil, false
	}
	k.objects[r] = struct{}{}
	return r, true
}

// adopt tracks a handle that op just made, with the context current and
// k.life read-held. When the context is closing, it destroys the handle
// and reports ErrClosed.
func (k *ctxCore) adopt(op string, kind resourceKind, handle uintptr, pinner *runtime.Pinner) (*resource, error) {
	r, ok := k.track(kind, handle, pinner)
	if !ok {
		_ = call(destroyOf[kind], handle)
		if pinner != nil {
			pinner.Unpin()
		}
		return nil, closedError(op)
	}
	return r, nil
}

// acquire read-locks r for a call and returns its live handle. On success
// the caller must call r.mu.RUnlock when the call is done.
func (r *resource) acquire(op string) (uintptr, error) {
	r.mu.RLock()
	if h := r.handle.Load(); h != 0 {
		return h, nil
	}
	r.mu.RUnlock()
	return 0, closedError(op)
}

// release destroys the resource once, after any call that is using it, after
// any capture in progress on it (a stream's), and after any queued copy that
// uses its memory; later calls return nil.
func (r *resource) release() error {
	if r.kind == kindStream {
		r.capture.Lock()
		defer r.capture.Unlock()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.handle.Load()
	if h == 0 {
		return nil
	}
	k := r.core
	var err error
	keepMemory := false
	switch {
	case r.kind == kindStream && r.uses.pending():
		// Copies on the stream still keep host memory alive: wait for them
		// before letting it go.
		err = r.synchronizeLocked(h)
	case r.inflight.Load() > 0:
		err = k.waitForUses(r)
		// The device may still copy to or from the memory: a pinned
		// buffer stays allocated rather than go back to the driver.
		keepMemory = err != nil && r.kind == kindHostMemory
	}
	// A failed wait above must survive a successful destroy: it means the
	// device may still use the host memory, which then stays pinned.
	if e := k.alive("Close"); e != nil {
		err = errors.Join(err, e)
	} else {
		if e := k.enter("Close"); e != nil {
			err = errors.Join(err, e)
		} else {
			if r.kind == kindAsyncMemory {
				// cuMemFree does not wait for stream work on memory from a
				// pool: wait for the context first (FreeAsync avoids this).
				err = errors.Join(err, call(symCtxSynchronize))
			}
			if !keepMemory {
				err = errors.Join(err, call(destroyOf[r.kind], h))
			}
			leave()
		}
		k.life.RUnlock()
	}
	r.handle.Store(0)
	k.mu.Lock()
	delete(k.objects, r)
	k.mu.Unlock()
	if r.pinner != nil {
		if err == nil {
			r.pinner.Unpin()
		} else {
			// The driver may still have the memory registered: keep it
			// pinned, and reachable, for the life of the process rather
			// than let Go reuse memory the device may write.
			keepPinned(r.pinner)
		}
	}
	if err != nil {
		return fmt.Errorf("cuda: closing %s: %w", r.kind, err)
	}
	return nil
}

var stuckPins struct {
	sync.Mutex
	pins []*runtime.Pinner
}

func keepPinned(p *runtime.Pinner) {
	stuckPins.Lock()
	stuckPins.pins = append(stuckPins.pins, p)
	stuckPins.Unlock()
}

// synchronizeLocked waits for the stream whose handle is h, with r.mu held,
// and lets go of the host memory its copies used.
func (r *resource) synchronizeLocked(h uintptr) error {
	k := r.core
	if err := k.alive("Stream.Close"); err != nil {
		return err
	}
	defer k.life.RUnlock()
	mark := r.uses.mark()
	if err := k.enter("Stream.Close"); err != nil {
		return err
	}
	var err error
	if r.capturing.Load() {
		// A capture forbids waiting for the stream (and would be
		// invalidated by it): the context's wait covers the work queued on
		// the stream before the capture began, and the capture's own
		// operations run nothing.
		err = call(symCtxSynchronize)
	} else {
		err = hot(symStreamSynchronize, 1, h, 0, 0, 0)
	}
	leave()
	// Even when the stream failed (a sticky error), it runs nothing more.
	r.uses.complete(mark)
	return err
}

// waitForUses synchronises every stream of k with a queued copy that uses
// the host memory mem, which the caller holds for writing.
func (k *ctxCore) waitForUses(mem *resource) error {
	k.mu.Lock()
	var streams []*resource
	for r := range k.objects {
		if r.kind == kindStream && r.uses.uses(mem) {
			streams = append(streams, r)
		}
	}
	k.mu.Unlock()
	var first error
	for _, s := range streams {
		h, err := s.acquire("Close")
		if err != nil {
			continue // closed meanwhile: its Close waited for it
		}
		if err := s.synchronizeLocked(h); err != nil && first == nil {
			first = err
		}
		s.mu.RUnlock()
	}
	return first
}

// owned is embedded in every owning type: the context it keeps reachable,
// its resource, and the cleanup that releases it if the object is dropped
// without Close.
type owned struct {
	ctx     *Context
	res     *resource
	cleanup runtime.Cleanup
}

// own wires obj's owned part to r and, when safetyNet is true, registers
// the cleanup that releases r once obj is unreachable.
func own[T any](obj *T, o *owned, c *Context, r *resource, safetyNet bool) {
	o.ctx = c
	o.res = r
	if safetyNet {
		o.cleanup = runtime.AddCleanup(obj, releaseQuietly, r)
	}
}

func releaseQuietly(r *resource) { _ = r.release() }

// use read-locks the object for a call and returns its live handle; the
// caller must call o.res.mu.RUnlock (done) afterwards.
func (o *owned) use(op string) (uintptr, error) {
	if o == nil || o.res == nil {
		return 0, argError(op, "nil object")
	}
	return o.res.acquire(op)
}

func (o *owned) done() { o.res.mu.RUnlock() }

// usePair read-locks two objects for one call: b may be nil or the same
// object as a. They are locked in a fixed order (by address), so that two
// calls locking the same pair the other way round cannot deadlock against
// a Close waiting on each. On success the caller must call donePair.
func usePair(op string, a, b *owned) error {
	if b == nil || b.res == a.res {
		_, err := a.use(op)
		return err
	}
	first, second := a, b
	if uintptr(unsafe.Pointer(first.res)) > uintptr(unsafe.Pointer(second.res)) {
		first, second = second, first
	}
	if _, err := first.use(op); err != nil {
		return err
	}
	if _, err := second.use(op); err != nil {
		first.done()
		return err
	}
	return nil
}

func donePair(a, b *owned) {
	a.done()
	if b != nil && b.res != a.res {
		b.done()
	}
}

// liveHandle returns the handle, or 0 once closed, without locking.
func (o *owned) liveHandle() uintptr {
	if o == nil || o.res == nil {
		return 0
	}
	return o.res.handle.Load()
}

// close releases the resource and stops the cleanup.
func (o *owned) close() error {
	if o == nil || o.res == nil {
		return nil
	}
	o.cleanup.Stop()
	return o.res.release()
}

// sameContext reports objects of two contexts used together.
func sameContext(op string, a, b *ctxCore) error {
	if a != b {
		return fmt.Errorf("cuda: %s: %w: an object of GPU %d's context used with one of GPU %d's",
			op, ErrWrongContext, a.dev.ordinal, b.dev.ordinal)
	}
	return nil
}

package driver

import (
	"runtime"
	"sync"
	"sync/atomic"
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
	var h uintptr
	if err := cuDevicePrimaryCtxRetain(&h, dev.cu()); err != nil {
		return nil, err
	}
	core := &ctxCore{dev: dev, objects: map[*resource]struct{}{}, closed: make(chan struct{})}
	core.handle.Store(h)
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
	err := cuCtxGetCurrent(s, &s.out[0])
	if err == nil && s.out[0] != h {
		err = cuCtxSetCurrent(s, h)
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
	k, err := c.begin("Context.Synchronize")
	if err != nil {
		return err
	}
	defer k.life.RUnlock()
	marks := k.streamMarks()
	err = cuCtxSynchronize()
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
	k, err := c.begin("Context.MemoryInfo")
	if err != nil {
		return 0, 0, err
	}
	defer k.end()
	out := new([2]uint64)
	err = cuMemGetInfo(&out[0], &out[1])
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
// (cuDevicePrimaryCtxRelease_v2). It first waits for the graph captures in
// progress on any Context of the device ([Stream.Capture]) to end, and
// holds new ones back until its objects are closed: the driver refuses to
// wait for a context while a stream of it is capturing, and the device's
// Contexts share one. Objects made while Close runs are closed
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
	// The driver refuses to wait for a context while a stream of it is
	// capturing, and invalidates the capture: let the captures in
	// progress on the device's primary context, which its every Context
	// shares, end first (this Context's are destroyed, not adopted), and
	// hold new ones back until the objects are closed.
	gate := gateOf(k.dev)
	gate.hold()
	defer gate.letGo()

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
	if len(objs) > 0 && k.alive("Context.Close") == nil {
		marks := k.streamMarks()
		if k.enter("Context.Close") == nil {
			err := cuCtxSynchronize()
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
		if !all && (r.kind == kindHostMemory || r.kind == kindManagedMemory) { // views point into them
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
		note(cuDevicePrimaryCtxRelease(k.dev.cu()))
	}
	k.life.Unlock()
	return first
}

package driver

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

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
	kindLinker    // a JIT link state (link.go)
	kindLibModule // a library's module on a context, the library's to unload (library.go)

	// The memory families' kinds.
	kindManagedMemory // managed.go
	kindVirtualMemory // vmm.go
	kindIPCMemory     // ipc.go: another process's memory, opened here
)

// destroyOf destroys a resource of each kind, given its handle.
var destroyOf = [...]func(h uintptr) error{
	kindDeviceMemory: freeDevice,
	kindHostMemory:   cuMemFreeHost,
	kindRegistration: cuMemHostUnregister,
	kindStream:       cuStreamDestroy,
	kindEvent:        cuEventDestroy,
	kindModule:       cuModuleUnload,
	kindAsyncMemory:  freeDevice, // after a context synchronisation: see release
	kindMemPool:      cuMemPoolDestroy,
	kindGraph:        cuGraphDestroy,
	kindGraphExec:    cuGraphExecDestroy,
	kindLinker:       cuLinkDestroy,
	kindLibModule:    func(uintptr) error { return nil },

	kindManagedMemory: freeDevice,
	kindVirtualMemory: freeVirtual,
	kindIPCMemory:     closeIPC,
}

func freeDevice(h uintptr) error { return cuMemFree(DevicePtr(h)) }

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
	case kindLinker:
		return "linker"
	case kindLibModule:
		return "library module"
	case kindManagedMemory:
		return "managed buffer"
	case kindVirtualMemory:
		return "virtual buffer"
	case kindIPCMemory:
		return "shared buffer"
	}
	return "object"
}

// closeOp names the Close of the Go type that owns a resource of kind k,
// for its errors: "Stream.Close".
func (k resourceKind) closeOp() string {
	switch k {
	case kindDeviceMemory, kindAsyncMemory, kindVirtualMemory, kindIPCMemory:
		return "DeviceBuffer.Close"
	case kindHostMemory:
		return "HostBuffer.Close"
	case kindRegistration:
		return "HostRegistration.Close"
	case kindStream:
		return "Stream.Close"
	case kindEvent:
		return "Event.Close"
	case kindModule:
		return "Module.Close"
	case kindMemPool:
		return "MemPool.Close"
	case kindGraph:
		return "Graph.Close"
	case kindGraphExec:
		return "GraphExec.Close"
	case kindLinker:
		return "Linker.Close"
	case kindLibModule:
		return "Library.Close" // the library unloads its modules
	case kindManagedMemory:
		return "ManagedBuffer.Close"
	}
	return "Close"
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
	// capturing is set while a capture may be under way on the stream
	// (set with mu held for writing, right before the capture begins): a
	// wait for the stream's work then has nothing to wait for (see
	// synchronizeLocked).
	capturing atomic.Bool

	// origin is a graph exec's: the graph it was instantiated from, whose
	// node handles name the exec's nodes to the driver, also after an
	// update from another graph (graphnode.go). Set under mu.
	origin *resource
	// execs counts a graph's open execs instantiated from it, and kept is
	// the handle that the graph's Close left for the last of them to
	// destroy. Both guarded by core.mu.
	execs int
	kept  uintptr
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
		_ = destroyOf[kind](handle)
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
	op := r.kind.closeOp()
	if e := k.alive(op); e != nil {
		err = errors.Join(err, e)
	} else {
		if e := k.enter(op); e != nil {
			err = errors.Join(err, e)
		} else {
			if r.kind == kindAsyncMemory {
				// cuMemFree does not wait for stream work on memory from a
				// pool: wait for the context first (FreeAsync avoids this).
				err = errors.Join(err, cuCtxSynchronize())
			}
			if !keepMemory && !r.keepForExecs(h) {
				err = errors.Join(err, destroyOf[r.kind](h))
			}
			if r.kind == kindGraphExec {
				err = errors.Join(err, r.dropOrigin())
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
	return wrapOp(op, err)
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
	if r.capturing.Load() {
		// The driver refuses a wait for a capturing stream, or for its
		// context, and invalidates the capture. There is nothing to wait
		// for: Capture waited for the copies queued before it began, and
		// captured copies run nothing.
		return nil
	}
	k := r.core
	if err := k.alive("Stream.Close"); err != nil {
		return err
	}
	defer k.life.RUnlock()
	mark := r.uses.mark()
	if err := k.enter("Stream.Close"); err != nil {
		return err
	}
	sc := getScratch()
	err := cuStreamSynchronize(sc, h)
	putScratch(sc)
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
		h, err := s.acquire("Stream.Close")
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

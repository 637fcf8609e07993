package driver

import (
	"sync/atomic"
	"unsafe"
)

// Flags of cuStreamCreate and cuEventCreate.
const (
	streamNonBlocking   = 0x1 // CU_STREAM_NON_BLOCKING
	eventBlockingSync   = 0x1 // CU_EVENT_BLOCKING_SYNC
	eventDisableTiming  = 0x2 // CU_EVENT_DISABLE_TIMING
	streamDefaultFlags  = 0x0 // CU_STREAM_DEFAULT
	eventDefaultOptions = 0x0 // CU_EVENT_DEFAULT
)

// StreamOptions configure [Context.NewStream]. The zero value gives a
// non-blocking stream of default priority.
type StreamOptions struct {
	// Blocking makes the stream synchronize with the legacy default stream.
	// Leave it false unless you mix in code that uses stream 0.
	Blocking bool
	// Priority is the stream priority; lower numbers are higher priority.
	// 0 is the default.
	Priority int
}

// Stream is a CUDA stream: an ordered queue of device work. The caller owns
// it and must Close it.
type Stream struct {
	owned
	// capt is the graph capture in progress on the stream, if any: what
	// its captured operations use (graph.go).
	capt atomic.Pointer[capture]
}

// NewStream creates a stream (cuStreamCreate, or cuStreamCreateWithPriority
// when Priority is set).
func (c *Context) NewStream(opts StreamOptions) (*Stream, error) {
	k, err := c.begin("NewStream")
	if err != nil {
		return nil, err
	}
	defer k.end()
	var flags uintptr = streamNonBlocking
	if opts.Blocking {
		flags = streamDefaultFlags
	}
	h := new(uintptr)
	if opts.Priority != 0 {
		err = call(symStreamCreateWithPriority, uintptr(unsafe.Pointer(h)), flags, uintptr(int64(opts.Priority)))
	} else {
		err = call(symStreamCreate, uintptr(unsafe.Pointer(h)), flags)
	}
	if err != nil {
		return nil, err
	}
	r, err := k.adopt("NewStream", kindStream, *h, nil)
	if err != nil {
		return nil, err
	}
	s := &Stream{}
	own(s, &s.owned, c, r, true)
	return s, nil
}

// Handle returns the raw CUstream, borrowed: never destroy it.
func (s *Stream) Handle() uintptr {
	if s == nil {
		return 0
	}
	return s.liveHandle()
}

// lock read-locks s for a call; the caller must call s.done().
func (s *Stream) lock(op string) (uintptr, error) {
	if s == nil {
		return 0, argError(op, "nil *Stream")
	}
	return s.use(op)
}

// blocking runs a call that may wait on the stream, with its context
// current, and returns the stream's host-memory mark taken before it. It
// makes the context current first unless the caller is bound to it (see
// [Context.Bind]); bound to another context, it refuses.
func (s *Stream) blocking(op string, bound via, id symID) (uint64, error) {
	h, err := s.lock(op)
	if err != nil {
		return 0, err
	}
	defer s.done()
	k := s.res.core
	if bound.k != nil && bound.k != k {
		return 0, sameContext(op+" (bound)", bound.k, k)
	}
	mark := s.res.uses.mark()
	if bound.k == nil {
		if err := k.enter(op); err != nil {
			return 0, err
		}
	}
	err = hot(id, 1, h, 0, 0, 0)
	if bound.k == nil {
		leave()
	}
	return mark, err
}

// issue calls a hot entry point for s, whose caller holds s's lock: it makes
// the context current first unless the caller is bound to it (see
// [Context.Bind]); bound to another context, it refuses. One scratch serves
// the context check and the call.
func (s *Stream) issue(op string, bound via, id symID, n int, a0, a1, a2, a3 uintptr) error {
	k := s.res.core
	if bound.k != nil && bound.k != k {
		return sameContext(op+" (bound)", bound.k, k)
	}
	sc := scratchPool.Get().(*scratch)
	var err error
	if bound.k == nil {
		err = k.enterWith(op, sc)
	}
	if err == nil {
		sc.args[0], sc.args[1], sc.args[2], sc.args[3] = a0, a1, a2, a3
		err = bound.call(id, sc, n)
		if bound.k == nil {
			leave()
		}
	}
	scratchPool.Put(sc)
	return err
}

// Synchronize blocks until all work queued on s is done (cuStreamSynchronize).
func (s *Stream) Synchronize() error { return s.synchronize("Stream.Synchronize", via{}) }

func (s *Stream) synchronize(op string, bound via) error {
	mark, err := s.blocking(op, bound, symStreamSynchronize)
	if err == nil {
		s.res.uses.complete(mark)
	}
	return err
}

// Done reports whether all work queued on s is done (cuStreamQuery).
// Work still running is (false, nil), not an error.
func (s *Stream) Done() (bool, error) {
	mark, err := s.blocking("Stream.Done", via{}, symStreamQuery)
	done, err := readiness(err)
	if done {
		s.res.uses.complete(mark)
	}
	return done, err
}

// WaitEvent makes all later work on s wait until e completes
// (cuStreamWaitEvent). The host does not block.
func (s *Stream) WaitEvent(e *Event) error { return s.waitEvent(via{}, e) }

func (s *Stream) waitEvent(bound via, e *Event) error {
	const op = "Stream.WaitEvent"
	if e == nil {
		return argError(op, "nil *Event")
	}
	// No defers on the issue paths (see Function.launch): each lock is let
	// go on every path.
	eh, err := e.use(op)
	if err != nil {
		return err
	}
	var h uintptr
	if h, err = s.lock(op); err == nil {
		if err = sameContext(op, e.res.core, s.res.core); err == nil {
			err = s.issue(op, bound, symStreamWaitEvent, 3, h, eh, 0, 0)
		}
		s.done()
	}
	e.done()
	return err
}

// hostCopy queues an asynchronous copy between dev and host memory on s and
// records the host memory as in use until the host sees the copy done.
func (s *Stream) hostCopy(op string, bound via, toDevice bool, dev *DeviceBuffer, devOff int, host HostMemory, hostOff, n int) error {
	devRole, hostRole := "source", "destination"
	if toDevice {
		devRole, hostRole = "destination", "source"
	}
	if host == nil {
		return argError(op, "nil %s HostMemory", hostRole)
	}
	if s == nil || s.res == nil {
		return argError(op, "nil *Stream")
	}
	if dev == nil {
		return argError(op, "nil %s *DeviceBuffer", devRole)
	}
	// Locks go memory first, then the stream, in every call. No defers on
	// the issue paths (see Function.launch): each lock is let go on every
	// path.
	d, err := dev.lockSpan(op, devRole, devOff, n)
	if err != nil {
		return err
	}
	p, mem, keep, err := host.lockSpan(op, hostRole, hostOff, n)
	if err == nil {
		var h uintptr
		if h, err = s.lock(op); err == nil {
			if n > 0 { // a copy of nothing, between open objects, does nothing
				err = s.hostCopyLocked(op, bound, toDevice, dev, d, mem, keep, p, n, h)
			}
			s.done()
		}
		mem.mu.RUnlock()
	}
	dev.done()
	return err
}

// hostCopyLocked is hostCopy's call, with dev (at address d), the host
// memory mem (at address p, owned by keep) and the stream (handle h)
// locked by the caller.
func (s *Stream) hostCopyLocked(op string, bound via, toDevice bool, dev *DeviceBuffer, d uintptr, mem *resource, keep any, p uintptr, n int, h uintptr) error {
	k := s.res.core
	if err := sameContext(op, dev.res.core, k); err != nil {
		return err
	}
	if !mem.portable {
		if err := sameContext(op, mem.core, k); err != nil {
			return err
		}
	}
	var err error
	if toDevice {
		err = s.issue(op, bound, symMemcpyHtoDAsync, 4, d, p, uintptr(n), h)
	} else {
		err = s.issue(op, bound, symMemcpyDtoHAsync, 4, p, d, uintptr(n), h)
	}
	if err == nil {
		s.res.uses.add(mem, keep)
		if c := s.capt.Load(); c != nil {
			c.add(mem, keep, true)
			c.add(dev.res, dev, false)
		}
	}
	return err
}

// CopyToDevice queues a copy of n bytes from src at srcOff to dst at dstOff
// (cuMemcpyHtoDAsync_v2). src must stay unchanged until the copy completes;
// until the host has seen it complete (see [Stream]'s package notes on
// memory), src is kept alive and its Close waits. A copy of 0 bytes between
// open objects does nothing.
func (s *Stream) CopyToDevice(dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, n int) error {
	return s.copyToDevice(via{}, dst, dstOff, src, srcOff, n)
}

func (s *Stream) copyToDevice(bound via, dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, n int) error {
	return s.hostCopy("Stream.CopyToDevice", bound, true, dst, dstOff, src, srcOff, n)
}

// CopyToHost queues a copy of n bytes from src at srcOff to dst at dstOff
// (cuMemcpyDtoHAsync_v2). dst must not be read until the copy completes;
// until the host has seen it complete, dst is kept alive and its Close
// waits. A copy of 0 bytes between open objects does nothing.
func (s *Stream) CopyToHost(dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	return s.copyToHost(via{}, dst, dstOff, src, srcOff, n)
}

func (s *Stream) copyToHost(bound via, dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	return s.hostCopy("Stream.CopyToHost", bound, false, src, srcOff, dst, dstOff, n)
}

// deviceOp queues an operation on one or two device buffers of s's context.
func (s *Stream) deviceOp(op string, id symID, dst *DeviceBuffer, dstOff int, src *DeviceBuffer, srcOff, n int, v byte) error {
	if s == nil || s.res == nil {
		return argError(op, "nil *Stream")
	}
	if dst == nil {
		return argError(op, "nil destination *DeviceBuffer")
	}
	var so *owned
	if src != nil {
		so = &src.owned
	}
	if err := usePair(op, &dst.owned, so); err != nil {
		return err
	}
	defer donePair(&dst.owned, so)
	if err := checkSpan(op, "destination", dstOff, n, dst.size); err != nil {
		return err
	}
	h, err := s.lock(op)
	if err != nil {
		return err
	}
	defer s.done()
	if err := sameContext(op, dst.res.core, s.res.core); err != nil {
		return err
	}
	if src != nil {
		if err := sameContext(op, src.res.core, s.res.core); err != nil {
			return err
		}
	}
	if n == 0 { // nothing to do, between open objects
		return nil
	}
	d := dst.liveHandle() + uintptr(dstOff)
	if src == nil {
		err = s.issue(op, via{}, id, 4, d, uintptr(v), uintptr(n), h)
	} else {
		if err := checkSpan(op, "source", srcOff, n, src.size); err != nil {
			return err
		}
		err = s.issue(op, via{}, id, 4, d, src.liveHandle()+uintptr(srcOff), uintptr(n), h)
	}
	if c := s.capt.Load(); c != nil && err == nil {
		c.add(dst.res, dst, false)
		if src != nil {
			c.add(src.res, src, false)
		}
	}
	return err
}

// CopyDevice queues a device-to-device copy (cuMemcpyDtoDAsync_v2). A copy
// of 0 bytes between open buffers does nothing.
func (s *Stream) CopyDevice(dst *DeviceBuffer, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	if src == nil {
		return argError("Stream.CopyDevice", "nil source *DeviceBuffer")
	}
	return s.deviceOp("Stream.CopyDevice", symMemcpyDtoDAsync, dst, dstOff, src, srcOff, n, 0)
}

// Memset queues setting n bytes of dst at off to v (cuMemsetD8Async); 0
// bytes of an open buffer does nothing.
func (s *Stream) Memset(dst *DeviceBuffer, off, n int, v byte) error {
	return s.deviceOp("Stream.Memset", symMemsetD8Async, dst, off, nil, 0, n, v)
}

// Close destroys the stream (cuStreamDestroy_v2). Work already queued
// still completes; when copies on the stream still use host memory, Close
// first waits for the stream, so that the memory can be let go. A second
// Close returns nil.
func (s *Stream) Close() error {
	if s == nil {
		return nil
	}
	return s.close()
}

// readiness maps CUDA_ERROR_NOT_READY to (false, nil): a state, not a failure.
func readiness(err error) (bool, error) {
	if err == nil {
		return true, nil
	}
	if e, ok := err.(*Error); ok && e.Code == ErrNotReady {
		return false, nil
	}
	return false, err
}

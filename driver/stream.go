package driver

import "sync/atomic"

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
	k, err := c.begin("Context.NewStream")
	if err != nil {
		return nil, err
	}
	defer k.end()
	var flags uint32 = streamNonBlocking
	if opts.Blocking {
		flags = streamDefaultFlags
	}
	var h uintptr
	if opts.Priority != 0 {
		err = cuStreamCreateWithPriority(&h, flags, int32(opts.Priority))
	} else {
		err = cuStreamCreate(&h, flags)
	}
	if err != nil {
		return nil, err
	}
	r, err := k.adopt("Context.NewStream", kindStream, h, nil)
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

// blocking runs wait, a call that may wait on the stream (cuStreamSynchronize
// or cuStreamQuery), with its context current, and returns the stream's
// host-memory mark taken before it. It makes the context current first
// unless the caller is bound to it (see [Context.Bind]); bound to another
// context, it refuses.
func (s *Stream) blocking(op string, bound via, wait func(sc *scratch, hStream uintptr) error) (uint64, error) {
	h, err := s.lock(op)
	if err != nil {
		return 0, err
	}
	defer s.done()
	mark := s.res.uses.mark()
	sc, err := s.issuing(op, bound)
	if err != nil {
		return 0, err
	}
	err = wait(sc, h)
	bound.issued(sc)
	return mark, err
}

// issuing begins a hot call for s, whose caller holds s's lock, and returns
// the scratch to make it with: one scratch serves the context check and the
// call. It makes the context current first unless the caller is bound to it
// (see [Context.Bind]); bound to another context, it refuses. On success
// the caller makes its call, then calls bound.issued.
func (s *Stream) issuing(op string, bound via) (*scratch, error) {
	k := s.res.core
	if bound.k != nil && bound.k != k {
		return nil, sameContext(op+" (bound)", bound.k, k)
	}
	sc := getScratch()
	if bound.k == nil {
		if err := k.enterWith(op, sc); err != nil {
			putScratch(sc)
			return nil, err
		}
	}
	return sc, nil
}

// issued ends a call that [Stream.issuing] began.
func (v via) issued(sc *scratch) {
	if v.k == nil {
		leave()
	}
	putScratch(sc)
}

// Synchronize blocks until all work queued on s is done (cuStreamSynchronize).
func (s *Stream) Synchronize() error { return s.synchronize("Stream.Synchronize", via{}) }

func (s *Stream) synchronize(op string, bound via) error {
	mark, err := s.blocking(op, bound, cuStreamSynchronize)
	if err == nil {
		s.res.uses.complete(mark)
	}
	return err
}

// Done reports whether all work queued on s is done (cuStreamQuery).
// Work still running is (false, nil), not an error.
func (s *Stream) Done() (bool, error) {
	mark, err := s.blocking("Stream.Done", via{}, cuStreamQuery)
	done, err := readiness(err)
	if done {
		s.res.uses.complete(mark)
	}
	return done, err
}

// WaitEvent makes all later work on s wait until e completes
// (cuStreamWaitEvent). The host does not block.
func (s *Stream) WaitEvent(e *Event) error { return s.waitEvent(via{}, e) }

// waitEvent is Stream.WaitEvent through bound.
func (s *Stream) waitEvent(bound via, e *Event) error {
	return s.waitEventFor("Stream.WaitEvent", bound, e)
}

// waitEventFor is the WaitEvent that op (Stream.WaitEvent, Bound.WaitEvent)
// makes.
func (s *Stream) waitEventFor(op string, bound via, e *Event) error {
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
			var sc *scratch
			if sc, err = s.issuing(op, bound); err == nil {
				err = cuStreamWaitEvent(sc, bound.direct, h, eh, 0)
				bound.issued(sc)
			}
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
	sc, err := s.issuing(op, bound)
	if err != nil {
		return err
	}
	if toDevice {
		err = cuMemcpyHtoDAsync(sc, bound.direct, DevicePtr(d), p, uintptr(n), h)
	} else {
		err = cuMemcpyDtoHAsync(sc, bound.direct, p, DevicePtr(d), uintptr(n), h)
	}
	bound.issued(sc)
	if err == nil {
		if c := s.capt.Load(); c != nil {
			// A captured copy runs nothing now: the graph keeps the
			// memory, and each launch's stream waits for it.
			c.add(mem, keep, true)
			c.add(dev.res, dev, false)
		} else {
			s.res.uses.add(mem, keep)
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

// deviceOp queues an operation on n bytes of one or two device buffers of
// s's context: queue, which calls the driver with the spans' addresses (src
// 0 without a source buffer) and n. A memset of elements of width bytes
// (1 otherwise) needs dstOff and n to be multiples of width.
func (s *Stream) deviceOp(op string, dst *DeviceBuffer, dstOff int, src *DeviceBuffer, srcOff, n, width int,
	queue func(sc *scratch, dst, src DevicePtr, n, hStream uintptr) error) error {
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
	if dstOff%width != 0 || n%width != 0 {
		return argError(op, "offset %d and size %d: must be multiples of %d bytes", dstOff, n, width)
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
	d, sp := dst.Ptr()+DevicePtr(dstOff), DevicePtr(0)
	if src != nil {
		if err := checkSpan(op, "source", srcOff, n, src.size); err != nil {
			return err
		}
		sp = src.Ptr() + DevicePtr(srcOff)
	}
	sc, err := s.issuing(op, via{})
	if err != nil {
		return err
	}
	err = queue(sc, d, sp, uintptr(n), h)
	via{}.issued(sc)
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
	return s.deviceOp("Stream.CopyDevice", dst, dstOff, src, srcOff, n, 1, cuMemcpyDtoDAsync)
}

// Memset queues setting n bytes of dst at off to v (cuMemsetD8Async); 0
// bytes of an open buffer does nothing.
func (s *Stream) Memset(dst *DeviceBuffer, off, n int, v byte) error {
	return s.deviceOp("Stream.Memset", dst, off, nil, 0, n, 1,
		func(sc *scratch, dst, _ DevicePtr, n, h uintptr) error { return cuMemsetD8Async(sc, dst, v, n, h) })
}

// Memset16 queues setting n bytes of dst at off to v, repeated in 16-bit
// elements (cuMemsetD16Async): off and n must be multiples of 2. 0 bytes of
// an open buffer does nothing.
func (s *Stream) Memset16(dst *DeviceBuffer, off, n int, v uint16) error {
	return s.deviceOp("Stream.Memset16", dst, off, nil, 0, n, 2,
		func(sc *scratch, dst, _ DevicePtr, n, h uintptr) error { return cuMemsetD16Async(sc, dst, v, n/2, h) })
}

// Memset32 queues setting n bytes of dst at off to v, repeated in 32-bit
// elements (cuMemsetD32Async): off and n must be multiples of 4. 0 bytes of
// an open buffer does nothing.
func (s *Stream) Memset32(dst *DeviceBuffer, off, n int, v uint32) error {
	return s.deviceOp("Stream.Memset32", dst, off, nil, 0, n, 4,
		func(sc *scratch, dst, _ DevicePtr, n, h uintptr) error { return cuMemsetD32Async(sc, dst, v, n/4, h) })
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

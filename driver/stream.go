package driver

import (
	"time"
	"unsafe"
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
}

// NewStream creates a stream (cuStreamCreate, or cuStreamCreateWithPriority
// when Priority is set).
func (c *Context) NewStream(opts StreamOptions) (*Stream, error) {
	if err := c.enter("NewStream"); err != nil {
		return nil, err
	}
	defer leave()
	var flags uintptr = 0x1 // CU_STREAM_NON_BLOCKING
	if opts.Blocking {
		flags = 0
	}
	h := new(uintptr)
	var err error
	if opts.Priority != 0 {
		err = call(symStreamCreateWithPriority, uintptr(unsafe.Pointer(h)), flags, uintptr(int64(opts.Priority)))
	} else {
		err = call(symStreamCreate, uintptr(unsafe.Pointer(h)), flags)
	}
	if err != nil {
		return nil, err
	}
	s := &Stream{}
	own(s, &s.owned, c.track(kindStream, *h))
	return s, nil
}

// Handle returns the raw CUstream, borrowed: never destroy it.
func (s *Stream) Handle() uintptr {
	if s == nil || s.res == nil {
		return 0
	}
	return s.res.handle.Load()
}

// begin checks s and makes its context current; the caller must leave().
func (s *Stream) begin(op string) (uintptr, error) {
	if s == nil {
		return 0, argError(op, "nil *Stream")
	}
	h, err := s.handleFor(op)
	if err != nil {
		return 0, err
	}
	if err := s.res.ctx.enter(op); err != nil {
		return 0, err
	}
	return h, nil
}

// issue calls a hot entry point for s: it makes the context current first
// unless the caller is bound to s's context (see [Context.Bind]).
func (s *Stream) issue(op string, bound *Context, id symID, n int, a0, a1, a2, a3 uintptr) error {
	ctx := s.res.ctx
	if bound == ctx {
		return hot(id, n, a0, a1, a2, a3)
	}
	if err := ctx.enter(op); err != nil {
		return err
	}
	err := hot(id, n, a0, a1, a2, a3)
	leave()
	return err
}

// handle returns s's live handle, or an error for a nil or closed stream.
func (s *Stream) handle(op string) (uintptr, error) {
	if s == nil {
		return 0, argError(op, "nil *Stream")
	}
	return s.handleFor(op)
}

// Synchronize blocks until all work queued on s is done (cuStreamSynchronize).
func (s *Stream) Synchronize() error {
	h, err := s.begin("Stream.Synchronize")
	if err != nil {
		return err
	}
	defer leave()
	return hot(symStreamSynchronize, 1, h, 0, 0, 0)
}

// Done reports whether all work queued on s is done (cuStreamQuery).
// Work still running is (false, nil), not an error.
func (s *Stream) Done() (bool, error) {
	h, err := s.begin("Stream.Done")
	if err != nil {
		return false, err
	}
	defer leave()
	return readiness(hot(symStreamQuery, 1, h, 0, 0, 0))
}

// WaitEvent makes all later work on s wait until e completes
// (cuStreamWaitEvent). The host does not block.
func (s *Stream) WaitEvent(e *Event) error { return s.waitEvent(nil, e) }

func (s *Stream) waitEvent(bound *Context, e *Event) error {
	const op = "Stream.WaitEvent"
	if e == nil {
		return argError(op, "nil *Event")
	}
	eh, err := e.handleFor(op)
	if err != nil {
		return err
	}
	h, err := s.handle(op)
	if err != nil {
		return err
	}
	return s.issue(op, bound, symStreamWaitEvent, 3, h, eh, 0, 0)
}

// CopyToDevice queues a copy of n bytes from src at srcOff to dst at dstOff
// (cuMemcpyHtoDAsync_v2). src must stay unchanged until the copy completes.
func (s *Stream) CopyToDevice(dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, n int) error {
	return s.copyToDevice(nil, dst, dstOff, src, srcOff, n)
}

func (s *Stream) copyToDevice(bound *Context, dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, n int) error {
	const op = "Stream.CopyToDevice"
	if src == nil {
		return argError(op, "nil source HostMemory")
	}
	if n == 0 {
		return nil
	}
	d, err := dst.span(op, "destination", dstOff, n)
	if err != nil {
		return err
	}
	p, err := src.hostSpan(op, "source", srcOff, n)
	if err != nil {
		return err
	}
	h, err := s.handle(op)
	if err != nil {
		return err
	}
	return s.issue(op, bound, symMemcpyHtoDAsync, 4, d, p, uintptr(n), h)
}

// CopyToHost queues a copy of n bytes from src at srcOff to dst at dstOff
// (cuMemcpyDtoHAsync_v2). dst must not be read until the copy completes.
func (s *Stream) CopyToHost(dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	return s.copyToHost(nil, dst, dstOff, src, srcOff, n)
}

func (s *Stream) copyToHost(bound *Context, dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	const op = "Stream.CopyToHost"
	if dst == nil {
		return argError(op, "nil destination HostMemory")
	}
	if n == 0 {
		return nil
	}
	p, err := dst.hostSpan(op, "destination", dstOff, n)
	if err != nil {
		return err
	}
	d, err := src.span(op, "source", srcOff, n)
	if err != nil {
		return err
	}
	h, err := s.handle(op)
	if err != nil {
		return err
	}
	return s.issue(op, bound, symMemcpyDtoHAsync, 4, p, d, uintptr(n), h)
}

// CopyDevice queues a device-to-device copy (cuMemcpyDtoDAsync_v2).
func (s *Stream) CopyDevice(dst *DeviceBuffer, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	const op = "Stream.CopyDevice"
	if n == 0 {
		return nil
	}
	d, err := dst.span(op, "destination", dstOff, n)
	if err != nil {
		return err
	}
	sp, err := src.span(op, "source", srcOff, n)
	if err != nil {
		return err
	}
	h, err := s.begin(op)
	if err != nil {
		return err
	}
	defer leave()
	return hot(symMemcpyDtoDAsync, 4, d, sp, uintptr(n), h)
}

// Memset queues setting n bytes of dst at off to v (cuMemsetD8Async).
func (s *Stream) Memset(dst *DeviceBuffer, off, n int, v byte) error {
	const op = "Stream.Memset"
	if n == 0 {
		return nil
	}
	d, err := dst.span(op, "destination", off, n)
	if err != nil {
		return err
	}
	h, err := s.begin(op)
	if err != nil {
		return err
	}
	defer leave()
	return hot(symMemsetD8Async, 4, d, uintptr(v), uintptr(n), h)
}

// Close waits for nothing and destroys the stream (cuStreamDestroy_v2);
// work already queued still completes. A second Close returns nil.
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

// EventOptions configure [Context.NewEvent]. The zero value gives an event
// without timing, the cheapest kind, for ordering work.
type EventOptions struct {
	// Timing lets the event be used with [Event.Elapsed].
	Timing bool
	// BlockingSync makes Synchronize sleep instead of spinning.
	BlockingSync bool
}

// Event is a CUDA event: a marker in a stream that other streams and the
// host can wait for. The caller owns it and must Close it.
type Event struct {
	owned
	timing bool
}

// NewEvent creates an event (cuEventCreate).
func (c *Context) NewEvent(opts EventOptions) (*Event, error) {
	if err := c.enter("NewEvent"); err != nil {
		return nil, err
	}
	defer leave()
	var flags uintptr
	if !opts.Timing {
		flags |= 0x2 // CU_EVENT_DISABLE_TIMING
	}
	if opts.BlockingSync {
		flags |= 0x1
	}
	h := new(uintptr)
	if err := call(symEventCreate, uintptr(unsafe.Pointer(h)), flags); err != nil {
		return nil, err
	}
	e := &Event{timing: opts.Timing}
	own(e, &e.owned, c.track(kindEvent, *h))
	return e, nil
}

// Record captures the work queued on s so far (cuEventRecord).
func (e *Event) Record(s *Stream) error { return e.record(nil, s) }

func (e *Event) record(bound *Context, s *Stream) error {
	const op = "Event.Record"
	if e == nil {
		return argError(op, "nil *Event")
	}
	eh, err := e.handleFor(op)
	if err != nil {
		return err
	}
	h, err := s.handle(op)
	if err != nil {
		return err
	}
	return s.issue(op, bound, symEventRecord, 2, eh, h, 0, 0)
}

func (e *Event) begin(op string) (uintptr, error) {
	if e == nil {
		return 0, argError(op, "nil *Event")
	}
	h, err := e.handleFor(op)
	if err != nil {
		return 0, err
	}
	if err := e.res.ctx.enter(op); err != nil {
		return 0, err
	}
	return h, nil
}

// Synchronize blocks until the work the event captured is done
// (cuEventSynchronize).
func (e *Event) Synchronize() error {
	h, err := e.begin("Event.Synchronize")
	if err != nil {
		return err
	}
	defer leave()
	return hot(symEventSynchronize, 1, h, 0, 0, 0)
}

// Done reports whether the captured work is done (cuEventQuery). Work still
// running is (false, nil).
func (e *Event) Done() (bool, error) {
	h, err := e.begin("Event.Done")
	if err != nil {
		return false, err
	}
	defer leave()
	return readiness(hot(symEventQuery, 1, h, 0, 0, 0))
}

// Elapsed returns the GPU time from e to end (cuEventElapsedTime), with
// about half a microsecond of resolution. Both events need Timing and must
// have completed.
func (e *Event) Elapsed(end *Event) (time.Duration, error) {
	const op = "Event.Elapsed"
	if end == nil {
		return 0, argError(op, "nil end *Event")
	}
	if e != nil && (!e.timing || !end.timing) {
		return 0, argError(op, "both events need EventOptions.Timing")
	}
	eh, err := end.handleFor(op)
	if err != nil {
		return 0, err
	}
	h, err := e.begin(op)
	if err != nil {
		return 0, err
	}
	defer leave()
	ms := new(float32)
	if err := call(symEventElapsedTime, uintptr(unsafe.Pointer(ms)), h, eh); err != nil {
		return 0, err
	}
	return time.Duration(float64(*ms) * float64(time.Millisecond)), nil
}

// Close destroys the event (cuEventDestroy_v2). A second Close returns nil.
func (e *Event) Close() error {
	if e == nil {
		return nil
	}
	return e.close()
}

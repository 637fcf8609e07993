package driver

import (
	"sync"
	"time"
)

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

	// The stream and host-memory mark of the last Record, so that seeing
	// the event done lets go of the memory that copies before it used.
	// recGen counts Records; Record holds recMu across its driver call,
	// so that a wait that sees recGen unchanged from before its own driver
	// call to after it knows which Record it waited for.
	recMu     sync.Mutex
	recStream *resource // nil: nothing to let go of
	recMark   uint64
	recGen    uint64
}

// NewEvent creates an event (cuEventCreate).
func (c *Context) NewEvent(opts EventOptions) (*Event, error) {
	k, err := c.begin("Context.NewEvent")
	if err != nil {
		return nil, err
	}
	defer k.end()
	var flags uint32 = eventDefaultOptions
	if !opts.Timing {
		flags |= eventDisableTiming
	}
	if opts.BlockingSync {
		flags |= eventBlockingSync
	}
	var h uintptr
	if err := cuEventCreate(&h, flags); err != nil {
		return nil, err
	}
	r, err := k.adopt("Context.NewEvent", kindEvent, h, nil)
	if err != nil {
		return nil, err
	}
	e := &Event{timing: opts.Timing}
	own(e, &e.owned, c, r, true)
	return e, nil
}

// Record captures the work queued on s so far (cuEventRecord).
func (e *Event) Record(s *Stream) error { return e.record(via{}, s) }

// record is Event.Record through bound.
func (e *Event) record(bound via, s *Stream) error { return e.recordFor("Event.Record", bound, s) }

// recordFor is the Record that op (Event.Record, Bound.Record) makes.
func (e *Event) recordFor(op string, bound via, s *Stream) error {
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
			e.recMu.Lock()
			mark := s.res.uses.mark()
			var sc *scratch
			if sc, err = s.issuing(op, bound); err == nil {
				err = cuEventRecord(sc, bound.direct, eh, h)
				bound.issued(sc)
			}
			if err == nil {
				e.recStream, e.recMark = s.res, mark
				if s.capt.Load() != nil {
					// A captured Record records nothing now, and a launch
					// of its graph says nothing of s's earlier copies.
					e.recStream = nil
				}
				e.recGen++
			}
			e.recMu.Unlock()
		}
		s.done()
	}
	e.done()
	return err
}

// lastRecord is what the last Record covers, taken before a wait for the
// event: the stream and mark it let go of, and the Record's number.
type lastRecord struct {
	stream *resource
	mark   uint64
	gen    uint64
}

func (e *Event) lastRecord() lastRecord {
	e.recMu.Lock()
	defer e.recMu.Unlock()
	return lastRecord{e.recStream, e.recMark, e.recGen}
}

// seen lets go of the host memory used by copies before the Record that
// rec (taken before the wait) describes, now that the event is known done,
// unless another Record came meanwhile: the wait may then have been for
// either, and the memory's Close waits for its streams itself.
func (e *Event) seen(rec lastRecord) {
	e.recMu.Lock()
	same := e.recGen == rec.gen
	e.recMu.Unlock()
	if same && rec.stream != nil {
		rec.stream.uses.complete(rec.mark)
	}
}

// blocking runs wait, a call on e (cuEventSynchronize or cuEventQuery),
// with its context current.
func (e *Event) blocking(op string, wait func(sc *scratch, hEvent uintptr) error) error {
	if e == nil {
		return argError(op, "nil *Event")
	}
	h, err := e.use(op)
	if err != nil {
		return err
	}
	defer e.done()
	sc := getScratch()
	defer putScratch(sc)
	if err := e.res.core.enterWith(op, sc); err != nil {
		return err
	}
	err = wait(sc, h)
	leave()
	return err
}

// Synchronize blocks until the work the event captured is done
// (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if e == nil || e.res == nil {
		return argError("Event.Synchronize", "nil *Event")
	}
	rec := e.lastRecord()
	err := e.blocking("Event.Synchronize", cuEventSynchronize)
	if err == nil {
		e.seen(rec)
	}
	return err
}

// Done reports whether the captured work is done (cuEventQuery). Work still
// running is (false, nil).
func (e *Event) Done() (bool, error) {
	if e == nil || e.res == nil {
		return false, argError("Event.Done", "nil *Event")
	}
	rec := e.lastRecord()
	done, err := readiness(e.blocking("Event.Done", cuEventQuery))
	if done {
		e.seen(rec)
	}
	return done, err
}

// Elapsed returns the GPU time from e to end (cuEventElapsedTime), with
// about half a microsecond of resolution. Both events need Timing and must
// have completed.
func (e *Event) Elapsed(end *Event) (time.Duration, error) {
	const op = "Event.Elapsed"
	if e == nil || end == nil {
		return 0, argError(op, "nil *Event")
	}
	if !e.timing || !end.timing {
		return 0, argError(op, "both events need EventOptions.Timing")
	}
	if err := usePair(op, &e.owned, &end.owned); err != nil {
		return 0, err
	}
	defer donePair(&e.owned, &end.owned)
	if err := sameContext(op, e.res.core, end.res.core); err != nil {
		return 0, err
	}
	// The out-parameter lives in a pooled scratch: Elapsed allocates
	// nothing, so that timing events around copies (BenchmarkCopyH2DTimed)
	// costs no garbage.
	sc := getScratch()
	defer putScratch(sc)
	if err := e.res.core.enterWith(op, sc); err != nil {
		return 0, err
	}
	sc.out[0] = 0
	err := cuEventElapsedTime(sc, sc.outFloat32(), e.liveHandle(), end.liveHandle())
	leave()
	if err != nil {
		return 0, err
	}
	ms := *sc.outFloat32()
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Close destroys the event (cuEventDestroy_v2). A second Close returns nil.
func (e *Event) Close() error {
	if e == nil {
		return nil
	}
	return e.close()
}

package driver

import "runtime"

// Bound is a goroutine locked to its OS thread with a context current, for
// loops that issue many calls in a row (the pipeline's issue loop). Its
// methods skip the per-call context check for objects of that context, and
// refuse objects of any other context with ErrWrongContext, leaving the
// bound context current. A Bound belongs to the goroutine that bound it,
// until Release: never share it.
type Bound struct {
	ctx    *Context
	direct bool
}

// BindOptions are a binding's choices; the zero value is the safe one.
type BindOptions struct {
	// DirectCalls makes the Bound's calls that do not wait (Launch,
	// CopyToDevice, CopyToHost, Record, WaitEvent and LaunchGraph) enter
	// the driver without telling the Go scheduler: no runtime.cgocall, no
	// system-call transition, and so less host time per launch
	// (bench/RESULTS.md, "Direct calls, and a one-chunk job without run
	// state", has the figures).
	// Synchronize and every other call that waits keep the safe path.
	//
	// The trade-offs. While such a call runs, its goroutine keeps its P
	// and cannot be stopped, so a call that blocks holds up every
	// stop-the-world of the garbage collector, and every goroutine with
	// it, until it returns; meanwhile the runtime signals the thread every
	// few microseconds to preempt it. The driver blocks in these calls
	// when a stream's queue is full (about a thousand operations queued
	// ahead of the GPU) and, at times, for its own locks. A crash inside
	// the driver during such a call is reported without the goroutine's
	// stack, and CPU profiles charge the call's time to
	// runtime._ExternalCode rather than to its caller. Ask for it where
	// each Bound keeps little queued: many small jobs that each end in a
	// synchronisation (pipeline.GPUOptions.DirectCalls).
	//
	// The direct path exists only in builds for linux/amd64 with the
	// overlap_directcalls build tag (go build -tags overlap_directcalls):
	// it links runtime.asmcgocall, which the runtime does not promise to
	// keep linkable. Elsewhere the option changes nothing;
	// [DirectCallsAvailable] says which.
	DirectCalls bool
}

// DirectCallsAvailable reports whether this build has the direct call path
// of [BindOptions].DirectCalls (linux/amd64, built with the
// overlap_directcalls tag).
func DirectCallsAvailable() bool { return haveDirectCalls }

// Bind locks the calling goroutine to its OS thread and makes c current
// there. Call Release, from the same goroutine, when done.
func (c *Context) Bind() (*Bound, error) {
	b := new(Bound)
	if err := c.bind("Context.Bind", b, BindOptions{}); err != nil {
		return nil, err
	}
	return b, nil
}

// BindInto is [Context.Bind] into b, a zero or released Bound, and
// allocates nothing: a caller that binds once per small job (the
// pipeline's issuer) keeps its Bound and binds it again. A Bound that is
// still bound is refused, and stays as it was.
func (c *Context) BindInto(b *Bound) error {
	return c.bindInto("Context.BindInto", b, BindOptions{})
}

// BindWith is [Context.BindInto] with options.
func (c *Context) BindWith(b *Bound, opts BindOptions) error {
	return c.bindInto("Context.BindWith", b, opts)
}

func (c *Context) bindInto(op string, b *Bound, opts BindOptions) error {
	if b == nil {
		return argError(op, "nil *Bound")
	}
	if b.ctx != nil {
		return argError(op, "the Bound is still bound; Release it first")
	}
	return c.bind(op, b, opts)
}

func (c *Context) bind(op string, b *Bound, opts BindOptions) error {
	k, err := c.begin(op)
	if err != nil {
		return err
	}
	// Keep the thread locked past end: lock once more before end unlocks.
	runtime.LockOSThread()
	k.end()
	b.ctx, b.direct = c, opts.DirectCalls && haveDirectCalls
	return nil
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
	return f.launchFor("Bound.Launch", b.via(), s, cfg, args)
}

// CopyToDevice is [Stream.CopyToDevice] without the context check.
func (b *Bound) CopyToDevice(s *Stream, dst *DeviceBuffer, dstOff int, src HostMemory, srcOff, n int) error {
	return s.hostCopy("Bound.CopyToDevice", b.via(), true, dst, dstOff, src, srcOff, n)
}

// CopyToHost is [Stream.CopyToHost] without the context check.
func (b *Bound) CopyToHost(s *Stream, dst HostMemory, dstOff int, src *DeviceBuffer, srcOff, n int) error {
	return s.hostCopy("Bound.CopyToHost", b.via(), false, src, srcOff, dst, dstOff, n)
}

// Synchronize is [Stream.Synchronize] without the context check: a
// caller that issued a small job through b waits for it without making
// its context current once more, a driver call saved on every small
// job.
func (b *Bound) Synchronize(s *Stream) error { return s.synchronize("Bound.Synchronize", b.via()) }

// Record is [Event.Record] without the context check.
func (b *Bound) Record(e *Event, s *Stream) error { return e.recordFor("Bound.Record", b.via(), s) }

// WaitEvent is [Stream.WaitEvent] without the context check.
func (b *Bound) WaitEvent(s *Stream, e *Event) error {
	return s.waitEventFor("Bound.WaitEvent", b.via(), e)
}

// via returns how b's calls reach the driver: its context's core and
// whether non-blocking calls go direct, or full checks (the zero via)
// after Release.
func (b *Bound) via() via {
	if b == nil || b.ctx == nil {
		return via{}
	}
	return via{k: b.ctx.core, direct: b.direct}
}

// via is how a call reaches the driver: through a Bound (k, the bound
// context's core: no context check) or not (k nil), and for a call that
// does not wait, whether it skips runtime.cgocall (direct).
type via struct {
	k      *ctxCore
	direct bool
}

package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// plan is one run's resolved job: where each chunk's bytes come from and go.
type plan struct {
	job     Job
	mode    HostMode
	chunks  int
	ins     []source // per input
	outs    []source // per output
	staging bool     // some buffer goes through pinned slots
	report  *Report
	// queue, when set, is a group's shared queue of chunks: the device
	// takes its next chunk from it instead of running chunk i as its i-th
	// (see Group).
	queue *chunkQueue
	// stopGroup, on a device of a group of several, stops the group's
	// other devices: settleOnPanic calls it first, so that they stop
	// taking chunks while this one drains.
	stopGroup func()
	// issued is how many chunks the device issued.
	issued int
	// copies is how many chunks one copy moves (copiesFor; 0 or 1: one).
	copies int
	// origin is the host time of the spans' origin.
	origin time.Duration
}

// source is one buffer's host side: pinned memory used in place
// (mem, with chunk offsets) or a Go slice staged through slots (data).
type source struct {
	mem  HostMemory
	data []byte
	elem int
}

func (s source) staged() bool { return s.mem == nil }

// validate checks a job against the pipeline's shape.
func (p *Pipeline) validate(job Job) error {
	if job.Kernel == nil {
		return errors.New("pipeline: job has no Kernel")
	}
	if job.N < 0 {
		return fmt.Errorf("pipeline: %d elements: must not be negative", job.N)
	}
	if job.Host < HostAuto || job.Host > HostRegistered {
		return fmt.Errorf("pipeline: unknown host mode %d", int(job.Host))
	}
	check := func(kind string, bufs []Buffer, sizes []int) error {
		if len(bufs) != len(sizes) {
			return fmt.Errorf("pipeline: job has %d %ss, the pipeline was built for %d", len(bufs), kind, len(sizes))
		}
		for i, b := range bufs {
			if b.bad != "" {
				return fmt.Errorf("pipeline: %s %d: %s", kind, i, b.bad)
			}
			if b.Data != nil && b.width > 0 && b.elem != sizes[i] {
				return fmt.Errorf("pipeline: %s %d holds rows of %d bytes (%d values), but the pipeline's Config says %d-byte elements", kind, i, b.elem, b.width, sizes[i])
			}
			if b.Data != nil && b.elem != 0 && b.elem != sizes[i] {
				return fmt.Errorf("pipeline: %s %d is a slice of %d-byte elements, but the pipeline's Config says %d-byte elements", kind, i, b.elem, sizes[i])
			}
			if (b.Data == nil) == (b.Pinned == nil) && job.N > 0 {
				return fmt.Errorf("pipeline: %s %d: set exactly one of Data and Pinned", kind, i)
			}
			need, ok := checkedMul(job.N, sizes[i])
			if !ok {
				return fmt.Errorf("pipeline: %d elements of %d bytes overflow", job.N, sizes[i])
			}
			if have := len(b.bytes()); have < need {
				return fmt.Errorf("pipeline: %s %d holds %d bytes, but %d elements of %d bytes need %d", kind, i, have, job.N, sizes[i], need)
			}
		}
		return nil
	}
	if err := check("input", job.Inputs, p.cfg.Inputs); err != nil {
		return err
	}
	if err := check("output", job.Outputs, p.cfg.Outputs); err != nil {
		return err
	}
	if err := checkKernel(job.Kernel, len(p.cfg.Inputs), len(p.cfg.Outputs), p.cfg.ChunkElems); err != nil {
		return err
	}
	return p.b.Prepare(job.Kernel)
}

// resolve decides the host mode and builds the plan.
func (p *Pipeline) resolve(job Job) (*plan, error) {
	pl := new(plan)
	if err := p.resolveInto(pl, job, new(Report)); err != nil {
		return nil, err
	}
	return pl, nil
}

// resolveInto is resolve into pl, whose source lists it reuses, with rep
// as the plan's report: Run resolves into the pipeline's own plan, so
// that a small job allocates nothing but its report, and RunInto not even
// that (bench/RESULTS.md, "Small jobs without allocations").
func (p *Pipeline) resolveInto(pl *plan, job Job, rep *Report) error {
	mode := job.Host
	if mode == HostAuto {
		mode = p.cfg.Host
	}
	*rep = p.shapeOf(job)
	*pl = plan{job: job, mode: mode, ins: pl.ins[:0], outs: pl.outs[:0], report: rep}
	pl.chunks = (job.N + p.cfg.ChunkElems - 1) / p.cfg.ChunkElems
	pl.report.Chunks = pl.chunks
	allPinned := true
	for _, bufs := range [2][]Buffer{job.Inputs, job.Outputs} {
		for _, b := range bufs {
			allPinned = allPinned && b.Pinned != nil
		}
	}
	if mode == HostPinned && !allPinned {
		return errors.New("pipeline: host mode pinned needs every buffer in pinned memory; use staged or registered for Go slices")
	}
	auto := mode == HostAuto
	if auto {
		mode = p.autoMode(job, allPinned)
	}
	pl.mode = mode
	pl.report.Mode = mode
	mk := func(b Buffer, elem int) (source, error) {
		switch {
		case b.Pinned != nil:
			return source{mem: b.Pinned, elem: elem}, nil
		case mode == HostRegistered:
			mem, took, err := p.register(b.Data[:job.N*elem])
			pl.report.Register += took
			if err != nil && auto && errors.Is(err, ErrRegistered) {
				// Registered by someone else (another pipeline, say):
				// auto mode stages this buffer instead.
				pl.staging = true
				return source{data: b.Data, elem: elem}, nil
			}
			return source{mem: mem, elem: elem}, err
		default:
			pl.staging = true
			return source{data: b.Data, elem: elem}, nil
		}
	}
	for i, b := range job.Inputs {
		s, err := mk(b, p.cfg.Inputs[i])
		if err != nil {
			return err
		}
		pl.ins = append(pl.ins, s)
	}
	for i, b := range job.Outputs {
		s, err := mk(b, p.cfg.Outputs[i])
		if err != nil {
			return err
		}
		pl.outs = append(pl.outs, s)
	}
	if mode == HostRegistered && pl.staging {
		pl.mode, pl.report.Mode = HostStaged, HostStaged // auto fell back
	}
	return nil
}

// forget drops what a plan of Run holds of the job, so that the pipeline
// keeps no caller's memory alive between runs; its lists keep their room.
func (pl *plan) forget() {
	clear(pl.ins)
	clear(pl.outs)
	*pl = plan{ins: pl.ins[:0], outs: pl.outs[:0]}
}

// autoMode picks the host mode for Go slices: registered when they are
// already registered or were seen in an earlier run (so the one-off
// registration cost is likely to pay off), staged otherwise.
func (p *Pipeline) autoMode(job Job, allPinned bool) HostMode {
	mode, keys := p.settledMode(job, allPinned)
	if len(p.seen) > 256 {
		clear(p.seen)
	}
	for _, k := range keys {
		p.seen[k] = true
	}
	return mode
}

// settledMode is what autoMode picks for job now, without marking its
// slices seen, and the keys of its slices. p.mu held, or the group's.
func (p *Pipeline) settledMode(job Job, allPinned bool) (HostMode, []regKey) {
	if allPinned {
		return HostPinned, nil
	}
	reuse := true
	var keys []regKey
	for i, b := range append(append([]Buffer(nil), job.Inputs...), job.Outputs...) {
		if b.Data == nil {
			continue
		}
		elem := 0
		if i < len(job.Inputs) {
			elem = p.cfg.Inputs[i]
		} else {
			elem = p.cfg.Outputs[i-len(job.Inputs)]
		}
		k := keyOf(b.Data[:job.N*elem])
		keys = append(keys, k)
		if _, ok := p.regs[k]; !ok && !p.seen[k] {
			reuse = false
		}
	}
	if reuse {
		return HostRegistered, keys
	}
	return HostStaged, keys
}

// Run processes job and returns when every output is in place. It issues
// each chunk's H2D copy, kernel and D2H copy on their own streams, ordered
// only by events, and waits on the host only to refill a staging slot and
// at the end. When ctx ends it stops issuing, lets work in flight drain,
// and returns ctx.Err(). A failure names its chunk and stage
// (*StageError); the pipeline stays usable unless draining itself failed,
// in which case it closes itself.
func (p *Pipeline) Run(ctx context.Context, job Job) (*Report, error) {
	if err := p.usable("Run"); err != nil {
		return nil, err
	}
	rep := new(Report)
	ok, err := p.run(ctx, job, rep)
	if !ok {
		return nil, err
	}
	return rep, err
}

// RunInto is Run writing its report into rep, which it overwrites: for a
// caller that runs many small jobs and keeps no report, a job of one
// chunk on pinned memory then allocates nothing on a GPU,
// unless the pipeline pins its issuing thread to the GPU's CPUs (see
// GPU). When Run would return no report, rep holds only the job's shape;
// a job of no elements under a cancelled ctx gets its report and
// ctx.Err(), as from Run.
func (p *Pipeline) RunInto(ctx context.Context, job Job, rep *Report) error {
	if err := p.usable("RunInto"); err != nil {
		return err
	}
	if rep == nil {
		return errors.New("pipeline: RunInto: nil *Report")
	}
	ok, err := p.run(ctx, job, rep)
	if !ok {
		*rep = p.shapeOf(job)
	}
	return err
}

// shapeOf is the part of job's report known before it runs.
func (p *Pipeline) shapeOf(job Job) Report {
	return Report{Backend: p.b.Name(), N: job.N, ChunkElems: p.cfg.ChunkElems}
}

// run is Run into rep. It returns whether rep holds the run's report,
// which it does with a nil error, and for a job of no elements with
// ctx.Err() too, as Run returns them.
func (p *Pipeline) run(ctx context.Context, job Job, rep *Report) (bool, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	if err := p.validate(job); err != nil {
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false, p.closedErr()
	}
	start := p.runBegin()
	defer p.runEnd()
	if job.N == 0 {
		*rep = Report{Backend: p.b.Name(), Mode: job.Host, ChunkElems: p.cfg.ChunkElems, Elapsed: p.now() - start}
		return true, ctx.Err()
	}
	// The kernel's parameters and scratch buffers, before anything runs;
	// an upload is not part of the run's time (Report.Upload).
	readyFrom := readyClock(p, job.Kernel)
	upload, err := p.ready(job.Kernel)
	if err != nil {
		return false, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	// The readying is not part of the run's time, and only that: the
	// run's own fixed cost, which a simulator charges as the run begins,
	// stays in.
	start += readyTook(p, job.Kernel, readyFrom)
	pl := &p.runPlan
	if err := p.resolveInto(pl, job, rep); err != nil {
		pl.forget()
		p.evict()
		return false, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	rep.Upload, rep.Notes = upload, notesOf(p.b, job.Kernel)
	defer func() {
		pl.forget()
		if err := p.evict(); err != nil && p.broken == nil {
			p.broken = err
		}
	}()
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if pl.staging {
		if err := p.allocStaging(); err != nil {
			return false, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
		}
	}
	if err := p.execute(ctx, pl); err != nil {
		return false, err
	}
	rep.Elapsed = p.now() - start
	if p.cfg.Timing {
		rep.Origin = pl.origin - start
	}
	return true, nil
}

// closedErr says why a closed pipeline refuses work; p.mu held.
func (p *Pipeline) closedErr() error {
	if p.broken != nil {
		return fmt.Errorf("%w after a failure: %v", ErrClosed, p.broken)
	}
	return ErrClosed
}

// runState coordinates the issuing goroutine with the staging goroutines,
// through its handoff (mu guards everything here).
type runState struct {
	handoff
	err       error // first failure
	staged    int   // chunks whose inputs are in their pinned slots
	h2dIssued int   // chunks whose H2D copies are queued
	d2hIssued int   // chunks whose D2H copies are queued
	unstaged  int   // chunks whose outputs are copied out of their slots
	// chunkOf[i] is the job chunk that the device's i-th chunk is, or -1
	// past the last, when the chunks come from a group's queue.
	chunkOf    []int
	hostSpans  []Span
	hostOrigin time.Duration
	clock      func() time.Duration
	// ctx is a watched run's context, nil otherwise: the goroutines that
	// take chunks look at it themselves (ended), since the watch that
	// stops the run on it runs on a goroutine of its own and, on a busy
	// host, may start only after the rest of the job was issued.
	ctx context.Context
}

// ended reports whether the run has stopped, stopping it first when its
// context has ended: once the caller's cancel has returned, each device of
// the run launches at most the chunk (or the coalesced group of chunks)
// it was issuing.
func (r *runState) ended() bool {
	if r.ctx != nil {
		if err := r.ctx.Err(); err != nil {
			r.fail(err)
			return true
		}
	}
	return r.stopping()
}

func newRunState(p *Pipeline) *runState {
	rs := &runState{clock: p.now}
	rs.init(p.b, 0)
	return rs
}

// runStateFor returns the state of a run of p. A GPU run without a
// cancellation watch reuses the pipeline's own, reset, so that a small
// job allocates none: nothing can reach it once the run returns. A
// watched run gets a new one, since the watch may still be running when
// the run returns, and so does a run on a HostTracker, whose host clocks
// hold on to it. p.mu held (or, for a group's pipeline, the group's mu,
// which orders its runs).
func (p *Pipeline) runStateFor(watched bool) *runState {
	if watched || trackerOf(p.b) != nil {
		return newRunState(p)
	}
	rs := &p.runState
	if rs.clock == nil {
		rs.clock = p.now
	}
	rs.init(p.b, 0)
	rs.err, rs.ctx = nil, nil
	rs.staged, rs.h2dIssued, rs.d2hIssued, rs.unstaged = 0, 0, 0, 0
	rs.chunkOf = rs.chunkOf[:0]
	rs.hostSpans = rs.hostSpans[:0]
	rs.hostOrigin = 0
	return rs
}

func (r *runState) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.stopLocked()
	r.mu.Unlock()
}

func (r *runState) span(c int, st Stage, lane string, t0 time.Duration) {
	end := r.clock()
	r.mu.Lock()
	r.hostSpans = append(r.hostSpans, Span{Chunk: c, Stage: st, Lane: lane, Start: t0 - r.hostOrigin, End: end - r.hostOrigin})
	r.mu.Unlock()
}

// take is the job chunk that the device runs as its i-th, or -1 when there
// is none: chunk i itself, unless the chunks come from a group's queue,
// when the caller takes the queue's next chunk and records it for the
// other goroutines of the run (chunkAt).
func (r *runState) take(pl *plan, i int) int {
	if pl.queue == nil {
		if i < pl.chunks {
			return i
		}
		return -1
	}
	c := pl.queue.take()
	r.mu.Lock()
	r.chunkOf = append(r.chunkOf, c)
	r.mu.Unlock()
	return c
}

// chunkAt is the job chunk that take returned for the device's i-th.
func (r *runState) chunkAt(pl *plan, i int) int {
	if pl.queue == nil {
		if i < pl.chunks {
			return i
		}
		return -1
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.chunkOf[i]
}

// chunkBounds returns chunk c's first element and element count.
func (p *Pipeline) chunkBounds(pl *plan, c int) (off, n int) {
	off = c * p.cfg.ChunkElems
	return off, min(p.cfg.ChunkElems, pl.job.N-off)
}

// execute runs the schedule. The calling goroutine issues; staged runs add
// a stage-in and a stage-out goroutine.
func (p *Pipeline) execute(ctx context.Context, pl *plan) (runErr error) {
	stagedIn, stagedOut := false, false
	for _, s := range pl.ins {
		stagedIn = stagedIn || s.staged()
	}
	for _, s := range pl.outs {
		stagedOut = stagedOut || s.staged()
	}
	// A job of one chunk with nothing staged and nothing timed goes on
	// one stream (executeSingle).
	if pl.chunks == 1 && pl.queue == nil && !stagedIn && !stagedOut && !p.cfg.Timing && !p.skipWAR {
		pl.report.Schedule = ScheduleInStream // one chunk on one stream
		return p.executeSingle(ctx, pl)
	}
	pl.report.Schedule = p.scheduleFor(pl, stagedIn || stagedOut)
	if pl.report.Schedule == ScheduleInStream {
		return p.executeInStream(ctx, pl)
	}
	watch := ctx.Done() != nil // else it is never cancelled while it runs
	rs := p.runStateFor(watch)
	if watch {
		rs.ctx = ctx
		stopWatch := context.AfterFunc(ctx, func() { rs.fail(ctx.Err()) })
		defer stopWatch()
	}

	iss, timers, err := p.beginIssue(pl)
	if err != nil {
		return err
	}
	defer iss.Release()
	if timers != nil {
		rs.hostOrigin = timers.hostOrigin
	}

	if stagedIn {
		rs.spawn("stage-in goroutine", func() { p.stageIn(pl, rs) })
	}
	if stagedOut {
		rs.spawn("stage-out goroutine", func() { p.stageOut(pl, rs) })
	}
	issuing := true
	defer p.settleOnPanic(rs, pl.stopGroup, &issuing)

	var issued int
	var issueErr error
	if pl.copies = p.copiesFor(pl, pl.report.Schedule); pl.copies > 1 {
		issued, issueErr = p.issueGrouped(pl, rs, iss, timers)
	} else {
		issued, issueErr = p.issue(pl, rs, iss, timers, stagedIn, stagedOut)
	}
	issuing = false
	pl.issued = issued
	if issueErr != nil {
		rs.fail(issueErr)
	}
	// Staging must finish every chunk whose D2H was issued (or stop).
	if stagedOut && issueErr == nil && issued > 0 {
		rs.waitFor(&rs.unstaged, issued-1)
	}
	rs.mu.Lock()
	rs.stopLocked()
	rs.mu.Unlock()
	rs.join()

	// Drain: the host waits for the GPU once, at the end.
	if err := p.drain(); err != nil {
		return p.drainFailed(err)
	}
	rs.mu.Lock()
	firstErr := rs.err
	rs.mu.Unlock()
	if firstErr != nil {
		if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(firstErr, ctxErr) {
			return ctxErr
		}
		return firstErr
	}
	if timers != nil {
		spans, err := timers.collect()
		if err != nil {
			return &StageError{Chunk: -1, Stage: StageDrain, Err: err}
		}
		pl.report.Spans = append(spans, rs.hostSpans...)
	}
	return nil
}

// beginIssue takes the issuer of a run of pl and, with Config.Timing, its
// timers, whose origin becomes the plan's; the caller releases the
// issuer.
func (p *Pipeline) beginIssue(pl *plan) (Issuer, *timing, error) {
	iss, err := p.b.Issuer()
	if err != nil {
		return nil, nil, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	if !p.cfg.Timing {
		return iss, nil, nil
	}
	timers, err := p.startTiming(iss, pl.chunks)
	if err != nil {
		iss.Release()
		return nil, nil, &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	pl.origin = timers.hostOrigin
	return iss, timers, nil
}

// executeSingle runs a job of one chunk with nothing staged and nothing
// timed (see execute): one goroutine issues it on one stream and waits for
// that stream, so it needs no run state, no watch and no join, which a
// small job would otherwise pay for (bench/RESULTS.md, "Direct calls,
// and a one-chunk job without run state"). Its host never waits
// before the drain, so a cancellation has nobody to wake; one while the
// job ran is reported after the drain, as a watched run reports it.
func (p *Pipeline) executeSingle(ctx context.Context, pl *plan) error {
	iss, err := singleIssuerOf(p.b)
	if err != nil {
		return &StageError{Chunk: -1, Stage: StageSetup, Err: err}
	}
	defer iss.Release()
	issuing := true
	defer p.settleOnPanic(nil, nil, &issuing)
	pl.issued = 1
	issueErr := p.issueSingle(pl, iss)
	issuing = false
	// Drain even after a failed issue: what was queued must finish before
	// the slots are used again.
	if err := iss.Synchronize(p.comp[0]); err != nil {
		return p.drainFailed(err)
	}
	if issueErr != nil {
		return issueErr
	}
	return ctx.Err()
}

// singleIssuing is a backend with an issuer of its own for a run of one
// chunk: the GPU's, whose GPUOptions.DirectCalls apply to those runs only.
type singleIssuing interface {
	singleIssuer() (Issuer, error)
}

// singleIssuerOf returns b's issuer for a run of one chunk.
func singleIssuerOf(b Backend) (Issuer, error) {
	if s, ok := b.(singleIssuing); ok {
		return s.singleIssuer()
	}
	return b.Issuer()
}

// issueSingle issues a job of one chunk on one stream: its H2D copies,
// its kernel and its D2H copies in stream order, with no events. The
// three-stream schedule (issue) gains nothing on one chunk, and a small
// job's time is its driver calls: this makes one copy per buffer and a
// launch, where issue adds three event records and two waits, and the
// drain then synchronises one stream instead of all of them.
// The run before has drained, so no slot is still in use.
func (p *Pipeline) issueSingle(pl *plan, iss Issuer) error {
	s := p.comp[0]
	off, n := p.chunkBounds(pl, 0)
	for j, src := range pl.ins {
		if err := iss.CopyToDevice(s, p.din[0][j].all, p.din[0][j].off, src.mem, off*src.elem, n*src.elem); err != nil {
			return &StageError{Chunk: 0, Stage: StageH2D, Err: err}
		}
	}
	chunk := &p.chunk
	p.fillChunk(chunk, 0, 0, off, n)
	if err := iss.Launch(s, pl.job.Kernel, *chunk); err != nil {
		return &StageError{Chunk: 0, Stage: StageCompute, Err: err}
	}
	for j, dst := range pl.outs {
		if err := iss.CopyToHost(s, dst.mem, off*dst.elem, p.dout[0][j].all, p.dout[0][j].off, n*dst.elem); err != nil {
			return &StageError{Chunk: 0, Stage: StageD2H, Err: err}
		}
	}
	return nil
}

// drainFailed closes the pipeline after its drain failed with err (the
// device may still use its memory, or the context is broken) and returns
// the run's error.
func (p *Pipeline) drainFailed(err error) error {
	p.broken = err
	p.closed = true
	p.release()
	return &StageError{Chunk: -1, Stage: StageDrain, Err: fmt.Errorf("%w; the pipeline closed itself", err)}
}

// errPanicked stops the goroutines of a run whose issuing goroutine is
// panicking (settleOnPanic); nobody sees it as a run's error.
var errPanicked = errors.New("pipeline: the issuing goroutine panicked")

// settleOnPanic is deferred by each way of issuing a run, which calls
// the caller's code on the issuing goroutine (a kernel's or a step's
// Args). When that code panics, or ends the goroutine with
// runtime.Goexit (a test's t.FailNow) while *issuing is still set, it
// stops the run's goroutines (rs; nil where there are none), waits for
// them, and drains what was queued, closing the pipeline as a failed
// drain does, before the panic or the Goexit goes on: a caller who
// recovers it finds no goroutine left waiting on a handoff that will
// never come, and no copy still writing memory that the caller owns or
// the next run's slots. stopGroup, where not nil, comes first: a
// group's other devices stop taking chunks. The caller clears *issuing
// once the issue has returned, so that a normal return settles nothing.
func (p *Pipeline) settleOnPanic(rs *runState, stopGroup func(), issuing *bool) {
	v := recover()
	if v == nil && !*issuing {
		return
	}
	if stopGroup != nil {
		stopGroup()
	}
	if rs != nil {
		rs.fail(errPanicked)
		rs.join()
	}
	if err := p.drain(); err != nil {
		p.drainFailed(err)
	}
	if v != nil {
		panic(v)
	}
	// A Goexit (recover returns nil for it) goes on by itself.
}

// drain waits for every stream and returns the first failure (a faulted
// context fails every stream with the same error).
func (p *Pipeline) drain() error {
	first := p.h2d.Synchronize()
	if err := p.d2h.Synchronize(); err != nil && first == nil {
		first = err
	}
	for _, s := range p.comp {
		if err := s.Synchronize(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// issue is the schedule. For the device's i-th chunk, job chunk c, in
// slot s = i mod Slots:
//
//	H2D:     wait compDone[s] (i ≥ Slots: the kernel that last read din[s]),
//	         copy inputs, record h2dDone[s]
//	compute: wait h2dDone[s]; wait d2hDone[s] (i ≥ Slots: the D2H that last
//	         read dout[s]); launch; record compDone[s]
//	D2H:     wait compDone[s]; copy outputs; record d2hDone[s]
//
// Each wait is issued before the event is recorded again for chunk i, so it
// names chunk i - Slots. The host never waits here, except for staging and,
// on a device of a group, before taking a chunk from the shared queue. It
// returns how many chunks it issued.
func (p *Pipeline) issue(pl *plan, rs *runState, iss Issuer, tm *timing, stagedIn, stagedOut bool) (int, error) {
	S := p.cfg.Slots
	for i := 0; ; i++ {
		if rs.ended() {
			return i, nil
		}
		if pl.queue == nil && i >= pl.chunks {
			rs.advance(&rs.d2hIssued, i+1) // the stage-out goroutine reads the end
			return i, nil
		}
		s, k := i%S, i%len(p.comp)
		var c int
		if stagedIn && !p.skipStaged {
			// The stage-in goroutine took the chunk and filled the slot.
			if !rs.waitFor(&rs.staged, i) {
				return i, nil
			}
			c = rs.chunkAt(pl, i)
		} else {
			if pl.queue != nil {
				// A device of a group takes a chunk only when it has room
				// for it: once the H2D two chunks back is done (the copy
				// engine still has the last one queued), and the chunk
				// that last used the slot is out. Otherwise the first
				// issuer would take nearly every chunk before any device
				// had run one. The stream waits below hold the chunk until
				// then anyway, so this costs the device nothing but host
				// waits.
				if err := p.roomFor(rs, pl, i); err != nil {
					return i, err
				}
				if rs.ended() { // the host may have waited long for room
					return i, nil
				}
			}
			c = rs.take(pl, i)
		}
		if c < 0 {
			rs.advance(&rs.d2hIssued, i+1)
			return i, nil
		}
		off, n := p.chunkBounds(pl, c)
		at := issueAt{i: i, c: c, s: s, k: k, off: off, n: n}
		if err := p.issueH2D(pl, iss, tm, at); err != nil {
			return i, &StageError{Chunk: c, Stage: StageH2D, Err: err}
		}
		rs.advance(&rs.h2dIssued, i+1)
		if err := p.issueCompute(pl, iss, tm, at); err != nil {
			return i, &StageError{Chunk: c, Stage: StageCompute, Err: err}
		}
		// The D2H into a staging slot waits, on the host, until the
		// stage-out goroutine has emptied it (chunk i - Slots).
		if stagedOut && i >= S && !p.skipUnstaged && !rs.waitFor(&rs.unstaged, i-S) {
			return i, nil
		}
		if err := p.issueD2H(pl, iss, tm, at); err != nil {
			return i, &StageError{Chunk: c, Stage: StageD2H, Err: err}
		}
		rs.advance(&rs.d2hIssued, i+1)
	}
}

// issueAt is where issue is: the device's i-th chunk, job chunk c, its
// slot s and compute stream k, and its elements [off, off+n).
type issueAt struct{ i, c, s, k, off, n int }

// issueH2D issues chunk at's H2D phase: wait compDone[s] (i ≥ Slots: the
// kernel that last read din[s]), copy the inputs, record h2dDone[s].
func (p *Pipeline) issueH2D(pl *plan, iss Issuer, tm *timing, at issueAt) error {
	i, c, s, off, n := at.i, at.c, at.s, at.off, at.n
	S := p.cfg.Slots
	if i >= S && !p.skipWAR {
		if err := iss.Wait(p.h2d, p.compDone[s]); err != nil {
			return err
		}
	}
	if err := tm.mark(iss, p.h2d, c, StageH2D, 0); err != nil {
		return err
	}
	for j, src := range pl.ins {
		var err error
		bytes := n * src.elem
		if src.staged() {
			err = iss.CopyToDevice(p.h2d, p.din[s][j].all, p.din[s][j].off, p.sin[s][j], 0, bytes)
		} else {
			err = iss.CopyToDevice(p.h2d, p.din[s][j].all, p.din[s][j].off, src.mem, off*src.elem, bytes)
		}
		if err != nil {
			return err
		}
	}
	if err := tm.mark(iss, p.h2d, c, StageH2D, 1); err != nil {
		return err
	}
	return iss.Record(p.h2dDone[s], p.h2d)
}

// issueCompute issues chunk at's compute phase on its compute stream:
// wait h2dDone[s]; wait d2hDone[s] (i ≥ Slots: the D2H that last read
// dout[s]); launch; record compDone[s].
func (p *Pipeline) issueCompute(pl *plan, iss Issuer, tm *timing, at issueAt) error {
	i, c, s, off, n := at.i, at.c, at.s, at.off, at.n
	S := p.cfg.Slots
	// The chunk's slices are reused from run to run (Launch may not keep
	// them): a small job allocates none.
	chunk := &p.chunk
	cs := p.comp[at.k]
	if err := iss.Wait(cs, p.h2dDone[s]); err != nil {
		return err
	}
	if i >= S && !p.skipWAR {
		if err := iss.Wait(cs, p.d2hDone[s]); err != nil {
			return err
		}
	}
	if err := tm.mark(iss, cs, c, StageCompute, 0); err != nil {
		return err
	}
	p.fillChunk(chunk, c, s, off, n)
	if err := iss.Launch(cs, pl.job.Kernel, *chunk); err != nil {
		return err
	}
	if err := tm.mark(iss, cs, c, StageCompute, 1); err != nil {
		return err
	}
	return iss.Record(p.compDone[s], cs)
}

// issueD2H issues chunk at's D2H phase: wait compDone[s], copy the
// outputs, record d2hDone[s].
func (p *Pipeline) issueD2H(pl *plan, iss Issuer, tm *timing, at issueAt) error {
	c, s, off, n := at.c, at.s, at.off, at.n
	if err := iss.Wait(p.d2h, p.compDone[s]); err != nil {
		return err
	}
	if err := tm.mark(iss, p.d2h, c, StageD2H, 0); err != nil {
		return err
	}
	for j, dst := range pl.outs {
		var err error
		bytes := n * dst.elem
		if dst.staged() {
			err = iss.CopyToHost(p.d2h, p.sout[s][j], 0, p.dout[s][j].all, p.dout[s][j].off, bytes)
		} else {
			err = iss.CopyToHost(p.d2h, dst.mem, off*dst.elem, p.dout[s][j].all, p.dout[s][j].off, bytes)
		}
		if err != nil {
			return err
		}
	}
	if err := tm.mark(iss, p.d2h, c, StageD2H, 1); err != nil {
		return err
	}
	return iss.Record(p.d2hDone[s], p.d2h)
}

// roomFor waits until the device has room to take its i-th chunk from a
// group's queue (see issue).
func (p *Pipeline) roomFor(rs *runState, pl *plan, i int) error {
	S := p.cfg.Slots
	if i >= 2 {
		if err := p.h2dDone[(i-2)%S].Synchronize(); err != nil {
			return &StageError{Chunk: rs.chunkAt(pl, i-2), Stage: StageH2D, Err: err}
		}
	}
	if i >= S {
		if err := p.d2hDone[i%S].Synchronize(); err != nil {
			return &StageError{Chunk: rs.chunkAt(pl, i-S), Stage: StageD2H, Err: err}
		}
	}
	return nil
}

// fillChunk describes chunk c (off, n) in slot s for the kernel, reusing
// the chunk's slices.
func (p *Pipeline) fillChunk(chunk *Chunk, c, s, off, n int) {
	chunk.Index, chunk.Offset, chunk.N = c, off, n
	chunk.Inputs, chunk.InBytes = chunk.Inputs[:0], chunk.InBytes[:0]
	chunk.Outputs, chunk.OutBytes = chunk.Outputs[:0], chunk.OutBytes[:0]
	for j, d := range p.din[s] {
		chunk.Inputs = append(chunk.Inputs, d.ptr())
		chunk.InBytes = append(chunk.InBytes, n*p.cfg.Inputs[j])
	}
	for j, d := range p.dout[s] {
		chunk.Outputs = append(chunk.Outputs, d.ptr())
		chunk.OutBytes = append(chunk.OutBytes, n*p.cfg.Outputs[j])
	}
	chunk.Params = chunk.Params[:0]
	if p.cur != nil {
		chunk.Params = append(chunk.Params, p.cur.ptrs...)
	}
	chunk.Scratch, chunk.ScratchBytes = chunk.Scratch[:0], chunk.ScratchBytes[:0]
	for j, per := range p.curScratch {
		chunk.Scratch = append(chunk.Scratch, p.scratch[p.scratchSlot(s)][j].Ptr())
		chunk.ScratchBytes = append(chunk.ScratchBytes, n*per)
	}
}

// stageIn copies each chunk's Go-slice inputs into its slot's pinned
// buffers, once the H2D that last read that slot has completed. On a
// device of a group it takes the chunks from the queue, as it is the first
// to need them, and ends the device's run with the queue.
func (p *Pipeline) stageIn(pl *plan, rs *runState) {
	rs.stager()
	S := p.cfg.Slots
	for i := 0; pl.queue != nil || i < pl.chunks; i++ {
		s := i % S
		if i >= S {
			// The H2D of chunk i-S must be queued before its event means it.
			if !rs.waitFor(&rs.h2dIssued, i-S) {
				return
			}
			if err := p.h2dDone[s].Synchronize(); err != nil {
				rs.fail(&StageError{Chunk: rs.chunkAt(pl, i-S), Stage: StageIn, Err: err})
				return
			}
		}
		if rs.ended() {
			return
		}
		c := rs.take(pl, i)
		if c < 0 {
			rs.advance(&rs.staged, i+1) // the issuer reads the end
			return
		}
		rs.stagingChunk()
		t0 := rs.clock()
		off, n := p.chunkBounds(pl, c)
		for j, src := range pl.ins {
			if !src.staged() {
				continue
			}
			if err := p.b.StageIn(p.sin[s][j], 0, src.data[off*src.elem:(off+n)*src.elem]); err != nil {
				rs.fail(&StageError{Chunk: c, Stage: StageIn, Err: err})
				return
			}
		}
		if p.cfg.Timing {
			rs.span(c, StageIn, "stage-in", t0)
		}
		rs.advance(&rs.staged, i+1)
	}
}

// stageOut copies each chunk's outputs from its slot's pinned buffers into
// the Go slices, once its D2H has completed.
func (p *Pipeline) stageOut(pl *plan, rs *runState) {
	rs.stager()
	S := p.cfg.Slots
	for i := 0; ; i++ {
		s := i % S
		if !rs.waitFor(&rs.d2hIssued, i) {
			return
		}
		c := rs.chunkAt(pl, i)
		if c < 0 {
			return
		}
		if err := p.d2hDone[s].Synchronize(); err != nil {
			rs.fail(&StageError{Chunk: c, Stage: StageOut, Err: err})
			return
		}
		rs.stagingChunk()
		t0 := rs.clock()
		off, n := p.chunkBounds(pl, c)
		for j, dst := range pl.outs {
			if !dst.staged() {
				continue
			}
			if err := p.b.StageOut(dst.data[off*dst.elem:(off+n)*dst.elem], p.sout[s][j], 0); err != nil {
				rs.fail(&StageError{Chunk: c, Stage: StageOut, Err: err})
				return
			}
		}
		if p.cfg.Timing {
			rs.span(c, StageOut, "stage-out", t0)
		}
		rs.advance(&rs.unstaged, i+1)
	}
}

package pipeline

import "time"

// hostTracker is implemented by backends that follow each host goroutine
// on a clock of its own: the simulator. The engine tells it about the
// handoffs between its goroutines (a counter that one goroutine advances
// and another waits for, a goroutine started and joined), so that the
// simulator orders their clocks the way the engine really synchronises
// them, and reads time from it. The GPU backend does not implement it;
// there the hooks cost one nil check.
type hostTracker interface {
	// hostNow is the calling goroutine's clock.
	hostNow() time.Duration
	// hostRun makes the caller an active host actor for a whole Run (so
	// that its clock cannot fall behind the simulation's), returns its
	// clock, and charges the fixed cost of a Run; hostRunEnd ends it.
	hostRun() time.Duration
	hostRunEnd()
	// hostPublish snapshots the caller's clock at a handoff; hostJoin
	// orders the caller after such a snapshot.
	hostPublish() hostToken
	hostJoin(t hostToken)
	// hostBlock says that the caller is about to wait for a handoff;
	// hostRelease lets it go, joined to t (nil: the run stopped).
	hostBlock() *actor
	hostRelease(a *actor, t *hostToken)
	// hostFork prepares the clock of a goroutine about to be started; the
	// goroutine calls hostStart first and hostExit last.
	hostFork(name string) *actor
	hostStart(a *actor)
	hostExit() hostToken
	// hostTimeKernels, while on, has the caller's kernels take their time
	// without computing: StageTimes' outputs are never read.
	hostTimeKernels(on bool)
	// hostStager marks the caller as a run's staging goroutine, whose
	// copies take a staged run's own rate (Profile.StagingInRun).
	hostStager()
	// hostStagingChunk charges a staging goroutine its time per chunk
	// besides the copies (Profile.StagingChunkNs).
	hostStagingChunk()
}

func trackerOf(b Backend) hostTracker {
	t, _ := b.(hostTracker)
	return t
}

// epoch is the origin of wall-clock readings.
var epoch = time.Now()

// nowOf is b's time for the calling goroutine: the simulator's virtual
// clock, or the wall clock.
func nowOf(b Backend) time.Duration {
	if t := trackerOf(b); t != nil {
		return t.hostNow()
	}
	return time.Since(epoch)
}

// now is the pipeline's backend time for the calling goroutine.
func (p *Pipeline) now() time.Duration { return nowOf(p.b) }

// rsWaiter is a goroutine blocked in runState.waitFor.
type rsWaiter struct {
	counter *int
	c       int
	a       *actor
}

// publish records, with rs.mu held, that *counter has just reached to,
// and releases the goroutines waiting for it.
func (r *runState) publish(counter *int, to int) {
	if r.hs == nil {
		return
	}
	t := r.hs.hostPublish()
	list := r.toks[counter]
	for len(list) < to {
		list = append(list, t)
	}
	r.toks[counter] = list
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.counter == counter && w.c < to {
			r.hs.hostRelease(w.a, &t)
		} else {
			kept = append(kept, w)
		}
	}
	r.waiters = kept
}

// releaseAll lets every waiter go when the run stops. rs.mu held.
func (r *runState) releaseAll() {
	if r.hs == nil {
		return
	}
	for _, w := range r.waiters {
		r.hs.hostRelease(w.a, nil)
	}
	r.waiters = nil
}

// spawn starts fn on a goroutine of its own, with its own clock on a
// tracking backend, counted in r.exited when it ends.
func (r *runState) spawn(name string, fn func()) {
	r.spawned++
	var a *actor
	if r.hs != nil {
		a = r.hs.hostFork(name)
	}
	go func() {
		if r.hs != nil {
			r.hs.hostStart(a)
		}
		fn()
		r.mu.Lock()
		r.exited++
		r.publish(&r.exited, r.exited)
		r.cond.Broadcast()
		r.mu.Unlock()
		if r.hs != nil {
			r.hs.hostExit()
		}
	}()
}

// join waits for every spawned goroutine to end and orders the caller
// after each of them.
func (r *runState) join() {
	r.mu.Lock()
	if r.exited < r.spawned && r.hs != nil {
		r.waiters = append(r.waiters, rsWaiter{counter: &r.exited, c: r.spawned - 1, a: r.hs.hostBlock()})
	}
	for r.exited < r.spawned {
		r.cond.Wait()
	}
	toks := append([]hostToken(nil), r.toks[&r.exited]...)
	r.mu.Unlock()
	if r.hs != nil {
		for _, t := range toks {
			r.hs.hostJoin(t)
		}
	}
}

// runBegin makes the caller an active host actor for a run on p (Run,
// RunStream), ordered after the previous run on p, and returns the run's
// start; the caller defers runEnd. p.mu held.
func (p *Pipeline) runBegin(t hostTracker) time.Duration {
	t.hostJoin(p.runTok)
	return t.hostRun()
}

// runEnd ends what runBegin began. p.mu held.
func (p *Pipeline) runEnd(t hostTracker) {
	p.runTok = t.hostPublish()
	t.hostRunEnd()
}

// Now returns b's time for the calling goroutine: the simulator's virtual
// clock, or the wall clock on a GPU. Differences of two readings on one
// goroutine are durations on b.
func Now(b Backend) time.Duration { return nowOf(b) }

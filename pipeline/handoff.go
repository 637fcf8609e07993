package pipeline

import (
	"sync"
	"time"
)

// HostTracker is implemented by a backend that follows each host
// goroutine on a clock of its own, as the simulator does (package
// pipeline/sim); the engine then tells it about the goroutines of a run
// and the handoffs between them (a counter that one goroutine advances
// and another waits for, a goroutine started and joined), so that the
// backend orders their clocks the way the engine really synchronises
// them, and reads time from it. It is optional, as http.Flusher is: the
// GPU backend does not implement it, and there each hook costs one nil
// check.
//
// A HostClock is the tracker's own snapshot of a goroutine's clock; the
// engine only stores it and hands it back, and nil stands for a clock
// that orders nothing. A HostGoroutine is the tracker's handle on a host
// goroutine. Every method is called by the goroutine it is about.
type HostTracker interface {
	// HostNow is the calling goroutine's clock.
	HostNow() time.Duration
	// HostRun makes the caller a host goroutine of a run for the whole
	// run (so that its clock cannot fall behind the backend's), charges
	// the fixed cost of a run, and returns the caller's clock before that
	// cost; HostRunEnd ends it.
	HostRun() time.Duration
	HostRunEnd()
	// HostPublish snapshots the caller's clock at a handoff; HostJoin
	// orders the caller after such a snapshot; HostMerge is a clock
	// ordered after both a and b.
	HostPublish() HostClock
	HostJoin(c HostClock)
	HostMerge(a, b HostClock) HostClock
	// HostBlock says that the caller is about to wait for a handoff;
	// HostRelease, called by the goroutine that lets it go, orders it
	// after c (nil: the run stopped, or nothing to order after).
	HostBlock() HostGoroutine
	HostRelease(g HostGoroutine, c HostClock)
	// HostFork, called by a goroutine about to start another, makes the
	// new goroutine's clock at the caller's; the new goroutine calls
	// HostStart first and HostExit last.
	HostFork(name string) HostGoroutine
	HostStart(g HostGoroutine)
	HostExit()
	// HostTimeKernels, while on, has the caller's kernels take their time
	// without computing: StageTimes never reads their outputs.
	HostTimeKernels(on bool)
	// HostStager marks the caller as a run's staging goroutine, whose
	// copies are the staging of a run rather than copies alone.
	HostStager()
	// HostStagingChunk charges a staging goroutine its cost per chunk
	// besides the copies.
	HostStagingChunk()
}

// HostClock is a [HostTracker]'s snapshot of a host goroutine's clock,
// opaque to the engine.
type HostClock any

// HostGoroutine is a [HostTracker]'s handle on a host goroutine, opaque
// to the engine.
type HostGoroutine any

// handoff is how the goroutines of one run hand work to each other: a
// counter that one goroutine advances and another waits for, a flag set
// once, a goroutine started and joined, and a stop that ends every wait.
// Every wait is on a predicate over the owner's state, under mu; cond
// signals every change.
//
// The plain handoff (tr nil) is a mutex and condition variables. The
// tracked one also tells a [HostTracker] backend (the simulator) about
// every handoff: each advance and mark snapshots the caller's clock, each
// wait names the snapshot that ends it (its cause), and each goroutine is
// announced when it starts and ends, so that the backend orders the
// waiter's clock after the goroutine that let it go. The clocks are the
// tracker's: the handoff stores them and hands them back, and merges two
// only through the tracker. This file holds the engine's only calls of a
// HostTracker: the tracked handoff's, and the few that a run makes once
// (its start and end, the clock, StageTimes' timed kernels).
type handoff struct {
	mu      sync.Mutex
	cond    *sync.Cond // on mu: condv
	condv   sync.Cond
	stop    bool
	spawned int // goroutines started
	exited  int // goroutines ended
	tr      *tracking
}

// tracking is a tracked handoff's record of its clocks.
type tracking struct {
	t HostTracker
	// ring is how many recent values of each counter keep their clocks;
	// 0 keeps them all.
	ring    int
	toks    map[*int]*clockRing
	waiters []*waiter
	exit    HostClock // every exited goroutine's last clock
}

// waiter is a goroutine blocked in waitLocked on a tracked handoff.
type waiter struct {
	c        *sync.Cond
	ready    func() bool
	cause    func() HostClock
	g        HostGoroutine
	released bool
}

// clockRing holds the clocks that made a counter reach its values: tok[v%len]
// made it v (or, with a ring of 0, tok[v-1]).
type clockRing struct {
	val []int
	tok []HostClock
}

func (t *clockRing) at(v int) HostClock {
	if t.val == nil {
		if v >= 1 && v <= len(t.tok) {
			return t.tok[v-1]
		}
		return nil
	}
	i := v % len(t.val)
	if v >= 0 && t.val[i] == v {
		return t.tok[i]
	}
	// Older than the ring (a wait never looks back that far): the latest
	// clock is ordered after it when the same goroutine publishes.
	var last HostClock
	best := -1
	for j, x := range t.val {
		if x > best {
			best, last = x, t.tok[j]
		}
	}
	return last
}

// trackerOf is b's HostTracker, or nil.
func trackerOf(b Backend) HostTracker {
	t, _ := b.(HostTracker)
	return t
}

// init readies h for a run on b, reusing what it holds: tracked when b is
// a HostTracker, keeping ring recent values of each counter (0: all).
func (h *handoff) init(b Backend, ring int) {
	if h.cond == nil {
		h.condv.L = &h.mu
		h.cond = &h.condv
	}
	h.stop, h.spawned, h.exited = false, 0, 0
	h.tr = nil
	if t := trackerOf(b); t != nil {
		h.tr = &tracking{t: t, ring: ring, toks: map[*int]*clockRing{}}
	}
}

// tracked reports whether h tells a backend about its handoffs.
func (h *handoff) tracked() bool { return h.tr != nil }

// advanceLocked sets *counter to v and records the caller's clock as what
// made it every value up to v, merged with the clocks in with (those of
// other goroutines whose work it counts). mu held; signal afterwards.
func (h *handoff) advanceLocked(counter *int, v int, with ...HostClock) {
	old := *counter
	*counter = v
	if h.tr != nil && v > old {
		h.tr.record(counter, old, v, h.tr.publish(with...))
	}
}

// advance is advanceLocked and signal, with mu taken.
func (h *handoff) advance(counter *int, v int) {
	h.mu.Lock()
	h.advanceLocked(counter, v)
	h.signal()
	h.mu.Unlock()
}

// clockAt is the clock that made *counter exceed c; nil on a plain
// handoff. mu held.
func (h *handoff) clockAt(counter *int, c int) HostClock {
	if h.tr == nil || c < 0 {
		return nil
	}
	if ring := h.tr.toks[counter]; ring != nil {
		return ring.at(c + 1)
	}
	return nil
}

// stamp is the caller's clock now, merged with the clocks in with; nil on
// a plain handoff. mu held.
func (h *handoff) stamp(with ...HostClock) HostClock {
	if h.tr == nil {
		return nil
	}
	return h.tr.publish(with...)
}

// merge is a clock ordered after both a and b; nil on a plain handoff.
func (h *handoff) merge(a, b HostClock) HostClock {
	if h.tr == nil {
		return nil
	}
	return h.tr.t.HostMerge(a, b)
}

// signal wakes the goroutines waiting on cond and, on a tracked handoff,
// lets every waiter go whose predicate now holds. mu held.
func (h *handoff) signal() {
	h.cond.Broadcast()
	if h.tr != nil {
		h.tr.releaseReady()
	}
}

// stopLocked stops the run: every wait returns false. mu held.
func (h *handoff) stopLocked() {
	h.stop = true
	if h.tr != nil {
		h.tr.releaseAll()
	}
	h.cond.Broadcast()
}

// stopping reports whether the run has stopped.
func (h *handoff) stopping() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.stop
}

// waitLocked waits on c (cond or another on mu) until ready() or the run
// stops, and reports ready(); once ready, the caller is ordered after
// cause(). mu held.
func (h *handoff) waitLocked(c *sync.Cond, ready func() bool, cause func() HostClock) bool {
	if h.tr == nil {
		for !ready() && !h.stop {
			c.Wait()
		}
		return ready()
	}
	return h.tr.wait(c, ready, cause, func() bool { return h.stop })
}

// waitUntil is waitLocked on cond, with mu taken.
func (h *handoff) waitUntil(ready func() bool, cause func() HostClock) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.waitLocked(h.cond, ready, cause)
}

// waitFor blocks until *counter > c or the run stops; false means
// stopped. It allocates nothing on a plain handoff.
func (h *handoff) waitFor(counter *int, c int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.tr == nil {
		for *counter <= c && !h.stop {
			h.cond.Wait()
		}
		return *counter > c
	}
	return h.tr.wait(h.cond, func() bool { return *counter > c },
		func() HostClock { return h.clockAt(counter, c) }, func() bool { return h.stop })
}

// spawn runs fn on a goroutine of its own, announced to a tracking
// backend as a host goroutine with a clock of its own; join waits for
// every one.
func (h *handoff) spawn(name string, fn func()) {
	h.mu.Lock()
	h.spawned++
	h.mu.Unlock()
	// The goroutine keeps its own tr: once it has counted itself out, the
	// run may end and h be made ready for the next (init).
	tr := h.tr
	var g HostGoroutine
	if tr != nil {
		g = tr.t.HostFork(name)
	}
	go func() {
		if tr != nil {
			tr.t.HostStart(g)
		}
		// Deferred, so that a goroutine that fn ends with runtime.Goexit
		// (a kernel's Args calling a test's t.FailNow) still counts out,
		// and join does not wait for it forever.
		defer func() {
			h.mu.Lock()
			if tr != nil {
				tr.exit = tr.t.HostMerge(tr.exit, tr.t.HostPublish())
			}
			h.exited++
			h.signal()
			h.mu.Unlock()
			if tr != nil {
				tr.t.HostExit()
			}
		}()
		fn()
	}()
}

// join waits for every spawned goroutine to end, whether or not the run
// stopped, and orders the caller after each.
func (h *handoff) join() {
	h.mu.Lock()
	defer h.mu.Unlock()
	ready := func() bool { return h.exited == h.spawned }
	if h.tr == nil {
		for !ready() {
			h.cond.Wait()
		}
		return
	}
	h.tr.wait(h.cond, ready, func() HostClock { return h.tr.exit }, func() bool { return false })
}

// now is the calling goroutine's time on b: its clock on a HostTracker,
// or the wall clock.
func nowOf(b Backend) time.Duration {
	if t := trackerOf(b); t != nil {
		return t.HostNow()
	}
	return time.Since(epoch)
}

// epoch is the origin of wall-clock readings.
var epoch = time.Now()

// now is the pipeline's backend time for the calling goroutine.
func (p *Pipeline) now() time.Duration { return nowOf(p.b) }

// Now returns b's time for the calling goroutine: the simulator's virtual
// clock, or the wall clock on a GPU. Differences of two readings on one
// goroutine are durations on b.
func Now(b Backend) time.Duration { return nowOf(b) }

// runBegin makes the caller a host goroutine of a run on p (Run,
// RunStream, a group's runs on its lead) for the whole run, ordered after
// the previous run on p, and returns the run's start; the caller defers
// runEnd. p.mu held (or the group's).
func (p *Pipeline) runBegin() time.Duration {
	t := trackerOf(p.b)
	if t == nil {
		return p.now()
	}
	t.HostJoin(p.runTok)
	return t.HostRun()
}

// runEnd ends what runBegin began.
func (p *Pipeline) runEnd() {
	if t := trackerOf(p.b); t != nil {
		p.runTok = t.HostPublish()
		t.HostRunEnd()
	}
}

// timeKernels has the caller's kernels on b take their time without
// computing while on, on a HostTracker; it reports whether b is one.
func timeKernels(b Backend, on bool) bool {
	t := trackerOf(b)
	if t != nil {
		t.HostTimeKernels(on)
	}
	return t != nil
}

// stager marks the caller as a run's staging goroutine.
func (h *handoff) stager() {
	if h.tr != nil {
		h.tr.t.HostStager()
	}
}

// stagingChunk charges a staging goroutine its time per chunk besides the
// copies.
func (h *handoff) stagingChunk() {
	if h.tr != nil {
		h.tr.t.HostStagingChunk()
	}
}

// publish is the caller's clock merged with the clocks in with.
func (t *tracking) publish(with ...HostClock) HostClock {
	c := t.t.HostPublish()
	for _, w := range with {
		c = t.t.HostMerge(c, w)
	}
	return c
}

// record stores c as the clock that made *counter each value in (old, v].
func (t *tracking) record(counter *int, old, v int, c HostClock) {
	ring := t.toks[counter]
	if ring == nil {
		ring = &clockRing{}
		if t.ring > 0 {
			n := 2*t.ring + 8
			ring.val, ring.tok = make([]int, n), make([]HostClock, n)
			for i := range ring.val {
				ring.val[i] = -1
			}
		}
		t.toks[counter] = ring
	}
	if ring.val == nil {
		for len(ring.tok) < v {
			ring.tok = append(ring.tok, c)
		}
		return
	}
	for x := max(old+1, v-len(ring.val)+1); x <= v; x++ {
		ring.val[x%len(ring.val)], ring.tok[x%len(ring.val)] = x, c
	}
}

// wait blocks the caller, announced to the tracker, until a handoff makes
// ready() true or stopped(); if another goroutine took what it waited for
// (a job) first, it waits again. Once ready, the caller is ordered after
// cause(). The owner's mu held.
func (t *tracking) wait(c *sync.Cond, ready func() bool, cause func() HostClock, stopped func() bool) bool {
	for !ready() && !stopped() {
		w := &waiter{c: c, ready: ready, cause: cause, g: t.t.HostBlock()}
		t.waiters = append(t.waiters, w)
		for !w.released {
			c.Wait()
		}
	}
	ok := ready()
	if ok {
		t.t.HostJoin(cause())
	}
	return ok
}

// releaseReady lets every waiter go whose predicate holds, ordered after
// its cause.
func (t *tracking) releaseReady() {
	kept := t.waiters[:0]
	for _, w := range t.waiters {
		if w.ready() {
			t.t.HostRelease(w.g, w.cause())
			w.released = true
			w.c.Broadcast()
		} else {
			kept = append(kept, w)
		}
	}
	clear(t.waiters[len(kept):])
	t.waiters = kept
}

// releaseAll lets every waiter go: the run stopped.
func (t *tracking) releaseAll() {
	for _, w := range t.waiters {
		t.t.HostRelease(w.g, nil)
		w.released = true
		w.c.Broadcast()
	}
	clear(t.waiters)
	t.waiters = t.waiters[:0]
}

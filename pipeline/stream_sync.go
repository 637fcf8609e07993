package pipeline

import "sync"

// This file is how a streaming run's goroutines wait for each other. Every
// wait is on a predicate over the run's state, under streamRun.mu. On a
// backend that tracks host goroutines (the simulator, see hostsync.go)
// every wait, goroutine start and exit is also announced to it, and each
// wait names the handoff that ended it (cause), so that the simulator's
// clocks and its hazard detector order the waiter after the goroutine
// that made the predicate true. On the GPU backend r.hs is nil and each
// hook costs one nil check.

// streamWaiter is a goroutine blocked in waitLocked on a tracking backend.
type streamWaiter struct {
	c        *sync.Cond
	ready    func() bool
	cause    func() hostToken
	a        *actor
	released bool
}

// tokRing holds the clocks that made a counter reach its recent values:
// tok[v%len] made it v. Waits look back at most about 2·Slots values.
type tokRing struct {
	val []int
	tok []hostToken
}

func (t *tokRing) at(v int) hostToken {
	i := v % len(t.val)
	if v >= 0 && t.val[i] == v {
		return t.tok[i]
	}
	// Older than the ring (a wait never looks back that far): the latest
	// clock is ordered after it when the same goroutine publishes.
	var last hostToken
	best := -1
	for j, x := range t.val {
		if x > best {
			best, last = x, t.tok[j]
		}
	}
	return last
}

// jobQueue is the reads or writes waiting for a worker, in order.
type jobQueue struct {
	cond *sync.Cond // on streamRun.mu
	jobs []ioJob
}

// advanceLocked sets *counter to v and records the caller's clock as what
// made it every value up to v, joined with the clocks in with (those of
// other goroutines whose work it counts). r.mu held; signal afterwards.
func (r *streamRun) advanceLocked(counter *int, v int, with ...hostToken) {
	old := *counter
	*counter = v
	if r.hs == nil || v <= old {
		return
	}
	t := r.hs.hostPublish()
	for _, w := range with {
		t = joinTok(t, w)
	}
	ring := r.toks[counter]
	if ring == nil {
		n := 2*r.ring + 8
		ring = &tokRing{val: make([]int, n), tok: make([]hostToken, n)}
		for i := range ring.val {
			ring.val[i] = -1
		}
		r.toks[counter] = ring
	}
	for x := max(old+1, v-len(ring.val)+1); x <= v; x++ {
		ring.val[x%len(ring.val)], ring.tok[x%len(ring.val)] = x, t
	}
}

// tokAt is the clock that made *counter exceed c. r.mu held.
func (r *streamRun) tokAt(counter *int, c int) hostToken {
	if ring := r.toks[counter]; ring != nil && c >= 0 {
		return ring.at(c + 1)
	}
	return hostToken{}
}

// markLocked records the caller's clock in *tok (a flag just set).
// r.mu held.
func (r *streamRun) markLocked(tok *hostToken, with ...hostToken) {
	if r.hs != nil {
		*tok = r.hs.hostPublish()
		for _, w := range with {
			*tok = joinTok(*tok, w)
		}
	}
}

// doneLocked records, on a tracking backend, that the caller finished a
// read or write of ch: whoever completes ch is ordered after it.
// r.mu held.
func (r *streamRun) doneLocked(ch *chunkIO) {
	if r.hs != nil {
		ch.tok = joinTok(ch.tok, r.hs.hostPublish())
	}
}

// signal wakes the goroutines waiting on r.cond and, on a tracking
// backend, releases every waiter whose predicate now holds. r.mu held.
func (r *streamRun) signal() {
	r.cond.Broadcast()
	r.releaseReady()
}

func (r *streamRun) releaseReady() {
	if r.hs == nil {
		return
	}
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if w.ready() {
			t := w.cause()
			r.hs.hostRelease(w.a, &t)
			w.released = true
			w.c.Broadcast()
		} else {
			kept = append(kept, w)
		}
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
}

// stopLocked stops the run: every wait returns. r.mu held.
func (r *streamRun) stopLocked() {
	r.stop = true
	if r.hs != nil {
		for _, w := range r.waiters {
			r.hs.hostRelease(w.a, nil)
			w.released = true
		}
		clear(r.waiters)
		r.waiters = r.waiters[:0]
	}
	r.cond.Broadcast()
	for _, q := range r.queues {
		q.cond.Broadcast()
	}
}

// waitLocked waits on c until ready() or the run stops, and reports
// ready(); once ready the caller is ordered after cause(). r.mu held.
func (r *streamRun) waitLocked(c *sync.Cond, ready func() bool, cause func() hostToken) bool {
	for !ready() && !r.stop {
		if r.hs == nil {
			c.Wait()
			continue
		}
		// The simulator lets the caller go when a handoff makes ready()
		// true; if another goroutine took what it waited for (a job)
		// first, it waits again.
		w := &streamWaiter{c: c, ready: ready, cause: cause, a: r.hs.hostBlock()}
		r.waiters = append(r.waiters, w)
		for !w.released {
			c.Wait()
		}
	}
	ok := ready()
	if ok && r.hs != nil {
		r.hs.hostJoin(cause())
	}
	return ok
}

// waitUntil is waitLocked on r.cond without r.mu held.
func (r *streamRun) waitUntil(ready func() bool, cause func() hostToken) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waitLocked(r.cond, ready, cause)
}

// push queues jobs for q's workers, each stamped with the caller's clock.
func (r *streamRun) push(q *jobQueue, jobs []ioJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop {
		return
	}
	var t hostToken
	if r.hs != nil {
		t = r.hs.hostPublish()
	}
	for _, jb := range jobs {
		jb.tok = t
		q.jobs = append(q.jobs, jb)
	}
	q.cond.Broadcast()
	r.releaseReady()
}

// pop takes q's next job, waiting for one; false once the run stops.
func (r *streamRun) pop(q *jobQueue) (ioJob, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.waitLocked(q.cond, func() bool { return len(q.jobs) > 0 }, func() hostToken { return q.jobs[0].tok }) {
		return ioJob{}, false
	}
	if r.stop {
		return ioJob{}, false
	}
	jb := q.jobs[0]
	q.jobs[0] = ioJob{}
	q.jobs = q.jobs[1:]
	return jb, true
}

// spawn runs fn on a goroutine of its own, announced to a tracking
// backend; joinAll waits for every one.
func (r *streamRun) spawn(name string, fn func()) {
	r.mu.Lock()
	r.spawned++
	r.mu.Unlock()
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
		if r.hs != nil {
			t := r.hs.hostPublish()
			r.exitTok = hostToken{now: max(r.exitTok.now, t.now), vc: r.exitTok.vc.merge(t.vc)}
		}
		r.exited++
		r.signal()
		r.mu.Unlock()
		if r.hs != nil {
			r.hs.hostExit()
		}
	}()
}

// joinAll waits for every spawned goroutine to end, whether or not the
// run stopped, and orders the caller after each.
func (r *streamRun) joinAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	ready := func() bool { return r.exited == r.spawned }
	cause := func() hostToken { return r.exitTok }
	for !ready() {
		if r.hs == nil {
			r.cond.Wait()
			continue
		}
		w := &streamWaiter{c: r.cond, ready: ready, cause: cause, a: r.hs.hostBlock()}
		r.waiters = append(r.waiters, w)
		for !w.released {
			r.cond.Wait()
		}
	}
	if r.hs != nil {
		r.hs.hostJoin(r.exitTok)
	}
}

// joinTok is a clock ordered after both a and b.
func joinTok(a, b hostToken) hostToken {
	return hostToken{now: max(a.now, b.now), vc: a.vc.clone().merge(b.vc)}
}

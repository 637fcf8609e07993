package pipeline

// This file is how a streaming run's goroutines wait for each other,
// through the run's handoff (handoff.go): every wait is on a predicate
// over the run's state, under streamRun.mu, and on a HostTracker each
// wait names the clock of the handoff that ended it (its cause), so that
// the tracker's clocks and the simulator's hazard detector order the
// waiter after the goroutine that made the predicate true.

import "sync"

// jobQueue is the reads or writes waiting for a worker, in order.
type jobQueue struct {
	cond *sync.Cond // on streamRun.mu
	jobs []ioJob
}

// tokAt is the clock that made *counter exceed c. r.mu held.
func (r *streamRun) tokAt(counter *int, c int) HostClock { return r.clockAt(counter, c) }

// markLocked records the caller's clock in *tok (a flag just set), merged
// with the clocks in with. r.mu held.
func (r *streamRun) markLocked(tok *HostClock, with ...HostClock) {
	if r.tracked() {
		*tok = r.stamp(with...)
	}
}

// doneLocked records, on a HostTracker, that the caller finished a read
// or write of ch: whoever completes ch is ordered after it. r.mu held.
func (r *streamRun) doneLocked(ch *chunkIO) {
	if r.tracked() {
		ch.tok = r.merge(ch.tok, r.stamp())
	}
}

// stopLocked stops the run: every wait returns. r.mu held.
func (r *streamRun) stopLocked() {
	r.handoff.stopLocked()
	for _, q := range r.queues {
		q.cond.Broadcast()
	}
}

// push queues jobs for q's workers, each stamped with the caller's clock.
func (r *streamRun) push(q *jobQueue, jobs []ioJob) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stop {
		return
	}
	t := r.stamp()
	for _, jb := range jobs {
		jb.tok = t
		q.jobs = append(q.jobs, jb)
	}
	q.cond.Broadcast()
	r.signal()
}

// pop takes q's next job, waiting for one; false once the run stops.
func (r *streamRun) pop(q *jobQueue) (ioJob, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.waitLocked(q.cond, func() bool { return len(q.jobs) > 0 }, func() HostClock { return q.jobs[0].tok }) {
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

// joinAll waits for every spawned goroutine to end, whether or not the
// run stopped, and orders the caller after each.
func (r *streamRun) joinAll() { r.join() }

package driver

import "sync"

// hostUses is a stream's record of the host memory that its queued
// asynchronous copies read or write. Each entry keeps the memory's owner
// (a *HostBuffer or *HostRegistration) reachable, and its resource counted
// as in flight, until the host has seen the stream pass the copy: a
// Stream.Synchronize or Stream.Done on the stream, an Event.Synchronize or
// Event.Done on an event recorded on it after the copy, or a
// Context.Synchronize. Until then the memory can be neither collected nor
// freed: its Close waits for the stream.
type hostUses struct {
	mu      sync.Mutex
	seq     uint64 // uses added so far
	entries []hostUse
	head    int // entries[:head] are done and cleared
}

type hostUse struct {
	mem  *resource
	keep any
	seq  uint64
}

// add records a use of mem, whose owner is keep, by a copy just queued.
func (q *hostUses) add(mem *resource, keep any) {
	mem.inflight.Add(1)
	q.mu.Lock()
	q.seq++
	if q.head > 0 && q.head == len(q.entries) {
		q.entries, q.head = q.entries[:0], 0
	}
	q.entries = append(q.entries, hostUse{mem: mem, keep: keep, seq: q.seq})
	q.mu.Unlock()
}

// mark returns the position of the last use added: completing up to it
// covers every copy queued so far.
func (q *hostUses) mark() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.seq
}

// complete lets go of every use up to seq, which the host has seen done.
func (q *hostUses) complete(seq uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.head < len(q.entries) && q.entries[q.head].seq <= seq {
		e := &q.entries[q.head]
		e.mem.inflight.Add(-1)
		*e = hostUse{}
		q.head++
	}
	if q.head == len(q.entries) {
		q.entries, q.head = q.entries[:0], 0
	} else if q.head > 1024 && q.head*2 > len(q.entries) {
		n := copy(q.entries, q.entries[q.head:])
		clear(q.entries[n:])
		q.entries, q.head = q.entries[:n], 0
	}
}

// pending reports whether any use is not yet seen done.
func (q *hostUses) pending() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.head < len(q.entries)
}

// uses reports whether a use of mem is not yet seen done.
func (q *hostUses) uses(mem *resource) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, e := range q.entries[q.head:] {
		if e.mem == mem {
			return true
		}
	}
	return false
}

package sim

import (
	"errors"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// simOp is one operation queued on a stream.
type simOp struct {
	issueAt time.Duration
	issueVC vclock
	wait    *simGen
	// run starts the operation at the stream's clock vc; it calls finish
	// when the operation is over in virtual time.
	run    func(vc vclock, idx int, finish func())
	jitter bool
	done   bool
	vc     vclock
}

type simStream struct {
	sim    *Sim
	idx    int
	vc     vclock
	queue  []*simOp
	busy   bool
	armed  bool // a timer will pump the stream
	last   *simOp
	closed bool
}

func (st *simStream) pending() bool { return st.busy || len(st.queue) > 0 }

func (s *Sim) NewStream() (pipeline.Stream, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("stream"); err != nil {
		return nil, err
	}
	st := &simStream{sim: s}
	st.idx, st.vc = h.allocIdx()
	s.streams = append(s.streams, st)
	h.streams = append(h.streams, st)
	s.live["stream"]++
	return st, nil
}

// enqueue queues op at the issuing actor's time. h.mu held.
func (st *simStream) enqueue(a *actor, op *simOp) error {
	if st.closed {
		return errors.New("sim: stream is closed")
	}
	a.vc = a.vc.tick(a.idx)
	op.issueAt, op.issueVC = a.now, a.vc.clone()
	op.jitter = st.sim.host.jitter > 0
	st.queue = append(st.queue, op)
	st.last = op
	st.pump()
	return nil
}

// pump starts the stream's next operation when it may start. h.mu held.
func (st *simStream) pump() {
	h := st.sim.host
	for !st.busy && len(st.queue) > 0 {
		op := st.queue[0]
		if op.jitter {
			op.jitter = false
			op.issueAt = max(op.issueAt, h.now) + time.Duration(h.rng.Int64N(int64(h.jitter)+1))
		}
		if op.issueAt > h.now {
			if !st.armed {
				st.armed = true
				h.at(op.issueAt, func() { st.armed = false; st.pump() })
			}
			return
		}
		if op.wait != nil && !op.wait.done {
			op.wait.streams = append(op.wait.streams, st)
			return
		}
		st.queue = st.queue[1:]
		st.busy = true
		st.vc = st.vc.merge(op.issueVC)
		if op.wait != nil {
			st.vc = st.vc.merge(op.wait.vc)
		}
		st.vc = st.vc.tick(st.idx)
		vc := st.vc.clone()
		op.run(vc, st.idx, func() {
			op.done, op.vc = true, vc
			st.busy = false
			st.pump()
			if st.closed && !st.pending() {
				st.retire()
			}
		})
	}
}

func (st *simStream) Synchronize() error {
	s := st.sim
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("sync"); err != nil {
		return err
	}
	a := h.self()
	last := st.last
	if last == nil {
		a.now += time.Duration(s.prof.SyncNs)
		return nil
	}
	h.blockUntil(a, time.Duration(s.prof.SyncNs), func() bool { return last.done })
	a.vc = a.vc.merge(last.vc)
	return nil
}

// Close marks the stream closed; work already queued still runs, as with
// cuStreamDestroy.
func (st *simStream) Close() error {
	h := st.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if !st.closed {
		st.closed = true
		st.sim.live["stream"]--
		if !st.pending() {
			st.retire()
		}
	}
	return nil
}

// retire forgets a closed stream with nothing left to run. h.mu held.
func (st *simStream) retire() {
	h := st.sim.host
	drop := func(list []*simStream) []*simStream {
		for i, x := range list {
			if x == st {
				return append(list[:i], list[i+1:]...)
			}
		}
		return list
	}
	h.streams = drop(h.streams)
	st.sim.streams = drop(st.sim.streams)
	h.freeIndex(st.idx, st.vc)
}

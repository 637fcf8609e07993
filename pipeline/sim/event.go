package sim

import (
	"errors"
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// simGen is one recording of an event.
type simGen struct {
	done    bool
	vc      vclock
	at      time.Duration
	streams []*simStream // streams waiting for it
	on      *simStream   // the stream it was recorded on
}

type simEvent struct {
	sim    *Sim
	timing bool
	gen    *simGen
	closed bool
}

func (s *Sim) NewEvent(timing bool) (pipeline.Event, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("event"); err != nil {
		return nil, err
	}
	s.live["event"]++
	return &simEvent{sim: s, timing: timing}, nil
}

func (e *simEvent) Synchronize() error {
	s := e.sim
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("sync"); err != nil {
		return err
	}
	a := h.self()
	g := e.gen
	if g == nil {
		a.now += time.Duration(s.prof.SyncNs)
		return nil
	}
	h.blockUntil(a, time.Duration(s.prof.SyncNs), func() bool { return g.done })
	a.vc = a.vc.merge(g.vc)
	return nil
}

func (e *simEvent) Elapsed(end pipeline.Event) (time.Duration, error) {
	o, ok := end.(*simEvent)
	if !ok || !e.timing || !o.timing {
		return 0, errors.New("sim: Elapsed needs two timing events")
	}
	h := e.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a, b := e.gen, o.gen
	if a == nil || b == nil {
		return 0, errors.New("sim: event not recorded")
	}
	h.blockUntil(h.self(), 0, func() bool { return a.done && b.done })
	return b.at - a.at, nil
}

func (e *simEvent) Close() error {
	h := e.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if !e.closed {
		e.closed = true
		e.sim.live["event"]--
	}
	return nil
}

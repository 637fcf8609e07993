package sim

import "fmt"

// Hazards returns the hazards found so far on the device's host.
func (s *Sim) Hazards() []Hazard {
	if !s.usable() {
		return nil
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Hazard(nil), h.hazards...)
}

// Hazard is a pair of unordered accesses to the same bytes.
type Hazard struct {
	Memory       string
	First, Later string
}

func (h Hazard) String() string {
	return fmt.Sprintf("%s: %s is not ordered with %s", h.Memory, h.Later, h.First)
}

// vclock is a vector clock indexed by actor.
type vclock []uint64

func (v vclock) get(i int) uint64 {
	if i < len(v) {
		return v[i]
	}
	return 0
}

func (v vclock) merge(w vclock) vclock {
	for len(v) < len(w) {
		v = append(v, 0)
	}
	for i, x := range w {
		if x > v[i] {
			v[i] = x
		}
	}
	return v
}

func (v vclock) clone() vclock { return append(vclock(nil), v...) }

// tick advances actor i's own entry.
func (v vclock) tick(i int) vclock {
	for len(v) <= i {
		v = append(v, 0)
	}
	v[i]++
	return v
}

// access is one recorded read or write.
type access struct {
	actor int
	clock uint64
	lo    int
	hi    int
	write bool
	what  string
}

// memSpan is a range of one memory that an operation touches.
type memSpan struct {
	mem    int
	name   string
	lo, hi int
	write  bool
}

// touch records the spans of an operation by clock index actor at vc and
// reports hazards. h.mu held.
func (h *Host) touch(actor int, vc vclock, what string, spans []memSpan) {
	for _, sp := range spans {
		if sp.hi <= sp.lo {
			continue
		}
		list := h.accesses[sp.mem]
		for _, p := range list {
			if p.hi <= sp.lo || sp.hi <= p.lo || !(p.write || sp.write) {
				continue
			}
			if p.actor == actor || vc.get(p.actor) >= p.clock {
				continue // ordered
			}
			h.hazards = append(h.hazards, Hazard{Memory: sp.name, First: p.what, Later: what})
		}
		h.accesses[sp.mem] = append(list, access{actor: actor, clock: vc.get(actor), lo: sp.lo, hi: sp.hi, write: sp.write, what: what})
		h.naccess++
	}
	if h.naccess > max(4096, h.pruneAt) {
		h.prune()
		// What is left is unsettled; wait until it doubles before trying
		// again, so that pruning stays linear overall.
		h.pruneAt = 2 * h.naccess
	}
}

// prune drops accesses that every actor has already synchronised past:
// any later operation is ordered after them. h.mu held.
func (h *Host) prune() {
	var clocks []vclock
	for _, a := range h.all {
		clocks = append(clocks, a.vc)
	}
	for _, st := range h.streams {
		clocks = append(clocks, st.vc)
	}
	settled := func(a access) bool {
		for _, c := range clocks {
			if c.get(a.actor) < a.clock {
				return false
			}
		}
		return true
	}
	h.naccess = 0
	for m, list := range h.accesses {
		kept := list[:0]
		for _, a := range list {
			if !settled(a) {
				kept = append(kept, a)
			}
		}
		if len(kept) == 0 {
			delete(h.accesses, m)
		} else {
			h.accesses[m] = kept
			h.naccess += len(kept)
		}
	}
}

// hostAccess records an access by the calling goroutine. h.mu held.
func (h *Host) hostAccess(a *actor, what string, spans ...memSpan) {
	a.vc = a.vc.tick(a.idx)
	h.touch(a.idx, a.vc, what+" ("+a.name+")", spans)
}

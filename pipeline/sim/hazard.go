package sim

import (
	"fmt"
	"slices"
	"sort"
)

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

// accessList is one memory's recorded accesses, in order of lo (and of
// recording among equal lo), with the length of the longest: the accesses
// that can overlap a span [lo, hi) are those whose lo lies in (lo-longest,
// hi), found by binary search, so that a touch costs what overlaps it, not
// what the memory has seen. (A scan of every access made a simulated run
// of n chunks cost n²: 64K chunks of one element ran for minutes.)
type accessList struct {
	items   []access
	longest int
}

// window is the part of l.items that can overlap [lo, hi).
func (l *accessList) window(lo, hi int) []access {
	from := sort.Search(len(l.items), func(i int) bool { return l.items[i].lo > lo-l.longest })
	to := sort.Search(len(l.items), func(i int) bool { return l.items[i].lo >= hi })
	return l.items[from:max(from, to)]
}

// touch records the spans of an operation by clock index actor at vc and
// reports hazards. An access of the same actor, bytes and kind as an
// earlier one supersedes it: any later access unordered with the earlier
// one is unordered with it too (the actor's clock only grows), so the
// hazard is still found, named by the later operation. That keeps a slot
// that the same streams reuse chunk after chunk at a few accesses while
// nothing can be pruned (the goroutine that called Run is ordered after
// none of them until the run ends). h.mu held.
func (h *Host) touch(actor int, vc vclock, what string, spans []memSpan) {
	for _, sp := range spans {
		if sp.hi <= sp.lo {
			continue
		}
		list := h.accesses[sp.mem]
		if list == nil {
			list = &accessList{}
			h.accesses[sp.mem] = list
		}
		win := list.window(sp.lo, sp.hi)
		same := -1
		for i := range win {
			p := &win[i]
			if p.actor == actor && p.lo == sp.lo && p.hi == sp.hi && p.write == sp.write {
				same = i
			}
			if p.hi <= sp.lo || !(p.write || sp.write) {
				continue
			}
			if p.actor == actor || vc.get(p.actor) >= p.clock {
				continue // ordered
			}
			h.hazards = append(h.hazards, Hazard{Memory: sp.name, First: p.what, Later: what})
		}
		a := access{actor: actor, clock: vc.get(actor), lo: sp.lo, hi: sp.hi, write: sp.write, what: what}
		if same >= 0 {
			win[same] = a
			continue
		}
		at := sort.Search(len(list.items), func(i int) bool { return list.items[i].lo > sp.lo })
		list.items = slices.Insert(list.items, at, a)
		list.longest = max(list.longest, sp.hi-sp.lo)
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
		kept, longest := list.items[:0], 0
		for _, a := range list.items {
			if !settled(a) {
				kept = append(kept, a)
				longest = max(longest, a.hi-a.lo)
			}
		}
		if len(kept) == 0 {
			delete(h.accesses, m)
		} else {
			list.items, list.longest = kept, longest
			h.naccess += len(kept)
		}
	}
}

// hostAccess records an access by the calling goroutine. h.mu held.
func (h *Host) hostAccess(a *actor, what string, spans ...memSpan) {
	a.vc = a.vc.tick(a.idx)
	h.touch(a.idx, a.vc, what+" ("+a.name+")", spans)
}

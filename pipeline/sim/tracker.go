package sim

import (
	"time"

	"github.com/purecuda/overlap/pipeline"
)

// Host returns the host the device belongs to; nil for a nil Sim.
func (s *Sim) Host() *Host {
	if !s.usable() {
		return nil
	}
	return s.host
}

// HostNow returns the calling goroutine's virtual clock.
func (s *Sim) HostNow() time.Duration {
	if !s.usable() {
		return 0
	}
	return s.host.Now()
}

// HostRun activates the caller for a run and charges the profile's fixed
// cost of a run (Profile.RunNs).
func (s *Sim) HostRun() time.Duration {
	if !s.usable() {
		return 0
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	a.active++
	start := a.now
	h.spend(a, time.Duration(s.prof.RunNs))
	return start
}

// HostRunEnd ends what HostRun began.
func (s *Sim) HostRunEnd() {
	if !s.usable() {
		return
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	h.self().active--
	h.advance()
}

// hostToken is a host actor's clock at a handoff: the HostClock of the
// simulator. lag is how much later than now a goroutine other than a
// run's staging goroutines may go after joining it: a staging goroutine's
// handoff carries its profile's issue lag (StagingInRun's IssueLagNs, by
// the size of its last copy), on the GPU host the time its woken issuer
// waits for a CPU. The token carries it, so that the joiner goes that
// late whether it blocked for the handoff or came to it after.
type hostToken struct {
	now time.Duration
	vc  vclock
	lag time.Duration
}

// issuable is when a goroutine other than a staging goroutine may go
// after joining t.
func (t hostToken) issuable() time.Duration { return t.now + t.lag }

// joinedBy is when a goes after joining t.
func (t hostToken) joinedBy(a *actor) time.Duration {
	if a.stager {
		return max(a.now, t.now)
	}
	return max(a.now, t.issuable())
}

// tokenOf is c as a token; nil and foreign clocks order nothing.
func tokenOf(c pipeline.HostClock) hostToken {
	t, _ := c.(hostToken)
	return t
}

// HostPublish snapshots the caller's clock for others to join.
func (s *Sim) HostPublish() pipeline.HostClock {
	if !s.usable() {
		return nil
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	a.vc = a.vc.tick(a.idx)
	t := hostToken{now: a.now, vc: a.vc.clone()}
	if a.stager && a.staged > 0 {
		t.lag = s.prof.stagingIssueLag(a.staged)
	}
	return t
}

// HostMerge is a clock ordered after both a and b.
func (s *Sim) HostMerge(a, b pipeline.HostClock) pipeline.HostClock {
	ta, tb := tokenOf(a), tokenOf(b)
	now := max(ta.now, tb.now)
	return hostToken{now: now, vc: ta.vc.clone().merge(tb.vc), lag: max(ta.issuable(), tb.issuable()) - now}
}

// HostJoin orders the caller after a clock.
func (s *Sim) HostJoin(c pipeline.HostClock) {
	if !s.usable() {
		return
	}
	t := tokenOf(c)
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	a.vc = a.vc.merge(t.vc)
	a.now = t.joinedBy(a)
}

// HostBlock marks the caller as waiting on the engine's own handoff, so
// that the simulation does not wait for its clock; HostRelease ends it.
func (s *Sim) HostBlock() pipeline.HostGoroutine {
	if !s.usable() {
		return nil
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	a.blocked, a.until = true, nil
	h.advance()
	return a
}

// HostRelease lets a blocked actor run again, joined to c, and at the
// simulation's time at least; a staging goroutine's clock lets others go
// its issue lag later (hostToken).
func (s *Sim) HostRelease(g pipeline.HostGoroutine, c pipeline.HostClock) {
	if !s.usable() {
		return
	}
	a, _ := g.(*actor)
	if a == nil {
		return
	}
	t := tokenOf(c)
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a.vc = a.vc.merge(t.vc)
	a.now = t.joinedBy(a)
	if a.blocked && a.until == nil {
		a.blocked = false
		a.now = max(a.now, h.now)
	}
	h.cond.Broadcast()
}

// HostFork prepares the actor of a goroutine about to start, at the
// caller's clock.
func (s *Sim) HostFork(name string) pipeline.HostGoroutine {
	if !s.usable() {
		return nil
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fork(name)
}

// fork makes an active actor at the caller's clock. h.mu held.
func (h *Host) fork(name string) *actor {
	me := h.self()
	a := h.newActor(name)
	me.vc = me.vc.tick(me.idx)
	a.vc = a.vc.merge(me.vc)
	a.now = max(a.now, me.now)
	a.active++
	return a
}

// HostStart binds the calling goroutine to a forked actor.
func (s *Sim) HostStart(g pipeline.HostGoroutine) {
	if !s.usable() {
		return
	}
	a, _ := g.(*actor)
	if a == nil {
		return
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byGoroutine[goid()] = a
}

// HostExit ends the calling goroutine's actor.
func (s *Sim) HostExit() {
	if !s.usable() {
		return
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	h.exit()
	h.advance()
}

// exit ends the calling goroutine's actor and returns its last clock.
// h.mu held.
func (h *Host) exit() hostToken {
	id := goid()
	a := h.byGoroutine[id]
	if a == nil {
		return hostToken{now: h.now}
	}
	delete(h.byGoroutine, id)
	a.vc = a.vc.tick(a.idx)
	a.active--
	t := hostToken{now: a.now, vc: a.vc.clone()}
	h.retire(a)
	return t
}

// HostStager marks the caller as a run's staging goroutine, whose copies
// take a staged run's own rate (Profile.StagingInRun).
func (s *Sim) HostStager() {
	if !s.usable() {
		return
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	h.self().stager = true
}

// HostStagingChunk charges a run's staging goroutine its time per chunk
// besides the copies (Profile.StagingChunkNs).
func (s *Sim) HostStagingChunk() {
	if !s.usable() {
		return
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	h.spend(h.self(), time.Duration(s.prof.StagingChunkNs))
}

// HostTimeKernels has the caller's kernels timed but not computed while on.
func (s *Sim) HostTimeKernels(on bool) {
	if !s.usable() {
		return
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	h.self().timeOnly = on
}

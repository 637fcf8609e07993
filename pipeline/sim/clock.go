package sim

import (
	"container/heap"
	"math"
	"runtime"
	"time"
)

// This file is the simulator's clock: a discrete-event simulation of the
// devices, driven by the host goroutines that use them.
//
// Every host goroutine is an actor with its own virtual clock. A driver
// call costs its issue time on the caller's clock; a copy or kernel is
// queued at that time on its stream and runs, in virtual time, on the
// resources it needs: a copy engine and the host link for copies, the SMs
// for kernels, host memory bandwidth for staging copies. Rates are shared
// between activities that run at once (both copy directions share the
// link; kernels in flight share the SMs).
//
// The simulation may process an event at time t only when no goroutine can
// still issue work that starts before t: t must not pass the clock of any
// active actor that is running. An actor is active while it holds an
// Issuer or is one of the engine's own goroutines, and running unless it
// is blocked in the simulator (a synchronisation, a staging copy) or in a
// wait that the engine announces (pipeline.HostTracker). A blocked actor
// resumes at the virtual time of what it waited for.

// actor is one host goroutine.
type actor struct {
	idx     int // vector clock index
	name    string
	vc      vclock
	now     time.Duration
	active  int  // Issuers held, plus one for an engine goroutine
	blocked bool // in a wait; excluded from the horizon
	// until, when set, is checked after every event while blocked; when
	// it returns true the actor runs again at max(now, event time) + wake.
	until func() bool
	wake  time.Duration
	// timeOnly: its kernels are timed, not computed (StageTimes).
	timeOnly bool
	// stager: a run's staging goroutine (HostStager); staged is the size
	// of its last staging copy.
	stager bool
	staged int
}

// timer is a callback at a virtual time.
type timer struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)   { *h = append(*h, x.(*timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// activity classes.
const (
	actH2D = iota
	actD2H
	actKernel
	actMemcpy
)

// activity is work that progresses at a shared rate: bytes of a copy, or
// nanoseconds of a kernel's work alone on the device.
type activity struct {
	class     int
	dev       *Sim
	remaining float64
	solo      float64 // rate alone: bytes/ns, or 1 for kernel work
	pair      float64 // memcpy: the total rate of two such copies at once
	bytes     int     // memcpy: the copy's size, for its share under DMA
	inRun     float64 // memcpy: its rate in a staged run (Profile.StagingInRun), or 0
	boost     float64 // memcpy with inRun: how much faster alone (Profile.StagingAloneBoost)
	rate      float64
	done      func()
}

// at schedules fn at virtual time t (not before now). h.mu held.
func (h *Host) at(t time.Duration, fn func()) {
	if t < h.now {
		t = h.now
	}
	h.seq++
	heap.Push(&h.timers, &timer{at: t, seq: h.seq, fn: fn})
}

// start adds an activity now. h.mu held.
func (h *Host) start(a *activity) {
	if a.remaining <= 0 {
		h.at(h.now, a.done)
		return
	}
	h.acts = append(h.acts, a)
	h.rates()
}

// rates shares each resource between the activities that use it; staging
// copies also give up host memory bandwidth to DMA copies in flight, or,
// made by a run's staging goroutine with a profile that has StagingInRun,
// run at the rate measured in staged runs.
// h.mu held.
func (h *Host) rates() {
	type dirs struct{ n [2]int }
	perDev := map[*Sim]*dirs{}
	kernels := map[*Sim]int{}
	var mems []*activity
	for _, a := range h.acts {
		switch a.class {
		case actH2D, actD2H:
			d := perDev[a.dev]
			if d == nil {
				d = &dirs{}
				perDev[a.dev] = d
			}
			d.n[a.class]++
		case actKernel:
			kernels[a.dev]++
		case actMemcpy:
			mems = append(mems, a)
		}
	}
	// DMA copies in flight on any device of the host take host memory
	// bandwidth from staging copies (Profile.StagingDMA), by direction.
	var h2d, d2h bool
	for _, d := range perDev {
		h2d = h2d || d.n[actH2D] > 0
		d2h = d2h || d.n[actD2H] > 0
	}
	var linkTotal, soloMem float64
	for _, a := range h.acts {
		switch a.class {
		case actH2D, actD2H:
			d := perDev[a.dev]
			a.rate = a.solo / float64(d.n[a.class])
			if d.n[actH2D] > 0 && d.n[actD2H] > 0 {
				// Both directions at once share the device's link.
				both := a.dev.prof.BothGBps
				sum := a.dev.prof.H2D.GBps + a.dev.prof.D2H.GBps
				if both < sum {
					a.rate *= both / sum
				}
			}
			linkTotal += a.rate
		case actKernel:
			a.rate = 1 / float64(kernels[a.dev])
		case actMemcpy:
			a.rate = a.solo
			soloMem += a.solo
		}
	}
	linkScale := 1.0
	if h.linkGBps > 0 && linkTotal > h.linkGBps {
		linkScale = h.linkGBps / linkTotal
	}
	// Staging copies at once share what two at once achieve in total
	// (the mean of their pair rates), in proportion to their rates alone.
	memScale := 1.0
	if len(mems) > 1 {
		var pair float64
		for _, a := range mems {
			pair += a.pair
		}
		memScale = pair / float64(len(mems)) / soloMem
	}
	for _, a := range h.acts {
		switch a.class {
		case actH2D, actD2H:
			a.rate *= linkScale
		case actMemcpy:
			if a.inRun > 0 {
				// Measured in runs, beside the run's other staging
				// goroutine and its DMA: alone, it runs faster; more than
				// two staging copies at once (a group's devices) share it.
				if len(mems) == 1 {
					a.rate = a.inRun * a.boost
				} else {
					a.rate = a.inRun * min(1, 2/float64(len(mems)))
				}
				continue
			}
			a.rate *= memScale * a.dev.prof.stagingDMA(a.bytes, h2d, d2h)
		}
	}
}

// horizon is the earliest time an active running actor may still issue
// work at. h.mu held.
func (h *Host) horizon() time.Duration {
	hz := time.Duration(math.MaxInt64)
	for _, a := range h.all {
		if a.active > 0 && !a.blocked && a.now < hz {
			hz = a.now
		}
	}
	return hz
}

// advance processes events up to the horizon and wakes the actors whose
// waits are over. h.mu held.
func (h *Host) advance() {
	for {
		hz := h.horizon()
		next := time.Duration(math.MaxInt64)
		if len(h.timers) > 0 {
			next = h.timers[0].at
		}
		var first *activity
		for _, a := range h.acts {
			if a.rate <= 0 {
				continue
			}
			t := h.now + time.Duration(math.Ceil(a.remaining/a.rate))
			if t < next {
				next, first = t, a
			}
		}
		if next == time.Duration(math.MaxInt64) || next > hz {
			break
		}
		// Move every activity to next.
		dt := float64(next - h.now)
		for _, a := range h.acts {
			a.remaining -= a.rate * dt
		}
		h.now = next
		var done []*activity
		kept := h.acts[:0]
		for _, a := range h.acts {
			if a == first || a.remaining <= 1e-6 {
				done = append(done, a)
			} else {
				kept = append(kept, a)
			}
		}
		for i := len(kept); i < len(h.acts); i++ {
			h.acts[i] = nil
		}
		h.acts = kept
		if len(done) > 0 {
			h.rates()
		}
		for _, a := range done {
			a.done()
		}
		for len(h.timers) > 0 && h.timers[0].at <= h.now {
			t := heap.Pop(&h.timers).(*timer)
			t.fn()
		}
		h.wakeActors()
	}
	h.wakeActors()
	h.cond.Broadcast()
}

// wakeActors lets blocked actors whose waits are over run again. h.mu held.
func (h *Host) wakeActors() {
	for _, a := range h.all {
		if a.blocked && a.until != nil && a.until() {
			a.blocked, a.until = false, nil
			a.now = max(a.now, h.now) + a.wake
		}
	}
}

// blockUntil blocks the calling actor until cond holds in virtual time,
// then charges wake. h.mu held; it is released while waiting.
func (h *Host) blockUntil(a *actor, wake time.Duration, cond func() bool) {
	if cond() {
		a.now = max(a.now, h.now) + wake
		return
	}
	a.blocked, a.until, a.wake = true, cond, wake
	h.advance()
	for a.blocked {
		h.cond.Wait()
	}
}

// spend charges d to the actor's clock and lets the simulation catch up.
// h.mu held.
func (h *Host) spend(a *actor, d time.Duration) {
	a.now += d
	h.advance()
}

// goid returns the calling goroutine's id, which the simulator uses to
// tell host actors apart.
func goid() int64 {
	var buf [64]byte
	n := runtime.Stack(buf[:], false)
	var id int64
	for _, c := range buf[len("goroutine "):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + int64(c-'0')
	}
	return id
}

// self returns the calling goroutine's actor, creating it on first use.
// An actor that is not active has no say in the horizon, so its clock may
// lag: it catches up with the simulation when it comes back. h.mu held.
func (h *Host) self() *actor {
	id := goid()
	a := h.byGoroutine[id]
	if a == nil {
		a = h.newActor("")
		a.name = "host goroutine " + itoa(int(id))
		h.byGoroutine[id] = a
	}
	if a.active == 0 && a.now < h.now {
		a.now = h.now
	}
	return a
}

// newActor makes an actor with a vector clock index of its own. h.mu held.
func (h *Host) newActor(name string) *actor {
	idx, vc := h.allocIdx()
	a := &actor{idx: idx, name: name, vc: vc, now: h.now}
	h.all = append(h.all, a)
	return a
}

// allocIdx returns a vector clock index and a clock for its new owner.
// An index whose owner has ended (a closed stream, a finished goroutine)
// is reused once none of its accesses is still recorded: its new owner
// continues the old owner's count, so that nothing it does looks ordered
// before what others have seen. h.mu held.
func (h *Host) allocIdx() (int, vclock) {
	if len(h.freeIdx) > 0 {
		h.prune()
		used := map[int]bool{}
		for _, list := range h.accesses {
			for _, a := range list.items {
				used[a.actor] = true
			}
		}
		for k, idx := range h.freeIdx {
			if !used[idx] {
				h.freeIdx = append(h.freeIdx[:k], h.freeIdx[k+1:]...)
				vc := make(vclock, idx+1)
				vc[idx] = h.idxLast[idx]
				return idx, vc
			}
		}
	}
	idx := h.nclock
	h.nclock++
	return idx, make(vclock, idx+1)
}

// freeIndex retires an index whose owner's last clock is vc. h.mu held.
func (h *Host) freeIndex(idx int, vc vclock) {
	if h.idxLast == nil {
		h.idxLast = map[int]uint64{}
	}
	h.idxLast[idx] = vc.get(idx)
	h.freeIdx = append(h.freeIdx, idx)
}

// retire removes an ended actor. h.mu held.
func (h *Host) retire(a *actor) {
	for i, b := range h.all {
		if b == a {
			h.all = append(h.all[:i], h.all[i+1:]...)
			break
		}
	}
	h.freeIndex(a.idx, a.vc)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

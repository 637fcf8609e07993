package sim

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Host is the host that simulated devices share: its goroutines, each
// an actor with its own virtual clock; the host link that every device's
// copies cross; host memory bandwidth for staging copies; and the hazard
// detector. Make devices on it with [Host.NewDevice].
type Host struct {
	mu   sync.Mutex
	cond *sync.Cond

	rng        *rand.Rand
	jitter     time.Duration
	linkGBps   float64
	timingOnly bool

	now    time.Duration // the simulation has processed every event before now
	seq    uint64
	timers timerHeap
	acts   []*activity

	nclock      int // vector clock indexes given out, to actors and streams
	freeIdx     []int
	idxLast     map[int]uint64
	all         []*actor
	byGoroutine map[int64]*actor
	streams     []*simStream

	nextMem  int
	accesses map[int]*accessList
	naccess  int
	pruneAt  int
	hazards  []Hazard
	// dataMu serialises the byte movement itself, so that a schedule with
	// hazards is reported by the detector rather than racing in Go.
	dataMu sync.Mutex
}

// HostOptions shape a simulated host. The zero value is one host with
// no shared link limit, no jitter, and every byte moved and computed.
type HostOptions struct {
	// Seed makes jitter repeatable.
	Seed uint64
	// Jitter, when positive, delays each device operation by a random
	// virtual time up to Jitter, so that tests explore other schedules.
	Jitter time.Duration
	// LinkGBps bounds every device's copies together (a host whose PCIe
	// root or memory cannot feed all its GPUs at once); 0 means no bound
	// beyond each device's own.
	LinkGBps float64
	// TimingOnly skips moving bytes and running kernels: the schedule,
	// its times and the hazard detector are the same, the data is not.
	// It predicts large jobs quickly; nothing it outputs may be verified.
	TimingOnly bool
}

// NewHost returns a simulated host with no devices.
func NewHost(o HostOptions) *Host {
	h := &Host{
		rng:         rand.New(rand.NewPCG(o.Seed, o.Seed^0x9E3779B97F4A7C15)),
		jitter:      o.Jitter,
		linkGBps:    o.LinkGBps,
		timingOnly:  o.TimingOnly,
		byGoroutine: map[int64]*actor{},
		accesses:    map[int]*accessList{},
	}
	h.cond = sync.NewCond(&h.mu)
	return h
}

// usable reports a Host that NewHost made.
func (h *Host) usable() bool { return h != nil && h.cond != nil }

// Now returns the calling goroutine's virtual clock; 0 for a nil Host.
func (h *Host) Now() time.Duration {
	if !h.usable() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.self().now
}

// Go runs fn on a new goroutine that is a host actor of its own: it
// starts at the caller's virtual time and holds the simulation back, as
// every active actor does, until fn returns. wait blocks until then and
// orders the caller after fn, in virtual time too. Use it to drive
// several devices of one host at once: goroutines started with a plain go
// statement start at whatever virtual time the simulation has reached
// when they first call it. To start several actors at one time, use
// [Host.GoTogether], or fork them from an actor that holds the
// simulation, such as one started with Go: a caller that holds nothing does not hold it between two calls, so
// the first actor may run ahead in virtual time before the second is
// forked (TestSimGoForksTogether).
//
// A nil fn runs nothing; on a nil Host fn runs on a plain goroutine.
func (h *Host) Go(name string, fn func()) (wait func()) {
	if fn == nil {
		return func() {}
	}
	if !h.usable() {
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		return func() { <-done }
	}
	h.mu.Lock()
	a := h.fork(name)
	h.mu.Unlock()
	type handle struct {
		done   bool
		tok    hostToken
		waiter *actor
	}
	hd := &handle{}
	go func() {
		h.mu.Lock()
		h.byGoroutine[goid()] = a
		h.mu.Unlock()
		fn()
		h.mu.Lock()
		defer h.mu.Unlock()
		hd.tok = h.exit()
		hd.done = true
		if w := hd.waiter; w != nil {
			w.vc = w.vc.merge(hd.tok.vc)
			w.now = max(w.now, hd.tok.now)
			w.blocked, w.until = false, nil
		}
		h.advance()
	}()
	return func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		me := h.self()
		if hd.done {
			me.vc = me.vc.merge(hd.tok.vc)
			me.now = max(me.now, hd.tok.now)
			return
		}
		hd.waiter = me
		me.blocked, me.until = true, nil
		h.advance()
		for !hd.done {
			h.cond.Wait()
		}
	}
}

// GoTogether runs fn(0) … fn(n-1) on n goroutines that are host actors
// of their own, all starting at one virtual time, and returns once every
// one has, ordering the caller after them as Go's wait does. They are
// forked by an actor of their own (name), which holds the simulation
// until the last is forked: forked one by one from a goroutine that
// holds nothing, the first could run ahead in virtual time before the
// next existed (TestSimGoForksTogether).
func (h *Host) GoTogether(name string, n int, fn func(i int)) {
	if fn == nil {
		return
	}
	h.Go(name, func() {
		waits := make([]func(), n)
		for i := range n {
			waits[i] = h.Go(fmt.Sprintf("%s %d", name, i), func() { fn(i) })
		}
		for _, wait := range waits {
			wait()
		}
	})()
}

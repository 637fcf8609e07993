package sim

import (
	"errors"
	"sync"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
)

// Sim is a simulated GPU for the pipeline: a [pipeline.Backend] whose streams,
// events and copies have the driver's semantics, whose copies move real
// bytes and whose kernels run their Kernel.CPU stand-in, and whose clock
// is virtual: every operation takes the time that the device's [Profile]
// gives it, on the resources it needs (see Host). Reports, spans and
// stage timings read that clock, so they predict what the profiled GPU
// would do, whatever the speed of the machine that runs the simulation.
//
// It detects hazards. Every copy, kernel and host staging access records
// the byte ranges it reads and writes with a vector clock. Two accesses to
// overlapping bytes, at least one a write, that are not ordered by stream
// order, events, host synchronisation, or the engine's own handoffs
// between goroutines are a hazard. Each host goroutine is its own actor.
type Sim struct {
	host *Host
	prof *Profile
	name string

	engines [3]engine // H2D, D2H copy engines; the SMs
	live    map[string]int
	mems    map[driver.DevicePtr]*simDevice
	faults  []*fault
	// faulted is the device's sticky fault once a kernel's CPU stand-in
	// has panicked (runCPU): every operation after it fails with it, as
	// every call on a CUDA context fails after a kernel's illegal address.
	faulted error
	counts  map[string]int
	regs    []*simHost
	streams []*simStream
	// used is the device memory allocated, which the profile bounds
	// (Profile.DeviceMemoryBytes).
	used int64
}

// engine is one direction's copy engines: how many are busy and the copies
// waiting for one, in order.
type engine struct {
	busy  int
	queue []func()
}

// New returns a simulator of the built-in H200 profile on a host of its
// own. Device operations are delayed at random by up to jitter of virtual
// time, repeatably for a seed; pass 0 for the profile's exact times.
func New(seed uint64, jitter time.Duration) *Sim {
	return NewHost(HostOptions{Seed: seed, Jitter: jitter}).NewDevice(BuiltinProfile())
}

// errNoSim is the error of every call on a nil Sim, or on one that
// neither New nor Host.NewDevice made.
var errNoSim = errors.New("sim: nil or zero *Sim: make one with sim.New or Host.NewDevice")

func (s *Sim) usable() bool { return s != nil && s.host.usable() }

// Name reports "simulator" ("nil simulator" for a nil Sim).
func (s *Sim) Name() string {
	if !s.usable() {
		return "nil simulator"
	}
	return s.name
}

// Profile returns the device's profile; nil for a nil Sim.
func (s *Sim) Profile() *Profile {
	if !s.usable() {
		return nil
	}
	return s.prof.Clone()
}

// Live returns how many objects of each kind are allocated and not closed:
// "stream", "event", "device", "pinned", "registered".
func (s *Sim) Live() map[string]int {
	if !s.usable() {
		return map[string]int{}
	}
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.live {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// Count returns how many operations of a kind ("copy", "launch", "record",
// "wait", "alloc") the device has seen.
func (s *Sim) Count(kind string) int {
	if !s.usable() {
		return 0
	}
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	return s.counts[kind]
}

// fault makes the k-th operation of a kind fail.
type fault struct {
	kind string
	k    int
	err  error
}

// FailAt makes the k-th (from 1) operation of kind fail with err. Kinds:
// "copy", "launch", "record", "wait", "alloc", "stream", "event", and
// "sync" (a host Synchronize of a stream or event).
func (s *Sim) FailAt(kind string, k int, err error) {
	if !s.usable() {
		return
	}
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	s.faults = append(s.faults, &fault{kind: kind, k: k, err: err})
}

// tick counts an operation and returns the device's sticky fault or an
// injected one, if any. h.mu held.
func (s *Sim) tick(kind string) error {
	s.counts[kind]++
	if s.faulted != nil {
		return s.faulted
	}
	for _, f := range s.faults {
		if f.kind == kind && f.k == s.counts[kind] {
			return f.err
		}
	}
	return nil
}

var _ pipeline.HostTracker = (*Sim)(nil)

// SharedHost is the device's host (a *Host), for pipeline.HostSharer:
// a Group's simulated devices must share one. Nil for a nil Sim.
func (s *Sim) SharedHost() any {
	if !s.usable() {
		return nil
	}
	return s.host
}

// GoTogether runs fn(0) … fn(n-1) as host actors of the device's host,
// all starting at the caller's virtual time (Host.GoTogether), and returns
// once every one has: pipeline.GoTogether starts a benchmark's workers
// through it. A nil or zero Sim runs them as plain goroutines.
func (s *Sim) GoTogether(name string, n int, fn func(i int)) {
	if n <= 0 || fn == nil {
		return
	}
	if !s.usable() {
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() { defer wg.Done(); fn(i) }()
		}
		wg.Wait()
		return
	}
	s.host.GoTogether(name, n, fn)
}

// NewDevice adds a device with its own profile to the host; a nil p is
// the built-in profile. A nil Host, or one that NewHost did not
// make, has no devices to add: it returns nil, whose every call fails.
func (h *Host) NewDevice(p *Profile) *Sim {
	if !h.usable() {
		return nil
	}
	if p == nil {
		p = BuiltinProfile()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return &Sim{
		host:   h,
		prof:   p.Clone(),
		name:   "simulator",
		live:   map[string]int{},
		mems:   map[driver.DevicePtr]*simDevice{},
		counts: map[string]int{},
	}
}

var (
	_ pipeline.MemoryReporter = (*Sim)(nil)
	_ pipeline.KernelNoter    = (*Sim)(nil)
	_ pipeline.HostAccessor   = (*Sim)(nil)
	_ pipeline.HostSharer     = (*Sim)(nil)
)

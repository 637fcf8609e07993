package pipeline

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/purecuda/overlap/driver"
)

// SimHost is the host that simulated devices share: its goroutines, each
// an actor with its own virtual clock; the host link that every device's
// copies cross; host memory bandwidth for staging copies; and the hazard
// detector. Make devices on it with [SimHost.NewDevice].
type SimHost struct {
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
	accesses map[int][]access
	naccess  int
	pruneAt  int
	hazards  []Hazard
	// dataMu serialises the byte movement itself, so that a schedule with
	// hazards is reported by the detector rather than racing in Go.
	dataMu sync.Mutex
}

// SimHostOptions shape a simulated host. The zero value is one host with
// no shared link limit, no jitter, and every byte moved and computed.
type SimHostOptions struct {
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

// NewSimHost returns a simulated host with no devices.
func NewSimHost(o SimHostOptions) *SimHost {
	h := &SimHost{
		rng:         rand.New(rand.NewPCG(o.Seed, o.Seed^0x9E3779B97F4A7C15)),
		jitter:      o.Jitter,
		linkGBps:    o.LinkGBps,
		timingOnly:  o.TimingOnly,
		byGoroutine: map[int64]*actor{},
		accesses:    map[int][]access{},
	}
	h.cond = sync.NewCond(&h.mu)
	return h
}

// Sim is a simulated GPU for the pipeline: a [Backend] whose streams,
// events and copies have the driver's semantics, whose copies move real
// bytes and whose kernels run their Kernel.CPU stand-in, and whose clock
// is virtual: every operation takes the time that the device's [Profile]
// gives it, on the resources it needs (see SimHost). Reports, spans and
// stage timings read that clock, so they predict what the profiled GPU
// would do, whatever the speed of the machine that runs the simulation.
//
// It detects hazards. Every copy, kernel and host staging access records
// the byte ranges it reads and writes with a vector clock. Two accesses to
// overlapping bytes, at least one a write, that are not ordered by stream
// order, events, host synchronisation, or the engine's own handoffs
// between goroutines are a hazard. Each host goroutine is its own actor.
type Sim struct {
	host *SimHost
	prof *Profile
	name string

	engines [3]engine // H2D, D2H copy engines; the SMs
	live    map[string]int
	mems    map[driver.DevicePtr]*simDevice
	faults  []*fault
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

// NewSim returns a simulator of the built-in H200 profile on a host of its
// own. Device operations are delayed at random by up to jitter of virtual
// time, repeatably for a seed; pass 0 for the profile's exact times.
func NewSim(seed uint64, jitter time.Duration) *Sim {
	return NewSimHost(SimHostOptions{Seed: seed, Jitter: jitter}).NewDevice(BuiltinProfile())
}

// NewDevice adds a device with its own profile to the host; a nil p is
// the built-in profile. A nil SimHost, or one that NewSimHost did not
// make, has no devices to add: it returns nil, whose every call fails.
func (h *SimHost) NewDevice(p *Profile) *Sim {
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

// errNoSim is the error of every call on a nil Sim, or on one that
// neither NewSim nor SimHost.NewDevice made.
var errNoSim = errors.New("pipeline: sim: nil or zero *Sim: make one with NewSim or SimHost.NewDevice")

func (s *Sim) usable() bool { return s != nil && s.host.usable() }

// usable reports a SimHost that NewSimHost made.
func (h *SimHost) usable() bool { return h != nil && h.cond != nil }

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

// Host returns the host the device belongs to; nil for a nil Sim.
func (s *Sim) Host() *SimHost {
	if !s.usable() {
		return nil
	}
	return s.host
}

// Now returns the calling goroutine's virtual clock; 0 for a nil SimHost.
func (h *SimHost) Now() time.Duration {
	if !h.usable() {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.self().now
}

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

// tick counts an operation and returns an injected fault, if any. h.mu held.
func (s *Sim) tick(kind string) error {
	s.counts[kind]++
	for _, f := range s.faults {
		if f.kind == kind && f.k == s.counts[kind] {
			return f.err
		}
	}
	return nil
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
func (h *SimHost) touch(actor int, vc vclock, what string, spans []memSpan) {
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
func (h *SimHost) prune() {
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
func (h *SimHost) hostAccess(a *actor, what string, spans ...memSpan) {
	a.vc = a.vc.tick(a.idx)
	h.touch(a.idx, a.vc, what+" ("+a.name+")", spans)
}

// --- memory ---

type simDevice struct {
	sim    *Sim
	id     int
	base   driver.DevicePtr
	data   []byte
	size   int
	closed bool
}

func (d *simDevice) Len() int              { return d.size }
func (d *simDevice) Ptr() driver.DevicePtr { return d.base }
func (d *simDevice) name() string          { return fmt.Sprintf("device buffer %d", d.id) }
func (d *simDevice) Close() error {
	s := d.sim
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	if !d.closed {
		d.closed = true
		s.live["device"]--
		s.used -= int64(d.size)
		delete(s.mems, d.base)
	}
	return nil
}

type simHost struct {
	sim    *Sim
	id     int
	kind   string
	data   []byte
	closed bool
}

func (m *simHost) Bytes() []byte {
	if m.closed {
		return nil
	}
	return m.data
}
func (m *simHost) name() string { return fmt.Sprintf("%s host memory %d", m.kind, m.id) }
func (m *simHost) Close() error {
	s := m.sim
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	if !m.closed {
		m.closed = true
		s.live[m.kind]--
		for i, r := range s.regs {
			if r == m {
				s.regs = append(s.regs[:i], s.regs[i+1:]...)
				break
			}
		}
	}
	return nil
}

func (s *Sim) AllocDevice(n int) (DeviceMem, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	if n <= 0 {
		return nil, fmt.Errorf("pipeline: sim: device allocation of %d bytes", n)
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	if mem := s.prof.deviceMemory(); int64(n) > mem-s.used {
		return nil, fmt.Errorf("pipeline: sim: device allocation of %s with %s of the device's %s in use: %w",
			sizeString(int64(n)), sizeString(s.used), sizeString(mem), driver.ErrOutOfMemory)
	}
	if h.nextMem+1 >= simMaxID {
		return nil, fmt.Errorf("pipeline: sim: more than %d allocations on one simulated host", simMaxID-1)
	}
	h.nextMem++
	d := &simDevice{sim: s, id: h.nextMem, base: simAddr(h.nextMem), size: n}
	if !h.timingOnly {
		d.data = make([]byte, n)
	}
	s.mems[d.base] = d
	s.live["device"]++
	s.used += int64(n)
	return d, nil
}

// Device memory lies at simBase + id·simSpacing for the buffer of memory
// id (SimHost.nextMem), so that an address tells its buffer: simSpacing
// is more than any device's memory, and ids stay below simMaxID.
const (
	simBase    = 0x7f00_0000_0000
	simSpacing = 1 << 40
	simMaxID   = (1<<64 - simBase) / simSpacing
)

func simAddr(id int) driver.DevicePtr { return driver.DevicePtr(simBase + uint64(id)*simSpacing) }

// FreeMemory is the profile's device memory less what is allocated.
func (s *Sim) FreeMemory() (free, total int64, err error) {
	if !s.usable() {
		return 0, 0, errNoSim
	}
	s.host.mu.Lock()
	defer s.host.mu.Unlock()
	total = s.prof.deviceMemory()
	return total - s.used, total, nil
}

func (s *Sim) AllocPinned(n int) (PinnedMem, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	if n <= 0 {
		return nil, fmt.Errorf("pipeline: sim: pinned allocation of %d bytes", n)
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	h.nextMem++
	s.live["pinned"]++
	return &simHost{sim: s, id: h.nextMem, kind: "pinned", data: make([]byte, n)}, nil
}

// Register stands in for page-locking: the memory is used in place, and
// the caller's clock pays the profile's registration cost.
func (s *Sim) Register(mem []byte) (PinnedMem, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	if len(mem) == 0 {
		return nil, errors.New("pipeline: sim: registering empty memory")
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	// Like the driver, refuse to register memory twice.
	lo := uintptr(unsafe.Pointer(&mem[0]))
	for _, r := range s.regs {
		if !r.closed && lo < uintptr(unsafe.Pointer(&r.data[0]))+uintptr(len(r.data)) && uintptr(unsafe.Pointer(&r.data[0])) < lo+uintptr(len(mem)) {
			return nil, ErrRegistered
		}
	}
	h.spend(h.self(), time.Duration(s.prof.RegisterMsPerGiB*float64(time.Millisecond)*float64(len(mem))/(1<<30)))
	h.nextMem++
	s.live["registered"]++
	m := &simHost{sim: s, id: h.nextMem, kind: "registered", data: mem}
	s.regs = append(s.regs, m)
	return m, nil
}

func simHostOf(m HostMemory) (*simHost, error) {
	sh, ok := m.(*simHost)
	if !ok || sh.closed {
		return nil, fmt.Errorf("pipeline: sim: host memory %T is not live simulator memory", m)
	}
	return sh, nil
}

func simDevOf(d DeviceMem) (*simDevice, error) {
	sd, ok := d.(*simDevice)
	if !ok || sd.closed {
		return nil, fmt.Errorf("pipeline: sim: device memory %T is not live simulator memory", d)
	}
	return sd, nil
}

func (s *Sim) StageIn(dst HostMemory, dstOff int, src []byte) error {
	if !s.usable() {
		return errNoSim
	}
	m, err := simHostOf(dst)
	if err != nil {
		return err
	}
	return s.hostCopy("host stage-in", m.id, m.name(), m.data, dstOff, len(src), true, func(mem []byte) { copy(mem, src) })
}

func (s *Sim) StageOut(dst []byte, src HostMemory, srcOff int) error {
	if !s.usable() {
		return errNoSim
	}
	m, err := simHostOf(src)
	if err != nil {
		return err
	}
	return s.hostCopy("host stage-out", m.id, m.name(), m.data, srcOff, len(dst), false, func(mem []byte) { copy(dst, mem) })
}

// hostCopy is a staging copy by the calling goroutine: it records the
// access, moves the bytes, and takes the virtual time of n bytes at the
// profile's staging rate, shared with other staging copies at the same
// time; by a run's staging goroutine, at the profile's in-run rate where
// it has one.
func (s *Sim) hostCopy(what string, id int, name string, data []byte, off, n int, write bool, do func(mem []byte)) error {
	if off < 0 || n < 0 || n > len(data)-off {
		return fmt.Errorf("pipeline: sim: %s of %d bytes at %d does not fit %d", what, n, off, len(data))
	}
	h := s.host
	h.mu.Lock()
	a := h.self()
	h.hostAccess(a, what, memSpan{mem: id, name: name, lo: off, hi: off + n, write: write})
	h.mu.Unlock()
	if !h.timingOnly {
		h.dataMu.Lock()
		do(data[off : off+n])
		h.dataMu.Unlock()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	solo, pair := s.prof.stagingRate(n)
	finished := false
	act := &activity{class: actMemcpy, dev: s, remaining: float64(n), solo: solo, pair: pair, bytes: n, done: func() { finished = true }}
	if a.stager {
		act.inRun, act.boost = s.prof.stagingInRun(n, write), s.prof.StagingAloneBoost(n)
	}
	h.at(a.now, func() { h.start(act) })
	h.blockUntil(a, 0, func() bool { return finished })
	return nil
}

func (s *Sim) CopyToDeviceSync(dst DeviceMem, off int, src []byte) error {
	if !s.usable() {
		return errNoSim
	}
	d, err := simDevOf(dst)
	if err != nil {
		return err
	}
	return s.syncCopy("synchronous copy to device", d, off, len(src), true, func(mem []byte) { copy(mem, src) })
}

func (s *Sim) CopyToHostSync(dst []byte, src DeviceMem, off int) error {
	if !s.usable() {
		return errNoSim
	}
	d, err := simDevOf(src)
	if err != nil {
		return err
	}
	return s.syncCopy("synchronous copy to host", d, off, len(dst), false, func(mem []byte) { copy(dst, mem) })
}

// syncCopy is a blocking copy from or to pageable memory: like the
// driver's, it waits for every stream first, then moves n bytes at the
// profile's pageable rate through a copy engine.
func (s *Sim) syncCopy(what string, d *simDevice, off, n int, toDevice bool, do func(mem []byte)) error {
	if off < 0 || n < 0 || n > d.size-off {
		return fmt.Errorf("pipeline: sim: %s of %d bytes at %d does not fit %d", what, n, off, d.size)
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	// Wait for every stream of the device, as the legacy default stream does.
	var lasts []*simOp
	for _, st := range s.streams {
		if st.last != nil {
			lasts = append(lasts, st.last)
		}
	}
	h.blockUntil(a, 0, func() bool {
		for _, op := range lasts {
			if !op.done {
				return false
			}
		}
		return true
	})
	for _, op := range lasts {
		a.vc = a.vc.merge(op.vc)
	}
	h.hostAccess(a, what, memSpan{mem: d.id, name: d.name(), lo: off, hi: off + n, write: toDevice})
	if !h.timingOnly {
		h.dataMu.Lock()
		do(d.data[off : off+n])
		h.dataMu.Unlock()
	}
	dir, rate := actD2H, s.prof.PageableD2HGBps
	if toDevice {
		dir, rate = actH2D, s.prof.PageableH2DGBps
	}
	finished := false
	h.at(a.now, func() {
		s.acquire(dir, func() {
			h.start(&activity{class: dir, dev: s, remaining: float64(n), solo: rate, done: func() {
				s.release(dir)
				finished = true
			}})
		})
	})
	h.blockUntil(a, time.Duration(s.prof.SyncNs), func() bool { return finished })
	return nil
}

// acquire runs fn when a copy engine of direction dir is free. h.mu held.
func (s *Sim) acquire(dir int, fn func()) {
	e := &s.engines[dir]
	capacity := s.prof.CopyEngines
	if dir == actKernel {
		capacity = 1
	}
	if e.busy < capacity {
		e.busy++
		fn()
		return
	}
	e.queue = append(e.queue, fn)
}

// release frees a copy engine and starts the next copy waiting. h.mu held.
func (s *Sim) release(dir int) {
	e := &s.engines[dir]
	if len(e.queue) > 0 {
		fn := e.queue[0]
		e.queue = e.queue[1:]
		fn()
		return
	}
	e.busy--
}

// --- streams and events ---

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

func (s *Sim) NewStream() (Stream, error) {
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
		return errors.New("pipeline: sim: stream is closed")
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

func (s *Sim) NewEvent(timing bool) (Event, error) {
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

func (e *simEvent) Elapsed(end Event) (time.Duration, error) {
	o, ok := end.(*simEvent)
	if !ok || !e.timing || !o.timing {
		return 0, errors.New("pipeline: sim: Elapsed needs two timing events")
	}
	h := e.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a, b := e.gen, o.gen
	if a == nil || b == nil {
		return 0, errors.New("pipeline: sim: event not recorded")
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

// --- the issuer ---

type simIssuer struct {
	sim      *Sim
	a        *actor
	released bool
	// args holds each launch's arguments, built to be checked.
	args driver.Args
}

// Issuer makes the calling goroutine an active actor until Release: the
// simulation does not run past its clock while it may still issue.
func (s *Sim) Issuer() (Issuer, error) {
	if !s.usable() {
		return nil, errNoSim
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	a.active++
	return &simIssuer{sim: s, a: a}, nil
}

// Synchronize is s.Synchronize: the simulator has no thread to bind.
func (i *simIssuer) Synchronize(s Stream) error {
	ss, err := i.stream(s)
	if err != nil {
		return err
	}
	return ss.Synchronize()
}

func (i *simIssuer) Release() {
	h := i.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if !i.released {
		i.released = true
		i.a.active--
		h.advance()
	}
}

func (i *simIssuer) stream(st Stream) (*simStream, error) {
	ss, ok := st.(*simStream)
	if !ok || ss.sim != i.sim {
		return nil, fmt.Errorf("pipeline: sim: stream %T is not a stream of this simulated device", st)
	}
	return ss, nil
}

// issue charges the call's host cost on stream st and injects faults.
// h.mu held.
func (i *simIssuer) issue(kind string, st *simStream) error {
	return i.issueAs(kind, kind, st, false)
}

// issueAs is issue for a call that the profile prices as cost, on stream
// st (busy when it has unfinished work), for a wait whose event is still
// pending when pending. h.mu held.
func (i *simIssuer) issueAs(kind, cost string, st *simStream, pending bool) error {
	s := i.sim
	if err := s.tick(kind); err != nil {
		return err
	}
	busy := st != nil && st.pending()
	i.sim.host.spend(i.a, s.prof.issueCost(cost, busy, pending))
	return nil
}

func (i *simIssuer) CopyToDevice(st Stream, dst DeviceMem, dstOff int, src HostMemory, srcOff, n int) error {
	return i.copy(st, true, dst, dstOff, src, srcOff, n)
}

func (i *simIssuer) CopyToHost(st Stream, dst HostMemory, dstOff int, src DeviceMem, srcOff, n int) error {
	return i.copy(st, false, src, srcOff, dst, dstOff, n)
}

// copy queues n bytes between device memory dev at devOff and host memory
// host at hostOff, towards the device when toDevice.
func (i *simIssuer) copy(st Stream, toDevice bool, dev DeviceMem, devOff int, host HostMemory, hostOff, n int) error {
	ss, err := i.stream(st)
	if err != nil {
		return err
	}
	d, err := simDevOf(dev)
	if err != nil {
		return err
	}
	m, err := simHostOf(host)
	if err != nil {
		return err
	}
	if n < 0 || devOff < 0 || hostOff < 0 || n > d.size-devOff || n > len(m.data)-hostOff {
		return fmt.Errorf("pipeline: sim: copy of %d bytes does not fit", n)
	}
	s := i.sim
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	costKind := "copy"
	if m.kind == "registered" {
		costKind = "copy_registered"
	}
	if err := i.issueAs("copy", costKind, ss, false); err != nil {
		return err
	}
	dir, cost := actD2H, s.prof.copyCost(toDevice, m.kind == "registered")
	what := fmt.Sprintf("D2H copy on stream %d", ss.idx)
	if toDevice {
		dir = actH2D
		what = fmt.Sprintf("H2D copy on stream %d", ss.idx)
	}
	hostSpan := memSpan{mem: m.id, name: m.name(), lo: hostOff, hi: hostOff + n, write: !toDevice}
	devSpan := memSpan{mem: d.id, name: d.name(), lo: devOff, hi: devOff + n, write: toDevice}
	return ss.enqueue(i.a, &simOp{run: func(vc vclock, idx int, finish func()) {
		s.acquire(dir, func() {
			h.touch(idx, vc, what, []memSpan{hostSpan, devSpan})
			if !h.timingOnly {
				h.dataMu.Lock()
				if toDevice {
					copy(d.data[devOff:devOff+n], m.data[hostOff:hostOff+n])
				} else {
					copy(m.data[hostOff:hostOff+n], d.data[devOff:devOff+n])
				}
				h.dataMu.Unlock()
			}
			// A copy that starts while the other direction copies pays
			// the profile's BothFixedNs more (Profile.BothFixedNs).
			fixed := cost.FixedNs
			if s.engines[1-dir].busy > 0 {
				fixed += s.prof.BothFixedNs
			}
			h.at(h.now+time.Duration(fixed), func() {
				h.start(&activity{class: dir, dev: s, remaining: float64(n), solo: cost.GBps, done: func() {
					s.release(dir)
					finish()
				}})
			})
		})
	}})
}

// Prepare refuses a kernel without a CPU stand-in (for each of its steps,
// when it has Steps) before any work is issued.
func (s *Sim) Prepare(k *Kernel) error {
	switch {
	case !s.usable():
		return errNoSim
	case k == nil:
		return errors.New("pipeline: sim: nil *Kernel")
	}
	for i := range k.Steps {
		if k.Steps[i].CPU == nil {
			return fmt.Errorf("pipeline: sim: %s has no CPU stand-in, so the simulator cannot run it", stepLabel(k, i))
		}
	}
	if len(k.Steps) == 0 && k.CPU == nil {
		return fmt.Errorf("pipeline: sim: kernel %q has no CPU stand-in, so the simulator cannot run it", k.Name)
	}
	return nil
}

// KernelNotes says which of k's launches the profile has no cost for
// (Report.Notes), once each.
func (s *Sim) KernelNotes(k *Kernel) []string {
	if !s.usable() || k == nil {
		return nil
	}
	var notes []string
	seen := map[string]bool{}
	for _, st := range simSteps(k) {
		if _, ok := s.prof.Kernels[st.Name]; ok || seen[st.Name] || len(s.prof.Kernels) == 0 {
			continue
		}
		seen[st.Name] = true
		notes = append(notes, s.prof.fallbackNote(st.Name))
	}
	return notes
}

// simStep is one launch of a kernel as the simulator runs it.
type simStep struct {
	Step
	label string // for errors and hazards: "kernel mlp", "kernel mlp, step 0 (layer0)"
	iters int
}

// simSteps returns k's launches: its Steps, or for a kernel without steps
// one launch of its own fields, which reads every input, parameter and
// scratch buffer and writes every output and scratch buffer.
func simSteps(k *Kernel) []simStep {
	if len(k.Steps) > 0 {
		out := make([]simStep, len(k.Steps))
		for i, st := range k.Steps {
			out[i] = simStep{Step: st, label: stepLabel(k, i)}
		}
		return out
	}
	return []simStep{{Step: Step{Name: k.Name, Args: k.Args, CPU: k.CPU}, label: "kernel " + k.Name, iters: k.Iters}}
}

// allRefs names every buffer of c of the kinds given, for a kernel
// without steps.
func allRefs(c Chunk, kinds ...RefKind) []Ref {
	var refs []Ref
	for _, kind := range kinds {
		for j := range chunkPtrs(c, kind) {
			refs = append(refs, Ref{Kind: kind, Index: j})
		}
	}
	return refs
}

// chunkPtrs and chunkBytes are c's addresses and byte counts of a kind of
// buffer; a parameter's bytes are its whole buffer's (-1).
func chunkPtrs(c Chunk, kind RefKind) []driver.DevicePtr {
	switch kind {
	case RefInput:
		return c.Inputs
	case RefOutput:
		return c.Outputs
	case RefParam:
		return c.Params
	}
	return c.Scratch
}

func chunkBytes(c Chunk, kind RefKind, j int) int {
	switch kind {
	case RefInput:
		return c.InBytes[j]
	case RefOutput:
		return c.OutBytes[j]
	case RefScratch:
		return c.ScratchBytes[j]
	}
	return -1
}

// Launch queues each of k's launches on st in order: each step's CPU
// stand-in, with its Reads and Writes recorded for the hazard detector,
// on the profile's cost of the step's name. It builds every launch's
// arguments (Step.Args, Kernel.Args) and refuses a device address among
// them that is not a live buffer of this device named by the launch's
// Reads and Writes (for a kernel without steps, any of the chunk's
// buffers).
func (i *simIssuer) Launch(st Stream, k *Kernel, c Chunk) error {
	ss, err := i.stream(st)
	if err != nil {
		return err
	}
	if len(k.Steps) == 0 && k.CPU == nil {
		return fmt.Errorf("sim: kernel %q has no CPU stand-in", k.Name)
	}
	// The caller may reuse c's slices once Launch returns.
	c.Inputs, c.Outputs = append([]driver.DevicePtr(nil), c.Inputs...), append([]driver.DevicePtr(nil), c.Outputs...)
	c.Params, c.Scratch = append([]driver.DevicePtr(nil), c.Params...), append([]driver.DevicePtr(nil), c.Scratch...)
	c.InBytes, c.OutBytes = append([]int(nil), c.InBytes...), append([]int(nil), c.OutBytes...)
	c.ScratchBytes = append([]int(nil), c.ScratchBytes...)
	for _, step := range simSteps(k) {
		if len(k.Steps) == 0 {
			step.Reads = allRefs(c, RefInput, RefParam, RefScratch)
			step.Writes = allRefs(c, RefOutput, RefScratch)
		}
		if err := i.launchStep(ss, k, step, c); err != nil {
			return err
		}
	}
	return nil
}

// launchStep queues one launch.
func (i *simIssuer) launchStep(ss *simStream, k *Kernel, step simStep, c Chunk) error {
	s := i.sim
	if step.CPU == nil {
		return fmt.Errorf("sim: %s has no CPU stand-in", step.label)
	}
	fixed, work, _, err := s.prof.launchCost(step.Name, step.iters, step.FlopsPerElem, c.N)
	if err != nil {
		return err
	}
	if step.Args != nil {
		i.args.Reset()
		step.Args(&i.args, c)
		if err := i.args.Err(); err != nil {
			return fmt.Errorf("pipeline: sim: %s: %w", step.label, err)
		}
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	// Each buffer the launch names: its device memory, its bytes in the
	// chunk, and its place in the CPU's view.
	type named struct {
		d     *simDevice
		ref   Ref
		bytes int
		write bool
		name  string
	}
	var bufs []named
	ids := map[int]bool{}
	for w, list := range [2][]Ref{step.Reads, step.Writes} {
		for _, r := range list {
			ptrs := chunkPtrs(c, r.Kind)
			if r.Index < 0 || r.Index >= len(ptrs) {
				return fmt.Errorf("pipeline: sim: %s names %s %d, but the chunk has %d", step.label, r.Kind, r.Index, len(ptrs))
			}
			d := s.mems[ptrs[r.Index]]
			if d == nil {
				return fmt.Errorf("pipeline: sim: %s: its %s %d is not a live device buffer", step.label, r.Kind, r.Index)
			}
			n := chunkBytes(c, r.Kind, r.Index)
			if n < 0 {
				n = d.size
			}
			if n > d.size {
				return fmt.Errorf("pipeline: sim: %s: its %s %d of %d bytes is larger than its buffer of %d", step.label, r.Kind, r.Index, n, d.size)
			}
			bufs = append(bufs, named{d: d, ref: r, bytes: n, write: w == 1, name: simBufName(k, r, d)})
			ids[d.id] = true
		}
	}
	if err := s.checkArgs(&i.args, step, ids); err != nil {
		return err
	}
	if err := i.issue("launch", ss); err != nil {
		return err
	}
	what := fmt.Sprintf("%s (chunk %d) on stream %d", step.label, c.Index, ss.idx)
	compute := !h.timingOnly && !i.a.timeOnly
	return ss.enqueue(i.a, &simOp{run: func(vc vclock, idx int, finish func()) {
		var spans []memSpan
		// The CPU sees the buffers the launch names, and nil for the rest.
		hc := HostChunk{Index: c.Index, Offset: c.Offset, N: c.N,
			Inputs: make([][]byte, len(c.Inputs)), Outputs: make([][]byte, len(c.Outputs))}
		if len(c.Params) > 0 {
			hc.Params = make([][]byte, len(c.Params))
		}
		if len(c.Scratch) > 0 {
			hc.Scratch = make([][]byte, len(c.Scratch))
		}
		for _, b := range bufs {
			spans = append(spans, memSpan{mem: b.d.id, name: b.name, lo: 0, hi: b.bytes, write: b.write})
			if h.timingOnly {
				continue
			}
			view := b.d.data[:b.bytes]
			switch b.ref.Kind {
			case RefInput:
				hc.Inputs[b.ref.Index] = view
			case RefOutput:
				hc.Outputs[b.ref.Index] = view
			case RefParam:
				hc.Params[b.ref.Index] = view
			case RefScratch:
				hc.Scratch[b.ref.Index] = view
			}
		}
		h.touch(idx, vc, what, spans)
		if compute {
			h.dataMu.Lock()
			step.CPU(hc)
			h.dataMu.Unlock()
		}
		// The fixed part (launch and tail) overlaps other kernels, but for
		// the profile's serial share of it; the work, and that share, have
		// the SMs to themselves, kernels in the order they reach them (the
		// block scheduler fills the SMs with one grid's blocks before the
		// next grid's).
		serial := time.Duration(float64(fixed) * s.prof.KernelFixedSerial)
		h.at(h.now+fixed-serial, func() {
			s.acquire(actKernel, func() {
				h.start(&activity{class: actKernel, dev: s, remaining: float64(work + serial), solo: 1, done: func() {
					s.release(actKernel)
					finish()
				}})
			})
		})
	}})
}

// simBufName names a buffer a launch touches, for hazards: a parameter
// and a scratch buffer by their kind, the chunk's inputs and outputs as
// copies name them.
func simBufName(k *Kernel, r Ref, d *simDevice) string {
	switch r.Kind {
	case RefParam:
		return fmt.Sprintf("param %s of kernel %s (%s)", k.Params[r.Index].Name, k.Name, d.name())
	case RefScratch:
		return fmt.Sprintf("scratch %d of kernel %s (%s)", r.Index, k.Name, d.name())
	}
	return d.name()
}

// checkArgs checks every device address among step's arguments a: each
// 8-byte argument whose value lies in the simulator's device address
// space must point into a live buffer of this device that the launch
// names (ids). Other 8-byte values (scalars) are left alone: the address
// space starts at 0x7f01_0000_0000, which no count reaches and only a
// subnormal double's bits would. h.mu held.
func (s *Sim) checkArgs(a *driver.Args, step simStep, ids map[int]bool) error {
	if step.Args == nil {
		return nil
	}
	for j, pi := range a.Layout() {
		if pi.Size != 8 {
			continue
		}
		v, err := argWord(a, pi.Offset)
		if err != nil {
			return fmt.Errorf("pipeline: sim: %s: %w", step.label, err)
		}
		if v < simBase+simSpacing || v >= simBase+uint64(s.host.nextMem+1)*simSpacing {
			continue // not a device address of this host
		}
		id := int((v - simBase) / simSpacing)
		d := s.mems[simAddr(id)]
		switch {
		case d == nil:
			return fmt.Errorf("pipeline: sim: %s: argument %d (%#x) is not a live device buffer of this device", step.label, j, v)
		case v-uint64(d.base) > uint64(d.size):
			return fmt.Errorf("pipeline: sim: %s: argument %d (%#x) lies beyond the end of %s", step.label, j, v, d.name())
		case !ids[id]:
			return fmt.Errorf("pipeline: sim: %s: argument %d is the address of %s, which the launch's Reads and Writes do not name", step.label, j, d.name())
		}
	}
	return nil
}

// argWord reads the 8-byte argument at offset off of a. driver.Args has
// no accessor for its values, so the simulator reads them by reflection
// from its value array (a slab of uint64s, as Args documents it copies);
// if that field changes, every check fails with this error rather than
// passing unchecked.
func argWord(a *driver.Args, off int) (uint64, error) {
	v := reflect.ValueOf(a).Elem().FieldByName("vals")
	if !v.IsValid() || v.Kind() != reflect.Array || v.Type().Elem().Kind() != reflect.Uint64 || off%8 != 0 || off/8 >= v.Len() {
		return 0, fmt.Errorf("the simulator cannot read driver.Args' value at offset %d to check it", off)
	}
	return v.Index(off / 8).Uint(), nil
}

func (i *simIssuer) Record(e Event, st Stream) error {
	ss, err := i.stream(st)
	if err != nil {
		return err
	}
	ev, ok := e.(*simEvent)
	if !ok {
		return fmt.Errorf("pipeline: sim: event %T is not a simulator event", e)
	}
	h := i.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := i.issue("record", ss); err != nil {
		return err
	}
	g := &simGen{on: ss}
	ev.gen = g
	return ss.enqueue(i.a, &simOp{run: func(vc vclock, _ int, finish func()) {
		g.vc, g.at, g.done = vc, h.now, true
		for _, w := range g.streams {
			w.pump()
		}
		g.streams = nil
		finish()
	}})
}

func (i *simIssuer) Wait(st Stream, e Event) error {
	ss, err := i.stream(st)
	if err != nil {
		return err
	}
	ev, ok := e.(*simEvent)
	if !ok {
		return fmt.Errorf("pipeline: sim: event %T is not a simulator event", e)
	}
	h := i.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	g := ev.gen
	if err := i.issueAs("wait", "wait", ss, g != nil && !g.done); err != nil {
		return err
	}
	if g == nil {
		return nil // waiting on an event never recorded is a no-op, as in CUDA
	}
	// The wait holds the stream for the profile's WaitNs once the event
	// is done (see Profile.WaitNs), and the event's completion reaches the
	// stream DepNs after the work before it ended (Profile.DepNs).
	lat, dep := time.Duration(i.sim.prof.WaitNs), time.Duration(i.sim.prof.DepNs)
	if g.on == ss {
		dep = 0 // stream order already holds it
	}
	return ss.enqueue(i.a, &simOp{wait: g, run: func(_ vclock, _ int, finish func()) {
		end := max(h.now+lat, g.at+dep)
		if end <= h.now {
			finish()
			return
		}
		h.at(end, finish)
	}})
}

// --- the engine's host goroutines (pipeline.HostTracker) ---

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
// simulator.
type hostToken struct {
	now time.Duration
	vc  vclock
}

// tokenOf is c as a token; nil and foreign clocks order nothing.
func tokenOf(c HostClock) hostToken {
	t, _ := c.(hostToken)
	return t
}

// HostPublish snapshots the caller's clock for others to join.
func (s *Sim) HostPublish() HostClock {
	if !s.usable() {
		return nil
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	a.vc = a.vc.tick(a.idx)
	return hostToken{now: a.now, vc: a.vc.clone()}
}

// HostMerge is a clock ordered after both a and b.
func (s *Sim) HostMerge(a, b HostClock) HostClock {
	ta, tb := tokenOf(a), tokenOf(b)
	return hostToken{now: max(ta.now, tb.now), vc: ta.vc.clone().merge(tb.vc)}
}

// HostJoin orders the caller after a clock.
func (s *Sim) HostJoin(c HostClock) {
	if !s.usable() {
		return
	}
	t := tokenOf(c)
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	a := h.self()
	a.vc = a.vc.merge(t.vc)
	a.now = max(a.now, t.now)
}

// HostBlock marks the caller as waiting on the engine's own handoff, so
// that the simulation does not wait for its clock; HostRelease ends it.
func (s *Sim) HostBlock() HostGoroutine {
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
// simulation's time at least.
func (s *Sim) HostRelease(g HostGoroutine, c HostClock) {
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
	a.now = max(a.now, t.now)
	if a.blocked && a.until == nil {
		a.blocked = false
		a.now = max(a.now, h.now)
	}
	h.cond.Broadcast()
}

// HostFork prepares the actor of a goroutine about to start, at the
// caller's clock.
func (s *Sim) HostFork(name string) HostGoroutine {
	if !s.usable() {
		return nil
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.fork(name)
}

// fork makes an active actor at the caller's clock. h.mu held.
func (h *SimHost) fork(name string) *actor {
	me := h.self()
	a := h.newActor(name)
	me.vc = me.vc.tick(me.idx)
	a.vc = a.vc.merge(me.vc)
	a.now = max(a.now, me.now)
	a.active++
	return a
}

// HostStart binds the calling goroutine to a forked actor.
func (s *Sim) HostStart(g HostGoroutine) {
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
func (h *SimHost) exit() hostToken {
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

// Go runs fn on a new goroutine that is a host actor of its own: it
// starts at the caller's virtual time and holds the simulation back, as
// every active actor does, until fn returns. wait blocks until then and
// orders the caller after fn, in virtual time too. Use it to drive
// several devices of one host at once: goroutines started with a plain go
// statement start at whatever virtual time the simulation has reached
// when they first call it. To start several actors at one time, use
// [SimHost.GoTogether], or fork them from an actor that holds the
// simulation, such as one started with Go: a caller that holds nothing does not hold it between two calls, so
// the first actor may run ahead in virtual time before the second is
// forked (TestSimGoForksTogether).
//
// A nil fn runs nothing; on a nil SimHost fn runs on a plain goroutine.
func (h *SimHost) Go(name string, fn func()) (wait func()) {
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
func (h *SimHost) GoTogether(name string, n int, fn func(i int)) {
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

var _ HostTracker = (*Sim)(nil)

// SharedHost is the device's host (a *SimHost), for pipeline.HostSharer:
// a Group's simulated devices must share one. Nil for a nil Sim.
func (s *Sim) SharedHost() any {
	if !s.usable() {
		return nil
	}
	return s.host
}

var (
	_ MemoryReporter = (*Sim)(nil)
	_ KernelNoter    = (*Sim)(nil)
	_ HostAccessor   = (*Sim)(nil)
	_ HostSharer     = (*Sim)(nil)
)

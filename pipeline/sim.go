package pipeline

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
	"unsafe"

	"github.com/purecuda/overlap/driver"
)

// Sim is a CPU simulator of a GPU for the pipeline. Each stream is an
// ordered queue run by its own goroutine with randomised delays; events and
// waits have the driver's semantics; copies move real bytes; a kernel runs
// its Kernel.CPU stand-in.
//
// It detects hazards. Every copy, kernel and host staging access records
// the byte ranges it reads and writes with a vector clock. Two accesses to
// overlapping bytes, at least one a write, that are not ordered by stream
// order, events, or host synchronisation are a hazard. The host counts as
// one actor: its syncs order everything it does afterwards, and what it
// issues happens after everything it did before.
type Sim struct {
	mu         sync.Mutex
	rng        *rand.Rand
	maxDelay   time.Duration
	nextMem    int
	actors     int // actor 0 is the host; streams take 1, 2, ...
	hostVC     vclock
	streams    []*simStream
	accesses   map[int][]access
	naccess    int
	hazards    []Hazard
	live       map[string]int
	mems       map[driver.DevicePtr]*simDevice
	faults     []*fault
	counts     map[string]int
	origin     time.Time
	registered []*simHost
	// dataMu serialises the byte movement itself, so that a schedule with
	// hazards is reported by the detector rather than racing in Go.
	dataMu sync.Mutex
}

// Hazard is a pair of unordered accesses to the same bytes.
type Hazard struct {
	Memory       string
	First, Later string
}

func (h Hazard) String() string {
	return fmt.Sprintf("%s: %s is not ordered with %s", h.Memory, h.Later, h.First)
}

// NewSim returns a simulator whose streams pause up to maxDelay (at random)
// before each operation; seed makes runs repeatable.
func NewSim(seed uint64, maxDelay time.Duration) *Sim {
	return &Sim{
		rng:      rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15)),
		maxDelay: maxDelay,
		actors:   1,
		hostVC:   vclock{0},
		accesses: map[int][]access{},
		live:     map[string]int{},
		mems:     map[driver.DevicePtr]*simDevice{},
		counts:   map[string]int{},
		origin:   time.Now(),
	}
}

// Name reports "simulator".
func (s *Sim) Name() string { return "simulator" }

// Hazards returns the hazards found so far.
func (s *Sim) Hazards() []Hazard {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Hazard(nil), s.hazards...)
}

// Live returns how many objects of each kind are allocated and not closed:
// "stream", "event", "device", "pinned", "registered".
func (s *Sim) Live() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.live {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}

// Count returns how many operations of a kind ("copy", "launch", "record",
// "wait", "alloc") the simulator has seen.
func (s *Sim) Count(kind string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
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
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &fault{kind: kind, k: k, err: err})
}

// tick counts an operation and returns an injected fault, if any. s.mu held.
func (s *Sim) tick(kind string) error {
	s.counts[kind]++
	for _, f := range s.faults {
		if f.kind == kind && f.k == s.counts[kind] {
			return f.err
		}
	}
	return nil
}

// failHost counts a host operation and returns an injected fault, if any.
func (s *Sim) failHost(kind string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tick(kind)
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

// access is one recorded read or write.
type access struct {
	actor int
	clock uint64
	lo    int
	hi    int
	write bool
	what  string
}

// span is a range of one memory that an operation touches.
type span struct {
	mem    int
	name   string
	lo, hi int
	write  bool
}

// touch records the spans of an operation by actor at vc and reports
// hazards. s.mu held.
func (s *Sim) touch(actor int, vc vclock, what string, spans []span) {
	for _, sp := range spans {
		if sp.hi <= sp.lo {
			continue
		}
		list := s.accesses[sp.mem]
		for _, p := range list {
			if p.hi <= sp.lo || sp.hi <= p.lo || !(p.write || sp.write) {
				continue
			}
			if p.actor == actor || vc.get(p.actor) >= p.clock {
				continue // ordered
			}
			s.hazards = append(s.hazards, Hazard{Memory: sp.name, First: p.what, Later: what})
		}
		s.accesses[sp.mem] = append(list, access{actor: actor, clock: vc.get(actor), lo: sp.lo, hi: sp.hi, write: sp.write, what: what})
		s.naccess++
	}
	if s.naccess > 4096 {
		s.prune()
	}
}

// prune drops accesses that every actor has already synchronised past:
// any later operation is ordered after them. s.mu held.
func (s *Sim) prune() {
	clocks := []vclock{s.hostVC}
	for _, st := range s.streams {
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
	s.naccess = 0
	for m, list := range s.accesses {
		kept := list[:0]
		for _, a := range list {
			if !settled(a) {
				kept = append(kept, a)
			}
		}
		if len(kept) == 0 {
			delete(s.accesses, m)
		} else {
			s.accesses[m] = kept
			s.naccess += len(kept)
		}
	}
}

func (s *Sim) delay() {
	s.mu.Lock()
	d := time.Duration(0)
	if s.maxDelay > 0 && s.rng.IntN(2) == 0 {
		d = time.Duration(s.rng.Int64N(int64(s.maxDelay) + 1))
	}
	s.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
}

// --- memory ---

type simDevice struct {
	sim    *Sim
	id     int
	base   driver.DevicePtr
	data   []byte
	closed bool
}

func (d *simDevice) Len() int              { return len(d.data) }
func (d *simDevice) Ptr() driver.DevicePtr { return d.base }
func (d *simDevice) name() string          { return fmt.Sprintf("device buffer %d", d.id) }
func (d *simDevice) Close() error {
	s := d.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if !d.closed {
		d.closed = true
		s.live["device"]--
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

func (h *simHost) Bytes() []byte {
	if h.closed {
		return nil
	}
	return h.data
}
func (h *simHost) name() string { return fmt.Sprintf("%s host memory %d", h.kind, h.id) }
func (h *simHost) Close() error {
	s := h.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	if !h.closed {
		h.closed = true
		s.live[h.kind]--
		for i, r := range s.registered {
			if r == h {
				s.registered = append(s.registered[:i], s.registered[i+1:]...)
				break
			}
		}
	}
	return nil
}

func (s *Sim) AllocDevice(n int) (DeviceMem, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pipeline: sim: device allocation of %d bytes", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	s.nextMem++
	d := &simDevice{sim: s, id: s.nextMem, base: driver.DevicePtr(0x7f00_0000_0000 + uint64(s.nextMem)<<32), data: make([]byte, n)}
	s.mems[d.base] = d
	s.live["device"]++
	return d, nil
}

func (s *Sim) AllocPinned(n int) (PinnedMem, error) {
	if n <= 0 {
		return nil, fmt.Errorf("pipeline: sim: pinned allocation of %d bytes", n)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	s.nextMem++
	s.live["pinned"]++
	return &simHost{sim: s, id: s.nextMem, kind: "pinned", data: make([]byte, n)}, nil
}

// Register stands in for page-locking: the memory is used in place.
func (s *Sim) Register(mem []byte) (PinnedMem, error) {
	if len(mem) == 0 {
		return nil, errors.New("pipeline: sim: registering empty memory")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tick("alloc"); err != nil {
		return nil, err
	}
	// Like the driver, refuse to register memory twice.
	lo := uintptr(unsafe.Pointer(&mem[0]))
	for _, r := range s.registered {
		if !r.closed && lo < uintptr(unsafe.Pointer(&r.data[0]))+uintptr(len(r.data)) && uintptr(unsafe.Pointer(&r.data[0])) < lo+uintptr(len(mem)) {
			return nil, ErrRegistered
		}
	}
	s.nextMem++
	s.live["registered"]++
	h := &simHost{sim: s, id: s.nextMem, kind: "registered", data: mem}
	s.registered = append(s.registered, h)
	return h, nil
}

func simHostOf(h HostMemory) (*simHost, error) {
	sh, ok := h.(*simHost)
	if !ok || sh.closed {
		return nil, fmt.Errorf("pipeline: sim: host memory %T is not live simulator memory", h)
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

// host records a host access at the host's clock.
func (s *Sim) host(what string, spans ...span) {
	s.mu.Lock()
	s.hostVC[0]++
	s.touch(0, s.hostVC, what, spans)
	s.mu.Unlock()
}

func (s *Sim) StageIn(dst HostMemory, dstOff int, src []byte) error {
	h, err := simHostOf(dst)
	if err != nil {
		return err
	}
	return s.hostCopy("host stage-in", h.id, h.name(), h.data, dstOff, len(src), true, false, func(mem []byte) { copy(mem, src) })
}

func (s *Sim) StageOut(dst []byte, src HostMemory, srcOff int) error {
	h, err := simHostOf(src)
	if err != nil {
		return err
	}
	return s.hostCopy("host stage-out", h.id, h.name(), h.data, srcOff, len(dst), false, false, func(mem []byte) { copy(dst, mem) })
}

func (s *Sim) CopyToDeviceSync(dst DeviceMem, off int, src []byte) error {
	d, err := simDevOf(dst)
	if err != nil {
		return err
	}
	return s.hostCopy("synchronous copy to device", d.id, d.name(), d.data, off, len(src), true, true, func(mem []byte) { copy(mem, src) })
}

func (s *Sim) CopyToHostSync(dst []byte, src DeviceMem, off int) error {
	d, err := simDevOf(src)
	if err != nil {
		return err
	}
	return s.hostCopy("synchronous copy to host", d.id, d.name(), d.data, off, len(dst), false, true, func(mem []byte) { copy(dst, mem) })
}

// hostCopy is a copy the host does itself: it checks that n bytes at off
// fit data, waits for every stream first when syncFirst (as the driver's
// blocking copies do), records the access, and moves the bytes with do.
func (s *Sim) hostCopy(what string, id int, name string, data []byte, off, n int, write, syncFirst bool, do func(mem []byte)) error {
	if off < 0 || n < 0 || n > len(data)-off {
		return fmt.Errorf("pipeline: sim: %s of %d bytes at %d does not fit %d", what, n, off, len(data))
	}
	if syncFirst {
		if err := s.syncAll(); err != nil {
			return err
		}
	}
	s.host(what, span{mem: id, name: name, lo: off, hi: off + n, write: write})
	s.dataMu.Lock()
	do(data[off : off+n])
	s.dataMu.Unlock()
	return nil
}

// syncAll waits for every stream, as the driver's blocking copies on the
// legacy default stream do.
func (s *Sim) syncAll() error {
	s.mu.Lock()
	streams := append([]*simStream(nil), s.streams...)
	s.mu.Unlock()
	for _, st := range streams {
		if !st.isClosed() {
			if err := st.Synchronize(); err != nil {
				return err
			}
		}
	}
	return nil
}

// --- streams and events ---

type simOp struct {
	issueVC vclock
	wait    *simGen
	run     func(vc vclock, actor int)
	done    chan struct{} // for Synchronize markers
}

type simStream struct {
	sim    *Sim
	actor  int
	vc     vclock
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []simOp
	closed bool
	exited chan struct{}
}

func (s *Sim) NewStream() (Stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tick("stream"); err != nil {
		return nil, err
	}
	st := &simStream{sim: s, actor: s.actors, exited: make(chan struct{})}
	s.actors++
	st.vc = make(vclock, st.actor+1)
	st.cond = sync.NewCond(&st.mu)
	s.streams = append(s.streams, st)
	s.live["stream"]++
	go st.loop()
	return st, nil
}

func (st *simStream) isClosed() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.closed
}

func (st *simStream) enqueue(op simOp) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return errors.New("pipeline: sim: stream is closed")
	}
	st.queue = append(st.queue, op)
	st.cond.Signal()
	return nil
}

func (st *simStream) loop() {
	defer close(st.exited)
	for {
		st.mu.Lock()
		for len(st.queue) == 0 && !st.closed {
			st.cond.Wait()
		}
		if len(st.queue) == 0 {
			st.mu.Unlock()
			return
		}
		op := st.queue[0]
		st.queue = st.queue[1:]
		st.mu.Unlock()

		if op.wait != nil {
			<-op.wait.done
		}
		st.sim.delay()
		s := st.sim
		s.mu.Lock()
		st.vc = st.vc.merge(op.issueVC)
		if op.wait != nil {
			st.vc = st.vc.merge(op.wait.vc)
		}
		st.vc[st.actor]++
		vc := st.vc.clone()
		s.mu.Unlock()
		if op.run != nil {
			op.run(vc, st.actor)
		}
		if op.done != nil {
			close(op.done)
		}
	}
}

// issueVC snapshots the host's clock for an operation being issued.
func (s *Sim) issueVC() vclock {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hostVC[0]++
	return s.hostVC.clone()
}

func (st *simStream) Synchronize() error {
	if err := st.sim.failHost("sync"); err != nil {
		return err
	}
	done := make(chan struct{})
	var final vclock
	err := st.enqueue(simOp{issueVC: st.sim.issueVC(), run: func(vc vclock, _ int) { final = vc }, done: done})
	if err != nil {
		return err
	}
	<-done
	s := st.sim
	s.mu.Lock()
	s.hostVC = s.hostVC.merge(final)
	s.mu.Unlock()
	return nil
}

func (st *simStream) Close() error {
	st.mu.Lock()
	if st.closed {
		st.mu.Unlock()
		return nil
	}
	st.closed = true
	st.cond.Broadcast()
	st.mu.Unlock()
	<-st.exited // queued work still completes, as with cuStreamDestroy
	s := st.sim
	s.mu.Lock()
	s.live["stream"]--
	s.mu.Unlock()
	return nil
}

// simGen is one recording of an event.
type simGen struct {
	done chan struct{}
	vc   vclock
	at   time.Duration
}

type simEvent struct {
	sim    *Sim
	timing bool
	mu     sync.Mutex
	gen    *simGen
	closed bool
}

func (s *Sim) NewEvent(timing bool) (Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.tick("event"); err != nil {
		return nil, err
	}
	s.live["event"]++
	return &simEvent{sim: s, timing: timing}, nil
}

func (e *simEvent) current() *simGen {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.gen
}

func (e *simEvent) Synchronize() error {
	if err := e.sim.failHost("sync"); err != nil {
		return err
	}
	g := e.current()
	if g == nil {
		return nil
	}
	<-g.done
	s := e.sim
	s.mu.Lock()
	s.hostVC = s.hostVC.merge(g.vc)
	s.mu.Unlock()
	return nil
}

func (e *simEvent) Elapsed(end Event) (time.Duration, error) {
	o, ok := end.(*simEvent)
	if !ok || !e.timing || !o.timing {
		return 0, errors.New("pipeline: sim: Elapsed needs two timing events")
	}
	a, b := e.current(), o.current()
	if a == nil || b == nil {
		return 0, errors.New("pipeline: sim: event not recorded")
	}
	<-a.done
	<-b.done
	return b.at - a.at, nil
}

func (e *simEvent) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		e.sim.mu.Lock()
		e.sim.live["event"]--
		e.sim.mu.Unlock()
	}
	return nil
}

// --- the issuer ---

type simIssuer struct{ sim *Sim }

func (s *Sim) Issuer() (Issuer, error) { return &simIssuer{sim: s}, nil }

func (i *simIssuer) Release() {}

func (i *simIssuer) stream(st Stream) (*simStream, error) {
	ss, ok := st.(*simStream)
	if !ok {
		return nil, fmt.Errorf("pipeline: sim: stream %T is not a simulator stream", st)
	}
	return ss, nil
}

func (i *simIssuer) fail(kind string) error {
	s := i.sim
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tick(kind)
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
	h, err := simHostOf(host)
	if err != nil {
		return err
	}
	if n < 0 || devOff < 0 || hostOff < 0 || n > len(d.data)-devOff || n > len(h.data)-hostOff {
		return fmt.Errorf("pipeline: sim: copy of %d bytes does not fit", n)
	}
	if err := i.fail("copy"); err != nil {
		return err
	}
	what := fmt.Sprintf("D2H copy on stream %d", ss.actor)
	if toDevice {
		what = fmt.Sprintf("H2D copy on stream %d", ss.actor)
	}
	hostSpan := span{mem: h.id, name: h.name(), lo: hostOff, hi: hostOff + n, write: !toDevice}
	devSpan := span{mem: d.id, name: d.name(), lo: devOff, hi: devOff + n, write: toDevice}
	return ss.enqueue(simOp{issueVC: i.sim.issueVC(), run: func(vc vclock, actor int) {
		s := i.sim
		s.mu.Lock()
		s.touch(actor, vc, what, []span{hostSpan, devSpan})
		s.mu.Unlock()
		s.dataMu.Lock()
		if toDevice {
			copy(d.data[devOff:devOff+n], h.data[hostOff:hostOff+n])
		} else {
			copy(h.data[hostOff:hostOff+n], d.data[devOff:devOff+n])
		}
		s.dataMu.Unlock()
	}})
}

// Prepare refuses a kernel without a CPU stand-in before any work is issued.
func (s *Sim) Prepare(k *Kernel) error {
	if k.CPU == nil {
		return fmt.Errorf("pipeline: sim: kernel %q has no CPU stand-in, so the simulator cannot run it", k.Name)
	}
	return nil
}

func (i *simIssuer) Launch(st Stream, k *Kernel, c Chunk) error {
	ss, err := i.stream(st)
	if err != nil {
		return err
	}
	if k.CPU == nil {
		return fmt.Errorf("sim: kernel %q has no CPU stand-in", k.Name)
	}
	s := i.sim
	resolve := func(ptrs []driver.DevicePtr, sizes []int) ([]*simDevice, error) {
		out := make([]*simDevice, len(ptrs))
		s.mu.Lock()
		defer s.mu.Unlock()
		for j, p := range ptrs {
			d := s.mems[p]
			if d == nil || sizes[j] > len(d.data) {
				return nil, fmt.Errorf("pipeline: sim: kernel argument %d is not a live device buffer", j)
			}
			out[j] = d
		}
		return out, nil
	}
	ins, err := resolve(c.Inputs, c.InBytes)
	if err != nil {
		return err
	}
	outs, err := resolve(c.Outputs, c.OutBytes)
	if err != nil {
		return err
	}
	if err := i.fail("launch"); err != nil {
		return err
	}
	what := fmt.Sprintf("kernel %s (chunk %d) on stream %d", k.Name, c.Index, ss.actor)
	// The caller may reuse c's slices once Launch returns.
	c.InBytes = append([]int(nil), c.InBytes...)
	c.OutBytes = append([]int(nil), c.OutBytes...)
	return ss.enqueue(simOp{issueVC: s.issueVC(), run: func(vc vclock, actor int) {
		var spans []span
		hc := HostChunk{Index: c.Index, Offset: c.Offset, N: c.N}
		for j, d := range ins {
			spans = append(spans, span{mem: d.id, name: d.name(), lo: 0, hi: c.InBytes[j]})
			hc.Inputs = append(hc.Inputs, d.data[:c.InBytes[j]])
		}
		for j, d := range outs {
			spans = append(spans, span{mem: d.id, name: d.name(), lo: 0, hi: c.OutBytes[j], write: true})
			hc.Outputs = append(hc.Outputs, d.data[:c.OutBytes[j]])
		}
		s.mu.Lock()
		s.touch(actor, vc, what, spans)
		s.mu.Unlock()
		s.dataMu.Lock()
		k.CPU(hc)
		s.dataMu.Unlock()
	}})
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
	if err := i.fail("record"); err != nil {
		return err
	}
	g := &simGen{done: make(chan struct{})}
	ev.mu.Lock()
	ev.gen = g
	ev.mu.Unlock()
	return ss.enqueue(simOp{issueVC: i.sim.issueVC(), run: func(vc vclock, _ int) {
		g.vc = vc
		g.at = time.Since(i.sim.origin)
		close(g.done)
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
	if err := i.fail("wait"); err != nil {
		return err
	}
	g := ev.current()
	if g == nil {
		return nil // waiting on an event never recorded is a no-op, as in CUDA
	}
	return ss.enqueue(simOp{issueVC: i.sim.issueVC(), wait: g})
}

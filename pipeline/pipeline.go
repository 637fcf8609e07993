package pipeline

import (
	"errors"
	"fmt"
	"sync"
	"time"
	"unsafe"
	"weak"

	"github.com/purecuda/overlap/driver"
)

// ErrClosed reports use of a closed Pipeline or Group, alone or wrapped
// ("pipeline: closed after a failure: …"). It also matches
// driver.ErrClosed: errors.Is(err, driver.ErrClosed) holds for it, so
// that one check covers a closed pipeline and a closed driver object.
// The converse does not hold: a run that fails because a driver object
// was closed under it is a *StageError wrapping driver.ErrClosed, and
// the pipeline itself is not closed.
var ErrClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string { return "pipeline: closed" }

// Is makes ErrClosed match driver.ErrClosed.
func (closedError) Is(target error) bool { return target == driver.ErrClosed }

// Config shapes a Pipeline. Zero fields take the defaults noted.
type Config struct {
	// ChunkElems is the elements per chunk; 0 means DefaultChunkElems.
	ChunkElems int
	// Slots is the number of buffer slots in the ring, at least 2 and at
	// least ComputeStreams; 0 means ComputeStreams+2, so that every
	// compute stream has a kernel in flight while one slot is copied in
	// and one copied out. The copies of chunks whose smallest copy is
	// under 1 MiB are coalesced in groups of at most a third of the slots
	// (CopyChunks): 48 slots give 64K float32 elements copies of 4 MiB.
	// So for such chunks 0 means room for six groups of copies of 4 MiB,
	// at most 48 slots, and never more than the 24 MiB a buffer that the
	// default chunk's 6 float32 slots hold, where the copies can coalesce:
	// not when Host is HostStaged, Schedule ScheduleInStream or CopyChunks
	// given. A Group of several devices copies each chunk on its own, and
	// a streaming run (RunStream) stages every chunk: give them Slots, or
	// they hold these slots too (NewGroup does, for several devices).
	Slots int
	// ComputeStreams is the number of streams kernels go to, round robin;
	// 0 means DefaultComputeStreams. Several let one chunk's kernel start
	// while the last one's tail still runs.
	ComputeStreams int
	// Inputs and Outputs give each input's and output's element size in
	// bytes. At least one output is required.
	Inputs, Outputs []int
	// Host is the default host mode.
	Host HostMode
	// Timing records every stage of every chunk in Report.Spans.
	Timing bool
	// MaxRegistered bounds the bytes of Go memory kept registered between
	// runs; 0 means 16 GiB. The least recently used go first.
	MaxRegistered int64
	// Schedule orders each run's stages on the device; the zero value,
	// ScheduleAuto, picks per run (see Schedule). Report.Schedule says
	// which one ran.
	Schedule Schedule
	// CopyChunks is how many chunks in neighbouring slots one copy moves
	// on ScheduleEvents (see copyGroup): 0 picks, the fewest that make a
	// copy of 4 MiB; 1 copies each chunk on its own; more must divide
	// Slots and be at most a third of them, and needs chunks of a
	// multiple of 256 bytes for every input and output. Runs that stage,
	// on ScheduleInStream, or of a Group of several devices copy each
	// chunk on its own whatever it says.
	CopyChunks int
}

// The defaults are what the H200 measured best for the lecture's workload
// (bench/RESULTS.md): 1M-element chunks on 4 compute streams and 6 slots
// reached 98.8% of the stage bound, against 95% for 4M chunks on one.
const (
	DefaultChunkElems     = 1 << 20
	DefaultComputeStreams = 4
)

// smallJobChunks and minSmallJobChunk shape DefaultChunkFor.
const (
	smallJobChunks   = 16
	minSmallJobChunk = 128 << 10
)

// DefaultChunkFor is a chunk size for a job of n elements when the caller
// has none: DefaultChunkElems, or for a job of fewer than 16 of those,
// n/16 (rounded up to 64 elements), at least 128K elements, and never more
// than n. A small job's fill and drain, its first chunk's copy in and its
// last one's copy out, weigh as much as its stages: on the H200, 4M
// elements of the seed kernel took 0.65-0.74 ms in chunks of 1M and
// 0.53-0.58 ms in chunks of 256K, and 1M elements 0.21-0.24 ms in chunks
// of 128K (bench/RESULTS.md, "Small whole jobs: the tuner probes what
// the runs do").
func DefaultChunkFor(n int) int {
	if n <= 0 {
		return DefaultChunkElems
	}
	c := n / smallJobChunks
	if n%smallJobChunks != 0 {
		c++ // n/16 rounded up, without n+15 overflowing
	}
	c = (c + 63) &^ 63
	return min(n, max(minSmallJobChunk, min(c, DefaultChunkElems)))
}

// defaultSlotGroups, maxDefaultSlots and maxDefaultSlotBytes shape
// defaultSlots. On the H200, 128M elements in 64K-element chunks (pinned,
// 4 compute streams) ran at 66% of the stage bound on 6 slots, 81% on 8,
// 79% on 12 and 92% on 24 in copies of 1 MiB (bench/RESULTS.md,
// "64K-element chunks on the default slots"), and better on 48 in copies
// of 4 MiB (coalesceTarget).
const (
	defaultSlotGroups   = 6
	maxDefaultSlots     = 48
	maxDefaultSlotBytes = 6 * DefaultChunkElems * 4
)

// defaultSlots is Config.Slots when it is 0 (c's ChunkElems and
// ComputeStreams already defaulted): ComputeStreams+2, or, where copies
// coalesce (ScheduleEvents or auto, not staged, CopyChunks 0, slots back
// to back) and the smallest of a chunk's copies is under coalesceBytes,
// enough slots for defaultSlotGroups coalesced copies of coalesceTarget
// (copyGroupOf), at most maxDefaultSlots and at most what keeps the
// largest buffer's slots within maxDefaultSlotBytes, the default chunk's
// 6 slots of float32. A small chunk's copies cost more in their fixed
// overhead than in their bytes; with more slots they coalesce into
// copies of 4 MiB with room for a group in each stage. The byte bound
// keeps a wide input with a narrow output (a 1024-byte row into 4 bytes)
// from taking 48 slots of its wide rows.
func defaultSlots(c Config) int {
	s := c.ComputeStreams + 2
	per := smallestCopy(c)
	if per <= 0 || per >= coalesceBytes || !slotsBackToBack(c) ||
		c.CopyChunks != 0 || c.Schedule == ScheduleInStream || c.Host == HostStaged {
		return s
	}
	g := (coalesceTarget + per - 1) / per
	return max(s, min(defaultSlotGroups*g, maxDefaultSlots, maxDefaultSlotBytes/largestCopy(c)))
}

func (c Config) withDefaults() (Config, error) {
	if c.ChunkElems == 0 {
		c.ChunkElems = DefaultChunkElems
	}
	if c.ComputeStreams == 0 {
		c.ComputeStreams = DefaultComputeStreams
	}
	if c.Slots == 0 {
		c.Slots = defaultSlots(c)
	}
	if c.MaxRegistered == 0 {
		c.MaxRegistered = 16 << 30
	}
	switch {
	case c.ChunkElems < 0:
		return c, fmt.Errorf("pipeline: chunk size %d elements: must be positive", c.ChunkElems)
	case c.ComputeStreams < 0 || c.ComputeStreams > 64:
		return c, fmt.Errorf("pipeline: %d compute streams: want 1 to 64", c.ComputeStreams)
	case c.Slots < 2:
		return c, fmt.Errorf("pipeline: %d slots: at least 2 are needed to overlap anything", c.Slots)
	case c.Slots < c.ComputeStreams:
		return c, fmt.Errorf("pipeline: %d slots for %d compute streams: each compute stream needs a slot", c.Slots, c.ComputeStreams)
	case c.Slots > 1024:
		return c, fmt.Errorf("pipeline: %d slots: at most 1024", c.Slots)
	case len(c.Outputs) == 0:
		return c, errors.New("pipeline: the kernel needs at least one output")
	case c.Host < HostAuto || c.Host > HostRegistered:
		return c, fmt.Errorf("pipeline: unknown host mode %d", int(c.Host))
	case c.Schedule < ScheduleAuto || c.Schedule > ScheduleInStream:
		return c, fmt.Errorf("pipeline: unknown schedule %d", int(c.Schedule))
	case c.CopyChunks < 0 || c.CopyChunks > 1 && (c.Slots%c.CopyChunks != 0 || c.CopyChunks > c.Slots/3):
		return c, fmt.Errorf("pipeline: %d chunks a copy on %d slots: want 0, 1, or a divisor of the slots of at most a third of them", c.CopyChunks, c.Slots)
	case c.CopyChunks > 1 && !slotsBackToBack(c):
		return c, fmt.Errorf("pipeline: %d chunks a copy: a chunk of %d elements is not a multiple of %d bytes for every input and output, so its slots are not back to back", c.CopyChunks, c.ChunkElems, slotAlign)
	}
	for _, sizes := range [][]int{c.Inputs, c.Outputs} {
		for _, s := range sizes {
			if s <= 0 || s > 1<<20 {
				return c, fmt.Errorf("pipeline: element size %d bytes: want 1 to 1 MiB", s)
			}
			if _, ok := checkedMul(s, c.ChunkElems); !ok {
				return c, fmt.Errorf("pipeline: chunk of %d elements of %d bytes is too large", c.ChunkElems, s)
			}
		}
	}
	return c, nil
}

// Pipeline runs jobs through overlapped H2D, compute and D2H stages. It
// allocates its streams, events, device slots and pinned staging slots
// once; Run reuses them, one job at a time; Close frees them.
type Pipeline struct {
	b   Backend
	cfg Config

	mu     sync.Mutex // held by Run and Close
	closed bool
	broken error
	// runTok, on a tracking backend, is the clock at which the last run
	// ended: the next one, on whatever goroutine, is ordered after it,
	// as mu orders them.
	runTok HostClock

	h2d, d2h Stream
	comp     []Stream
	// din and dout are each slot's device buffers, [slot][input] and
	// [slot][output]: slot s's part of one allocation per input and per
	// output (dinAll, doutAll) that holds every slot's back to back, so
	// that the copies of chunks in neighbouring slots can be one copy
	// (see copyGroup).
	din, dout       [][]slotBuf
	dinAll, doutAll []DeviceMem
	sin             [][]PinnedMem // [slot][input]; by New for auto and staged modes, else on the first staged run
	sout            [][]PinnedMem // [slot][output]
	h2dDone         []Event
	compDone        []Event
	d2hDone         []Event
	timers          []Event // timing events, grown on demand
	// stagingDirty says that sin and sout may hold something other than
	// PoisonWord: they were allocated, or a run, StageTimes or a stream
	// staged through them, since PoisonSlots last filled them. p.mu held.
	stagingDirty bool
	// chunk describes the chunk being launched; issue reuses its slices
	// from run to run. p.mu held.
	chunk Chunk
	// runPlan and runState are Run's, reused from run to run (see
	// resolveInto and runStateFor). p.mu held, or a group's mu for its
	// pipelines.
	runPlan  plan
	runState runState

	// params are the resident parameters of the kernels run here, at
	// most maxResidentKernels, by a weak pointer to the kernel, so that
	// the pipeline does not keep a kernel (and its Params' Data) alive;
	// scratch is each slot's scratch buffers ([slot][buffer]), grown as
	// kernels need (resident.go). cur and curScratch are the running
	// kernel's, for fillChunk. p.mu held.
	params     map[weak.Pointer[Kernel]]*residentParams
	paramTick  uint64
	scratch    [][]DeviceMem
	cur        *residentParams
	curScratch []int

	regs     map[regKey]*regEntry
	regBytes int64
	regTick  uint64
	seen     map[regKey]bool

	// skipWAR drops the write-after-read waits; tests set it to show that
	// the hazard detector notices.
	skipWAR bool
	// skipStaged and skipUnstaged make the issuer stop waiting for the
	// stage-in and stage-out goroutines: host-side races that the
	// detector must name (tests only).
	skipStaged, skipUnstaged bool
	// shareScratch makes every slot use slot 0's scratch buffers, a
	// hazard the detector must name (tests only).
	shareScratch bool
}

// New builds a pipeline on b. On error nothing is left allocated.
func New(b Backend, cfg Config) (p *Pipeline, err error) {
	if b == nil {
		return nil, errors.New("pipeline: nil Backend")
	}
	cfg, err = cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	p = &Pipeline{b: b, cfg: cfg, regs: map[regKey]*regEntry{}, seen: map[regKey]bool{}}
	defer func() {
		if err != nil {
			p.release()
			p = nil
			err = &StageError{Chunk: -1, Stage: StageSetup, Err: err}
		}
	}()
	if p.h2d, err = b.NewStream(); err != nil {
		return p, err
	}
	if p.d2h, err = b.NewStream(); err != nil {
		return p, err
	}
	for i := 0; i < cfg.ComputeStreams; i++ {
		s, err := b.NewStream()
		if err != nil {
			return p, err
		}
		p.comp = append(p.comp, s)
	}
	if p.dinAll, err = p.allocSlots(cfg.Inputs); err != nil {
		return p, err
	}
	if p.doutAll, err = p.allocSlots(cfg.Outputs); err != nil {
		return p, err
	}
	p.din, p.dout = slotsOf(p.dinAll, cfg.Inputs, cfg), slotsOf(p.doutAll, cfg.Outputs, cfg)
	for range cfg.Slots {
		for _, evs := range []*[]Event{&p.h2dDone, &p.compDone, &p.d2hDone} {
			e, err := b.NewEvent(false)
			if err != nil {
				return p, err
			}
			*evs = append(*evs, e)
		}
	}
	// Staging slots are set up front unless the host mode rules staging
	// out, so that a run never pays for pinned allocations.
	if cfg.Host == HostAuto || cfg.Host == HostStaged {
		if err := p.allocStaging(); err != nil {
			return p, err
		}
	}
	return p, nil
}

// allocSlots allocates one device buffer per element size, each room for
// every slot's chunk.
func (p *Pipeline) allocSlots(sizes []int) ([]DeviceMem, error) {
	var out []DeviceMem
	for _, s := range sizes {
		n, ok := checkedMul(slotStride(s*p.cfg.ChunkElems), p.cfg.Slots)
		if !ok {
			return out, fmt.Errorf("pipeline: %d slots of %d elements of %d bytes are too large", p.cfg.Slots, p.cfg.ChunkElems, s)
		}
		d, err := p.b.AllocDevice(n)
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// slotAlign is the alignment of every slot's device address: cuMemAlloc's
// own (256 bytes), which a kernel with vector loads may rely on, as it
// did when each slot was an allocation of its own.
const slotAlign = 256

// slotStride is the bytes from one slot's start to the next for a chunk
// of chunkBytes: the chunk, rounded up to slotAlign. Chunks whose bytes
// are a multiple of it are back to back, and only theirs are coalesced
// (copyGroup).
func slotStride(chunkBytes int) int { return (chunkBytes + slotAlign - 1) / slotAlign * slotAlign }

// slotBuf is one slot's part of a buffer that holds every slot's: the
// bytes from off of all, a chunk's worth.
type slotBuf struct {
	all DeviceMem
	off int
}

// ptr is the slot's device address, for kernels.
func (b slotBuf) ptr() driver.DevicePtr { return b.all.Ptr() + driver.DevicePtr(b.off) }

// slotsOf splits each buffer of all (one per element size) into cfg's
// slots, slot s at s chunks' bytes: [slot][buffer].
func slotsOf(all []DeviceMem, sizes []int, cfg Config) [][]slotBuf {
	slots := make([][]slotBuf, cfg.Slots)
	for s := range slots {
		for j, d := range all {
			slots[s] = append(slots[s], slotBuf{all: d, off: s * slotStride(sizes[j]*cfg.ChunkElems)})
		}
	}
	return slots
}

// allocStaging allocates the pinned staging slots unless they are, and
// marks them as written (stagingDirty): every caller is about to stage
// through them, or has just made them, and new pinned memory holds no
// poison either.
func (p *Pipeline) allocStaging() error {
	if p.sin != nil {
		p.stagingDirty = true
		return nil
	}
	alloc := func(sizes []int) ([]PinnedMem, error) {
		var out []PinnedMem
		for _, s := range sizes {
			h, err := p.b.AllocPinned(s * p.cfg.ChunkElems)
			if err != nil {
				return out, err
			}
			out = append(out, h)
		}
		return out, nil
	}
	sin := make([][]PinnedMem, p.cfg.Slots)
	sout := make([][]PinnedMem, p.cfg.Slots)
	var err error
	for s := 0; s < p.cfg.Slots && err == nil; s++ {
		if sin[s], err = alloc(p.cfg.Inputs); err == nil {
			sout[s], err = alloc(p.cfg.Outputs)
		}
	}
	if err != nil {
		for s := range sin {
			closeAll(sin[s])
			closeAll(sout[s])
		}
		return err
	}
	p.sin, p.sout = sin, sout
	p.stagingDirty = true
	return nil
}

// usable refuses a nil Pipeline, or one that New did not make, for the
// method named.
func (p *Pipeline) usable(method string) error {
	switch {
	case p == nil:
		return fmt.Errorf("pipeline: %s: nil *Pipeline", method)
	case p.b == nil:
		return fmt.Errorf("pipeline: %s: the Pipeline was not made by New", method)
	}
	return nil
}

// Config returns the configuration in force, defaults filled in; the
// zero Config for a nil Pipeline.
func (p *Pipeline) Config() Config {
	if p == nil {
		return Config{}
	}
	return p.cfg
}

// Backend returns the backend the pipeline runs on; nil for a nil
// Pipeline.
func (p *Pipeline) Backend() Backend {
	if p == nil {
		return nil
	}
	return p.b
}

// Close waits for nothing (Run has already drained), frees every stream,
// event, buffer and registration, and is safe to call twice.
func (p *Pipeline) Close() error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	return p.release()
}

// release frees everything; the first error is returned.
func (p *Pipeline) release() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range p.regs {
		add(e.mem.Close())
	}
	p.regs, p.regBytes = map[regKey]*regEntry{}, 0
	add(p.releaseResident())
	add(closeAll(p.dinAll))
	add(closeAll(p.doutAll))
	for s := range p.sin {
		add(closeAll(p.sin[s]))
		add(closeAll(p.sout[s]))
	}
	for _, evs := range [][]Event{p.h2dDone, p.compDone, p.d2hDone, p.timers} {
		for _, e := range evs {
			add(e.Close())
		}
	}
	for _, s := range append([]Stream{p.h2d, p.d2h}, p.comp...) {
		if s != nil {
			add(s.Close())
		}
	}
	p.din, p.dout, p.dinAll, p.doutAll, p.sin, p.sout = nil, nil, nil, nil, nil, nil
	p.h2dDone, p.compDone, p.d2hDone, p.timers, p.comp = nil, nil, nil, nil, nil
	p.h2d, p.d2h = nil, nil
	return errors.Join(errs...)
}

func closeAll[T interface{ Close() error }](xs []T) error {
	var first error
	for _, x := range xs {
		if err := x.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// --- registration cache ---

type regKey struct {
	base uintptr
	n    int
}

type regEntry struct {
	mem     PinnedMem
	lastUse uint64
	inUse   bool
}

func keyOf(b []byte) regKey {
	if len(b) == 0 {
		return regKey{}
	}
	return regKey{base: uintptr(unsafe.Pointer(&b[0])), n: len(b)}
}

// register returns a registration of b, from the cache or new, and the time
// a new registration took.
func (p *Pipeline) register(b []byte) (PinnedMem, time.Duration, error) {
	k := keyOf(b)
	p.regTick++
	if e, ok := p.regs[k]; ok {
		e.lastUse, e.inUse = p.regTick, true
		return e.mem, 0, nil
	}
	// A registration overlapping this memory must go first: the driver
	// refuses to register a page twice.
	for ok, e := range p.regs {
		if ok.base < k.base+uintptr(k.n) && k.base < ok.base+uintptr(ok.n) {
			if e.inUse {
				return nil, 0, fmt.Errorf("pipeline: buffers overlap in memory")
			}
			if err := e.mem.Close(); err != nil {
				return nil, 0, err
			}
			delete(p.regs, ok)
			p.regBytes -= int64(ok.n)
		}
	}
	start := p.now()
	mem, err := p.b.Register(b)
	if err != nil {
		return nil, 0, err
	}
	took := p.now() - start
	p.regs[k] = &regEntry{mem: mem, lastUse: p.regTick, inUse: true}
	p.regBytes += int64(k.n)
	return mem, took, nil
}

// evict drops least recently used registrations not in use until the cache
// fits MaxRegistered, and clears the in-use marks.
func (p *Pipeline) evict() error {
	var first error
	for p.regBytes > p.cfg.MaxRegistered {
		var oldest regKey
		var oe *regEntry
		for k, e := range p.regs {
			if !e.inUse && (oe == nil || e.lastUse < oe.lastUse) {
				oldest, oe = k, e
			}
		}
		if oe == nil {
			break
		}
		if err := oe.mem.Close(); err != nil && first == nil {
			first = err
		}
		delete(p.regs, oldest)
		p.regBytes -= int64(oldest.n)
	}
	for _, e := range p.regs {
		e.inUse = false
	}
	return first
}

// Unregister drops the cached registration of b, if any, so that b is no
// longer page-locked.
func (p *Pipeline) Unregister(b []byte) error {
	if err := p.usable("Unregister"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := keyOf(b)
	e, ok := p.regs[k]
	if !ok {
		return nil
	}
	delete(p.regs, k)
	p.regBytes -= int64(k.n)
	return e.mem.Close()
}

// Registered reports how many bytes of Go memory the pipeline keeps
// registered; 0 for a nil Pipeline.
func (p *Pipeline) Registered() int64 {
	if p == nil {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.regBytes
}

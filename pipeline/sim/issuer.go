package sim

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
)

type simIssuer struct {
	sim      *Sim
	a        *actor
	released bool
	// args holds each launch's arguments, built to be checked.
	args driver.Args
}

// Issuer makes the calling goroutine an active actor until Release: the
// simulation does not run past its clock while it may still issue.
func (s *Sim) Issuer() (pipeline.Issuer, error) {
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
func (i *simIssuer) Synchronize(s pipeline.Stream) error {
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

func (i *simIssuer) stream(st pipeline.Stream) (*simStream, error) {
	ss, ok := st.(*simStream)
	if !ok || ss.sim != i.sim {
		return nil, fmt.Errorf("sim: stream %T is not a stream of this simulated device", st)
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

func (i *simIssuer) CopyToDevice(st pipeline.Stream, dst pipeline.DeviceMem, dstOff int, src pipeline.HostMemory, srcOff, n int) error {
	return i.copy(st, true, dst, dstOff, src, srcOff, n)
}

func (i *simIssuer) CopyToHost(st pipeline.Stream, dst pipeline.HostMemory, dstOff int, src pipeline.DeviceMem, srcOff, n int) error {
	return i.copy(st, false, src, srcOff, dst, dstOff, n)
}

// copy queues n bytes between device memory dev at devOff and host memory
// host at hostOff, towards the device when toDevice.
func (i *simIssuer) copy(st pipeline.Stream, toDevice bool, dev pipeline.DeviceMem, devOff int, host pipeline.HostMemory, hostOff, n int) error {
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
		return fmt.Errorf("sim: copy of %d bytes does not fit", n)
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

// Fill32 queues setting n bytes of dst from off to word, repeated, on st
// (pipeline.DeviceFiller, for PoisonSlots): a write that the hazard
// detector sees, issued at a launch's host cost and taking no device
// time, since the profile has no term for it and it only ever comes
// between runs.
func (i *simIssuer) Fill32(st pipeline.Stream, dst pipeline.DeviceMem, off, n int, word uint32) error {
	ss, err := i.stream(st)
	if err != nil {
		return err
	}
	d, err := simDevOf(dst)
	if err != nil {
		return err
	}
	if d.sim != i.sim {
		return fmt.Errorf("sim: fill of %s, which is not this simulated device's memory", d.name())
	}
	if n < 0 || off < 0 || n > d.size-off || off%4 != 0 || n%4 != 0 {
		return fmt.Errorf("sim: fill of %d bytes at %d in %s of %d: want whole 4-byte words that fit", n, off, d.name(), d.size)
	}
	h := i.sim.host
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := i.issueAs("fill", "launch", ss, false); err != nil {
		return err
	}
	what := fmt.Sprintf("fill on stream %d", ss.idx)
	span := memSpan{mem: d.id, name: d.name(), lo: off, hi: off + n, write: true}
	return ss.enqueue(i.a, &simOp{run: func(vc vclock, idx int, finish func()) {
		h.touch(idx, vc, what, []memSpan{span})
		if !h.timingOnly {
			h.dataMu.Lock()
			for j := off; j < off+n; j += 4 {
				binary.LittleEndian.PutUint32(d.data[j:], word)
			}
			h.dataMu.Unlock()
		}
		finish()
	}})
}

// Prepare refuses a kernel without a CPU stand-in (for each of its steps,
// when it has Steps) before any work is issued.
func (s *Sim) Prepare(k *pipeline.Kernel) error {
	switch {
	case !s.usable():
		return errNoSim
	case k == nil:
		return errors.New("sim: nil *Kernel")
	}
	for i := range k.Steps {
		if k.Steps[i].CPU == nil {
			return fmt.Errorf("sim: %s has no CPU stand-in, so the simulator cannot run it", stepLabel(k, i))
		}
	}
	if len(k.Steps) == 0 && k.CPU == nil {
		return fmt.Errorf("sim: kernel %q has no CPU stand-in, so the simulator cannot run it", k.Name)
	}
	return nil
}

// KernelNotes says which of k's launches the profile has no cost for
// (Report.Notes), once each.
func (s *Sim) KernelNotes(k *pipeline.Kernel) []string {
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
	pipeline.Step
	label string // for errors and hazards: "kernel mlp", "kernel mlp, step 0 (layer0)"
	iters int
}

// simSteps returns k's launches: its Steps, or for a kernel without steps
// one launch of its own fields, which reads every input, parameter and
// scratch buffer and writes every output and scratch buffer.
func simSteps(k *pipeline.Kernel) []simStep {
	if len(k.Steps) > 0 {
		out := make([]simStep, len(k.Steps))
		for i, st := range k.Steps {
			out[i] = simStep{Step: st, label: stepLabel(k, i)}
		}
		return out
	}
	return []simStep{{Step: pipeline.Step{Name: k.Name, Args: k.Args, CPU: k.CPU}, label: "kernel " + k.Name, iters: k.Iters}}
}

// allRefs names every buffer of c of the kinds given, for a kernel
// without steps.
func allRefs(c pipeline.Chunk, kinds ...pipeline.RefKind) []pipeline.Ref {
	var refs []pipeline.Ref
	for _, kind := range kinds {
		for j := range chunkPtrs(c, kind) {
			refs = append(refs, pipeline.Ref{Kind: kind, Index: j})
		}
	}
	return refs
}

// chunkPtrs and chunkBytes are c's addresses and byte counts of a kind of
// buffer; a parameter's bytes are its whole buffer's (-1).
func chunkPtrs(c pipeline.Chunk, kind pipeline.RefKind) []driver.DevicePtr {
	switch kind {
	case pipeline.RefInput:
		return c.Inputs
	case pipeline.RefOutput:
		return c.Outputs
	case pipeline.RefParam:
		return c.Params
	}
	return c.Scratch
}

func chunkBytes(c pipeline.Chunk, kind pipeline.RefKind, j int) int {
	switch kind {
	case pipeline.RefInput:
		return c.InBytes[j]
	case pipeline.RefOutput:
		return c.OutBytes[j]
	case pipeline.RefScratch:
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
func (i *simIssuer) Launch(st pipeline.Stream, k *pipeline.Kernel, c pipeline.Chunk) error {
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
			step.Reads = allRefs(c, pipeline.RefInput, pipeline.RefParam, pipeline.RefScratch)
			step.Writes = allRefs(c, pipeline.RefOutput, pipeline.RefScratch)
		}
		if err := i.launchStep(ss, k, step, c); err != nil {
			return err
		}
	}
	return nil
}

// launchStep queues one launch.
func (i *simIssuer) launchStep(ss *simStream, k *pipeline.Kernel, step simStep, c pipeline.Chunk) error {
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
			return fmt.Errorf("sim: %s: %w", step.label, err)
		}
	}
	h := s.host
	h.mu.Lock()
	defer h.mu.Unlock()
	// Each buffer the launch names: its device memory, its bytes in the
	// chunk, and its place in the CPU's view.
	type named struct {
		d     *simDevice
		ref   pipeline.Ref
		off   int // where the chunk's part starts in d
		bytes int
		write bool
		name  string
	}
	var bufs []named
	ids := map[int]bool{}
	for w, list := range [2][]pipeline.Ref{step.Reads, step.Writes} {
		for _, r := range list {
			ptrs := chunkPtrs(c, r.Kind)
			if r.Index < 0 || r.Index >= len(ptrs) {
				return fmt.Errorf("sim: %s names %s %d, but the chunk has %d", step.label, r.Kind, r.Index, len(ptrs))
			}
			d, off := s.deviceAt(ptrs[r.Index])
			if d == nil {
				return fmt.Errorf("sim: %s: its %s %d is not a live device buffer", step.label, r.Kind, r.Index)
			}
			n := chunkBytes(c, r.Kind, r.Index)
			if n < 0 {
				n = d.size - off
			}
			if n > d.size-off {
				return fmt.Errorf("sim: %s: its %s %d of %d bytes at offset %d does not fit its buffer of %d", step.label, r.Kind, r.Index, n, off, d.size)
			}
			bufs = append(bufs, named{d: d, ref: r, off: off, bytes: n, write: w == 1, name: simBufName(k, r, d)})
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
		hc := pipeline.HostChunk{Index: c.Index, Offset: c.Offset, N: c.N,
			Inputs: make([][]byte, len(c.Inputs)), Outputs: make([][]byte, len(c.Outputs))}
		if len(c.Params) > 0 {
			hc.Params = make([][]byte, len(c.Params))
		}
		if len(c.Scratch) > 0 {
			hc.Scratch = make([][]byte, len(c.Scratch))
		}
		for _, b := range bufs {
			spans = append(spans, memSpan{mem: b.d.id, name: b.name, lo: b.off, hi: b.off + b.bytes, write: b.write})
			if h.timingOnly {
				continue
			}
			view := b.d.data[b.off : b.off+b.bytes]
			switch b.ref.Kind {
			case pipeline.RefInput:
				hc.Inputs[b.ref.Index] = view
			case pipeline.RefOutput:
				hc.Outputs[b.ref.Index] = view
			case pipeline.RefParam:
				hc.Params[b.ref.Index] = view
			case pipeline.RefScratch:
				hc.Scratch[b.ref.Index] = view
			}
		}
		h.touch(idx, vc, what, spans)
		if compute {
			s.runCPU(step.CPU, hc, what)
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

// runCPU computes a launch's chunk on the host with its CPU stand-in, on
// whichever goroutine moves the simulated clock, h.mu held. A panic in it
// is the simulator's faulting kernel: it is kept as the device's sticky
// fault (Sim.faulted), which every later operation on the device returns,
// as a GPU's context fails every call after a kernel faults, and the
// launch completes in simulated time. Unrecovered, it ran on through the
// clock's locks, and the run hung or the program ended.
func (s *Sim) runCPU(cpu func(pipeline.HostChunk), hc pipeline.HostChunk, what string) {
	h := s.host
	h.dataMu.Lock()
	defer h.dataMu.Unlock()
	defer func() {
		if v := recover(); v != nil && s.faulted == nil {
			s.faulted = fmt.Errorf("sim: %s: its CPU stand-in panicked: %v (the device has faulted: every operation on it fails)", what, v)
		}
	}()
	cpu(hc)
}

// simBufName names a buffer a launch touches, for hazards: a parameter
// and a scratch buffer by their kind, the chunk's inputs and outputs as
// copies name them.
func simBufName(k *pipeline.Kernel, r pipeline.Ref, d *simDevice) string {
	switch r.Kind {
	case pipeline.RefParam:
		return fmt.Sprintf("param %s of kernel %s (%s)", k.Params[r.Index].Name, k.Name, d.name())
	case pipeline.RefScratch:
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
			return fmt.Errorf("sim: %s: %w", step.label, err)
		}
		if v < simBase+simSpacing || v >= simBase+uint64(s.host.nextMem+1)*simSpacing {
			continue // not a device address of this host
		}
		id := int((v - simBase) / simSpacing)
		d := s.mems[simAddr(id)]
		switch {
		case d == nil:
			return fmt.Errorf("sim: %s: argument %d (%#x) is not a live device buffer of this device", step.label, j, v)
		case v-uint64(d.base) > uint64(d.size):
			return fmt.Errorf("sim: %s: argument %d (%#x) lies beyond the end of %s", step.label, j, v, d.name())
		case !ids[id]:
			return fmt.Errorf("sim: %s: argument %d is the address of %s, which the launch's Reads and Writes do not name", step.label, j, d.name())
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

// streamEvent is st and e as the simulator's own, or why not.
func (i *simIssuer) streamEvent(st pipeline.Stream, e pipeline.Event) (*simStream, *simEvent, error) {
	ss, err := i.stream(st)
	if err != nil {
		return nil, nil, err
	}
	ev, ok := e.(*simEvent)
	if !ok {
		return nil, nil, fmt.Errorf("sim: event %T is not a simulator event", e)
	}
	return ss, ev, nil
}

func (i *simIssuer) Record(e pipeline.Event, st pipeline.Stream) error {
	ss, ev, err := i.streamEvent(st, e)
	if err != nil {
		return err
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

func (i *simIssuer) Wait(st pipeline.Stream, e pipeline.Event) error {
	ss, ev, err := i.streamEvent(st, e)
	if err != nil {
		return err
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

// stepLabel names step i of k in errors, as the engine does.
func stepLabel(k *pipeline.Kernel, i int) string {
	if n := k.Steps[i].Name; n != "" {
		return fmt.Sprintf("kernel %s, step %d (%s)", k.Name, i, n)
	}
	return fmt.Sprintf("kernel %s, step %d", k.Name, i)
}

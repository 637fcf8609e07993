package pipeline

import (
	"encoding/binary"
	"fmt"
)

// PoisonWord is the 32-bit word that PoisonSlots fills slots with: the
// bits of a float32 quiet NaN, which no float32 check passes. For outputs
// of other types it is an ordinary value (as a float64 pair, a finite
// 2^1021), which a check catches only where the right answer differs.
const PoisonWord uint32 = 0x7fc00000

// DeviceFiller is an Issuer that fills device memory in a stream's order:
// the GPU's (cuMemsetD32Async) and the simulator's. PoisonSlots uses one
// where the backend's issuer is one, and blocking copies of a host buffer
// (Backend.CopyToDeviceSync) where it is not.
type DeviceFiller interface {
	// Fill32 queues setting n bytes of dst from off to word, repeated;
	// off and n are multiples of 4.
	Fill32(s Stream, dst DeviceMem, off, n int, word uint32) error
}

// PoisonSlots fills every slot with [PoisonWord] and returns when that is
// done: the device memory of each input's and output's slots and of the
// kernels' scratch buffers, and the pinned staging slots unless nothing
// has staged through them since it last filled them. It is for runs
// that are checked: a slot keeps what the last chunk that used it left
// there, so a run whose chunks each have a slot of their own (no more
// chunks than slots) finds the results of the run before in them, and a
// run that skipped a copy or a launch for such a chunk would copy out the
// right answer. After PoisonSlots it copies out NaN, which no check of
// float32 results passes. A run's own use of its slots is unchanged:
// each chunk's copies and kernel overwrite what it reads.
//
// A failure to wait for the fills closes the pipeline, as a run's failed
// drain does: the device may still be writing its memory.
func (p *Pipeline) PoisonSlots() error {
	if err := p.usable("PoisonSlots"); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return p.closedErr()
	}
	p.runBegin()
	defer p.runEnd()
	return p.poisonSlots()
}

// PoisonSlots is Pipeline.PoisonSlots on every device of the group, at
// once. An error names the device; a device whose wait failed closes the
// group, as a run's failed drain does.
func (g *Group) PoisonSlots() error {
	if err := g.usable("PoisonSlots"); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return g.closedErr()
	}
	lead := g.pipes[0]
	lead.runBegin()
	defer lead.runEnd()
	errs := make([]error, len(g.pipes))
	g.eachDevice(func(d int) { errs[d] = g.pipes[d].poisonSlots() }, nil)
	var first error
	for d := range g.pipes {
		if errs[d] != nil && first == nil {
			first = g.deviceErr(d, errs[d])
		}
	}
	g.closeBroken(errs)
	return first
}

// poisonSlots fills the staging slots on the host, then every device slot
// buffer on the H2D stream, and waits for that stream even after a failed
// fill: the wait is what orders the fills before the next run, whose
// copies may go on other streams (the in-stream schedule, a job of one
// chunk). p.mu held (or the group's), in a tracked run on a HostTracker.
func (p *Pipeline) poisonSlots() error {
	fail := func(err error) error { return fmt.Errorf("pipeline: PoisonSlots: %w", err) }
	if err := p.poisonStaging(); err != nil {
		return fail(err)
	}
	bufs := append(append([]DeviceMem(nil), p.dinAll...), p.doutAll...)
	for _, slot := range p.scratch {
		bufs = append(bufs, slot...)
	}
	iss, err := p.b.Issuer()
	if err != nil {
		return fail(err)
	}
	defer iss.Release()
	f, ok := iss.(DeviceFiller)
	if !ok {
		if err := p.poisonByCopies(bufs); err != nil {
			return fail(err)
		}
		return nil
	}
	var fillErr error
	for _, d := range bufs {
		// The input and output slots are whole words (slotStride aligns
		// each slot's part); a scratch buffer whose size is not a
		// multiple of 4 keeps its last 1-3 bytes.
		if fillErr = f.Fill32(p.h2d, d, 0, d.Len()&^3, PoisonWord); fillErr != nil {
			break
		}
	}
	if err := iss.Synchronize(p.h2d); err != nil {
		p.broken, p.closed = err, true
		p.release()
		return fail(fmt.Errorf("%w; the pipeline closed itself", err))
	}
	if fillErr != nil {
		return fail(fillErr)
	}
	return nil
}

// poisonByCopies fills bufs with PoisonWord by blocking copies of a host
// buffer, a MiB at a time, for a backend whose issuer cannot fill. The
// pipeline is idle: its last run drained.
func (p *Pipeline) poisonByCopies(bufs []DeviceMem) error {
	var piece []byte
	for _, d := range bufs {
		n := d.Len() &^ 3
		if piece == nil && n > 0 {
			piece = make([]byte, min(1<<20, n))
			fillWords(piece)
		}
		for off := 0; off < n; off += len(piece) {
			if err := p.b.CopyToDeviceSync(d, off, piece[:min(len(piece), n-off)]); err != nil {
				return err
			}
		}
	}
	return nil
}

// poisonStaging fills the pinned staging slots with PoisonWord on the
// host (through HostAccess on a HostAccessor, whose detector sees it)
// when anything may have written them since it last did (stagingDirty):
// a staged run that skipped a chunk's copy out would otherwise stage out
// what an earlier run left in the slot. Runs that do not stage
// (registered memory after auto mode's first run) leave the slots
// poisoned, so that they are not preceded by a host fill of slots they do
// not use.
func (p *Pipeline) poisonStaging() error {
	if !p.stagingDirty {
		return nil
	}
	ha, tracked := p.b.(HostAccessor)
	for _, slots := range [2][][]PinnedMem{p.sin, p.sout} {
		for _, slot := range slots {
			for _, m := range slot {
				n := len(m.Bytes())
				if !tracked {
					fillWords(m.Bytes())
					continue
				}
				if _, err := ha.HostAccess(m, 0, n, true, "PoisonSlots's fill of a staging slot", func(b []byte) (int, error) {
					fillWords(b)
					return len(b), nil
				}); err != nil {
					return err
				}
			}
		}
	}
	p.stagingDirty = false
	return nil
}

// fillWords sets every whole 4-byte word of b to PoisonWord.
func fillWords(b []byte) {
	for j := 0; j+4 <= len(b); j += 4 {
		binary.LittleEndian.PutUint32(b[j:], PoisonWord)
	}
}

package pipeline

import (
	"errors"
	"fmt"
)

// PoisonWord is the 32-bit word that PoisonSlots fills device slots with:
// the float32 quiet NaN's bits, which no kernel's verified result is.
const PoisonWord uint32 = 0x7fc00000

// DeviceFiller is an Issuer that fills device memory in a stream's order:
// the GPU's (cuMemsetD32Async) and the simulator's. PoisonSlots needs
// one; an Issuer that is not one makes it fail with
// errors.ErrUnsupported.
type DeviceFiller interface {
	// Fill32 queues setting n bytes of dst from off to word, repeated;
	// off and n are multiples of 4.
	Fill32(s Stream, dst DeviceMem, off, n int, word uint32) error
}

// PoisonSlots fills the device memory of every slot (each input's and
// output's, and the kernels' scratch buffers) with [PoisonWord] and
// returns when that is done. It is for runs that are checked: a slot
// keeps what the last chunk that used it left there, so a run whose
// chunks each have a slot of their own (no more chunks than slots) finds
// the results of the run before in them, and a run that skipped a copy
// in or a launch for such a chunk would copy out the right answer.
// After PoisonSlots it copies out NaN, which no check passes. A run's
// own use of its slots is unchanged: each chunk's copy in and kernel
// overwrite what it reads.
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
// once. An error names the device.
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
	g.eachDevice(func(d int) { errs[d] = g.pipes[d].poisonSlots() })
	for d, err := range errs {
		if err != nil {
			return g.deviceErr(d, err)
		}
	}
	return nil
}

// poisonSlots fills every slot buffer with PoisonWord on the H2D stream,
// which orders it before the next run's first copy in, and waits for
// it. p.mu held (or the group's), in a tracked run on a HostTracker.
func (p *Pipeline) poisonSlots() (err error) {
	iss, err := p.b.Issuer()
	if err != nil {
		return fmt.Errorf("pipeline: PoisonSlots: %w", err)
	}
	defer iss.Release()
	f, ok := iss.(DeviceFiller)
	if !ok {
		return fmt.Errorf("pipeline: PoisonSlots: the %s backend's issuer cannot fill device memory: %w", p.b.Name(), errors.ErrUnsupported)
	}
	bufs := append(append([]DeviceMem(nil), p.dinAll...), p.doutAll...)
	for _, slot := range p.scratch {
		bufs = append(bufs, slot...)
	}
	for _, d := range bufs {
		// The input and output slots are whole words (slotStride aligns
		// each slot's part); a scratch buffer whose size is not a
		// multiple of 4 keeps its last 1-3 bytes.
		if err := f.Fill32(p.h2d, d, 0, d.Len()&^3, PoisonWord); err != nil {
			return fmt.Errorf("pipeline: PoisonSlots: %w", err)
		}
	}
	if err := iss.Synchronize(p.h2d); err != nil {
		return fmt.Errorf("pipeline: PoisonSlots: %w", err)
	}
	return nil
}

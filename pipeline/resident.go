package pipeline

import (
	"fmt"
	"time"
	"weak"

	"github.com/purecuda/overlap/driver"
)

// This file holds what a pipeline keeps on its device for kernels with
// Params and Scratch (steps.go): each kernel's resident parameters, and
// each slot's scratch buffers.

// maxResidentKernels is how many kernels' parameters a pipeline keeps on
// its device at once: uploading a further kernel's frees those of the one
// used least recently (and all of the others when the new ones do not fit
// beside them).
const maxResidentKernels = 4

// residentParams is one kernel's parameters on a pipeline's device.
type residentParams struct {
	mems    []DeviceMem
	ptrs    []driver.DevicePtr // the chunks' Params
	bytes   int64
	lastUse uint64
}

func (r *residentParams) close() error { return closeAll(r.mems) }

// readyClock is the pipeline's clock before readying k for a run, where
// there is anything to ready (readies); readyTook is how long the
// readying took since then (the upload of the kernel's parameters,
// Report.Upload, and the allocation of its scratch buffers), which a run
// leaves out of its time. A kernel with nothing to ready reads no clock.
func readyClock(p *Pipeline, k *Kernel) time.Duration {
	if !readies(k) {
		return 0
	}
	return p.now()
}

func readyTook(p *Pipeline, k *Kernel, from time.Duration) time.Duration {
	if !readies(k) {
		return 0
	}
	return p.now() - from
}

// readies says that k has parameters or scratch buffers to ready.
func readies(k *Kernel) bool { return len(k.Params) > 0 || len(k.Scratch) > 0 }

// ready makes k runnable on p's device before a run issues anything: its
// parameters resident (uploaded now if they are not, synchronously), and
// every slot's scratch buffers large enough. It returns the time the
// upload took. p.mu held, or the group's mu for its pipelines.
func (p *Pipeline) ready(k *Kernel) (time.Duration, error) {
	p.cur, p.curScratch = nil, k.Scratch
	var took time.Duration
	if len(k.Params) > 0 {
		rp, t, err := p.paramsOf(k)
		if err != nil {
			return 0, err
		}
		p.cur, took = rp, t
	}
	if err := p.growScratch(k); err != nil {
		p.curScratch = nil
		return took, fmt.Errorf("pipeline: kernel %s: scratch buffers: %w", k.Name, err)
	}
	return took, nil
}

// paramsOf returns k's resident parameters, uploading them on first use.
func (p *Pipeline) paramsOf(k *Kernel) (*residentParams, time.Duration, error) {
	p.paramTick++
	key := weak.Make(k)
	if rp, ok := p.params[key]; ok {
		rp.lastUse = p.paramTick
		return rp, 0, nil
	}
	var total int64
	for _, pr := range k.Params {
		total += int64(len(pr.Data))
	}
	for len(p.params) >= maxResidentKernels {
		p.dropParams(false)
	}
	if err := p.paramsFit(k, total); err != nil {
		if len(p.params) == 0 {
			return nil, 0, err
		}
		// Other kernels' parameters may be what fills the device.
		p.dropParams(true)
		if err := p.paramsFit(k, total); err != nil {
			return nil, 0, err
		}
	}
	start := p.now()
	rp := &residentParams{bytes: total, lastUse: p.paramTick}
	for _, pr := range k.Params {
		d, err := p.b.AllocDevice(len(pr.Data))
		if err == nil {
			rp.mems = append(rp.mems, d)
			rp.ptrs = append(rp.ptrs, d.Ptr())
			err = p.b.CopyToDeviceSync(d, 0, pr.Data)
		}
		if err != nil {
			rp.close()
			return nil, 0, fmt.Errorf("pipeline: kernel %s: uploading parameter %s (%s): %w", k.Name, pr.Name, sizeString(int64(len(pr.Data))), err)
		}
	}
	if p.params == nil {
		p.params = map[weak.Pointer[Kernel]]*residentParams{}
	}
	p.params[key] = rp
	return rp, p.now() - start, nil
}

// paramsFit checks that k's parameters, total bytes, fit in the device's
// free memory, where the backend says how much that is.
func (p *Pipeline) paramsFit(k *Kernel, total int64) error {
	mr, ok := p.b.(MemoryReporter)
	if !ok {
		return nil
	}
	free, _, err := mr.FreeMemory()
	if err != nil {
		return fmt.Errorf("pipeline: kernel %s: reading the device's free memory: %w", k.Name, err)
	}
	if total > free {
		return fmt.Errorf("pipeline: kernel %s: parameters of %s do not fit in the device's %s free", k.Name, sizeString(total), sizeString(free))
	}
	return nil
}

// dropParams frees the parameters of a kernel that is gone (collected),
// else of the one used least recently; or of every kernel when all.
func (p *Pipeline) dropParams(all bool) {
	var oldest weak.Pointer[Kernel]
	var orp *residentParams
	for k, rp := range p.params {
		if all {
			rp.close()
			delete(p.params, k)
			continue
		}
		gone, ogone := k.Value() == nil, orp != nil && oldest.Value() == nil
		if orp == nil || gone && !ogone || gone == ogone && rp.lastUse < orp.lastUse {
			oldest, orp = k, rp
		}
	}
	if orp != nil {
		orp.close()
		delete(p.params, oldest)
	}
}

// growScratch makes every slot hold k's scratch buffers, keeping buffers
// that are large enough already.
func (p *Pipeline) growScratch(k *Kernel) error {
	if len(k.Scratch) == 0 {
		return nil
	}
	if p.scratch == nil {
		p.scratch = make([][]DeviceMem, p.cfg.Slots)
	}
	for s := range p.scratch {
		for j, per := range k.Scratch {
			need := per * p.cfg.ChunkElems
			if j < len(p.scratch[s]) {
				if p.scratch[s][j].Len() >= need {
					continue
				}
				// Every run before has drained: nothing uses it.
				p.scratch[s][j].Close()
				d, err := p.b.AllocDevice(need)
				if err != nil {
					closeAll(p.scratch[s][j+1:])
					p.scratch[s] = p.scratch[s][:j]
					return err
				}
				p.scratch[s][j] = d
				continue
			}
			d, err := p.b.AllocDevice(need)
			if err != nil {
				return err
			}
			p.scratch[s] = append(p.scratch[s], d)
		}
	}
	return nil
}

// scratchSlot is the slot whose scratch buffers slot s uses: its own,
// unless a test makes every slot share slot 0's (shareScratch).
func (p *Pipeline) scratchSlot(s int) int {
	if p.shareScratch {
		return 0
	}
	return s
}

// releaseResident frees every kernel's parameters and every scratch
// buffer; the first error is returned.
func (p *Pipeline) releaseResident() error {
	var first error
	for k, rp := range p.params {
		if err := rp.close(); err != nil && first == nil {
			first = err
		}
		delete(p.params, k)
	}
	for s := range p.scratch {
		if err := closeAll(p.scratch[s]); err != nil && first == nil {
			first = err
		}
	}
	p.scratch, p.cur, p.curScratch = nil, nil, nil
	return first
}

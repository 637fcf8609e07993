package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StageTimes are each stage's time over a whole job, run alone.
type StageTimes struct {
	// In and Out are the host's staging copies into and out of the pinned
	// slots; zero unless some buffer is staged.
	In, Out           time.Duration
	H2D, Compute, D2H time.Duration
	// Copies is the H2D and D2H copies at once. A group measures it,
	// since a host link shared by several devices may not feed every copy
	// engine at once; a single pipeline leaves it zero, as one device's
	// copies in both directions overlap at full speed.
	Copies time.Duration
	// Staging is the host's staging copies in both directions at once, as
	// a run makes them: they share the host's memory bandwidth. A group
	// measures it; a single pipeline leaves it zero.
	Staging time.Duration
}

// Bound is the slowest stage: no overlapped schedule can beat it.
func (s StageTimes) Bound() time.Duration {
	return max(s.In, s.H2D, s.Compute, s.D2H, s.Out, s.Copies, s.Staging)
}

// Slowest names the slowest stage.
func (s StageTimes) Slowest() Stage {
	best, st := s.H2D, StageH2D
	for _, c := range []struct {
		d  time.Duration
		st Stage
	}{{s.Compute, StageCompute}, {s.D2H, StageD2H}, {s.In, StageIn}, {s.Out, StageOut}, {s.Copies, StageCopies}, {s.Staging, StageStaging}} {
		if c.d > best {
			best, st = c.d, c.st
		}
	}
	return st
}

// at returns the time of stage st; set sets it.
func (s *StageTimes) at(st Stage) *time.Duration {
	switch st {
	case StageIn:
		return &s.In
	case StageH2D:
		return &s.H2D
	case StageCompute:
		return &s.Compute
	case StageD2H:
		return &s.D2H
	case StageOut:
		return &s.Out
	case StageCopies:
		return &s.Copies
	case StageStaging:
		return &s.Staging
	}
	return new(time.Duration)
}

// StageTimes measures each stage of job alone, with the pipeline's chunks,
// streams and slots, each stage over every chunk before the next starts:
// for staged Go slices, every chunk's inputs copied into its pinned slot
// by one goroutine (In); every chunk's H2D copies back to back on one
// stream; every chunk's kernel on the compute streams; every chunk's D2H
// copies; and, for staged outputs, every chunk's copy out of its slot into
// the job's output (Out). Each stage reads what the stage before it wrote,
// so every copy and kernel works on the job's real data (a slot holds the
// last chunk staged into it); on the simulator, whose clock does not
// depend on the data, the kernels are timed but not computed. Staged
// outputs are left with unspecified contents, which Run overwrites;
// pinned and registered outputs are not written.
func (p *Pipeline) StageTimes(ctx context.Context, job Job) (StageTimes, error) {
	var st StageTimes
	if err := p.usable("StageTimes"); err != nil {
		return st, err
	}
	if err := p.validate(job); err != nil {
		return st, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return st, ErrClosed
	}
	defer p.evict()
	pl, err := p.resolve(job)
	if err != nil {
		return st, err
	}
	if pl.chunks == 0 {
		return st, nil
	}
	// The copies as a run would make them.
	pl.copies = p.copiesFor(pl, p.scheduleFor(pl, pl.staging))
	if _, err := p.ready(job.Kernel); err != nil {
		return st, err
	}
	if pl.staging {
		if err := p.allocStaging(); err != nil {
			return st, err
		}
	}
	iss, done, err := p.stageIssuer()
	if err != nil {
		return st, err
	}
	defer done()
	for _, stage := range pl.stages(false) {
		if *st.at(stage), err = p.timeStage(ctx, pl, iss, stage, 0, pl.chunks); err != nil {
			return st, err
		}
	}
	return st, nil
}

// stages lists the stages that StageTimes measures for the plan, in the
// order each reads what the one before wrote; group adds the stages that
// only a group measures: the copies in both directions at once, and the
// staging copies in both directions at once.
func (pl *plan) stages(group bool) []Stage {
	var list []Stage
	if pl.staging {
		list = append(list, StageIn)
	}
	list = append(list, StageH2D, StageCompute, StageD2H)
	if group {
		list = append(list, StageCopies)
	}
	if pl.staging {
		list = append(list, StageOut)
		if group {
			list = append(list, StageStaging)
		}
	}
	return list
}

// stageIssuer returns an issuer for timing stages alone and what undoes
// it: on the simulator the kernels are then timed without being computed,
// since nobody reads what they write.
func (p *Pipeline) stageIssuer() (Issuer, func(), error) {
	iss, err := p.b.Issuer()
	if err != nil {
		return nil, nil, err
	}
	tracked := timeKernels(p.b, true)
	return iss, func() {
		if tracked {
			timeKernels(p.b, false)
		}
		iss.Release()
	}, nil
}

// timeStage times stage st alone over chunks first to last-1 of the
// plan: the host issues every chunk's work and waits for it once. It
// calls the kernel's Args, so it settles as a run does when they panic
// or end the goroutine (settleOnPanic).
func (p *Pipeline) timeStage(ctx context.Context, pl *plan, iss Issuer, st Stage, first, last int) (time.Duration, error) {
	issuing := true
	defer p.settleOnPanic(nil, nil, &issuing)
	took, err := p.timeStageIssuing(ctx, pl, iss, st, first, last)
	issuing = false
	return took, err
}

// timeStageIssuing is timeStage without the settling.
func (p *Pipeline) timeStageIssuing(ctx context.Context, pl *plan, iss Issuer, st Stage, first, last int) (time.Duration, error) {
	S, K := p.cfg.Slots, len(p.comp)
	// The copies of pl.copies chunks at a time are one copy, as a run
	// makes them (copiesFor): n covers the group from chunk c.
	step := max(1, pl.copies)
	groupBounds := func(c int) (off, n int) {
		off, _ = p.chunkBounds(pl, c)
		lastOff, lastN := p.chunkBounds(pl, min(c+step, last)-1)
		return off, lastOff + lastN - off
	}
	h2d := func(c int) error {
		off, n := groupBounds(c)
		for j, src := range pl.ins {
			mem, at := src.mem, off*src.elem
			if src.staged() {
				mem, at = p.sin[c%S][j], 0
			}
			if err := iss.CopyToDevice(p.h2d, p.din[c%S][j].all, p.din[c%S][j].off, mem, at, n*src.elem); err != nil {
				return &StageError{Chunk: c, Stage: StageH2D, Err: err}
			}
		}
		return nil
	}
	d2h := func(c int) error {
		off, n := groupBounds(c)
		for j, dst := range pl.outs {
			mem, at := dst.mem, off*dst.elem
			if dst.staged() {
				mem, at = p.sout[c%S][j], 0
			}
			if err := iss.CopyToHost(p.d2h, mem, at, p.dout[c%S][j].all, p.dout[c%S][j].off, n*dst.elem); err != nil {
				return &StageError{Chunk: c, Stage: StageD2H, Err: err}
			}
		}
		return nil
	}
	chunk := Chunk{}
	var each func(c int) error
	var streams []Stream
	grouped := false // each takes a group of step chunks
	switch st {
	case StageIn:
		each = func(c int) error {
			off, n := p.chunkBounds(pl, c)
			for j, src := range pl.ins {
				if src.staged() {
					if err := p.b.StageIn(p.sin[c%S][j], 0, src.data[off*src.elem:(off+n)*src.elem]); err != nil {
						return &StageError{Chunk: c, Stage: StageIn, Err: err}
					}
				}
			}
			return nil
		}
	case StageH2D:
		each, streams, grouped = h2d, []Stream{p.h2d}, true
	case StageCompute:
		each, streams = func(c int) error {
			off, n := p.chunkBounds(pl, c)
			p.fillChunk(&chunk, c, c%K, off, n) // one slot per compute stream: no two streams share buffers
			if err := iss.Launch(p.comp[c%K], pl.job.Kernel, chunk); err != nil {
				return &StageError{Chunk: c, Stage: StageCompute, Err: err}
			}
			return nil
		}, p.comp
	case StageD2H:
		each, streams, grouped = d2h, []Stream{p.d2h}, true
	case StageCopies:
		each, streams, grouped = func(c int) error {
			if err := h2d(c); err != nil {
				return err
			}
			return d2h(c)
		}, []Stream{p.h2d, p.d2h}, true
	case StageOut:
		each = func(c int) error {
			off, n := p.chunkBounds(pl, c)
			for j, dst := range pl.outs {
				if dst.staged() {
					if err := p.b.StageOut(dst.data[off*dst.elem:(off+n)*dst.elem], p.sout[c%S][j], 0); err != nil {
						return &StageError{Chunk: c, Stage: StageOut, Err: err}
					}
				}
			}
			return nil
		}
	default:
		return 0, fmt.Errorf("pipeline: stage %s cannot be timed alone", st)
	}
	if err := p.drain(); err != nil {
		return 0, err
	}
	if !grouped {
		step = 1
	}
	t0 := p.now()
	for c := first; c < last; c += step {
		if err := ctx.Err(); err != nil {
			p.drain()
			return 0, err
		}
		if err := each(c); err != nil {
			p.drain()
			return 0, err
		}
	}
	for _, s := range streams {
		if err := s.Synchronize(); err != nil {
			return 0, err
		}
	}
	return p.now() - t0, nil
}

// Synchronous runs job the way the lecture's processDataSynchronously
// does, for comparison: whole-array device buffers, a blocking copy of each
// input from pageable memory, one kernel over all N elements on one stream
// (each of its steps, for a kernel with Steps, with scratch buffers for all
// N), and a blocking copy of each output back. It returns the time from
// the first copy to the last; allocation and the upload of the kernel's
// parameters are not timed.
func Synchronous(ctx context.Context, b Backend, cfg Config, job Job) (time.Duration, error) {
	if b == nil {
		return 0, errors.New("pipeline: nil Backend")
	}
	if job.Kernel == nil {
		return 0, errors.New("pipeline: job has no Kernel")
	}
	if err := b.Prepare(job.Kernel); err != nil {
		return 0, err
	}
	if len(job.Inputs) != len(cfg.Inputs) || len(job.Outputs) != len(cfg.Outputs) {
		return 0, fmt.Errorf("pipeline: job has %d inputs and %d outputs, config %d and %d", len(job.Inputs), len(job.Outputs), len(cfg.Inputs), len(cfg.Outputs))
	}
	if err := checkKernel(job.Kernel, len(cfg.Inputs), len(cfg.Outputs), max(job.N, 1)); err != nil {
		return 0, err
	}
	if job.N <= 0 {
		return 0, nil
	}
	var mems []DeviceMem
	defer func() { closeAll(mems) }()
	alloc := func(bufs []Buffer, sizes []int) ([]DeviceMem, error) {
		var out []DeviceMem
		for i, buf := range bufs {
			need, ok := checkedMul(job.N, sizes[i])
			if !ok || len(buf.bytes()) < need {
				return nil, fmt.Errorf("pipeline: buffer %d holds %d bytes, need %d", i, len(buf.bytes()), need)
			}
			d, err := b.AllocDevice(need)
			if err != nil {
				return nil, err
			}
			mems = append(mems, d)
			out = append(out, d)
		}
		return out, nil
	}
	ins, err := alloc(job.Inputs, cfg.Inputs)
	if err != nil {
		return 0, err
	}
	outs, err := alloc(job.Outputs, cfg.Outputs)
	if err != nil {
		return 0, err
	}
	// The kernel's parameters, uploaded before the clock starts, and its
	// scratch buffers for all N elements.
	var extra []DeviceMem
	for _, pr := range job.Kernel.Params {
		d, err := b.AllocDevice(len(pr.Data))
		if err != nil {
			return 0, err
		}
		mems = append(mems, d)
		extra = append(extra, d)
		if err := b.CopyToDeviceSync(d, 0, pr.Data); err != nil {
			return 0, err
		}
	}
	for _, per := range job.Kernel.Scratch {
		d, err := b.AllocDevice(per * job.N)
		if err != nil {
			return 0, err
		}
		mems = append(mems, d)
		extra = append(extra, d)
	}
	s, err := b.NewStream()
	if err != nil {
		return 0, err
	}
	defer s.Close()
	iss, err := b.Issuer()
	if err != nil {
		return 0, err
	}
	defer iss.Release()
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	t0 := nowOf(b)
	c := Chunk{N: job.N}
	for i, d := range ins {
		if err := b.CopyToDeviceSync(d, 0, job.Inputs[i].bytes()[:d.Len()]); err != nil {
			return 0, &StageError{Chunk: 0, Stage: StageH2D, Err: err}
		}
		c.Inputs = append(c.Inputs, d.Ptr())
		c.InBytes = append(c.InBytes, d.Len())
	}
	for _, d := range outs {
		c.Outputs = append(c.Outputs, d.Ptr())
		c.OutBytes = append(c.OutBytes, d.Len())
	}
	for _, d := range extra {
		if len(c.Params) < len(job.Kernel.Params) {
			c.Params = append(c.Params, d.Ptr())
			continue
		}
		c.Scratch = append(c.Scratch, d.Ptr())
		c.ScratchBytes = append(c.ScratchBytes, d.Len())
	}
	if err := iss.Launch(s, job.Kernel, c); err != nil {
		return 0, &StageError{Chunk: 0, Stage: StageCompute, Err: err}
	}
	if err := s.Synchronize(); err != nil {
		return 0, &StageError{Chunk: 0, Stage: StageCompute, Err: err}
	}
	for i, d := range outs {
		if err := b.CopyToHostSync(job.Outputs[i].bytes()[:d.Len()], d, 0); err != nil {
			return 0, &StageError{Chunk: 0, Stage: StageD2H, Err: err}
		}
	}
	return nowOf(b) - t0, nil
}

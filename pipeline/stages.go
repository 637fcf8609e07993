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
}

// Bound is the slowest stage: no overlapped schedule can beat it.
func (s StageTimes) Bound() time.Duration { return max(s.In, s.H2D, s.Compute, s.D2H, s.Out) }

// Slowest names the slowest stage.
func (s StageTimes) Slowest() Stage {
	best, st := s.H2D, StageH2D
	for _, c := range []struct {
		d  time.Duration
		st Stage
	}{{s.Compute, StageCompute}, {s.D2H, StageD2H}, {s.In, StageIn}, {s.Out, StageOut}} {
		if c.d > best {
			best, st = c.d, c.st
		}
	}
	return st
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
// depend on the data, the kernels are timed but not computed. Staged outputs are left with unspecified
// contents, which Run overwrites; pinned and registered outputs are not
// written.
func (p *Pipeline) StageTimes(ctx context.Context, job Job) (StageTimes, error) {
	var st StageTimes
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
	if pl.staging {
		if err := p.allocStaging(); err != nil {
			return st, err
		}
	}
	iss, err := p.b.Issuer()
	if err != nil {
		return st, err
	}
	defer iss.Release()
	if t := trackerOf(p.b); t != nil {
		// Nobody reads what these kernels write: the simulator times them
		// without spending the CPU on them.
		t.hostTimeKernels(true)
		defer t.hostTimeKernels(false)
	}
	S, K := p.cfg.Slots, len(p.comp)

	timed := func(streams []Stream, each func(c int) error) (time.Duration, error) {
		if err := p.drain(); err != nil {
			return 0, err
		}
		t0 := p.now()
		for c := 0; c < pl.chunks; c++ {
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
	if pl.staging {
		if st.In, err = timed(nil, func(c int) error {
			off, n := p.chunkBounds(pl, c)
			for j, src := range pl.ins {
				if src.staged() {
					if err := p.b.StageIn(p.sin[c%S][j], 0, src.data[off*src.elem:(off+n)*src.elem]); err != nil {
						return &StageError{Chunk: c, Stage: StageIn, Err: err}
					}
				}
			}
			return nil
		}); err != nil {
			return st, err
		}
	}
	if st.H2D, err = timed([]Stream{p.h2d}, func(c int) error {
		off, n := p.chunkBounds(pl, c)
		for j, src := range pl.ins {
			mem, at := src.mem, off*src.elem
			if src.staged() {
				mem, at = p.sin[c%S][j], 0
			}
			if err := iss.CopyToDevice(p.h2d, p.din[c%S][j], 0, mem, at, n*src.elem); err != nil {
				return &StageError{Chunk: c, Stage: StageH2D, Err: err}
			}
		}
		return nil
	}); err != nil {
		return st, err
	}
	chunk := Chunk{}
	if st.Compute, err = timed(p.comp, func(c int) error {
		off, n := p.chunkBounds(pl, c)
		p.fillChunk(&chunk, c, c%K, off, n) // one slot per compute stream: no two streams share buffers
		if err := iss.Launch(p.comp[c%K], job.Kernel, chunk); err != nil {
			return &StageError{Chunk: c, Stage: StageCompute, Err: err}
		}
		return nil
	}); err != nil {
		return st, err
	}
	if st.D2H, err = timed([]Stream{p.d2h}, func(c int) error {
		off, n := p.chunkBounds(pl, c)
		for j, dst := range pl.outs {
			mem, at := dst.mem, off*dst.elem
			if dst.staged() {
				mem, at = p.sout[c%S][j], 0
			}
			if err := iss.CopyToHost(p.d2h, mem, at, p.dout[c%S][j], 0, n*dst.elem); err != nil {
				return &StageError{Chunk: c, Stage: StageD2H, Err: err}
			}
		}
		return nil
	}); err != nil {
		return st, err
	}
	if pl.staging {
		if st.Out, err = timed(nil, func(c int) error {
			off, n := p.chunkBounds(pl, c)
			for j, dst := range pl.outs {
				if dst.staged() {
					if err := p.b.StageOut(dst.data[off*dst.elem:(off+n)*dst.elem], p.sout[c%S][j], 0); err != nil {
						return &StageError{Chunk: c, Stage: StageOut, Err: err}
					}
				}
			}
			return nil
		}); err != nil {
			return st, err
		}
	}
	return st, nil
}

// Synchronous runs job the way the lecture's processDataSynchronously
// does, for comparison: whole-array device buffers, a blocking copy of each
// input from pageable memory, one kernel over all N elements on one stream,
// and a blocking copy of each output back. It returns the time from the
// first copy to the last; allocation is not timed.
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

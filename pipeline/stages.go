package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// StageTimes are each GPU stage's time over a whole job, run alone.
type StageTimes struct {
	H2D, Compute, D2H time.Duration
}

// Bound is the slowest stage: no overlapped schedule can beat it.
func (s StageTimes) Bound() time.Duration { return max(s.H2D, s.Compute, s.D2H) }

// StageTimes measures each GPU stage of job alone, with the pipeline's
// chunks, streams and slots: every chunk's H2D copies back to back on one
// stream, then every chunk's kernel on the compute streams, then every
// chunk's D2H copies. Copies use the job's pinned or registered memory, or
// the pinned staging slots for staged Go slices. The outputs are not
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
	S, K := p.cfg.Slots, len(p.comp)

	timed := func(streams []Stream, each func(c int) error) (time.Duration, error) {
		if err := p.drain(); err != nil {
			return 0, err
		}
		t0 := time.Now()
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
		return time.Since(t0), nil
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
	t0 := time.Now()
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
	return time.Since(t0), nil
}

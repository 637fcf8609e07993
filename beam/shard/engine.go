package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// engine is one pipeline of package pipeline on one device, with the
// kernel that shards stream through: what the kernel and the mlp
// processors share. A shard is one input stream and one output stream,
// each of rows of inRow and outRow bytes (the pipeline's elements).
type engine struct {
	backend       pipeline.Backend
	p             *pipeline.Pipeline
	k             *pipeline.Kernel
	inRow, outRow int
	closers       []func() error // in the order they close

	probeMu sync.Mutex
	perElem map[string]float64 // device stages' ns per row, once probed

	closeOnce sync.Once
	closeErr  error
}

// process streams in through the kernel into out. An input that ends
// inside a row is a *RowError at the offset where that row starts.
func (e *engine) process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
	if in == nil || out == nil {
		return Stats{}, errors.New("shard: Process needs an input and an output")
	}
	inName, outName := streamName(in, "input"), streamName(out, "output")
	job := pipeline.StreamJob{
		Inputs: []io.Reader{in}, Outputs: []io.Writer{out}, Kernel: e.k,
		InputNames: []string{inName}, OutputNames: []string{outName},
	}
	st := Stats{Backend: e.backend.Name()}
	rep, err := e.p.RunStream(ctx, job)
	if rep != nil {
		st.Rows, st.Elapsed = rep.N, rep.Elapsed
		if len(rep.InputBytes) == 1 && len(rep.OutputBytes) == 1 {
			st.InBytes, st.OutBytes = rep.InputBytes[0], rep.OutputBytes[0]
		}
	}
	if err != nil {
		var se *pipeline.StreamError
		if errors.As(err, &se) && errors.Is(err, pipeline.ErrPartialElement) {
			return st, &RowError{Shard: inName, Offset: se.Offset, Size: -1, RowBytes: e.inRow}
		}
		return st, err
	}
	per, err := e.perElement(ctx)
	if err != nil {
		return st, fmt.Errorf("shard: timing the device's stages: %w", err)
	}
	n := float64(rep.N)
	st.Stages = map[string]time.Duration{
		StageRead:    rep.Read,
		StageH2D:     time.Duration(per[StageH2D] * n),
		StageCompute: time.Duration(per[StageCompute] * n),
		StageD2H:     time.Duration(per[StageD2H] * n),
		StageWrite:   rep.Write,
	}
	st.Bound = slowest(st.Stages)
	return st, nil
}

// maxProbeBytes bounds the pinned memory of the stage probe (input and
// output together) where 2·Slots chunks would take more: rows of a wide
// model make large chunks.
const maxProbeBytes = 512 << 20

// probeChunks is how many chunks the stage probe of cfg measures: 2·Slots,
// fewer where they would pass maxProbeBytes, and at least 2.
func probeChunks(cfg pipeline.Config, inRow, outRow int) int {
	chunk := int64(cfg.ChunkElems) * int64(inRow+outRow)
	n := 2 * cfg.Slots
	for n > 2 && int64(n)*chunk > maxProbeBytes {
		n--
	}
	return n
}

// perElement returns the device stages' cost per row, measured once per
// engine: each stage alone (Pipeline.StageTimes) over 2·Slots chunks
// (probeChunks) of overlap's standard pattern in pinned memory. A shard's
// device stages are these times its rows, as overlap run --in reckons
// them; its read and write are measured in the run itself. The first
// probe of a kernel with Params uploads them to the device.
func (e *engine) perElement(ctx context.Context) (map[string]float64, error) {
	e.probeMu.Lock()
	defer e.probeMu.Unlock()
	if e.perElem != nil {
		return e.perElem, nil
	}
	cfg := e.p.Config()
	n := probeChunks(cfg, e.inRow, e.outRow) * cfg.ChunkElems
	in, err := e.backend.AllocPinned(e.inRow * n)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	out, err := e.backend.AllocPinned(e.outRow * n)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	kernels.FillPattern(driver.View[float32](in.Bytes()), 0)
	st, err := e.p.StageTimes(ctx, pipeline.Job{
		N: n, Kernel: e.k, Host: pipeline.HostPinned,
		Inputs: []pipeline.Buffer{pipeline.Pinned(in)}, Outputs: []pipeline.Buffer{pipeline.Pinned(out)},
	})
	if err != nil {
		return nil, err
	}
	e.perElem = map[string]float64{
		StageH2D:     float64(st.H2D) / float64(n),
		StageCompute: float64(st.Compute) / float64(n),
		StageD2H:     float64(st.D2H) / float64(n),
	}
	return e.perElem, nil
}

// close runs the closers in order, once.
func (e *engine) close() error {
	e.closeOnce.Do(func() {
		for _, c := range e.closers {
			e.closeErr = errors.Join(e.closeErr, c())
		}
	})
	return e.closeErr
}

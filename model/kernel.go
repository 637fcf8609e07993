package model

import (
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// KernelOptions say how a model runs in the pipeline. The zero value
// runs in FP32 on the simulator only.
type KernelOptions struct {
	Precision Precision
	// Gemm loads the GEMM kernels on each context the pipeline launches
	// on; nil leaves the steps without a GPU function (the simulator
	// needs none).
	Gemm *kernels.GemmModules
}

// gemm is the launch contract of a precision's GEMM entry.
func (p Precision) gemm() kernels.GemmContract {
	if p == TF32 {
		return kernels.Gemm.TF32
	}
	return kernels.Gemm.F32
}

// gemmAct is the GEMM's act argument for an activation.
func gemmAct(a Activation) kernels.GemmAct {
	if a == GELU {
		return kernels.GemmGELU
	}
	return kernels.GemmReLU
}

// scratchPlan says where each layer reads and writes: layer 0 reads input
// 0, the last layer writes output 0, and the layers between alternate
// between two scratch buffers, each as wide as the widest layer output it
// holds. It returns the scratch buffers' bytes per row.
func (m *Model) scratchPlan() (reads, writes []pipeline.Ref, scratch []int) {
	for i := range m.Layers {
		if i == 0 {
			reads = append(reads, pipeline.Ref{Kind: pipeline.RefInput, Index: 0})
		} else {
			reads = append(reads, pipeline.Ref{Kind: pipeline.RefScratch, Index: (i - 1) % 2})
		}
		if i == len(m.Layers)-1 {
			writes = append(writes, pipeline.Ref{Kind: pipeline.RefOutput, Index: 0})
			continue
		}
		j := i % 2
		if j == len(scratch) {
			scratch = append(scratch, 0)
		}
		scratch[j] = max(scratch[j], 4*m.Layers[i].Out)
		writes = append(writes, pipeline.Ref{Kind: pipeline.RefScratch, Index: j})
	}
	return reads, writes, scratch
}

// Kernel returns the model as a pipeline kernel over rows: one step per
// layer, each a launch of gemm_f32 or gemm_tf32 (by opts.Precision) with
// the activation after every layer but the last, reading the layer's
// weight and bias from the kernel's resident parameters (Params 2i and
// 2i+1, the file's tensors, zeros for a missing bias) and the previous
// layer's output from a scratch buffer. Each step has a CPU stand-in in
// float32 (Forward32) for the simulator, and its arithmetic for the
// simulator's cost ([StepFlops]: 2·in·out a row, out in whole tiles). Run
// it with [Model.Config]; each job's N counts rows, each row In float32
// in and Out float32 out (pipeline.Rows).
func (m *Model) Kernel(opts KernelOptions) (*pipeline.Kernel, error) {
	if err := m.Check(); err != nil {
		return nil, err
	}
	if opts.Precision != FP32 && opts.Precision != TF32 {
		return nil, fmt.Errorf("model: unknown precision %v", opts.Precision)
	}
	gemm := opts.Precision.gemm()
	entry := gemm.Entry
	reads, writes, scratch := m.scratchPlan()
	k := &pipeline.Kernel{
		Name:    fmt.Sprintf("mlp %s (%s)", m, opts.Precision),
		Scratch: scratch,
	}
	var fn func(*driver.Context) (*driver.Function, error)
	if opts.Gemm != nil {
		g := opts.Gemm
		fn = func(ctx *driver.Context) (*driver.Function, error) { return g.Function(ctx, entry) }
	}
	for i := range m.Layers {
		l := &m.Layers[i]
		wName, bName := l.WeightName, l.BiasName
		if wName == "" {
			wName = fmt.Sprintf("layer %d weight", i)
		}
		if bName == "" {
			bName = fmt.Sprintf("%s's bias (zeros)", wName)
		}
		k.Params = append(k.Params,
			pipeline.Param{Name: wName, Data: driver.Bytes(l.Weight)},
			pipeline.Param{Name: bName, Data: driver.Bytes(l.Bias)})
		wRef := pipeline.Ref{Kind: pipeline.RefParam, Index: 2 * i}
		bRef := pipeline.Ref{Kind: pipeline.RefParam, Index: 2*i + 1}
		in, out := reads[i], writes[i]
		last := i == len(m.Layers)-1
		act := kernels.GemmNone
		if !last {
			act = gemmAct(m.Activation)
		}
		activation := m.Activation
		k.Steps = append(k.Steps, pipeline.Step{
			Name:     entry,
			Function: fn,
			Args: func(a *driver.Args, c pipeline.Chunk) {
				gemm.Args(a, chunkPtr(c, out), chunkPtr(c, in), c.Params[wRef.Index], c.Params[bRef.Index], c.N, l.Out, l.In, act)
			},
			Launch: func(c pipeline.Chunk) driver.LaunchConfig { return gemm.Launch(c.N, l.Out) },
			Reads:  []pipeline.Ref{in, wRef, bRef},
			Writes: []pipeline.Ref{out},
			CPU: func(c pipeline.HostChunk) {
				x := driver.View[float32](hostBuf(c, in))[:c.N*l.In]
				y := driver.View[float32](hostBuf(c, out))[:c.N*l.Out]
				l.Forward32(y, x, c.N, activation, !last)
			},
			FlopsPerElem: StepFlops(l.In, l.Out),
		})
	}
	return k, nil
}

// StepFlops is the arithmetic that the GEMM kernels do for one row of a
// layer of in inputs and out outputs, the simulator's cost of the layer's
// step (pipeline.Step.FlopsPerElem): 2·in·out with out rounded up to the
// kernels' tile of 128 outputs (TileN of every entry this package
// launches), since a block computes its whole tile, the columns past out
// included. On the H200,
// gemm_f32 ran 768→256 at 42 TFLOP/s and 256→16 at 5 TFLOP/s of real
// arithmetic: 40 TFLOP/s of this, within 5% of the wide layers' rate.
func StepFlops(in, out int) float64 {
	tile := kernels.Gemm.F32.TileN // the same for TF32 and BF16
	return 2 * float64(in) * float64((out+tile-1)/tile*tile)
}

// chunkPtr is the device address of the chunk's buffer r.
func chunkPtr(c pipeline.Chunk, r pipeline.Ref) driver.DevicePtr {
	switch r.Kind {
	case pipeline.RefInput:
		return c.Inputs[r.Index]
	case pipeline.RefOutput:
		return c.Outputs[r.Index]
	case pipeline.RefParam:
		return c.Params[r.Index]
	}
	return c.Scratch[r.Index]
}

// hostBuf is the chunk's buffer r on the host (the simulator's).
func hostBuf(c pipeline.HostChunk, r pipeline.Ref) []byte {
	switch r.Kind {
	case pipeline.RefInput:
		return c.Inputs[r.Index]
	case pipeline.RefOutput:
		return c.Outputs[r.Index]
	case pipeline.RefParam:
		return c.Params[r.Index]
	}
	return c.Scratch[r.Index]
}

// DefaultChunkRows is the rows of a chunk when none is asked for: 16384,
// enough rows for the GEMM to fill a large GPU (a 128×128 tile per block:
// 16384 rows of 256 outputs are 256 blocks), fewer when a chunk of input
// or output would pass 64 MiB, and a multiple of every GEMM entry's
// tile rows (kernels.Gemm.TileM).
func (m *Model) DefaultChunkRows() int {
	widest := max(m.In(), m.Out(), 1) // 1 for a model without layers
	rows := min(16384, (64<<20)/(4*widest))
	tile := kernels.Gemm.TileM
	return max(tile, rows/tile*tile)
}

// Config returns the pipeline configuration for the model: one input of
// In float32 a row, one output of Out float32 a row, and chunks of
// chunkRows rows (DefaultChunkRows when 0). It refuses a chunk that a
// GEMM entry the model may run (gemm_f32 or gemm_tf32) cannot launch in
// one grid.
func (m *Model) Config(chunkRows int) (pipeline.Config, error) {
	if err := m.Check(); err != nil {
		return pipeline.Config{}, err
	}
	if chunkRows == 0 {
		chunkRows = m.DefaultChunkRows()
	}
	if chunkRows < 0 {
		return pipeline.Config{}, fmt.Errorf("model: a chunk of %d rows", chunkRows)
	}
	for _, l := range m.Layers {
		for _, p := range []Precision{FP32, TF32} {
			if err := p.gemm().Check(chunkRows, l.Out, l.In); err != nil {
				return pipeline.Config{}, fmt.Errorf("model: a chunk of %d rows through %s: %s", chunkRows, l.WeightName, trimWord(err))
			}
		}
	}
	return pipeline.Config{ChunkElems: chunkRows, Inputs: []int{4 * m.In()}, Outputs: []int{4 * m.Out()}}, nil
}

// trimWord drops an error's leading "ptx: ".
func trimWord(err error) string {
	s := err.Error()
	if len(s) > 5 && s[:5] == "ptx: " {
		return s[5:]
	}
	return s
}

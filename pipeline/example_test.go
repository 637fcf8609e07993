package pipeline_test

import (
	"context"
	"fmt"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// A job on the CPU simulator, as on a GPU: only the Backend differs
// (pipeline.GPU(ctx) on a GPU, with a kernels.Modules to load the kernel).
// The simulator checks every copy and kernel for ordering hazards.
func Example() {
	in, out := make([]float32, 100_000), make([]float32, 100_000)
	kernels.FillPattern(in, 0)

	k, err := kernels.Seed.Pipeline(nil, 10) // no GPU: no modules needed
	if err != nil {
		fmt.Println(err)
		return
	}
	dev := sim.New(1, 0)
	cfg := pipeline.Float32Config(1, 1) // one float32 input, one output
	cfg.ChunkElems = 16 << 10
	p, err := pipeline.New(dev, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	rep, err := p.Run(context.Background(), pipeline.Job{
		N:       len(in),
		Kernel:  k,
		Inputs:  []pipeline.Buffer{pipeline.Slice(in)},
		Outputs: []pipeline.Buffer{pipeline.Slice(out)},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%d chunks of %d on the %s, host memory %s\n", rep.Chunks, rep.ChunkElems, rep.Backend, rep.Mode)
	fmt.Println("hazards:", len(dev.Hazards()))
	fmt.Println("verified:", kernels.Seed.Verify([][]float32{in}, out, 10) == nil)
	// Output:
	// 7 chunks of 16384 on the simulator, host memory staged
	// hazards: 0
	// verified: true
}

// Mistakes in a job are reported before any work is issued.
func ExamplePipeline_Run_errors() {
	p, err := pipeline.New(sim.New(1, 0), pipeline.Float32Config(1, 1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer p.Close()
	k, _ := kernels.Seed.Pipeline(nil)
	wide := make([]float64, 10)
	_, err = p.Run(context.Background(), pipeline.Job{
		N: 10, Kernel: k,
		Inputs:  []pipeline.Buffer{pipeline.Slice(wide)},
		Outputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 10))},
	})
	fmt.Println(err)
	// Output:
	// pipeline: input 0 is a slice of 8-byte elements, but the pipeline's Config says 4-byte elements
}

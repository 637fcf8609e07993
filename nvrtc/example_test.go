package nvrtc_test

import (
	"context"
	"fmt"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// A .cu file compiled at run time for the GPU and run through the
// pipeline, as overlap run --cu FILE --entry NAME does. It needs a GPU
// and NVRTC, so it has no output to check.
func ExampleCompileKernelFile() {
	run := func(in, out []float32) error {
		dev, err := driver.DeviceAt(0)
		if err != nil {
			return err
		}
		ctx, err := driver.NewContext(dev)
		if err != nil {
			return err
		}
		defer ctx.Close()
		res, err := nvrtc.CompileKernelFile("testdata/scale.cu", "scale", nvrtc.Options{Device: dev})
		if err != nil {
			return err // without NVRTC: the files looked for and every path tried
		}
		prog, err := ptx.Load(ctx, "testdata/scale.cu", res.PTX, "scale", driver.ModuleOptions{})
		if err != nil {
			return err
		}
		defer prog.Close()
		p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Float32Config(1, 1))
		if err != nil {
			return err
		}
		defer p.Close()
		_, err = p.Run(context.Background(), pipeline.Job{
			N:       len(in),
			Kernel:  kernels.Elementwise("scale", pipeline.FunctionOn(ctx, prog.Function)),
			Inputs:  []pipeline.Buffer{pipeline.Slice(in)},
			Outputs: []pipeline.Buffer{pipeline.Slice(out)},
		})
		return err
	}
	in, out := []float32{1, 2, 3}, make([]float32, 3)
	if err := run(in, out); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(out) // [4 7 10]
}

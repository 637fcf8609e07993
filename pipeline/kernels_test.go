package pipeline_test

import (
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// The engine's tests run overlap's embedded kernels from the kernel table;
// these helpers keep the call sites short. mods is nil on the simulator.

func mustKernel(k *kernels.Kernel, mods *kernels.Modules, scalars ...float64) *pipeline.Kernel {
	pk, err := k.Pipeline(mods, scalars...)
	if err != nil {
		panic(err)
	}
	return pk
}

func seedKernel(mods *kernels.Modules, iters int) *pipeline.Kernel {
	return mustKernel(kernels.Seed, mods, float64(iters))
}

func saxpyKernel(mods *kernels.Modules, a float32) *pipeline.Kernel {
	return mustKernel(kernels.Saxpy, mods, float64(a))
}

func lerpKernel(mods *kernels.Modules, t, scale float32) *pipeline.Kernel {
	return mustKernel(kernels.Lerp, mods, float64(t), float64(scale))
}

func verifySeed(in, out []float32, iters int) error {
	return kernels.Seed.Verify([][]float32{in}, out, float64(iters))
}

func verifySaxpy(x, y, out []float32, a float32) error {
	return kernels.Saxpy.Verify([][]float32{x, y}, out, float64(a))
}

func verifyLerp(a, b, out []float32, t, scale float32) error {
	return kernels.Lerp.Verify([][]float32{a, b}, out, float64(t), float64(scale))
}

// gpuKernels returns the embedded kernels, loaded on ctx as they are first
// launched there, and unloaded when the test ends.
func gpuKernels(t *testing.T, ctx *driver.Context) *kernels.Modules {
	mods := new(kernels.Modules)
	t.Cleanup(func() { mods.Close() })
	// Load them now, so that a broken module fails here and not inside a run.
	for _, k := range []*kernels.Kernel{kernels.Seed, kernels.Saxpy, kernels.Lerp} {
		if _, err := mods.Function(ctx, k); err != nil {
			t.Fatalf("loading %s: %v", k.Name, err)
		}
	}
	return mods
}

var _ = gputest.Context

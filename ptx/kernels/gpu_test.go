package kernels

import (
	"context"
	"fmt"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUTableRows runs every pipelinable row of the table through the
// engine on the GPU, with its default scalars and two others, and checks
// every element against the row's reference: the row's PTX, argument
// builder (two scalars of one size swapped fail here) and verifier agree.
func TestGPUTableRows(t *testing.T) {
	ctx := gputest.Context(t)
	var mods Modules
	defer mods.Close()
	const n = 1<<22 + 7
	for _, k := range All() {
		if k.Inputs+k.Outputs == 0 {
			continue
		}
		for _, s := range variants(k) {
			t.Run(fmt.Sprintf("%s%v", k.Name, s), func(t *testing.T) {
				ins, out := runOnGPU(t, ctx, &mods, k, n, s)
				require.NoError(t, k.Verify(ins, out, s...))
			})
		}
	}
}

// runOnGPU runs kernel k over n pattern elements on ctx through the
// pipeline and returns its inputs and output.
func runOnGPU(t *testing.T, ctx *driver.Context, mods *Modules, k *Kernel, n int, s []float64) ([][]float32, []float32) {
	t.Helper()
	pk, err := k.Pipeline(mods, s...)
	require.NoError(t, err)
	cfg := pipeline.Float32Config(k.Inputs, k.Outputs)
	cfg.ChunkElems = 1 << 20
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	require.NoError(t, err)
	defer p.Close()
	job := pipeline.Job{N: n, Kernel: pk, Host: pipeline.HostStaged}
	var ins [][]float32
	for i := 0; i < k.Inputs; i++ {
		in := make([]float32, n)
		FillPattern(in, i*7919)
		ins = append(ins, in)
		job.Inputs = append(job.Inputs, pipeline.Slice(in))
	}
	out := make([]float32, n)
	job.Outputs = []pipeline.Buffer{pipeline.Slice(out)}
	_, err = p.Run(context.Background(), job)
	require.NoError(t, err)
	return ins, out
}

// TestGPUEmptyKernel launches the row that the pipeline cannot run.
func TestGPUEmptyKernel(t *testing.T) {
	ctx := gputest.Context(t)
	var mods Modules
	defer mods.Close()
	fn, err := mods.Function(ctx, Empty)
	require.NoError(t, err)
	s, err := ctx.NewStream(driver.StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, fn.Launch(s, driver.GridFor(1, 1), driver.NewArgs()))
	require.NoError(t, s.Synchronize())
}

// TestGPUModulesPerContext runs one kernel of one Modules on two contexts
// (two GPUs when the host has them, else two contexts of GPU 0): each
// context gets its own module, and a function resolved for one context is
// never handed to the other.
func TestGPUModulesPerContext(t *testing.T) {
	first := gputest.Context(t)
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	dev, err := driver.DeviceAt(min(1, n-1))
	require.NoError(t, err)
	second, err := driver.NewContext(dev)
	require.NoError(t, err)
	defer second.Close()

	var mods Modules
	for _, ctx := range []*driver.Context{first, second} {
		ins, out := runOnGPU(t, ctx, &mods, Seed, 1<<20+3, []float64{10})
		require.NoError(t, Seed.Verify(ins, out, 10))
	}
	p1, err := mods.Program(first, Seed)
	require.NoError(t, err)
	p2, err := mods.Program(second, Seed)
	require.NoError(t, err)
	assert.NotSame(t, p1, p2, "one module per context")
	again, err := mods.Program(first, Seed)
	require.NoError(t, err)
	assert.Same(t, p1, again, "loaded once per context")
	open1, open2 := first.OpenObjects(), second.OpenObjects()
	require.NoError(t, mods.Close())
	assert.Less(t, first.OpenObjects(), open1, "Close unloads the first context's module")
	assert.Less(t, second.OpenObjects(), open2, "Close unloads the second context's module")
}

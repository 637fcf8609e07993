package pipeline_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pinnedCopy returns a pinned buffer holding a copy of data.
func pinnedCopy(t testing.TB, ctx *driver.Context, data []float32) *driver.HostBuffer {
	h, err := ctx.AllocHost(max(len(data), 1)*4, driver.HostAllocOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { h.Close() })
	copy(h.Float32s(), data)
	return h
}

func TestGPUPipelineEveryElement(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	const chunk = 1 << 20
	sizes := []int{1, 1000, chunk, chunk + 1, 3*chunk + 17, 16<<20 + 5}
	for _, mode := range []pipeline.HostMode{pipeline.HostPinned, pipeline.HostStaged, pipeline.HostRegistered} {
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
		p, err := pipeline.New(pipeline.GPU(ctx), cfg)
		require.NoError(t, err)
		for _, n := range sizes {
			in := make([]float32, n)
			kernels.FillPattern(in, n)
			out := make([]float32, n)
			job := pipeline.Job{N: n, Kernel: seedKernel(ks, 100), Host: mode}
			var hout *driver.HostBuffer
			if mode == pipeline.HostPinned {
				job.Inputs = []pipeline.Buffer{pipeline.Pinned(pinnedCopy(t, ctx, in))}
				hout = pinnedCopy(t, ctx, make([]float32, n))
				job.Outputs = []pipeline.Buffer{pipeline.Pinned(hout)}
			} else {
				job.Inputs, job.Outputs = []pipeline.Buffer{pipeline.Slice(in)}, []pipeline.Buffer{pipeline.Slice(out)}
			}
			rep, err := p.Run(context.Background(), job)
			require.NoError(t, err, "%s n=%d", mode, n)
			assert.Equal(t, mode, rep.Mode)
			if hout != nil {
				out = hout.Float32s()[:n]
			}
			require.NoError(t, verifySeed(in, out, 100), "%s n=%d", mode, n)
		}
		require.NoError(t, p.Close())
	}
}

func TestGPUPipelineTwoInputKernels(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	const n = 5<<20 + 3
	a, b := make([]float32, n), make([]float32, n)
	kernels.FillPattern(a, 1)
	kernels.FillPattern(b, 99)
	for _, mode := range []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered} {
		cfg := pipeline.Float32Config(2, 1)
		cfg.ChunkElems = 1 << 20
		p, err := pipeline.New(pipeline.GPU(ctx), cfg)
		require.NoError(t, err)
		out := make([]float32, n)
		_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: saxpyKernel(ks, 2.5), Host: mode,
			Inputs: []pipeline.Buffer{pipeline.Slice(a), pipeline.Slice(b)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		require.NoError(t, verifySaxpy(a, b, out, 2.5), mode.String())
		_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: lerpKernel(ks, 0.75, -2), Host: mode,
			Inputs: []pipeline.Buffer{pipeline.Slice(a), pipeline.Slice(b)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		require.NoError(t, verifyLerp(a, b, out, 0.75, -2), mode.String())
		require.NoError(t, p.Close())
	}
}

func TestGPUPipelineRepeatedRuns(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	const n = 8 << 20
	in, out := make([]float32, n), make([]float32, n)
	p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Config{ChunkElems: 1 << 20, Inputs: []int{4}, Outputs: []int{4}})
	require.NoError(t, err)
	defer p.Close()
	for r := 0; r < 6; r++ {
		kernels.FillPattern(in, r*7)
		clear(out)
		rep, err := p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(ks, 20), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err)
		require.NoError(t, verifySeed(in, out, 20), "run %d", r)
		t.Logf("run %d: mode %s, %v (registration %v)", r, rep.Mode, rep.Elapsed, rep.Register)
		if r >= 2 {
			assert.Equal(t, pipeline.HostRegistered, rep.Mode)
			assert.Zero(t, rep.Register, "registration is cached")
		}
	}
}

func TestGPUConcurrentPipelines(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			n := (g + 1) * 3 << 20
			cfg := pipeline.Float32Config(1, 1)
			if g%2 == 1 {
				cfg = pipeline.Float32Config(2, 1)
			}
			cfg.ChunkElems = (256 << 10) << g
			p, err := pipeline.New(pipeline.GPU(ctx), cfg)
			if err != nil {
				errs <- err
				return
			}
			defer p.Close()
			a, b, out := make([]float32, n), make([]float32, n), make([]float32, n)
			kernels.FillPattern(a, g)
			kernels.FillPattern(b, g+5)
			for r := 0; r < 3; r++ {
				if g%2 == 0 {
					_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(ks, 10), Inputs: []pipeline.Buffer{pipeline.Slice(a)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
					if err == nil {
						err = verifySeed(a, out, 10)
					}
				} else {
					_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: saxpyKernel(ks, float32(g)), Inputs: []pipeline.Buffer{pipeline.Slice(a), pipeline.Slice(b)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
					if err == nil {
						err = verifySaxpy(a, b, out, float32(g))
					}
				}
				if err != nil {
					errs <- fmt.Errorf("pipeline %d run %d: %w", g, r, err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestGPUOverlapFromEvents proves the overlap from event timestamps: the
// copies of chunk k+1 run while the kernel of chunk k runs.
func TestGPUOverlapFromEvents(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	const n, chunk = 32 << 20, 2 << 20
	in := pinnedCopy(t, ctx, make([]float32, n))
	kernels.FillPattern(in.Float32s(), 0)
	out := pinnedCopy(t, ctx, make([]float32, n))
	p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Config{ChunkElems: chunk, Inputs: []int{4}, Outputs: []int{4}, Timing: true})
	require.NoError(t, err)
	defer p.Close()
	rep, err := p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(ks, 100), Inputs: []pipeline.Buffer{pipeline.Pinned(in)}, Outputs: []pipeline.Buffer{pipeline.Pinned(out)}})
	require.NoError(t, err)
	require.NoError(t, verifySeed(in.Float32s(), out.Float32s(), 100))
	byKey := map[[2]int]pipeline.Span{}
	for _, s := range rep.Spans {
		byKey[[2]int{s.Chunk, int(s.Stage)}] = s
	}
	overlapped := 0
	for k := 0; k+1 < rep.Chunks; k++ {
		kern := byKey[[2]int{k, int(pipeline.StageCompute)}]
		next := byKey[[2]int{k + 1, int(pipeline.StageH2D)}]
		if next.Start < kern.End && kern.Start < next.End {
			overlapped++
		}
	}
	t.Logf("%d of %d chunk pairs overlap H2D(k+1) with compute(k); total %v", overlapped, rep.Chunks-1, rep.Elapsed)
	assert.GreaterOrEqual(t, overlapped, (rep.Chunks-1)*3/4)
}

func TestGPUCancelAndReuse(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	free0, _, err := ctx.MemoryInfo()
	require.NoError(t, err)
	const n = 16 << 20
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 3)
	p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Config{ChunkElems: 1 << 20, Inputs: []int{4}, Outputs: []int{4}, Host: pipeline.HostStaged})
	require.NoError(t, err)
	canceled := 0
	var longest time.Duration
	for i := 0; i < 40; i++ {
		c, cancel := context.WithCancel(context.Background())
		time.AfterFunc(time.Duration(i%10)*time.Millisecond, cancel)
		start := time.Now()
		_, err := p.Run(c, pipeline.Job{N: n, Kernel: seedKernel(ks, 100), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		if err != nil {
			require.ErrorIs(t, err, context.Canceled)
			canceled++
			longest = max(longest, time.Since(start))
		}
		cancel()
	}
	t.Logf("%d of 40 runs cancelled; longest cancelled run took %v", canceled, longest)
	assert.Greater(t, canceled, 0)
	_, err = p.Run(context.Background(), pipeline.Job{N: n, Kernel: seedKernel(ks, 100), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	require.NoError(t, verifySeed(in, out, 100))
	require.NoError(t, p.Close())
	free1, _, err := ctx.MemoryInfo()
	require.NoError(t, err)
	assert.InDelta(t, float64(free0), float64(free1), 8<<20, "device memory returned")
}

package pipeline_test

import (
	"context"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	. "github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUWaitModes guards issue 14: a pipeline runs small jobs, one chunk
// each with pinned buffers, on a context made in each wait mode, and every
// element is right. It runs in a fresh process, so that each mode finds
// the primary context inactive.
func TestGPUWaitModes(t *testing.T) {
	if !gputest.Fresh(t) {
		return
	}
	for _, w := range []driver.Wait{driver.WaitSpin, driver.WaitYield, driver.WaitBlock} {
		t.Run(w.String(), func(t *testing.T) {
			ctx := gputest.ContextWith(t, driver.ContextOptions{Wait: w})
			got, err := ctx.Wait()
			require.NoError(t, err)
			require.Equal(t, w, got)
			for _, n := range []int{4 << 10, 1 << 20} {
				p, job, in, hout := smallJob(t, ctx, n, n, 100)
				for i := 0; i < 20; i++ {
					rep, err := p.Run(context.Background(), job)
					require.NoError(t, err, "%s, %d elements, job %d", w, n, i)
					assert.Equal(t, 1, rep.Chunks)
				}
				require.NoError(t, verifySeed(in, hout.Float32s()[:n], 100), "%s, %d elements", w, n)
				require.NoError(t, p.Close())
			}
		})
	}
}

// BenchmarkGPUSmallJob times one small job (4K elements, pinned, one
// chunk, the seed kernel with 100 iterations) on a reused pipeline, the
// unit of overlap bench --small-jobs, so that a CPU profile shows where the
// host's time per job goes (issue 14). The last job's output is checked.
func BenchmarkGPUSmallJob(b *testing.B) {
	const n = 4 << 10
	p, job, in, hout := smallJob(b, gputest.Context(b), n, n, 100)
	_, err := p.Run(context.Background(), job)
	require.NoError(b, err)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Run(context.Background(), job); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	require.NoError(b, verifySeed(in, hout.Float32s()[:n], 100))
}

// smallJob is one job of n elements as overlap bench --small-jobs runs it:
// on a smallJobPipeline, with pinned input and output buffers of room
// elements (the input holding the standard pattern, which it returns too)
// and the seed kernel at iters iterations. Everything is closed when t
// ends, the pipeline first.
func smallJob(t testing.TB, ctx *driver.Context, n, room, iters int) (*Pipeline, Job, []float32, *driver.HostBuffer) {
	t.Helper()
	mods := new(kernels.Modules)
	t.Cleanup(func() { mods.Close() })
	in := make([]float32, room)
	kernels.FillPattern(in, 0)
	hin, hout := pinnedCopy(t, ctx, in), pinnedCopy(t, ctx, make([]float32, room))
	p := smallJobPipeline(t, ctx, n)
	t.Cleanup(func() { p.Close() })
	job := Job{N: n, Kernel: seedKernel(mods, iters), Inputs: []Buffer{Pinned(hin)}, Outputs: []Buffer{Pinned(hout)}}
	return p, job, in, hout
}

// smallJobPipeline is the pipeline that overlap bench --small-jobs runs a
// job of n elements on: one chunk of n, two slots, one compute stream, on
// ctx. The caller closes it.
func smallJobPipeline(t testing.TB, ctx *driver.Context, n int) *Pipeline {
	t.Helper()
	cfg := Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = n, 2, 1
	p, err := New(GPU(ctx), cfg)
	require.NoError(t, err)
	return p
}

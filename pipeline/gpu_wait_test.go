package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
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

// TestGPUDirectCalls runs jobs on a backend made with
// GPUOptions.DirectCalls (issue 14) from four goroutines at once, each
// with its own pipeline on one context, while the garbage collector runs
// all the while: small jobs of one chunk (direct calls, where the build
// has them: it logs whether), and on the same pipeline a job of eight
// chunks on pinned memory and a staged one (the safe path), every element
// of every job checked against the CPU.
func TestGPUDirectCalls(t *testing.T) {
	ctx := gputest.Context(t)
	t.Logf("direct calls in this build: %v", driver.DirectCallsAvailable())
	mods := new(kernels.Modules)
	t.Cleanup(func() { mods.Close() })
	const iters, chunk = 20, 64 << 10
	const big = 8*chunk - 5
	ins, hins, houts := make([][]float32, 4), make([]*driver.HostBuffer, 4), make([]*driver.HostBuffer, 4)
	for g := range 4 {
		ins[g] = make([]float32, big)
		kernels.FillPattern(ins[g], g)
		hins[g], houts[g] = pinnedCopy(t, ctx, ins[g]), pinnedCopy(t, ctx, make([]float32, big))
	}
	// directJobs runs goroutine g's jobs and returns the first failure.
	directJobs := func(g int) error {
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
		p, err := pipeline.New(pipeline.GPUWith(ctx, pipeline.GPUOptions{DirectCalls: true}), cfg)
		if err != nil {
			return err
		}
		defer p.Close()
		in, hin, hout := ins[g], hins[g], houts[g]
		out := make([]float32, big)
		k := seedKernel(mods, iters)
		var rep pipeline.Report
		for r := range 40 {
			n := 4 << 10
			job := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Pinned(hin)}, Outputs: []pipeline.Buffer{pipeline.Pinned(hout)}}
			got := func() []float32 { return hout.Float32s()[:n] }
			switch r % 4 {
			case 1:
				job.N, n = chunk, chunk
			case 2:
				job.N, n = big, big
			case 3:
				job.N, n = big, big
				job.Host, job.Inputs, job.Outputs = pipeline.HostStaged, []pipeline.Buffer{pipeline.Slice(in)}, []pipeline.Buffer{pipeline.Slice(out)}
				got = func() []float32 { return out }
			}
			clear(hout.Float32s())
			clear(out)
			if err := p.RunInto(context.Background(), job, &rep); err != nil {
				return fmt.Errorf("goroutine %d, job %d (%d elements): %w", g, r, n, err)
			}
			if err := verifySeed(in[:n], got(), iters); err != nil {
				return fmt.Errorf("goroutine %d, job %d (%d elements, %d chunks): %w", g, r, n, rep.Chunks, err)
			}
		}
		return nil
	}
	errs := make(chan error, 4)
	gputest.WhileCollecting(func() {
		for g := range 4 {
			go func() { errs <- directJobs(g) }()
		}
		for range 4 {
			assert.NoError(t, <-errs)
		}
	})
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

// BenchmarkGPUSmallJobPaired splits a small job's time on the GPU into the
// driver's and the engine's: it alternates blocks of jobs through
// Pipeline.RunInto with blocks of the same job's four calls made directly
// through a driver.Bound (a copy in, the launch, a copy out, a stream
// synchronisation: what bench/reference/smalljobs.cu makes), on buffers of
// the same size, in one process, so that the machine's drift from run to
// run falls on both alike (issue 14). It reports run-ns/job, bound-ns/job
// and their difference, engine-ns/job, the pipeline's own cost per job
// (binding its issuer's thread for each job included).
// It also alternates blocks of the Bound's calls bound anew for each job,
// as a run binds its issuer: bind-ns/job is what that costs, the part of
// engine-ns/job that is binding; and blocks of the same jobs on a pipeline
// whose backend makes direct calls (GPUOptions.DirectCalls):
// direct-run-ns/job, and direct-saves-ns/job, what that saves a job.
// OVERLAP_SMALLJOB_ELEMS sets the job's size (4096 unless set). The
// outputs are checked.
func BenchmarkGPUSmallJobPaired(b *testing.B) {
	const iters, block = 100, 256
	n := 4 << 10
	if v := os.Getenv("OVERLAP_SMALLJOB_ELEMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 1<<28 {
			b.Fatalf("OVERLAP_SMALLJOB_ELEMS=%q: want 1 to %d elements", v, 1<<28)
		}
	}
	ctx := gputest.Context(b)
	p, job, in, hout := smallJob(b, ctx, n, n, iters)
	var rep pipeline.Report
	require.NoError(b, p.RunInto(context.Background(), job, &rep))
	pd := smallJobPipelineWith(b, ctx, n, pipeline.GPUOptions{DirectCalls: true})
	b.Cleanup(func() { pd.Close() })
	hout3 := pinnedCopy(b, ctx, make([]float32, n))
	jobd := job
	jobd.Outputs = []pipeline.Buffer{pipeline.Pinned(hout3)}
	require.NoError(b, pd.RunInto(context.Background(), jobd, &rep))
	bound, hout2 := boundJobs(b, ctx, in, iters, false)
	rebind, _ := boundJobs(b, ctx, in, iters, true)
	runOn := func(p *pipeline.Pipeline, job pipeline.Job) func(int) {
		return func(jobs int) {
			for range jobs {
				if err := p.RunInto(context.Background(), job, &rep); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	run, runDirect := runOn(p, job), runOn(pd, jobd)
	timed := func(f func(int), jobs int) time.Duration {
		t0 := time.Now()
		f(jobs)
		return time.Since(t0)
	}
	bound(block) // warm the second module
	rebind(block)
	for _, h := range []*driver.HostBuffer{hout, hout2, hout3} {
		clear(h.Bytes()) // the checks below see the timed jobs' output
	}
	b.ResetTimer()
	var tRun, tBound, tRebind, tDirect time.Duration
	for done := 0; done < b.N; done += block {
		k := min(block, b.N-done)
		tRun += timed(run, k)
		tBound += timed(bound, k)
		tRebind += timed(rebind, k)
		tDirect += timed(runDirect, k)
	}
	b.StopTimer()
	perJob := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(perJob(tRun), "run-ns/job")
	b.ReportMetric(perJob(tBound), "bound-ns/job")
	b.ReportMetric(perJob(tRun-tBound), "engine-ns/job")
	b.ReportMetric(perJob(tRebind-tBound), "bind-ns/job")
	b.ReportMetric(perJob(tDirect), "direct-run-ns/job")
	b.ReportMetric(perJob(tRun-tDirect), "direct-saves-ns/job")
	require.NoError(b, verifySeed(in, hout.Float32s()[:n], iters), "through the pipeline")
	require.NoError(b, verifySeed(in, hout2.Float32s()[:n], iters), "through the Bound")
	require.NoError(b, verifySeed(in, hout3.Float32s()[:n], iters), "through the pipeline with direct calls")
}

// boundJobs returns a function that runs jobs small jobs of len(in)
// elements back to back as bench/reference/smalljobs.cu makes them, with
// no pipeline: the four calls (a copy in, the seed kernel at iters
// iterations, a copy out, a stream synchronisation) through a
// driver.Bound, bound once per call of it (or once per job, with
// perJob), on pinned buffers, device buffers and a stream of its own; and
// the pinned output buffer. Everything is closed when tb ends.
func boundJobs(tb testing.TB, ctx *driver.Context, in []float32, iters int, perJob bool) (func(jobs int), *driver.HostBuffer) {
	tb.Helper()
	n := len(in)
	mods := new(kernels.Modules)
	tb.Cleanup(func() { mods.Close() })
	fn, err := mods.Function(ctx, kernels.Seed)
	require.NoError(tb, err)
	hin, hout := pinnedCopy(tb, ctx, in), pinnedCopy(tb, ctx, make([]float32, n))
	din, err := ctx.Alloc(4 * n)
	require.NoError(tb, err)
	tb.Cleanup(func() { din.Close() })
	dout, err := ctx.Alloc(4 * n)
	require.NoError(tb, err)
	tb.Cleanup(func() { dout.Close() })
	s, err := ctx.NewStream(driver.StreamOptions{})
	require.NoError(tb, err)
	tb.Cleanup(func() { s.Close() })
	args := driver.NewArgs().Buffer(dout, 0).Buffer(din, 0).Uint32(uint32(n)).Int32(int32(iters))
	cfg := driver.GridFor(n, 256)
	var bd driver.Bound
	bind := func() {
		if err := ctx.BindInto(&bd); err != nil {
			tb.Fatal(err)
		}
	}
	return func(jobs int) {
		if !perJob {
			bind()
		}
		for range jobs {
			if perJob {
				bind()
			}
			err := bd.CopyToDevice(s, din, 0, hin, 0, 4*n)
			if err == nil {
				err = bd.Launch(fn, s, cfg, args)
			}
			if err == nil {
				err = bd.CopyToHost(s, hout, 0, dout, 0, 4*n)
			}
			if err == nil {
				err = bd.Synchronize(s)
			}
			if err != nil {
				tb.Fatal(err)
			}
			if perJob {
				bd.Release()
			}
		}
		bd.Release()
	}, hout
}

// smallJob is one job of n elements as overlap bench --small-jobs runs it:
// on a smallJobPipeline, with pinned input and output buffers of room
// elements (the input holding the standard pattern, which it returns too)
// and the seed kernel at iters iterations. Everything is closed when t
// ends, the pipeline first.
func smallJob(t testing.TB, ctx *driver.Context, n, room, iters int) (*pipeline.Pipeline, pipeline.Job, []float32, *driver.HostBuffer) {
	t.Helper()
	mods := new(kernels.Modules)
	t.Cleanup(func() { mods.Close() })
	in := make([]float32, room)
	kernels.FillPattern(in, 0)
	hin, hout := pinnedCopy(t, ctx, in), pinnedCopy(t, ctx, make([]float32, room))
	p := smallJobPipeline(t, ctx, n)
	t.Cleanup(func() { p.Close() })
	job := pipeline.Job{N: n, Kernel: seedKernel(mods, iters), Inputs: []pipeline.Buffer{pipeline.Pinned(hin)}, Outputs: []pipeline.Buffer{pipeline.Pinned(hout)}}
	return p, job, in, hout
}

// smallJobPipeline is the pipeline that overlap bench --small-jobs runs a
// job of n elements on: one chunk of n, two slots, one compute stream, on
// ctx. The caller closes it.
func smallJobPipeline(t testing.TB, ctx *driver.Context, n int) *pipeline.Pipeline {
	t.Helper()
	return smallJobPipelineWith(t, ctx, n, pipeline.GPUOptions{})
}

// smallJobPipelineWith is smallJobPipeline on a backend with opts.
func smallJobPipelineWith(t testing.TB, ctx *driver.Context, n int, opts pipeline.GPUOptions) *pipeline.Pipeline {
	t.Helper()
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = n, 2, 1
	p, err := pipeline.New(pipeline.GPUWith(ctx, opts), cfg)
	require.NoError(t, err)
	return p
}

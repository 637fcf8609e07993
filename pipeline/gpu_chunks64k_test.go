package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// BenchmarkGPU64KPipelines asks whether the spread of the 64K-element
// chunks between processes (bench/RESULTS.md, "64K-element chunks: the
// spread between processes": a slow process is slow in all its runs)
// belongs to the process or to the pipeline: in one process it builds
// the CLI's pipeline (128M elements from pinned memory, 64K chunks, the
// default slots and streams) nine times over, each with new streams and
// device buffers, and prints each one's runs. If the slow mode comes and
// goes between pipelines of one process, it is the pipeline's streams
// (their hardware queues, or the copy engines that their copies take);
// if every pipeline of a process runs alike, it is the context's. The
// pipelines take three shapes in turn: the default (copies of 16 chunks,
// 4 MiB, on 48 slots: coalesceTarget), the default before it (copies of
// 4 chunks, 1 MiB, on 24 slots), and copies of 8 chunks (2 MiB) on 48
// slots. Run with -test.benchtime 1x.
func BenchmarkGPU64KPipelines(b *testing.B) {
	ctx := gputest.Context(b)
	mods := new(kernels.Modules)
	b.Cleanup(func() { mods.Close() })
	const n, chunk, runs, pipelines = 128 << 20, 64 << 10, 3, 9
	gpu := pipeline.GPU(ctx)
	in, err := gpu.AllocPinned(4 * n)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := gpu.AllocPinned(4 * n)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	src := driver.View[float32](in.Bytes())[:n]
	kernels.FillPattern(src, 0)
	k := seedKernel(mods, 100)
	job := pipeline.Job{N: n, Kernel: k, Host: pipeline.HostPinned,
		Inputs: []pipeline.Buffer{pipeline.Pinned(in)}, Outputs: []pipeline.Buffer{pipeline.Pinned(out)}}
	shapes := []struct{ slots, copyChunks int }{{0, 0}, {24, 4}, {48, 8}}
	var bests []time.Duration
	for i := 0; i < b.N*pipelines; i++ {
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Host = chunk, pipeline.HostPinned
		cfg.Slots, cfg.CopyChunks = shapes[i%len(shapes)].slots, shapes[i%len(shapes)].copyChunks
		p, err := pipeline.New(gpu, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if i == b.N*pipelines-1 {
			clear(out.Bytes())
		}
		var took []time.Duration
		for r := 0; r < runs+1; r++ { // the first warms up
			rep, err := p.Run(context.Background(), job)
			if err != nil {
				p.Close()
				b.Fatal(err)
			}
			if r > 0 {
				took = append(took, rep.Elapsed)
			}
		}
		slots, streams, group := p.Config().Slots, p.Config().ComputeStreams, p.Config().CopyChunks
		if err := p.Close(); err != nil {
			b.Fatal(err)
		}
		if i == b.N*pipelines-1 { // every element once, of the last pipeline's runs
			if err := verifySeed(src, driver.View[float32](out.Bytes())[:n], 100); err != nil {
				b.Fatal(err)
			}
		}
		line := fmt.Sprintf("pipeline %d (%d slots, %d compute streams, CopyChunks %d, 0 for the default's):", i, slots, streams, group)
		for _, d := range took {
			line += fmt.Sprintf(" %.2f", float64(d)/1e6)
		}
		b.Log(line + " ms")
		bests = append(bests, slices.Min(took))
	}
	slices.Sort(bests)
	b.ReportMetric(float64(bests[0]), "best-ns")
	b.ReportMetric(float64(bests[len(bests)-1]), "worst-pipeline-best-ns")
}

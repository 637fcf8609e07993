//go:build linux

package pipeline_test

import (
	"context"
	"testing"

	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
)

// BenchmarkFakeSmallJob measures the engine's own host cost for one small
// job (4K elements, one chunk, pinned buffers, a reused pipeline, as
// overlap bench --small-jobs runs it; under a context that cannot be
// cancelled and one that can), with the driver's cost removed: it
// runs against the fake driver in its no-op mode (`make bench-fake`; it
// skips otherwise). What it reports is what Pipeline.Run adds on top of
// the five driver calls that a hand-written C++ job makes too (issue 14).
func BenchmarkFakeSmallJob(b *testing.B) {
	f := fakecuda.Benchmark(b)
	f.Reset()
	ctx := gputest.Context(b)
	p, job, in, _ := smallJob(b, ctx, 4<<10, 4<<10, 1)
	bound, _ := boundJobs(b, ctx, in, 1, false)
	if _, err := p.Run(context.Background(), job); err != nil { // loads the kernel
		b.Fatal(err)
	}
	f.Noop(true)
	defer f.Reset()
	// The floor: the same four calls through a Bound, with no pipeline.
	b.Run("Bound", func(b *testing.B) {
		b.ReportAllocs()
		bound(b.N)
	})
	// The same jobs on a backend whose issuers make direct calls.
	pd := smallJobPipelineWith(b, ctx, 4<<10, pipeline.GPUOptions{DirectCalls: true})
	b.Cleanup(func() { pd.Close() })
	b.Run("Direct/RunInto", func(b *testing.B) {
		b.ReportAllocs()
		var rep pipeline.Report
		for i := 0; i < b.N; i++ {
			if err := pd.RunInto(context.Background(), job, &rep); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range jobContexts(b) {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := p.Run(c.ctx, job); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/RunInto", func(b *testing.B) {
			b.ReportAllocs()
			var rep pipeline.Report
			for i := 0; i < b.N; i++ {
				if err := p.RunInto(c.ctx, job, &rep); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

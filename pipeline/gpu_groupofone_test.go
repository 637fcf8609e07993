package pipeline_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// BenchmarkGPUGroupOfOne times the README's job (4M elements of seed at
// 100 iterations in 256K chunks, registered memory) back to back through
// a Pipeline and through a Group of the same one GPU, in turn, b.N
// rounds of one run each, and reports each one's best and median: what a
// group of one costs beyond its pipeline (overlap run measures through a
// Group). Every element of the last run of each is checked.
func BenchmarkGPUGroupOfOne(b *testing.B) {
	ctx := gputest.Context(b)
	mods := new(kernels.Modules)
	b.Cleanup(func() { mods.Close() })
	const n, chunk = 4 << 20, 256 << 10
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Host = chunk, pipeline.HostRegistered
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	g, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctx)}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	// Each its own slices: one registers what it runs on, and memory
	// that one holds registered the other cannot register.
	inP, inG, outP, outG := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	kernels.FillPattern(inP, 0)
	copy(inG, inP)
	k := seedKernel(mods, 100)
	jobP := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(inP)}, Outputs: []pipeline.Buffer{pipeline.Slice(outP)}}
	jobG := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(inG)}, Outputs: []pipeline.Buffer{pipeline.Slice(outG)}}
	bg := context.Background()
	var tp, tg []time.Duration
	for i := 0; i < b.N+5; i++ { // the first 5 of each register and warm up
		rp, err := p.Run(bg, jobP)
		if err != nil {
			b.Fatal(err)
		}
		rg, err := g.Run(bg, jobG)
		if err != nil {
			b.Fatal(err)
		}
		if i >= 5 {
			tp, tg = append(tp, rp.Elapsed), append(tg, rg.Elapsed)
		}
	}
	for _, out := range [][]float32{outP, outG} {
		if err := verifySeed(inP, out, 100); err != nil {
			b.Fatal(err)
		}
	}
	slices.Sort(tp)
	slices.Sort(tg)
	b.ReportMetric(float64(tp[0]), "pipeline-best-ns")
	b.ReportMetric(float64(tp[len(tp)/2]), "pipeline-p50-ns")
	b.ReportMetric(float64(tg[0]), "group-best-ns")
	b.ReportMetric(float64(tg[len(tg)/2]), "group-p50-ns")
}

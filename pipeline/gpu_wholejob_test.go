package pipeline_test

import (
	"context"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/internal/ntstore"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// BenchmarkGPUWholeJob runs small whole jobs (1M and 4M elements of the
// seed kernel at 100 iterations, pinned, a few chunks) back to back on one
// pipeline, the shape that bench/reference/wholejob.cu runs in C++, and
// reports the best and the median run (best-ns, p50-ns); then runs it ten
// times more, each right after 20 ms of Group.Warm, as overlap run times
// its runs (warm-best-ns, warm-p50-ns), and five times as overlap run
// timed it until it rehearsed, its output cleared before 500 ms of Warm
// and checked after (cli-best-ns, cli-p50-ns); with an untimed run
// between the warm-up and the timed one (again-); as overlap run times
// it now (bench.RunOptions.Rehearse): 500 ms of Warm, an untimed run, the
// output poisoned with NaN by non-temporal stores (ntstore.Fill), the
// timed run (rehearse-); so with the poison written by plain stores
// (rehearse-plain-); and with no untimed run, the output poisoned by
// non-temporal stores before the warm-up (nt-). One more run with
// Config.Timing then says where the device's time went: dev-first-ns is
// when its first stage began after the run's origin, dev-last-ns when its
// last ended, and run-ns that run's Elapsed; the gap between dev-last-ns
// and run-ns is the host's own start and finish. Every element of the last
// timed run and of the timed run is checked.
func BenchmarkGPUWholeJob(b *testing.B) {
	ctx := gputest.Context(b)
	type shape struct {
		n, chunk, streams, slots int
		sched                    pipeline.Schedule
		copyChunks               int
		host                     pipeline.HostMode
	}
	var shapes []shape
	for _, n := range []int{1 << 20, 4 << 20} {
		for _, chunk := range []int{128 << 10, 256 << 10, 512 << 10, 1 << 20} {
			for _, host := range []pipeline.HostMode{pipeline.HostPinned, pipeline.HostRegistered} {
				shapes = append(shapes,
					shape{n, chunk, 4, 6, pipeline.ScheduleEvents, 1, host},
					shape{n, chunk, 4, 8, pipeline.ScheduleInStream, 0, host},
					shape{n, chunk, 8, 8, pipeline.ScheduleInStream, 0, host})
			}
		}
	}
	for _, sh := range shapes {
		name := fmt.Sprintf("n=%dK/chunk=%dK/%s/%s/streams=%d/slots=%d", sh.n>>10, sh.chunk>>10, sh.host, sh.sched, sh.streams, sh.slots)
		b.Run(name, func(b *testing.B) {
			mods := new(kernels.Modules)
			b.Cleanup(func() { mods.Close() })
			in := make([]float32, sh.n)
			kernels.FillPattern(in, 0)
			hin, hout := pinnedCopy(b, ctx, in), pinnedCopy(b, ctx, make([]float32, sh.n))
			job := pipeline.Job{N: sh.n, Kernel: seedKernel(mods, 100), Host: sh.host,
				Inputs: []pipeline.Buffer{pipeline.Pinned(hin)}, Outputs: []pipeline.Buffer{pipeline.Pinned(hout)}}
			out := hout.Float32s()
			if sh.host == pipeline.HostRegistered {
				out = make([]float32, sh.n)
				job.Inputs, job.Outputs = []pipeline.Buffer{pipeline.Slice(in)}, []pipeline.Buffer{pipeline.Slice(out)}
			}
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = sh.chunk, sh.slots, sh.streams
			cfg.Schedule, cfg.CopyChunks = sh.sched, sh.copyChunks
			p, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctx)}, cfg)
			require.NoError(b, err)
			defer p.Close()
			for range 20 { // warm the clocks and the pipeline
				_, err := p.Run(context.Background(), job)
				require.NoError(b, err)
			}
			times := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				rep, err := p.Run(context.Background(), job)
				if err != nil {
					b.Fatal(err)
				}
				times = append(times, rep.Elapsed)
			}
			b.StopTimer()
			require.NoError(b, verifySeed(in, out, 100))
			slices.Sort(times)
			b.ReportMetric(float64(times[0]), "best-ns")
			b.ReportMetric(float64(times[len(times)/2]), "p50-ns")
			times = times[:0]
			for range 10 {
				require.NoError(b, p.Warm(context.Background(), job, 20*time.Millisecond))
				rep, err := p.Run(context.Background(), job)
				require.NoError(b, err)
				times = append(times, rep.Elapsed)
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[0]), "warm-best-ns")
			b.ReportMetric(float64(times[len(times)/2]), "warm-p50-ns")
			// As overlap run timed a run before it rehearsed (cli): the
			// output cleared by the host, 500 ms of Warm, the run, the
			// output read back; with a run back to back after the
			// warm-up (again); and the variants of a poisoned output
			// that the comment above lists.
			nan := float32(math.NaN())
			plain := func(out []float32) {
				for i := range out {
					out[i] = nan
				}
			}
			nt := func(out []float32) { ntstore.Fill(out, nan) }
			variant := func(metric string, before func([]float32), again bool, after func([]float32)) {
				times = times[:0]
				for range 5 {
					before(out)
					require.NoError(b, p.Warm(context.Background(), job, 500*time.Millisecond))
					if again {
						_, err := p.Run(context.Background(), job)
						require.NoError(b, err)
					}
					if after != nil {
						after(out)
					}
					rep, err := p.Run(context.Background(), job)
					require.NoError(b, err)
					times = append(times, rep.Elapsed)
					require.NoError(b, verifySeed(in, out, 100))
				}
				slices.Sort(times)
				b.ReportMetric(float64(times[0]), metric+"-best-ns")
				b.ReportMetric(float64(times[len(times)/2]), metric+"-p50-ns")
			}
			clearOut := func(out []float32) { clear(out) }
			variant("cli", clearOut, false, nil)
			variant("again", clearOut, true, nil)
			variant("rehearse", clearOut, true, nt)
			variant("rehearse-plain", clearOut, true, plain)
			variant("nt", nt, false, nil)

			// The timed pipeline registers the slices anew.
			require.NoError(b, p.Close())
			cfg.Timing = true
			pt, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctx)}, cfg)
			require.NoError(b, err)
			defer pt.Close()
			clear(out)
			var rep *pipeline.Report
			for range 5 {
				rep, err = pt.Run(context.Background(), job)
				require.NoError(b, err)
			}
			require.NoError(b, verifySeed(in, out, 100))
			first, last := time.Duration(1<<62), time.Duration(0)
			for _, s := range rep.Spans {
				first, last = min(first, s.Start), max(last, s.End)
			}
			b.ReportMetric(float64(first), "dev-first-ns")
			b.ReportMetric(float64(last), "dev-last-ns")
			b.ReportMetric(float64(rep.Elapsed), "run-ns")
			if b.N > 1 && sh.n == 1<<20 && sh.chunk == 256<<10 && sh.host == pipeline.HostPinned {
				for _, s := range rep.Spans {
					b.Logf("span chunk %d %-8s %-10s %8.1f %8.1f µs", s.Chunk, s.Stage, s.Lane, float64(s.Start)/1e3, float64(s.End)/1e3)
				}
			}
		})
	}
}

package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// BenchmarkGPUWholeJob runs small whole jobs (1M and 4M elements of the
// seed kernel at 100 iterations, pinned, a few chunks) back to back on one
// pipeline, the shape that bench/reference/wholejob.cu runs in C++, and
// reports the best and the median run (best-ns, p50-ns); then runs it ten
// times more, each right after 20 ms of Group.Warm, as overlap run times
// its runs (warm-best-ns, warm-p50-ns), and five times as overlap run
// times it, its output cleared before 500 ms of Warm and checked after
// (cli-best-ns, cli-p50-ns), and so with 20 ms of Warm (clear-), with
// no clearing (long-), and with an untimed run between the warm-up and
// the timed one (again-). One more run with
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
			// As overlap run times a run (cli): the output cleared by the
			// host, 500 ms of Warm, the run, the output read back; and
			// with one of those changed: 20 ms of Warm (clear), no clear
			// (long), a run back to back after the warm-up's (again).
			variant := func(metric string, clearOut bool, warm time.Duration, again bool) {
				times = times[:0]
				for range 5 {
					if clearOut {
						clear(out)
					}
					require.NoError(b, p.Warm(context.Background(), job, warm))
					if again {
						_, err := p.Run(context.Background(), job)
						require.NoError(b, err)
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
			variant("cli", true, 500*time.Millisecond, false)
			variant("clear", true, 20*time.Millisecond, false)
			variant("long", false, 500*time.Millisecond, false)
			variant("again", true, 500*time.Millisecond, true)

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

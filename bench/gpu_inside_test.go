package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// seedStampSource is the seed kernel with a stamp of the GPU's
// %globaltimer (ns) at the start of each block and at its end, the
// earliest start and the latest end of the chunk's blocks kept in
// stamp[0] and stamp[1]: one atomic per block at each end, which costs
// the kernel nothing measurable beside 100 sines per element.
const seedStampSource = `
extern "C" __global__ void clock_stamp(unsigned long long* t) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(*t));
}

extern "C" __global__ void seed_stamp(float* __restrict__ out, const float* __restrict__ in,
                                      unsigned int n, int iters, unsigned long long* stamp) {
    unsigned long long t;
    if (threadIdx.x == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        atomicMin(&stamp[0], t);
    }
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        float v = x * 0.5f + x * x * 0.1f;
        for (int k = 0; k < iters; ++k) {
            v += sinf(v * 0.01f);
        }
        out[i] = v;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        atomicMax(&stamp[1], t);
    }
}
`

// insideRun is what one run of the README job took: on the host
// (Elapsed), and on the GPU, each chunk's kernel from its first block's
// start to its last block's end.
type insideRun struct {
	elapsed       time.Duration
	start, finish []time.Duration // per chunk, from the first kernel's start
	// fill is the run's start to the first kernel's start, and drain the
	// last kernel's end to the run's end, on the host's clock (clockOffset
	// says how closely).
	fill, drain time.Duration
}

// span is the first kernel's start to the last kernel's end.
func (r insideRun) span() time.Duration { return slices.Max(r.finish) }

// BenchmarkGPUWholeJobInside splits a whole job's time (seed at 100
// iterations over registered memory, on the pipeline's default slots and
// streams; among the shapes, the README's: 4M elements in 256K chunks)
// into what the host measures and what the kernels span on the GPU,
// without the events that --trace records around every stage (which made
// the README job 0.74 ms instead of 0.51): the kernel stamps each chunk's
// first block start and last block end with %globaltimer. Each timed run
// comes as overlap run's do (500 ms of Group.Warm, an untimed run, the
// output and the slots poisoned); then 20 runs one after the other, each
// followed by clockOffset's 20 one-thread kernels (so not quite back to
// back). The rest of the host's time is split into the fill before the
// first kernel and the drain after the last on the host's clock, which
// clockOffset bounds %globaltimer against right after each run, since the
// two drift apart; the host's clock is read around the call to Group.Run,
// so fill and drain include the call's own work outside Report.Elapsed
// (1-3 µs on the H200, bench/RESULTS.md, "The host's part of the README
// job"). The simulator's picture of the same job (its spans, Config.Timing,
// with Report.Origin, and its host time without them) is printed beside
// it. It needs NVRTC, to compile the stamped kernel. Run with
// -test.benchtime 1x.
func BenchmarkGPUWholeJobInside(b *testing.B) {
	ctx := gputest.Context(b)
	prog, clk := stampKernels(b, ctx)
	logOffset(b, "at the start", clockOffset(b, ctx, clk.Function, 200))
	for _, sh := range [][2]int{{1 << 10, 1 << 10}, {256 << 10, 256 << 10}, {1 << 20, 1 << 20}, {1 << 20, 256 << 10},
		{4 << 20, 256 << 10}, {4 << 20, 1 << 20}, {16 << 20, 256 << 10}} {
		b.Run(fmt.Sprintf("n=%dK/chunk=%dK", sh[0]>>10, sh[1]>>10), func(b *testing.B) {
			benchInside(b, ctx, prog.Function, clk.Function, sh[0], sh[1])
		})
	}
	logOffset(b, "at the end", clockOffset(b, ctx, clk.Function, 200))
}

// stampKernels compiles seedStampSource with NVRTC and loads its two
// kernels on ctx, unloaded when b ends; b skips without NVRTC.
func stampKernels(b *testing.B, ctx *driver.Context) (seed, clock *ptx.Program) {
	if err := nvrtc.Load(); errors.Is(err, loader.ErrNoLibrary) {
		b.Skip("skipping: no NVRTC library (set OVERLAP_NVRTC_LIBRARY): " + err.Error())
	}
	res, err := nvrtc.Compile(seedStampSource, "seed_stamp.cu", nvrtc.Options{Arch: "compute_90"})
	if err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"seed_stamp", "clock_stamp"} {
		prog, err := ptx.Load(ctx, "seed_stamp.ptx", res.PTX, name, driver.ModuleOptions{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { prog.Close() })
		if seed == nil {
			seed = prog
		} else {
			clock = prog
		}
	}
	return seed, clock
}

// benchInside is BenchmarkGPUWholeJobInside for n elements in chunks of
// chunk, with fn the stamped kernel on ctx.
func benchInside(b *testing.B, ctx *driver.Context, fn, clk *driver.Function, n, chunk int) {
	const iters, timed, backToBack = 100, 5, 20
	chunks := (n + chunk - 1) / chunk
	runs := timed + backToBack + 1 // the last for warm-ups and rehearsals
	stamps, err := ctx.Alloc(runs * chunks * 16)
	if err != nil {
		b.Fatal(err)
	}
	defer stamps.Close()
	init := make([]byte, stamps.Len())
	for i := 0; i < len(init); i += 16 {
		binary.LittleEndian.PutUint64(init[i:], math.MaxUint64)
	}
	if err := stamps.CopyFromHost(0, init); err != nil {
		b.Fatal(err)
	}
	cur := runs - 1
	k := kernels.Elementwise("seed", pipeline.FunctionOn(ctx, fn))
	k.Args = func(a *driver.Args, c pipeline.Chunk) {
		a.Pointer(c.Outputs[0]).Pointer(c.Inputs[0]).Uint32(uint32(c.N)).Int32(iters)
		a.Pointer(stamps.Ptr() + driver.DevicePtr(16*(cur*chunks+c.Index)))
	}
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Host = chunk, pipeline.HostRegistered
	g, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctx)}, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	bg := context.Background()
	elapsed := make([]time.Duration, runs-1)
	hostAt := make([][2]int64, runs-1) // the host's clock (Unix ns) before and after each run
	offs := make([]offset, runs-1)     // the clocks' offset, bounded right after each run
	run := func(r int) {
		cur = r
		t0 := time.Now().UnixNano()
		rep, err := g.Run(bg, job)
		t1 := time.Now().UnixNano()
		if err != nil {
			b.Fatal(err)
		}
		if r < runs-1 {
			elapsed[r], hostAt[r] = rep.Elapsed, [2]int64{t0, t1}
			offs[r] = clockOffset(b, ctx, clk, 20)
		}
		cur = runs - 1
	}
	run(runs - 1) // registers the slices
	for r := 0; r < timed; r++ {
		if err := g.Warm(bg, job, 500*time.Millisecond); err != nil {
			b.Fatal(err)
		}
		run(runs - 1)
		poison(out)
		if err := g.PoisonSlots(); err != nil {
			b.Fatal(err)
		}
		run(r)
		if err := kernels.Seed.Verify([][]float32{in}, out, iters); err != nil {
			b.Fatalf("timed run %d: %v", r, err)
		}
	}
	for r := timed; r < runs-1; r++ {
		run(r)
	}
	got := make([]byte, stamps.Len())
	if err := stamps.CopyToHost(got, 0); err != nil {
		b.Fatal(err)
	}
	gpu := make([]insideRun, runs-1)
	for r := range gpu {
		ir := insideRun{elapsed: elapsed[r]}
		base := uint64(math.MaxUint64)
		for c := range chunks {
			base = min(base, binary.LittleEndian.Uint64(got[16*(r*chunks+c):]))
		}
		for c := range chunks {
			o := 16 * (r*chunks + c)
			ir.start = append(ir.start, time.Duration(binary.LittleEndian.Uint64(got[o:])-base))
			ir.finish = append(ir.finish, time.Duration(binary.LittleEndian.Uint64(got[o+8:])-base))
		}
		// On the host's clock, the first kernel's start less the run's
		// start, and the run's end less the last kernel's end.
		mid := (offs[r].lo + offs[r].hi) / 2
		ir.fill = time.Duration(int64(base) - mid - hostAt[r][0])
		ir.drain = time.Duration(hostAt[r][1] - (int64(base) + int64(ir.span()) - mid))
		gpu[r] = ir
	}
	simRun := simulateJob(b, n, chunk, iters)
	b.Logf("%d chunks: host time, the kernels' span on the GPU (first start to last end), the rest (fill and drain), and each chunk's kernel start,end in µs from the first start", chunks)
	show := func(what string, r insideRun) {
		line := "" // the first 16 chunks' stamps
		for c := range r.start[:min(len(r.start), 16)] {
			line += " " + usText(r.start[c]) + "," + usText(r.finish[c])
		}
		b.Logf("%-16s host %s  span %s  rest %s  fill %s drain %s |%s", what, usText(r.elapsed), usText(r.span()), usText(r.elapsed-r.span()), usText(r.fill), usText(r.drain), line)
	}
	show("simulator", simRun)
	for r, ir := range gpu {
		what := fmt.Sprintf("timed %d", r+1)
		if r >= timed {
			what = "back to back"
		}
		show(what, ir)
	}
	med := func(f func(insideRun) time.Duration, rs []insideRun) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = float64(f(r))
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(func(r insideRun) time.Duration { return r.elapsed }, gpu[:timed]), "timed-host-ns")
	b.ReportMetric(med(insideRun.span, gpu[:timed]), "timed-span-ns")
	b.ReportMetric(med(func(r insideRun) time.Duration { return r.elapsed }, gpu[timed:]), "b2b-host-ns")
	b.ReportMetric(med(insideRun.span, gpu[timed:]), "b2b-span-ns")
	rest := func(r insideRun) time.Duration { return r.elapsed - r.span() }
	b.ReportMetric(med(rest, gpu[:timed]), "timed-rest-ns")
	b.ReportMetric(med(rest, gpu[timed:]), "b2b-rest-ns")
	b.ReportMetric(float64(rest(simRun)), "sim-rest-ns")
	b.ReportMetric(med(func(r insideRun) time.Duration { return r.fill }, gpu[:timed]), "timed-fill-ns")
	b.ReportMetric(med(func(r insideRun) time.Duration { return r.drain }, gpu[:timed]), "timed-drain-ns")
	b.ReportMetric(med(func(r insideRun) time.Duration { return r.fill }, gpu[timed:]), "b2b-fill-ns")
	b.ReportMetric(med(func(r insideRun) time.Duration { return r.drain }, gpu[timed:]), "b2b-drain-ns")
	b.ReportMetric(float64(simRun.fill), "sim-fill-ns")
	b.ReportMetric(float64(simRun.drain), "sim-drain-ns")
	b.ReportMetric(float64(simRun.elapsed), "sim-host-ns")
	b.ReportMetric(float64(simRun.span()), "sim-span-ns")
}

// usText formats d in µs with one decimal.
func usText(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/1e3) }

// simulateJob runs the job on the built-in profile and returns what
// insideRun holds: the host's time of a run without Config.Timing (whose
// events cost a simulated one-chunk job of 256K elements 18 µs), and the
// compute spans of one with it.
func simulateJob(b testing.TB, n, chunk, iters int) insideRun {
	k, err := kernels.Seed.Pipeline(nil, float64(iters))
	if err != nil {
		b.Fatal(err)
	}
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	second := func(timing bool) *pipeline.Report {
		dev := sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(sim.BuiltinProfile())
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Host, cfg.Timing = chunk, pipeline.HostRegistered, timing
		p, err := pipeline.New(dev, cfg)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		var rep *pipeline.Report
		for range 2 { // the first registers the slices
			if rep, err = p.Run(context.Background(), job); err != nil {
				b.Fatal(err)
			}
		}
		return rep
	}
	rep := second(true)
	chunks := (n + chunk - 1) / chunk
	r := insideRun{elapsed: second(false).Elapsed, start: make([]time.Duration, chunks), finish: make([]time.Duration, chunks)}
	first, last := time.Duration(math.MaxInt64), time.Duration(0)
	for _, s := range rep.Spans {
		if s.Stage == pipeline.StageCompute {
			first, last = min(first, s.Start), max(last, s.End)
		}
	}
	// The spans count from the run's origin (Report.Origin), after the
	// run's fixed cost; fill and drain are on the clock of the run with
	// the timing events.
	r.fill, r.drain = rep.Origin+first, rep.Elapsed-(rep.Origin+last)
	for _, s := range rep.Spans {
		if s.Stage == pipeline.StageCompute {
			r.start[s.Chunk], r.finish[s.Chunk] = s.Start-first, s.End-first
		}
	}
	return r
}

// offset is where %globaltimer stands against the host's clock: gt =
// host + δ with lo ≤ δ ≤ hi, in ns.
type offset struct{ lo, hi int64 }

// clockOffset bounds δ with reads one-thread kernels (clk) that read
// %globaltimer, each between two readings of the host's clock: the
// kernel ran after the first and before the second, so δ is at least
// gt - after and at most gt - before. The bounds are as far apart as the
// fastest launch and return, a few µs. The two clocks drift apart (on
// the H200 by about 200 µs in 25 s), so each run takes its own, right
// after it.
func clockOffset(b *testing.B, ctx *driver.Context, clk *driver.Function, reads int) offset {
	buf, err := ctx.Alloc(8 * reads)
	if err != nil {
		b.Fatal(err)
	}
	defer buf.Close()
	s, err := ctx.NewStream(driver.StreamOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	host := make([][2]int64, reads)
	args := driver.NewArgs()
	for i := range reads {
		args.Reset()
		args.Pointer(buf.Ptr() + driver.DevicePtr(8*i))
		host[i][0] = time.Now().UnixNano()
		if err := clk.Launch(s, driver.GridFor(1, 1), args); err != nil {
			b.Fatal(err)
		}
		if err := s.Synchronize(); err != nil {
			b.Fatal(err)
		}
		host[i][1] = time.Now().UnixNano()
	}
	got := make([]byte, 8*reads)
	if err := buf.CopyToHost(got, 0); err != nil {
		b.Fatal(err)
	}
	o := offset{lo: math.MinInt64, hi: math.MaxInt64}
	for i := range reads {
		gt := int64(binary.LittleEndian.Uint64(got[8*i:]))
		o.lo, o.hi = max(o.lo, gt-host[i][1]), min(o.hi, gt-host[i][0])
	}
	return o
}

// logOffset prints o, said when.
func logOffset(b *testing.B, when string, o offset) {
	b.Logf("%%globaltimer - the host's clock %s: %.1f to %.1f µs", when, float64(o.lo)/1e3, float64(o.hi)/1e3)
}

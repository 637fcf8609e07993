package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
)

// profileOptions are overlap profile's flags.
type profileOptions struct {
	out      string
	validate bool
	sim      bool
	truth    string // --profile: with --sim, the profile the simulated "GPU" runs on
	device   int
	elems    int // validation job size for the seed kernel
	repeat   int
}

// profileCmd is overlap profile.
var profileCmd = &command{
	name:      "profile",
	usageLine: "overlap profile [--out FILE] [--validate] [--sim [--profile FILE]] [--device N] [--elems N] [--repeat N]",
	short:     "measure the GPU's device profile for the simulator (--out FILE); --validate compares measured and predicted times over 26 configurations",
	flags: func(fs *flag.FlagSet) func(stdout, stderr io.Writer) int {
		o, check := profileFlags(fs)
		return func(stdout, stderr io.Writer) int {
			if err := check(); err != nil {
				return reportError("profile", usageError{err}, stderr)
			}
			ctx, stop := signalContext()
			defer stop()
			if err := profileCommand(ctx, o, stdout); err != nil {
				return reportError("profile", stoppedBy(ctx, err), stderr)
			}
			return exitOK
		}
	},
}

// profileFlags registers overlap profile's flags on fs; check checks them
// once parsed.
func profileFlags(fs *flag.FlagSet) (*profileOptions, func() error) {
	o := &profileOptions{elems: 128 << 20, repeat: 3}
	var m machine
	fs.StringVar(&o.out, "out", "", "write the measured profile (JSON) to this file")
	fs.BoolVar(&o.validate, "validate", false, "then run a set of configurations and compare each with the simulator's prediction from the fresh profile")
	m.addMachineFlags(fs, flagSim|flagDevice|flagProfile, map[string]string{
		"sim":     "measure the simulator instead of a GPU (a self-test of the command)",
		"profile": "with --sim: the profile the measured simulator runs on (default: built-in)"})
	fs.Var(sizeFlag{v: &o.elems}, "elems", "--validate's seed job size (128M); chunk sizes scale with it, saxpy runs a quarter of it, and the staged runs that time staging run half of it")
	fs.IntVar(&o.repeat, "repeat", 3, "--validate: rounds, each timing every configuration once after an untimed run; each takes its median round")
	return o, func() error {
		if err := m.check(fs, false, false); err != nil {
			return err
		}
		o.sim, o.truth, o.device = m.sim, m.profile, m.device
		switch {
		case fs.NArg() > 0:
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		case o.elems < 1<<16 || int64(o.elems) > maxElems:
			return fmt.Errorf("--elems %d: want 64K to %d", o.elems, int64(maxElems))
		case o.repeat < 1 || o.repeat > 100:
			return fmt.Errorf("--repeat %d: want 1 to 100", o.repeat)
		}
		if o.out != "" {
			f, err := os.OpenFile(o.out, os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				return fmt.Errorf("--out: %v", err)
			}
			f.Close()
		}
		return nil
	}
}

// kernelSet makes pipeline kernels from the kernel table, loaded on the
// GPU's context as first launched (mods is nil on the simulator).
type kernelSet struct{ mods *kernels.Modules }

// kernel returns row k as a pipeline kernel with the given scalars; the
// rows and scalars used here are fixed and valid.
func (ks kernelSet) kernel(k *kernels.Kernel, scalars ...float64) *pipeline.Kernel {
	pk, err := k.Pipeline(ks.mods, scalars...)
	if err != nil {
		panic(err)
	}
	return pk
}

// profileEnv opens the GPU, or the simulator standing in for one.
func profileEnv(o *profileOptions) (*env, kernelSet, error) {
	e, err := openEnv(&runOptions{machine: machine{sim: o.sim, profile: o.truth, device: o.device}, kernel: "seed"})
	if err != nil {
		return nil, kernelSet{}, err
	}
	return e, kernelSet{mods: e.mods}, nil
}

func profileCommand(ctx context.Context, o *profileOptions, w io.Writer) error {
	start := time.Now()
	e, ks, err := profileEnv(o)
	if err != nil {
		return err
	}
	defer e.close()
	label := ""
	if o.sim {
		label = " [simulated: measuring the simulator]"
	}
	fmt.Fprintf(w, "overlap profile: measuring %s%s\n", e.backend.Name(), label)
	// Measurements on the simulator compute every element on the CPU, so
	// they use smaller chunks; its costs are linear, so nothing is lost.
	small, large := 64<<10, 2<<20
	if o.sim {
		small, large = 32<<10, 128<<10
	}
	prof, err := measureProfile(ctx, e.backend, ks, small, large)
	if err != nil {
		return err
	}
	if err := measureStagingInRun(ctx, e.backend, stagingKernel(o, ks), prof, o.elems/2); err != nil {
		return err
	}
	if err := measureModelCosts(e, prof); err != nil {
		return fmt.Errorf("measuring the GEMM kernels: %w", err)
	}
	if err := prof.Check(); err != nil {
		return fmt.Errorf("the measured profile is unusable: %w", err)
	}
	if e.ctx != nil {
		prof.Device, _ = e.ctx.Device().Name()
	} else {
		prof.Device = "simulator of " + e.sim.Profile().Device
	}
	v, _ := driver.DriverVersion()
	prof.Source = fmt.Sprintf("measured by `overlap profile` on %s, %s UTC, %d host threads", prof.Device, time.Now().UTC().Format("2006-01-02 15:04"), runtime.GOMAXPROCS(0))
	if e.ctx != nil {
		prof.Source += fmt.Sprintf(", driver CUDA %d.%d", v/1000, v%1000/10)
	}
	printProfile(w, prof)
	if o.out != "" {
		if err := prof.Write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s\n", o.out)
	}
	if o.validate {
		if err := validateProfile(ctx, o, e, ks, prof, w); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "took %.1f s of wall time\n", time.Since(start).Seconds())
	return nil
}

// stagingKernel is the kernel of measureStagingInRun's staged runs, over
// half the validation's seed job: the validation's, on a GPU; on the
// simulator, which computes every element on the CPU, one that loops no
// more.
func stagingKernel(o *profileOptions, ks kernelSet) *pipeline.Kernel {
	if o.sim {
		return ks.kernel(kernels.Seed, 0)
	}
	return ks.kernel(kernels.Seed, 100)
}

func printProfile(w io.Writer, p *pipeline.Profile) {
	fmt.Fprintf(w, "copies: H2D %.2f us + %.1f GB/s, D2H %.2f us + %.1f GB/s, both at once %.1f GB/s; pageable %.1f / %.1f GB/s\n",
		p.H2D.FixedNs/1e3, p.H2D.GBps, p.D2H.FixedNs/1e3, p.D2H.GBps, p.BothGBps, p.PageableH2DGBps, p.PageableD2HGBps)
	if p.H2DRegistered.GBps > 0 {
		fmt.Fprintf(w, "copies of registered memory: H2D %.2f us + %.1f GB/s, D2H %.2f us + %.1f GB/s\n",
			p.H2DRegistered.FixedNs/1e3, p.H2DRegistered.GBps, p.D2HRegistered.FixedNs/1e3, p.D2HRegistered.GBps)
	}
	var names []string
	for n := range p.Kernels {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		k := p.Kernels[n]
		if k.NsPerFlop > 0 {
			fmt.Fprintf(w, "kernel %s: %.2f us + %.4g ns/FLOP (%.1f TFLOP/s)\n", n, k.FixedNs/1e3, k.NsPerFlop, 1e-3/k.NsPerFlop)
			continue
		}
		fmt.Fprintf(w, "kernel %s: %.2f us + %.5f ns/elem + %.6f ns/elem/iteration\n", n, k.FixedNs/1e3, k.NsPerElem, k.NsPerElemPerIter)
	}
	fmt.Fprintf(w, "host: issue copy %.2f us, launch %.2f us, record %.2f us, wait %.2f us; sync %.2f us; run %.2f us; register %.1f ms/GiB\n",
		p.IssueNs["copy"]/1e3, p.IssueNs["launch"]/1e3, p.IssueNs["record"]/1e3, p.IssueNs["wait"]/1e3, p.SyncNs/1e3, p.RunNs/1e3, p.RegisterMsPerGiB)
	fmt.Fprintf(w, "host: a copy from registered memory %.2f us; one chunk's 10 calls in a steady loop %.2f us\n", p.IssueNs["copy_registered"]/1e3, p.IssueSequenceNs/1e3)
	fmt.Fprintf(w, "host, on a stream with work queued: copy %.2f us, launch %.2f us, record %.2f us, wait %.2f us; a wait for a pending event %.2f us\n",
		p.IssueNs["copy_busy"]/1e3, p.IssueNs["launch_busy"]/1e3, p.IssueNs["record_busy"]/1e3, p.IssueNs["wait_busy"]/1e3, p.IssueNs["wait_pending"]/1e3)
	if len(p.IssueLoops) > 0 {
		fmt.Fprint(w, "host: the engine's issue loop per chunk (measured / from the calls above):")
		for _, l := range p.IssueLoops {
			fmt.Fprintf(w, " %d slots %d streams %d input(s) %.2f / %.2f us;", l.Slots, l.Streams, max(l.Inputs, 1), l.Ns/1e3, l.PredictedNs/1e3)
		}
		fmt.Fprintf(w, " scale %.3f\n", p.IssueScale)
	}
	fmt.Fprintf(w, "device: a wait for another stream's event holds the stream %.2f us; a dependency between streams %.2f us; kernels on other streams overlap all but %.0f%% of a kernel's fixed cost; a copy started while the other direction copies costs %.2f us more\n", p.WaitNs/1e3, p.DepNs/1e3, 100*p.KernelFixedSerial, p.BothFixedNs/1e3)
	fmt.Fprint(w, "staging copies (alone / two at once in total):")
	for _, r := range p.Staging {
		fmt.Fprintf(w, " %s %.1f/%.1f GB/s;", humanBytes(int64(r.Bytes)), r.GBps, r.PairGBps)
	}
	switch {
	case len(p.StagingDMABySize) > 0:
		fmt.Fprint(w, " two at once keep, while the device copies H2D / D2H / both ways:")
		for _, r := range p.StagingDMABySize {
			fmt.Fprintf(w, " %s %.0f/%.0f/%.0f%%;", humanBytes(int64(r.Bytes)), 100*r.H2D, 100*r.D2H, 100*r.Both)
		}
	case p.StagingDMA > 0:
		fmt.Fprintf(w, " while the device copies both ways, %.0f%% of that rate", 100*p.StagingDMA)
	}
	fmt.Fprintln(w)
	printStagingInRun(w, p, "")
}

// printStagingInRun prints p's in-run staging rates, if it has them.
func printStagingInRun(w io.Writer, p *pipeline.Profile, which string) {
	if len(p.StagingInRun) == 0 {
		return
	}
	fmt.Fprintf(w, "staging copies in a staged run%s (in / out, each; alone faster by):", which)
	for _, r := range p.StagingInRun {
		fmt.Fprintf(w, " %s %.1f/%.1f GB/s x%.2f;", humanBytes(int64(r.Bytes)), r.InGBps, r.OutGBps, p.StagingAloneBoost(r.Bytes))
	}
	fmt.Fprintf(w, " and %.2f us a chunk besides the copies\n", p.StagingChunkNs/1e3)
}

// linear fits t = fixed + slope·x through two points, the small one for
// the fixed cost and the large one for the slope.
func linear(x1, t1, x2, t2 float64) (fixed, slope float64) {
	slope = (t2 - t1) / (x2 - x1)
	return max(0, t1-slope*x1), max(slope, 0)
}

// stageReps is how many times measureProfile times each count of chunks
// of a stage alone, and each count of copies both ways at once; the best
// counts.
const stageReps = 3

// measureProfile measures every number of a profile on b through the
// pipeline's own interface, with chunks of small and large elements.
//
// A stage's time alone over k chunks is a fixed overhead (the first call,
// the final synchronisation) plus k times its cost per chunk, so each cost
// per chunk is the difference between 16 and 4 chunks, over 12.
func measureProfile(ctx context.Context, b pipeline.Backend, ks kernelSet, small, large int) (*pipeline.Profile, error) {
	p := &pipeline.Profile{CopyEngines: 1, IssueNs: map[string]float64{}, Kernels: map[string]pipeline.KernelCost{}, Notes: map[string]string{}}
	const k1, k2 = 4, 16
	size := k2 * large

	// Copies and the seed kernel: each stage alone, per chunk, at a small
	// and a large chunk (pinned memory).
	in, err := b.AllocPinned(size * 4)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	out, err := b.AllocPinned(size * 4)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	kernels.FillPattern(driver.View[float32](in.Bytes())[:size], 0)
	perChunk := func(cfg pipeline.Config, job pipeline.Job, chunk int) (pipeline.StageTimes, error) {
		host := pipeline.HostPinned
		if job.Inputs[0].Data != nil {
			host = pipeline.HostRegistered
		}
		cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = chunk, 2, 1, host
		pp, err := pipeline.New(b, cfg)
		if err != nil {
			return pipeline.StageTimes{}, err
		}
		defer pp.Close()
		// Each count's best of stageReps: a copy's rate varies by a few
		// percent from one timing to the next (one profile's H2D rate came
		// out 6% below the rest from a single timing), and the slower
		// timings are the noise.
		var st [2]pipeline.StageTimes
		for i, k := range []int{k1, k2} {
			job.N = k * chunk
			for r := 0; r < stageReps; r++ {
				t, err := pp.StageTimes(ctx, job)
				if err != nil {
					return pipeline.StageTimes{}, err
				}
				if r == 0 {
					st[i] = t
				}
				st[i].H2D, st[i].Compute, st[i].D2H = min(st[i].H2D, t.H2D), min(st[i].Compute, t.Compute), min(st[i].D2H, t.D2H)
			}
		}
		return pipeline.StageTimes{H2D: (st[1].H2D - st[0].H2D) / (k2 - k1), Compute: (st[1].Compute - st[0].Compute) / (k2 - k1),
			D2H: (st[1].D2H - st[0].D2H) / (k2 - k1)}, nil
	}
	seedJob := func(iters int) pipeline.Job {
		return pipeline.Job{N: size, Kernel: ks.kernel(kernels.Seed, float64(iters)), Inputs: []pipeline.Buffer{pipeline.Pinned(in)}, Outputs: []pipeline.Buffer{pipeline.Pinned(out)}}
	}
	var s100, l100, s0, l0 pipeline.StageTimes
	for _, m := range []struct {
		st    *pipeline.StageTimes
		iters int
		chunk int
	}{{&s100, 100, small}, {&l100, 100, large}, {&s0, 0, small}, {&l0, 0, large}} {
		if *m.st, err = perChunk(pipeline.Float32Config(1, 1), seedJob(m.iters), m.chunk); err != nil {
			return nil, fmt.Errorf("timing stages: %w", err)
		}
	}
	ns := func(d time.Duration) float64 { return float64(d) }
	fx, sl := linear(float64(small*4), ns(s100.H2D), float64(large*4), ns(l100.H2D))
	p.H2D = pipeline.CopyCost{FixedNs: fx, GBps: 1 / sl}
	fx, sl = linear(float64(small*4), ns(s100.D2H), float64(large*4), ns(l100.D2H))
	p.D2H = pipeline.CopyCost{FixedNs: fx, GBps: 1 / sl}
	f100, c100 := linear(float64(small), ns(s100.Compute), float64(large), ns(l100.Compute))
	_, c0 := linear(float64(small), ns(s0.Compute), float64(large), ns(l0.Compute))
	p.Kernels["seed"] = pipeline.KernelCost{FixedNs: f100, NsPerElem: c0, NsPerElemPerIter: max(0, (c100-c0)/100)}
	// The same copies from and to registered Go memory (job.Host
	// registered): the DMA reads and writes the Go heap's pages.
	{
		regIn, regOut := make([]byte, size*4), make([]byte, size*4)
		copy(regIn, in.Bytes()[:size*4])
		job := seedJob(0)
		job.Inputs, job.Outputs = []pipeline.Buffer{{Data: regIn}}, []pipeline.Buffer{{Data: regOut}}
		var rs, rl pipeline.StageTimes
		if rs, err = perChunk(pipeline.Float32Config(1, 1), job, small); err == nil {
			rl, err = perChunk(pipeline.Float32Config(1, 1), job, large)
		}
		if err != nil {
			return nil, fmt.Errorf("timing copies of registered memory: %w", err)
		}
		fx, sl = linear(float64(small*4), ns(rs.H2D), float64(large*4), ns(rl.H2D))
		p.H2DRegistered = pipeline.CopyCost{FixedNs: fx, GBps: 1 / sl}
		fx, sl = linear(float64(small*4), ns(rs.D2H), float64(large*4), ns(rl.D2H))
		p.D2HRegistered = pipeline.CopyCost{FixedNs: fx, GBps: 1 / sl}
		p.Notes["copies_registered"] = "as copies, from and to registered Go memory"
	}
	p.Notes["copies"] = fmt.Sprintf("pinned H2D and D2H alone, back to back on one stream: (time of %d chunks - time of %d) / %d, each the best of %d, at chunks of %d and %d float32s", k2, k1, k2-k1, stageReps, small, large)
	p.Notes["seed"] = fmt.Sprintf("kernels alone on one stream, per chunk as for copies, at chunks of %d and %d elements, at 100 and 0 iterations", small, large)

	// saxpy and lerp, with two inputs.
	in2, err := b.AllocPinned(size * 4)
	if err != nil {
		return nil, err
	}
	defer in2.Close()
	for _, k := range []*pipeline.Kernel{ks.kernel(kernels.Saxpy, 2.5), ks.kernel(kernels.Lerp, 0.25, 1.5)} {
		job := pipeline.Job{N: size, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Pinned(in), pipeline.Pinned(in2)}, Outputs: []pipeline.Buffer{pipeline.Pinned(out)}}
		ss, err := perChunk(pipeline.Float32Config(2, 1), job, small)
		if err != nil {
			return nil, err
		}
		ls, err := perChunk(pipeline.Float32Config(2, 1), job, large)
		if err != nil {
			return nil, err
		}
		fx, sl = linear(float64(small), ns(ss.Compute), float64(large), ns(ls.Compute))
		p.Kernels[k.Name] = pipeline.KernelCost{FixedNs: fx, NsPerElem: sl}
	}
	p.Notes["saxpy"] = "like seed, with two inputs; lerp likewise"

	// Both directions at once, and the host's cost per call.
	if err := measureLink(b, in, out, size, p); err != nil {
		return nil, err
	}
	if err := measureIssue(b, ks, p); err != nil {
		return nil, err
	}
	if err := measureWait(b, ks, p); err != nil {
		return nil, err
	}
	if err := measureHost(b, p, 128<<20); err != nil {
		return nil, err
	}
	if err := measureBusy(b, ks, p); err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("the measured profile is unusable: %w", err)
	}
	if err := measureDep(b, ks, p, small); err != nil {
		return nil, err
	}
	if err := measureBothFixed(b, p, small*4); err != nil {
		return nil, err
	}
	if err := measureKernelSerial(b, ks, p, small); err != nil {
		return nil, err
	}
	if err := measureLoops(b, ks, p); err != nil {
		return nil, err
	}
	// The fixed cost of a Run: a one-chunk job measured, less what the
	// profile so far predicts for it.
	p.RunNs = 0
	tiny := func(bk pipeline.Backend) (time.Duration, error) {
		buf, err := bk.AllocPinned(1024 * 4)
		if err != nil {
			return 0, err
		}
		defer buf.Close()
		cfg := pipeline.Float32Config(1, 1)
		cfg.ChunkElems, cfg.Host = 1024, pipeline.HostPinned
		pp, err := pipeline.New(bk, cfg)
		if err != nil {
			return 0, err
		}
		defer pp.Close()
		job := pipeline.Job{N: 1024, Kernel: ks.kernel(kernels.Seed, 1), Inputs: []pipeline.Buffer{pipeline.Pinned(buf)}, Outputs: []pipeline.Buffer{pipeline.Pinned(buf)}}
		var total time.Duration
		const runs = 50
		for i := 0; i < runs+5; i++ {
			rep, err := pp.Run(ctx, job)
			if err != nil {
				return 0, err
			}
			if i >= 5 {
				total += rep.Elapsed
			}
		}
		return total / runs, nil
	}
	measured, err := tiny(b)
	if err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("the measured profile is unusable: %w", err)
	}
	predicted, err := tiny(pipeline.NewSimHost(pipeline.SimHostOptions{TimingOnly: true}).NewDevice(p))
	if err != nil {
		return nil, err
	}
	p.RunNs = max(0, float64(measured-predicted))
	p.Notes["run"] = fmt.Sprintf("a 1024-element one-chunk Run took %v; the rest of this profile predicts %v", measured, predicted)
	return p, p.Check()
}

// measureLink times copies in both directions at once on two streams.
func measureLink(b pipeline.Backend, in, out pipeline.PinnedMem, size int, p *pipeline.Profile) error {
	d1, err := b.AllocDevice(size * 4)
	if err != nil {
		return err
	}
	defer d1.Close()
	d2, err := b.AllocDevice(size * 4)
	if err != nil {
		return err
	}
	defer d2.Close()
	s1, err := b.NewStream()
	if err != nil {
		return err
	}
	defer s1.Close()
	s2, err := b.NewStream()
	if err != nil {
		return err
	}
	defer s2.Close()
	iss, err := b.Issuer()
	if err != nil {
		return err
	}
	defer iss.Release()
	both := func(reps int) (time.Duration, error) {
		t0 := pipeline.Now(b)
		for r := 0; r < reps; r++ {
			if err := iss.CopyToDevice(s1, d1, 0, in, 0, size*4); err != nil {
				return 0, err
			}
			if err := iss.CopyToHost(s2, out, 0, d2, 0, size*4); err != nil {
				return 0, err
			}
		}
		if err := s1.Synchronize(); err != nil {
			return 0, err
		}
		if err := s2.Synchronize(); err != nil {
			return 0, err
		}
		return pipeline.Now(b) - t0, nil
	}
	// Best of stageReps each: one profile's single timing of both ways at
	// once came out at 79 GB/s where the others found 101.
	bestBoth := func(reps int) (time.Duration, error) {
		best := time.Duration(math.MaxInt64)
		for r := 0; r < stageReps; r++ {
			t, err := both(reps)
			if err != nil {
				return 0, err
			}
			best = min(best, t)
		}
		return best, nil
	}
	t1, err := bestBoth(1)
	if err != nil {
		return err
	}
	t4, err := bestBoth(4)
	if err != nil {
		return err
	}
	// Each copy's fixed cost leaves the link idle; the rate is that of the
	// bytes while they move.
	pair := float64(t4-t1)/3 - max(p.H2D.FixedNs, p.D2H.FixedNs)
	p.BothGBps = float64(2*size*4) / pair
	p.Notes["both"] = fmt.Sprintf("copies of %d KiB each way at once on two streams: (time of 4 pairs - time of 1) / 3, each the best of %d, less the larger fixed cost per copy", size*4>>10, stageReps)
	return nil
}

// callRig is what measureIssue and measureBusy time calls on: a stream,
// an event, two 4-byte device buffers, 4 bytes of pinned memory, and
// registered Go memory of whole pages of its own (Go gives an allocation
// this large a span of its own), so that it shares no page with memory
// registered later.
type callRig struct {
	st     pipeline.Stream
	ev     pipeline.Event
	dev    pipeline.DeviceMem
	dev2   pipeline.DeviceMem
	host   pipeline.PinnedMem
	regMem []byte
	reg    pipeline.PinnedMem
}

func newCallRig(b pipeline.Backend) (*callRig, error) {
	r := &callRig{regMem: make([]byte, 64<<10)}
	fail := func(err error) (*callRig, error) {
		r.close()
		return nil, err
	}
	var err error
	if r.st, err = b.NewStream(); err != nil {
		r.st = nil
		return fail(err)
	}
	if r.ev, err = b.NewEvent(false); err != nil {
		r.ev = nil
		return fail(err)
	}
	if r.dev, err = b.AllocDevice(4096); err != nil {
		r.dev = nil
		return fail(err)
	}
	if r.dev2, err = b.AllocDevice(4096); err != nil {
		r.dev2 = nil
		return fail(err)
	}
	if r.host, err = b.AllocPinned(4096); err != nil {
		r.host = nil
		return fail(err)
	}
	if r.reg, err = b.Register(r.regMem); err != nil {
		r.reg = nil
		return fail(err)
	}
	return r, nil
}

// chunk is a one-element chunk from dev to dev2, for a launch.
func (r *callRig) chunk() pipeline.Chunk {
	return pipeline.Chunk{N: 1, Inputs: []driver.DevicePtr{r.dev.Ptr()}, InBytes: []int{4}, Outputs: []driver.DevicePtr{r.dev2.Ptr()}, OutBytes: []int{4}}
}

// close releases what was made, registration first.
func (r *callRig) close() {
	if r.reg != nil {
		r.reg.Close()
	}
	if r.host != nil {
		r.host.Close()
	}
	if r.dev2 != nil {
		r.dev2.Close()
	}
	if r.dev != nil {
		r.dev.Close()
	}
	if r.ev != nil {
		r.ev.Close()
	}
	if r.st != nil {
		r.st.Close()
	}
	runtime.KeepAlive(r.regMem)
}

// callReps is how many rounds measureIssue and measureBusy time each
// kind of call in; each kind's best round counts.
const callReps = 5

// measureIssue times the host's cost of each kind of driver call.
func measureIssue(b pipeline.Backend, ks kernelSet, p *pipeline.Profile) error {
	rig, err := newCallRig(b)
	if err != nil {
		return err
	}
	defer rig.close()
	st, ev, dev, host, reg := rig.st, rig.ev, rig.dev, rig.host, rig.reg
	iss, err := b.Issuer()
	if err != nil {
		return err
	}
	defer iss.Release()
	const calls = 400
	k := ks.kernel(kernels.Seed, 0)
	chunk := rig.chunk()
	kinds := []struct {
		kind string
		call func() error
	}{
		{"record", func() error { return iss.Record(ev, st) }},
		{"wait", func() error { return iss.Wait(st, ev) }},
		{"copy", func() error { return iss.CopyToDevice(st, dev, 0, host, 0, 4) }},
		{"copy_registered", func() error { return iss.CopyToDevice(st, dev, 0, reg, 0, 4) }},
		{"launch", func() error { return iss.Launch(st, k, chunk) }},
	}
	// The kinds take turns within each round, so that a slow spell of the
	// host slows every kind in one round rather than all rounds of one
	// kind (one profile had copies from registered memory 40% dearer
	// than from pinned memory, and the next one 2% cheaper).
	best := make([]time.Duration, len(kinds))
	for i := range best {
		best[i] = time.Duration(math.MaxInt64)
	}
	for rep := 0; rep < callReps; rep++ {
		for i, kd := range kinds {
			if err := st.Synchronize(); err != nil {
				return err
			}
			t0 := pipeline.Now(b)
			for n := 0; n < calls; n++ {
				if err := kd.call(); err != nil {
					return fmt.Errorf("timing %s calls: %w", kd.kind, err)
				}
			}
			best[i] = min(best[i], pipeline.Now(b)-t0)
		}
	}
	if err := st.Synchronize(); err != nil {
		return err
	}
	for i, kd := range kinds {
		p.IssueNs[kd.kind] = float64(best[i]) / calls
	}
	// Sync: record on an idle stream and wait for it, less the record.
	bestSync := time.Duration(math.MaxInt64)
	for rep := 0; rep < 3; rep++ {
		t0 := pipeline.Now(b)
		for i := 0; i < calls; i++ {
			if err := iss.Record(ev, st); err != nil {
				return err
			}
			if err := ev.Synchronize(); err != nil {
				return err
			}
		}
		bestSync = min(bestSync, pipeline.Now(b)-t0)
	}
	p.SyncNs = max(0, float64(bestSync)/calls-p.IssueNs["record"])
	p.Notes["issue"] = fmt.Sprintf("best of %d rounds of %d calls of each kind from one goroutine, the kinds in turn within each round (copy_registered: from registered Go memory); sync: an event recorded on an idle stream and waited for, less the record, best of 3", callReps, calls)
	return measureSequence(b, iss, k, p)
}

// measureSequence times the host's calls for one chunk in a steady loop,
// in the engine's order (Profile.IssueSequenceNs): per chunk, on two slots
// of tiny buffers and three streams, a wait for the slot's kernel, the H2D
// copy and its record; two waits (the H2D, the slot's last D2H), the
// launch and its record; a wait for the kernel, the D2H copy and its
// record.
func measureSequence(b pipeline.Backend, iss pipeline.Issuer, k *pipeline.Kernel, p *pipeline.Profile) error {
	ns, err := issueLoop(b, iss, k, 2, 1)
	if err != nil {
		return err
	}
	p.IssueSequenceNs = ns
	p.Notes["issue_sequence"] = fmt.Sprintf("best of 3 rounds of %d chunks' calls in the engine's order (4 waits, 2 copies of 4 bytes, a one-element launch, 3 records each) on three streams and two slots, from one goroutine", loopChunks-loopWarm)
	return nil
}

const loopChunks, loopWarm = 200, 2

// issueLoop is the host's time per chunk of the engine's issue loop
// (pipeline/run.go) with slots slots and nComp compute streams, on
// one-element buffers with a one-element kernel, so that the host sets
// the pace: best of 3 rounds of loopChunks-loopWarm chunks after loopWarm
// untimed, each round drained before the next.
func issueLoop(b pipeline.Backend, iss pipeline.Issuer, k *pipeline.Kernel, slots, nComp int) (float64, error) {
	const inputs = 1 // the seed's one input, as measureSequence times it
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	streams := make([]pipeline.Stream, 2+nComp) // H2D, D2H, compute...
	for i := range streams {
		st, err := b.NewStream()
		if err != nil {
			return 0, err
		}
		closers = append(closers, st.Close)
		streams[i] = st
	}
	var events [3][]pipeline.Event // H2D done, kernel done, D2H done
	din, dout := make([][]pipeline.DeviceMem, slots), make([]pipeline.DeviceMem, slots)
	for e := range events {
		events[e] = make([]pipeline.Event, slots)
	}
	for s := 0; s < slots; s++ {
		for e := range events {
			ev, err := b.NewEvent(false)
			if err != nil {
				return 0, err
			}
			closers = append(closers, ev.Close)
			events[e][s] = ev
		}
		din[s] = make([]pipeline.DeviceMem, inputs)
		for i := 0; i <= inputs; i++ {
			m, err := b.AllocDevice(4)
			if err != nil {
				return 0, err
			}
			closers = append(closers, m.Close)
			if i < inputs {
				din[s][i] = m
			} else {
				dout[s] = m
			}
		}
	}
	in, err := b.AllocPinned(4)
	if err != nil {
		return 0, err
	}
	closers = append(closers, in.Close)
	out, err := b.AllocPinned(4)
	if err != nil {
		return 0, err
	}
	closers = append(closers, out.Close)
	h2d, d2h, comps := streams[0], streams[1], streams[2:]
	h2dDone, compDone, d2hDone := events[0], events[1], events[2]
	chunks := make([]pipeline.Chunk, slots) // each slot's, made before the timing
	for s := range chunks {
		chunks[s] = pipeline.Chunk{N: 1, Outputs: []driver.DevicePtr{dout[s].Ptr()}, OutBytes: []int{4}}
		for _, d := range din[s] {
			chunks[s].Inputs = append(chunks[s].Inputs, d.Ptr())
			chunks[s].InBytes = append(chunks[s].InBytes, 4)
		}
	}
	chunk := func(i int) error {
		s, comp := i%slots, comps[i%nComp]
		if i >= slots {
			if err := iss.Wait(h2d, compDone[s]); err != nil {
				return err
			}
		}
		for _, d := range din[s] {
			if err := iss.CopyToDevice(h2d, d, 0, in, 0, 4); err != nil {
				return err
			}
		}
		c := chunks[s]
		c.Index = i
		if err := iss.Record(h2dDone[s], h2d); err != nil {
			return err
		}
		if err := iss.Wait(comp, h2dDone[s]); err != nil {
			return err
		}
		if i >= slots {
			if err := iss.Wait(comp, d2hDone[s]); err != nil {
				return err
			}
		}
		if err := iss.Launch(comp, k, c); err != nil {
			return err
		}
		if err := iss.Record(compDone[s], comp); err != nil {
			return err
		}
		if err := iss.Wait(d2h, compDone[s]); err != nil {
			return err
		}
		if err := iss.CopyToHost(d2h, out, 0, dout[s], 0, 4); err != nil {
			return err
		}
		return iss.Record(d2hDone[s], d2h)
	}
	best := time.Duration(math.MaxInt64)
	for rep := 0; rep < 3; rep++ {
		for i := 0; i < loopWarm; i++ {
			if err := chunk(i); err != nil {
				return 0, fmt.Errorf("timing a chunk's calls: %w", err)
			}
		}
		t0 := pipeline.Now(b)
		for i := loopWarm; i < loopChunks; i++ {
			if err := chunk(i); err != nil {
				return 0, fmt.Errorf("timing a chunk's calls: %w", err)
			}
		}
		best = min(best, pipeline.Now(b)-t0)
		for _, st := range streams {
			if err := st.Synchronize(); err != nil {
				return 0, err
			}
		}
	}
	return float64(best) / (loopChunks - loopWarm), nil
}

// measureWait times the device's cost of a wait for another stream's event
// (Profile.WaitNs): kernels back to back on one stream, each long enough
// that the stream never runs dry while the host issues, alone and with a
// wait for an event already recorded on another stream before each; the
// difference per kernel is the wait's device time. The kernels' length
// doubles until the device, not the host, sets the pace.
func measureWait(b pipeline.Backend, ks kernelSet, p *pipeline.Profile) error {
	const n, kernelsPerLoop = 16 << 10, 20
	st, err := b.NewStream()
	if err != nil {
		return err
	}
	defer st.Close()
	other, err := b.NewStream()
	if err != nil {
		return err
	}
	defer other.Close()
	var evs [3]pipeline.Event
	for i := range evs {
		if evs[i], err = b.NewEvent(i < 2); err != nil {
			return err
		}
		defer evs[i].Close()
	}
	start, end, done := evs[0], evs[1], evs[2]
	buf, err := b.AllocDevice(n * 4)
	if err != nil {
		return err
	}
	defer buf.Close()
	iss, err := b.Issuer()
	if err != nil {
		return err
	}
	defer iss.Release()
	if err := iss.Record(done, other); err != nil {
		return err
	}
	if err := other.Synchronize(); err != nil {
		return err
	}
	chunk := pipeline.Chunk{N: n, Inputs: []driver.DevicePtr{buf.Ptr()}, InBytes: []int{n * 4}, Outputs: []driver.DevicePtr{buf.Ptr()}, OutBytes: []int{n * 4}}
	// loop returns the device time of the kernels and the host's time to
	// issue them.
	loop := func(k *pipeline.Kernel, wait bool) (device, host time.Duration, err error) {
		// A first kernel keeps the stream busy while the rest is issued;
		// the timing starts when it ends.
		t0 := pipeline.Now(b)
		if err := iss.Launch(st, k, chunk); err != nil {
			return 0, 0, err
		}
		if err := iss.Record(start, st); err != nil {
			return 0, 0, err
		}
		for i := 0; i < kernelsPerLoop; i++ {
			if wait {
				if err := iss.Wait(st, done); err != nil {
					return 0, 0, err
				}
			}
			if err := iss.Launch(st, k, chunk); err != nil {
				return 0, 0, err
			}
		}
		if err := iss.Record(end, st); err != nil {
			return 0, 0, err
		}
		host = pipeline.Now(b) - t0
		if err := st.Synchronize(); err != nil {
			return 0, 0, err
		}
		device, err = start.Elapsed(end)
		return device, host, err
	}
	for iters := 100; ; iters *= 2 {
		k := ks.kernel(kernels.Seed, float64(iters))
		alone, _, err := loop(k, false)
		if err != nil {
			return fmt.Errorf("timing waits: %w", err)
		}
		waited, host, err := loop(k, true)
		if err != nil {
			return fmt.Errorf("timing waits: %w", err)
		}
		if alone < 2*host && iters < 1<<16 {
			continue
		}
		p.WaitNs = max(0, float64(waited-alone)/kernelsPerLoop)
		p.Notes["wait"] = fmt.Sprintf("%d seed kernels of %d elements at %d iterations back to back on one stream, each %v of device time, alone and with a wait before each for an event already recorded on another stream: the difference per kernel", kernelsPerLoop, n, iters, alone/kernelsPerLoop)
		return nil
	}
}

// both runs f and g at once, each on a goroutine of its own (on the
// simulator, host actors that start at the caller's virtual time).
func both(b pipeline.Backend, f, g func() error) error {
	var e1, e2 error
	if s, ok := b.(*pipeline.Sim); ok {
		// Forked one by one from this goroutine, which holds nothing, the
		// first copier could finish in virtual time before the second was
		// forked, whenever this goroutine was descheduled between the two:
		// the pair then measured one copy's rate (TestProfileSimEndToEnd
		// under load).
		s.Host().GoTogether("copier", 2, func(i int) {
			if i == 0 {
				e1 = f()
			} else {
				e2 = g()
			}
		})
		return errors.Join(e1, e2)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); e1 = f() }()
	go func() { defer wg.Done(); e2 = g() }()
	wg.Wait()
	return errors.Join(e1, e2)
}

// stagingReps is how many times each staging measurement is repeated.
const stagingReps = 5

// measureHost times staging copies over big bytes of Go memory, and
// registration and pageable copies.
//
// Staging copies go into and out of a pinned region as large as the Go
// memory, a fresh part of it for each copy. A staged run uses its few
// pinned slots again and again, but between two uses its DMA copies read
// or write them, so they are not in the host's caches as a region used
// only by the CPU would be: timed into reused slots without DMA, staging
// made a staged run of 64K-element chunks look 1.4 times as fast as it
// was on the H200 host (2026-11-30, bench/RESULTS.md).
func measureHost(b pipeline.Backend, p *pipeline.Profile, big int) error {
	const top = 128 << 20 // the largest copy size timed
	if big < top {
		return fmt.Errorf("measureHost: %d bytes of Go memory, less than the largest copy (%d)", big, top)
	}
	src := make([]byte, big)
	dst := make([]byte, big)
	for i := range src {
		src[i] = byte(i)
	}
	clear(dst)
	pinIn, err := b.AllocPinned(big)
	if err != nil {
		return err
	}
	defer pinIn.Close()
	pinOut, err := b.AllocPinned(big)
	if err != nil {
		return err
	}
	defer pinOut.Close()
	// Host memory bandwidth on the H200 host varies from one moment to
	// the next (a 4 MiB pair measured 26 to 42 GB/s on three machines):
	// best of stagingReps, with the heap collected first so that the
	// collector does not run beside the copies.
	runtime.GC()
	timeIt := func(fn func() error) (time.Duration, error) {
		best := time.Duration(math.MaxInt64)
		for rep := 0; rep < stagingReps; rep++ {
			t0 := pipeline.Now(b)
			if err := fn(); err != nil {
				return 0, err
			}
			best = min(best, pipeline.Now(b)-t0)
		}
		return best, nil
	}
	// Copies of each size over all of big, in and out, alone and at once.
	in := func(each int) func() error {
		return func() error {
			for off := 0; off+each <= big; off += each {
				if err := b.StageIn(pinIn, off, src[off:off+each]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	out := func(each int) func() error {
		return func() error {
			for off := 0; off+each <= big; off += each {
				if err := b.StageOut(dst[off:off+each], pinOut, off); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if _, err := timeIt(in(top)); err != nil { // warm both sides
		return err
	}
	for _, each := range []int{256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, top} {
		alone, err := timeIt(in(each))
		if err != nil {
			return err
		}
		pair, err := timeIt(func() error { return both(b, in(each), out(each)) })
		if err != nil {
			return err
		}
		p.Staging = append(p.Staging, pipeline.StagingRate{Bytes: each, GBps: float64(big) / float64(alone), PairGBps: float64(2*big) / float64(pair)})
	}
	if err := measureStagingDMA(b, p, in, out, big); err != nil {
		return err
	}
	p.Notes["staging"] = fmt.Sprintf("%d MiB of Go memory staged through as much pinned memory in copies of each size: alone (in), and in and out at once on two goroutines (total), best of %d; %d host threads", big>>20, stagingReps, runtime.GOMAXPROCS(0))

	// Registration of fresh memory (touched first, so page faults are not
	// counted).
	regMem := make([]byte, top)
	for i := 0; i < len(regMem); i += 4096 {
		regMem[i] = 1
	}
	t0 := pipeline.Now(b)
	reg, err := b.Register(regMem)
	if err != nil {
		return err
	}
	took := pipeline.Now(b) - t0
	if err := reg.Close(); err != nil {
		return err
	}
	runtime.KeepAlive(regMem)
	p.RegisterMsPerGiB = float64(took) / 1e6 * float64(1<<30) / float64(top)
	p.Notes["register"] = fmt.Sprintf("one registration of %d MiB of touched Go memory", top>>20)

	// Blocking copies from and to pageable memory.
	dev, err := b.AllocDevice(top)
	if err != nil {
		return err
	}
	defer dev.Close()
	h2d, err := timeIt(func() error { return b.CopyToDeviceSync(dev, 0, src[:top]) })
	if err != nil {
		return err
	}
	d2h, err := timeIt(func() error { return b.CopyToHostSync(src[:top], dev, 0) })
	if err != nil {
		return err
	}
	p.PageableH2DGBps = float64(top) / float64(h2d)
	p.PageableD2HGBps = float64(top) / float64(d2h)
	p.Notes["pageable"] = fmt.Sprintf("blocking copies of %d MiB of Go memory, best of 3", top>>20)
	return nil
}

// valConfig is one configuration that --validate measures and predicts.
type valConfig struct {
	kernel                   string
	host                     pipeline.HostMode
	chunk, slots, streams, n int
}

func (c valConfig) String() string {
	return fmt.Sprintf("%-5s %-10s %5s chunks %d slots %d streams", c.kernel, c.host, humanElems(c.chunk), c.slots, c.streams)
}

// validationSet is --validate's configurations for a seed job of n
// elements: chunk sizes from n/2048 (64K at 128M) to n/4, 2 to 6 slots, 1
// to 4 compute streams, every host mode, and saxpy at a quarter of n.
func validationSet(n int) []valConfig {
	seed := func(host pipeline.HostMode, chunk, slots, streams int) valConfig {
		return valConfig{"seed", host, max(1, n/(128<<20/chunk)), slots, streams, n}
	}
	sx := n / 4
	saxpy := func(host pipeline.HostMode, chunk, slots, streams int) valConfig {
		return valConfig{"saxpy", host, max(1, sx/(32<<20/chunk)), slots, streams, sx}
	}
	const K, M = 1 << 10, 1 << 20
	P, R, S := pipeline.HostPinned, pipeline.HostRegistered, pipeline.HostStaged
	return []valConfig{
		seed(P, 64*K, 2, 1), seed(P, 64*K, 6, 4), seed(P, 256*K, 2, 1), seed(P, 256*K, 4, 4),
		seed(P, 1*M, 3, 1), seed(P, 1*M, 6, 4), seed(P, 4*M, 2, 1), seed(P, 4*M, 4, 2),
		seed(P, 16*M, 2, 1), seed(P, 32*M, 2, 1), seed(P, 32*M, 6, 4),
		seed(R, 64*K, 6, 4), seed(R, 1*M, 2, 2), seed(R, 1*M, 6, 4), seed(R, 4*M, 3, 3), seed(R, 32*M, 2, 1),
		seed(S, 64*K, 6, 4), seed(S, 1*M, 4, 2), seed(S, 1*M, 6, 4), seed(S, 4*M, 2, 1), seed(S, 16*M, 3, 2),
		saxpy(P, 64*K, 6, 4), saxpy(P, 1*M, 6, 4), saxpy(P, 16*M, 2, 1), saxpy(R, 1*M, 3, 1), saxpy(S, 1*M, 4, 2),
	}
}

// valRow is one line of the validation table.
type valRow struct {
	cfg                 valConfig
	measured, predicted time.Duration
}

func (r valRow) err() float64 {
	return float64(r.predicted-r.measured) / float64(r.measured)
}

// validateProfile runs each configuration on the backend, verifies it, and
// predicts it on a simulator of prof.
func validateProfile(ctx context.Context, o *profileOptions, e *env, ks kernelSet, prof *pipeline.Profile, w io.Writer) error {
	cfgs := validationSet(o.elems)
	what := "measured on " + e.backend.Name()
	if o.sim {
		what += " [simulated]"
	}
	fmt.Fprintf(w, "\nvalidation: %d configurations, each the median of %d rounds (a round times every configuration once, each after an untimed run of its own), %s; predicted by the simulator from the profile above\n", len(cfgs), o.repeat, what)
	var rows []valRow
	// One workload per kernel, host mode and size, reused across chunkings.
	type wkey struct {
		kernel string
		host   pipeline.HostMode
		n      int
	}
	loads := map[wkey]*workload{}
	defer func() {
		for _, wl := range loads {
			wl.close()
		}
	}()
	wls := make([]*workload, len(cfgs))
	for i, c := range cfgs {
		k := wkey{c.kernel, c.host, c.n}
		if loads[k] == nil {
			ro := &runOptions{elems: c.n, kernel: c.kernel, iters: 100, host: c.host}
			wl, err := newWorkload(ro, e)
			if err != nil {
				return err
			}
			loads[k] = wl
		}
		wls[i] = loads[k]
	}
	// The configurations are measured in rounds, each timing every one of
	// them once, and each takes the median of its rounds. The host's speed
	// on the H200 host drifts within a process: two rows of the same
	// host-bound work measured 20.3 and 29.9 ms in one validation when
	// each was the best of runs back to back
	// (pipeline/testdata/h200-run4-validation.md). In rounds, a slow spell
	// costs every row one run, not one row all. Each round times the
	// profile's host figures again too (hostSamples), which take their
	// medians over the same rounds: a best of many short timings is faster
	// than a best of a few long ones, so the best on both sides is not the
	// same speed, and the median is.
	samples, err := newHostSamples(prof)
	if err != nil {
		return err
	}
	times := make([][]time.Duration, len(cfgs))
	var stageIn, stageOut []float32
	if len(prof.StagingInRun) > 0 {
		stageIn, stageOut = stagingMemory(o.elems / 2)
	}
	for round := 0; round < o.repeat; round++ {
		last := round == o.repeat-1
		if err := samples.round(ctx, e.backend, ks, stagingKernel(o, ks), prof, stageIn, stageOut); err != nil {
			return fmt.Errorf("timing the host again: %w", err)
		}
		for i, c := range cfgs {
			wl := wls[i]
			if last {
				clear(wl.outputs[0])
			}
			d, err := timedRun(ctx, e.backend, wl, c)
			if err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
			times[i] = append(times[i], d)
			if last {
				// This run wrote the output last: every element checked.
				if err := wl.verify(wl.outputs[0]); err != nil {
					return fmt.Errorf("%s: %w", c, err)
				}
			}
		}
	}
	scale := prof.IssueScale
	samples.apply(prof)
	fmt.Fprint(w, "host: the engine's issue loop per chunk, the median of the profile's and the rounds':")
	for _, l := range prof.IssueLoops {
		fmt.Fprintf(w, " %d slots %d streams %d input(s) %.2f us;", l.Slots, l.Streams, max(l.Inputs, 1), l.Ns/1e3)
	}
	fmt.Fprintf(w, " scale %.3f (the profile above: %.3f)\n", prof.IssueScale, scale)
	printStagingInRun(w, prof, ", the median of the profile's and the rounds'")
	if o.out != "" {
		if err := prof.Write(o.out); err != nil {
			return err
		}
		fmt.Fprintf(w, "wrote %s again, with those loops and staging rates\n", o.out)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %-5s | %-10s | %6s | %5s | %7s | %11s | %11s | %7s |\n", "KERNEL", "HOST", "CHUNK", "SLOTS", "STREAMS", "MEASURED", "PREDICTED", "ERROR")
	fmt.Fprintf(w, "|%s|%s|%s|%s|%s|%s|%s|%s|\n", strings.Repeat("-", 7), strings.Repeat("-", 12), strings.Repeat("-", 8), strings.Repeat("-", 7), strings.Repeat("-", 9), strings.Repeat("-", 13), strings.Repeat("-", 13), strings.Repeat("-", 9))
	for i, c := range cfgs {
		predicted, err := predict(ctx, prof, c)
		if err != nil {
			return fmt.Errorf("predicting %s: %w", c, err)
		}
		r := valRow{c, median(times[i]), predicted}
		rows = append(rows, r)
		fmt.Fprintf(w, "| %-6s | %-10s | %6s | %5d | %7d | %8.3f ms | %8.3f ms | %+6.1f%% |\n",
			c.kernel, c.host, humanElems(c.chunk), c.slots, c.streams, ms(r.measured), ms(predicted), 100*r.err())
	}
	errs := make([]float64, len(rows))
	worst := rows[0]
	for i, r := range rows {
		errs[i] = math.Abs(r.err())
		if errs[i] > math.Abs(worst.err()) {
			worst = r
		}
	}
	fmt.Fprintf(w, "\nmedian |error| %.1f%%, worst %.1f%% (%s); every element of every configuration verified%s\n", 100*median(errs), 100*math.Abs(worst.err()), worst.cfg, label(o.sim))
	return nil
}

func label(sim bool) string {
	if sim {
		return " [simulated]"
	}
	return ""
}

// timedRun runs c on b on a pipeline of its own: once untimed (which
// registers a registered job's memory and allocates a staged one's
// slots, as a caller's first run does), then once timed.
func timedRun(ctx context.Context, b pipeline.Backend, wl *workload, c valConfig) (time.Duration, error) {
	cfg := wl.cfg
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = c.chunk, c.slots, c.streams, c.host
	p, err := pipeline.New(b, cfg)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	if _, err := p.Run(ctx, wl.job); err != nil {
		return 0, err
	}
	rep, err := p.Run(ctx, wl.job)
	if err != nil {
		return 0, err
	}
	return rep.Elapsed, nil
}

// predict runs c on a timing-only simulator of prof, as timedRun does:
// the simulator's clock does not drift, so one round is all of them.
func predict(ctx context.Context, prof *pipeline.Profile, c valConfig) (time.Duration, error) {
	sim := pipeline.NewSimHost(pipeline.SimHostOptions{TimingOnly: true}).NewDevice(prof)
	ins := 1
	k := kernelSet{}.kernel(kernels.Seed, 100)
	if c.kernel == "saxpy" {
		ins, k = 2, kernelSet{}.kernel(kernels.Saxpy, 2.5)
	}
	wl := &workload{cfg: pipeline.Float32Config(ins, 1), job: pipeline.Job{N: c.n, Kernel: k}}
	buf := func() (pipeline.Buffer, error) {
		if c.host == pipeline.HostPinned {
			h, err := sim.AllocPinned(c.n * 4)
			if err != nil {
				return pipeline.Buffer{}, err
			}
			wl.closers = append(wl.closers, h.Close)
			return pipeline.Pinned(h), nil
		}
		return pipeline.Buffer{Data: make([]byte, c.n*4)}, nil
	}
	defer wl.close()
	for i := 0; i < ins; i++ {
		b, err := buf()
		if err != nil {
			return 0, err
		}
		wl.job.Inputs = append(wl.job.Inputs, b)
	}
	b, err := buf()
	if err != nil {
		return 0, err
	}
	wl.job.Outputs = []pipeline.Buffer{b}
	return timedRun(ctx, sim, wl, c)
}

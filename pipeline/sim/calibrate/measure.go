package calibrate

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

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
func measureProfile(ctx context.Context, b pipeline.Backend, ks kernelSet, small, large int, o Options) (*sim.Profile, error) {
	o.say("copies and kernels, each stage alone")
	p := &sim.Profile{CopyEngines: 1, IssueNs: map[string]float64{}, Kernels: map[string]sim.KernelCost{}, Notes: map[string]string{}}
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
	p.H2D = sim.CopyCost{FixedNs: fx, GBps: 1 / sl}
	fx, sl = linear(float64(small*4), ns(s100.D2H), float64(large*4), ns(l100.D2H))
	p.D2H = sim.CopyCost{FixedNs: fx, GBps: 1 / sl}
	f100, c100 := linear(float64(small), ns(s100.Compute), float64(large), ns(l100.Compute))
	_, c0 := linear(float64(small), ns(s0.Compute), float64(large), ns(l0.Compute))
	p.Kernels["seed"] = sim.KernelCost{FixedNs: f100, NsPerElem: c0, NsPerElemPerIter: max(0, (c100-c0)/100)}
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
		p.H2DRegistered = sim.CopyCost{FixedNs: fx, GBps: 1 / sl}
		fx, sl = linear(float64(small*4), ns(rs.D2H), float64(large*4), ns(rl.D2H))
		p.D2HRegistered = sim.CopyCost{FixedNs: fx, GBps: 1 / sl}
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
		p.Kernels[k.Name] = sim.KernelCost{FixedNs: fx, NsPerElem: sl}
	}
	p.Notes["saxpy"] = "like seed, with two inputs; lerp likewise"

	// Both directions at once, and the host's cost per call.
	o.say("copies both ways at once")
	if err := measureLink(b, in, out, size, p); err != nil {
		return nil, err
	}
	o.say("the host's calls")
	if err := measureIssue(b, ks, p); err != nil {
		return nil, err
	}
	o.say("waits between streams")
	if err := measureWait(b, ks, p); err != nil {
		return nil, err
	}
	o.say("staging copies, registration and pageable copies")
	if err := measureHost(b, p, 128<<20); err != nil {
		return nil, err
	}
	o.say("the host's calls on busy streams")
	if err := measureBusy(b, ks, p); err != nil {
		return nil, err
	}
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("the measured profile is unusable: %w", err)
	}
	o.say("dependencies between streams")
	if err := measureDep(b, ks, p, small); err != nil {
		return nil, err
	}
	o.say("copies both ways at once, behind a blocker")
	if err := measureBothFixed(b, p, small*4); err != nil {
		return nil, err
	}
	o.say("kernels on several streams")
	if err := measureKernelSerial(b, ks, p, small); err != nil {
		return nil, err
	}
	o.say("the engine's issue loop")
	if err := measureLoops(b, ks, p); err != nil {
		return nil, err
	}
	// The fixed cost of a Run: a one-chunk job measured, less what the
	// profile so far predicts for it.
	o.say("the fixed cost of a Run")
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
	predicted, err := tiny(sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(p))
	if err != nil {
		return nil, err
	}
	p.RunNs = max(0, float64(measured-predicted))
	p.Notes["run"] = fmt.Sprintf("a 1024-element one-chunk Run took %v; the rest of this profile predicts %v", measured, predicted)
	return p, p.Check()
}

// measureLink times copies in both directions at once on two streams.
func measureLink(b pipeline.Backend, in, out pipeline.PinnedMem, size int, p *sim.Profile) error {
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
func measureIssue(b pipeline.Backend, ks kernelSet, p *sim.Profile) error {
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
func measureSequence(b pipeline.Backend, iss pipeline.Issuer, k *pipeline.Kernel, p *sim.Profile) error {
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
func measureWait(b pipeline.Backend, ks kernelSet, p *sim.Profile) error {
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
func measureHost(b pipeline.Backend, p *sim.Profile, big int) error {
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
		pair, err := timeIt(func() error { return goTogether(b, in(each), out(each)) })
		if err != nil {
			return err
		}
		p.Staging = append(p.Staging, sim.StagingRate{Bytes: each, GBps: float64(big) / float64(alone), PairGBps: float64(2*big) / float64(pair)})
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

package calibrate

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// This file measures what a driver call and a dependency cost in the state
// the engine makes them in: calls on a stream with unfinished
// work, waits for pending events, the device's latency of a dependency
// between streams, and the engine's issue loop at several shapes.

// blocker holds a stream busy with back-to-back copies of a pinned buffer
// for at least a given time, so that calls timed meanwhile meet queued work
// and a pending event.
type blocker struct {
	b     pipeline.Backend
	iss   pipeline.Issuer
	st    pipeline.Stream
	ev    pipeline.Event
	host  pipeline.PinnedMem
	dev   pipeline.DeviceMem
	one   time.Duration // one copy of the whole buffer, measured
	bytes int
}

func newBlocker(b pipeline.Backend, iss pipeline.Issuer, bytes int) (*blocker, error) {
	bl := &blocker{b: b, iss: iss, bytes: bytes}
	var err error
	if bl.st, err = b.NewStream(); err != nil {
		return nil, err
	}
	if bl.ev, err = b.NewEvent(false); err != nil {
		bl.close()
		return nil, err
	}
	if bl.host, err = b.AllocPinned(bytes); err != nil {
		bl.close()
		return nil, err
	}
	if bl.dev, err = b.AllocDevice(bytes); err != nil {
		bl.close()
		return nil, err
	}
	// One copy alone, timed on the host through a synchronisation, the
	// best of 3: the blocker's time per copy.
	bl.one = time.Duration(math.MaxInt64)
	for rep := 0; rep < 3; rep++ {
		t0 := pipeline.Now(b)
		if err := iss.CopyToDevice(bl.st, bl.dev, 0, bl.host, 0, bytes); err != nil {
			bl.close()
			return nil, err
		}
		if err := bl.st.Synchronize(); err != nil {
			bl.close()
			return nil, err
		}
		bl.one = min(bl.one, pipeline.Now(b)-t0)
	}
	return bl, nil
}

// hold queues copies for at least d on the blocker's stream and records
// its event after them: until then the event is pending.
func (bl *blocker) hold(d time.Duration) error {
	n := int(d/max(bl.one, 1)) + 1
	for i := 0; i < n; i++ {
		if err := bl.iss.CopyToDevice(bl.st, bl.dev, 0, bl.host, 0, bl.bytes); err != nil {
			return err
		}
	}
	return bl.iss.Record(bl.ev, bl.st)
}

// timeHeld times on the device the work that issue queues, behind the
// blocker, so that the device, not the host, sets its pace. Each try holds
// the blocker's stream for a while, has the streams of held wait for it,
// records marks[0] on held[0], lets issue queue the work, and records
// marks[1] on last; it doubles the hold until the host issued within half
// of it (four tries at most).
func (bl *blocker) timeHeld(held []pipeline.Stream, last pipeline.Stream, marks [2]pipeline.Event, issue func() error) (time.Duration, error) {
	hold := 20 * time.Millisecond
	for try := 0; ; try++ {
		if err := bl.hold(hold); err != nil {
			return 0, err
		}
		for _, st := range held {
			if err := bl.iss.Wait(st, bl.ev); err != nil {
				return 0, err
			}
		}
		t0 := pipeline.Now(bl.b)
		if err := bl.iss.Record(marks[0], held[0]); err != nil {
			return 0, err
		}
		if err := issue(); err != nil {
			return 0, err
		}
		if err := bl.iss.Record(marks[1], last); err != nil {
			return 0, err
		}
		issued := pipeline.Now(bl.b) - t0
		for _, st := range append(held[:len(held):len(held)], last) {
			if err := st.Synchronize(); err != nil {
				return 0, err
			}
		}
		if issued < hold/2 || try == 3 {
			return marks[0].Elapsed(marks[1])
		}
		hold *= 2
	}
}

// heldRig is what a timing behind a blocker needs: an issuer, a blocker
// of 8 MiB copies, and what else the timing makes, closed last first.
type heldRig struct {
	iss     pipeline.Issuer
	bl      *blocker
	closers []func() error
}

func newHeldRig(b pipeline.Backend) (*heldRig, error) {
	iss, err := b.Issuer()
	if err != nil {
		return nil, err
	}
	bl, err := newBlocker(b, iss, 8<<20)
	if err != nil {
		iss.Release()
		return nil, err
	}
	return &heldRig{iss: iss, bl: bl}, nil
}

func (r *heldRig) close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
	r.bl.close()
	r.iss.Release()
}

func (bl *blocker) close() {
	for _, c := range []interface{ Close() error }{bl.dev, bl.host, bl.ev, bl.st} {
		if c != nil {
			c.Close()
		}
	}
}

// measureBusy measures the host's cost of each call kind on a stream with
// unfinished work (held behind a wait for a pending event) and of a wait
// for a pending event (Profile.IssueNs, the _busy and _pending kinds).
func measureBusy(b pipeline.Backend, ks kernelSet, p *sim.Profile) error {
	iss, err := b.Issuer()
	if err != nil {
		return err
	}
	defer iss.Release()
	bl, err := newBlocker(b, iss, 8<<20)
	if err != nil {
		return err
	}
	defer bl.close()
	rig, err := newCallRig(b)
	if err != nil {
		return err
	}
	defer rig.close()
	st, ev, dev, host, reg := rig.st, rig.ev, rig.dev, rig.host, rig.reg
	other, err := b.NewStream()
	if err != nil {
		return err
	}
	defer other.Close()
	done, err := b.NewEvent(false)
	if err != nil {
		return err
	}
	defer done.Close()
	// done: an event of another stream, complete before the loops.
	if err := iss.Record(done, other); err != nil {
		return err
	}
	if err := other.Synchronize(); err != nil {
		return err
	}
	const calls = 400
	k := ks.kernel(kernels.Seed, 0)
	chunk := rig.chunk()
	kinds := []struct {
		kind string
		call func() error
	}{
		{"record_busy", func() error { return iss.Record(ev, st) }},
		{"wait_busy", func() error { return iss.Wait(st, done) }},
		{"wait_pending", func() error { return iss.Wait(st, bl.ev) }},
		{"copy_busy", func() error { return iss.CopyToDevice(st, dev, 0, host, 0, 4) }},
		{"copy_registered_busy", func() error { return iss.CopyToDevice(st, dev, 0, reg, 0, 4) }},
		{"launch_busy", func() error { return iss.Launch(st, k, chunk) }},
	}
	// The blocker must outlast each loop: 4 times the slowest call alone.
	var slowest float64
	for _, c := range p.IssueNs {
		slowest = max(slowest, c)
	}
	hold := 4 * time.Duration(calls*max(slowest, 1000))
	// The kinds take turns within each round (see measureIssue).
	best := make([]time.Duration, len(kinds))
	for i := range best {
		best[i] = time.Duration(math.MaxInt64)
	}
	for rep := 0; rep < callReps; rep++ {
		for i, kd := range kinds {
			for try := 0; ; try++ {
				if err := bl.hold(hold); err != nil {
					return err
				}
				if err := iss.Wait(st, bl.ev); err != nil {
					return err
				}
				t0 := pipeline.Now(b)
				for n := 0; n < calls; n++ {
					if err := kd.call(); err != nil {
						return fmt.Errorf("timing %s calls: %w", kd.kind, err)
					}
				}
				took := pipeline.Now(b) - t0
				if err := st.Synchronize(); err != nil {
					return err
				}
				if took < hold/2 || try == 3 {
					best[i] = min(best[i], took)
					break
				}
				hold *= 2 // the stream may have run dry: hold it longer
			}
		}
	}
	for i, kd := range kinds {
		p.IssueNs[kd.kind] = float64(best[i]) / calls
	}
	p.Notes["issue_busy"] = fmt.Sprintf("best of %d rounds of %d calls of each kind, the kinds in turn within each round, on a stream held by a wait for an event that copies on another stream keep pending for twice the round or more (wait_busy: for an event already complete; wait_pending: for the pending one)", callReps, calls)
	return nil
}

// depChain times on the device a chain of rounds of an H2D copy, a seed
// kernel and a D2H copy of n float32s, each on its own stream and each waiting for
// an event recorded after the one before, so that every step is a
// dependency between streams. A blocker holds the first stream while the
// host issues the chain, so that the device, not the host, sets its pace.
func depChain(b pipeline.Backend, ks kernelSet, n, rounds int) (time.Duration, error) {
	r, err := newHeldRig(b)
	if err != nil {
		return 0, err
	}
	defer r.close()
	iss, bl := r.iss, r.bl
	var sts [3]pipeline.Stream
	var evs [3]pipeline.Event
	for i := range sts {
		if sts[i], err = b.NewStream(); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, sts[i].Close)
		if evs[i], err = b.NewEvent(false); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, evs[i].Close)
	}
	var marks [2]pipeline.Event
	for i := range marks {
		if marks[i], err = b.NewEvent(true); err != nil {
			return 0, err
		}
		r.closers = append(r.closers, marks[i].Close)
	}
	host, err := b.AllocPinned(n * 4)
	if err != nil {
		return 0, err
	}
	r.closers = append(r.closers, host.Close)
	din, err := b.AllocDevice(n * 4)
	if err != nil {
		return 0, err
	}
	r.closers = append(r.closers, din.Close)
	dout, err := b.AllocDevice(n * 4)
	if err != nil {
		return 0, err
	}
	r.closers = append(r.closers, dout.Close)
	// The seed kernel at 100 iterations and copies of n float32s are the
	// profile's own small points: the fits pass through them, so the
	// simulator's chain differs from the device's only by the
	// dependencies.
	k := ks.kernel(kernels.Seed, 100)
	chunk := pipeline.Chunk{N: n, Inputs: []driver.DevicePtr{din.Ptr()}, InBytes: []int{n * 4}, Outputs: []driver.DevicePtr{dout.Ptr()}, OutBytes: []int{n * 4}}
	h2d, comp, d2h := sts[0], sts[1], sts[2]
	return bl.timeHeld([]pipeline.Stream{h2d}, d2h, marks, func() error {
		for r := 0; r < rounds; r++ {
			if r > 0 {
				if err := iss.Wait(h2d, evs[2]); err != nil {
					return err
				}
			}
			if err := iss.CopyToDevice(h2d, din, 0, host, 0, n*4); err != nil {
				return err
			}
			if err := iss.Record(evs[0], h2d); err != nil {
				return err
			}
			if err := iss.Wait(comp, evs[0]); err != nil {
				return err
			}
			if err := iss.Launch(comp, k, chunk); err != nil {
				return err
			}
			if err := iss.Record(evs[1], comp); err != nil {
				return err
			}
			if err := iss.Wait(d2h, evs[1]); err != nil {
				return err
			}
			if err := iss.CopyToHost(d2h, host, 0, dout, 0, n*4); err != nil {
				return err
			}
			if err := iss.Record(evs[2], d2h); err != nil {
				return err
			}
		}
		return nil
	})
}

// measureDep measures Profile.DepNs: the chain of depChain on b, less the
// same chain on a simulator of p without it, per dependency.
func measureDep(b pipeline.Backend, ks kernelSet, p *sim.Profile, n int) error {
	const rounds = 50
	p.DepNs = 0
	measured, err := depChain(b, ks, n, rounds)
	if err != nil {
		return fmt.Errorf("timing dependencies: %w", err)
	}
	q := p.Clone()
	q.DepNs = 0
	predicted, err := depChain(sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q), ks, n, rounds)
	if err != nil {
		return err
	}
	hops := 3*rounds - 1
	// The simulator starts a stream waiting for another stream's event at
	// max(WaitNs after the wait reaches it, DepNs after the event): the
	// chain without DepNs already holds each hop for WaitNs, which DepNs
	// replaces rather than adds to (without this, dep_ns came
	// out short by wait_ns).
	p.DepNs = max(0, float64(measured-predicted)/float64(hops)+p.WaitNs)
	p.Notes["dep"] = fmt.Sprintf("%d rounds of an H2D copy, a kernel and a D2H copy of %d float32s, each on its own stream waiting for the one before, took %v on the device; the rest of this profile predicts %v; the difference over %d dependencies, plus wait_ns (which that prediction charges at each dependency)", rounds, n, measured, predicted, hops)
	return nil
}

// loopShapes are the issue loop's shapes that Measure times:
// slots, compute streams and inputs (H2D copies per chunk).
var loopShapes = [][3]int{{2, 1, 1}, {6, 4, 1}, {6, 4, 2}}

// measureLoops times the engine's issue loop (engineLoop) on b at each of
// loopShapes and predicts it on a simulator of p without IssueScale, and
// sets IssueScale to the ratio of their totals over the one-input shapes
// (the two-input one, saxpy's, is kept beside them as a check).
func measureLoops(b pipeline.Backend, ks kernelSet, p *sim.Profile) error {
	q := p.Clone()
	q.IssueScale, q.IssueSequenceNs = 0, 0 // per-call costs as measured
	sdev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q)
	p.IssueLoops = nil
	for _, sh := range loopShapes {
		var ns [2]float64
		for i, bk := range []pipeline.Backend{b, sdev} {
			var err error
			if ns[i], err = engineLoop(bk, loopKernel(ks, sh), sh[0], sh[1], sh[2]); err != nil {
				return err
			}
		}
		p.IssueLoops = append(p.IssueLoops, sim.IssueLoop{Slots: sh[0], Streams: sh[1], Inputs: sh[2], Ns: ns[0], PredictedNs: ns[1]})
	}
	p.IssueScale = loopScale(p.IssueLoops)
	p.Notes["issue_loops"] = fmt.Sprintf("the engine's own issue loop: Runs of %d and %d one-element chunks from pinned memory, the median of 3 each, the difference per chunk, at %v (slots, compute streams, inputs), beside the simulator's prediction of the same Runs from the per-call costs by state; issue_scale is measured over predicted, in total over the one-input shapes", engineShort, engineLong, loopShapes)
	return nil
}

// loopKernel is the kernel of an issue loop of shape sh: the seed's, or
// saxpy's for two inputs.
func loopKernel(ks kernelSet, sh [3]int) *pipeline.Kernel {
	if sh[2] == 2 {
		return ks.kernel(kernels.Saxpy, 2.5)
	}
	return ks.kernel(kernels.Seed, 0)
}

// loopScale is IssueScale from issue loops: their measured time over their
// predicted time, in total over the one-input loops; 0 without them.
func loopScale(loops []sim.IssueLoop) float64 {
	var sumM, sumP float64
	for _, l := range loops {
		if l.Inputs <= 1 {
			sumM += l.Ns
			sumP += l.PredictedNs
		}
	}
	if sumM > 0 && sumP > 0 {
		return sumM / sumP
	}
	return 0
}

// engineShort and engineLong are the chunks of engineLoop's two Runs.
const engineShort, engineLong = 50, 250

// engineLoop times the engine's own issue loop on b: Pipeline.Run of jobs
// whose chunks are one element each, so that the host sets the pace, with
// engineShort and engineLong chunks, the median of 3 each; the difference per
// chunk, which leaves out a Run's fixed cost. It is what the engine
// spends per chunk beside the driver calls (its bookkeeping, the events
// it waits on, the goroutine that issues), which an imitation of its calls
// did not see: on one H200 host that imitation took 8.4 µs a chunk while
// the engine issued 64K-element chunks at 10.2 µs at best.
func engineLoop(b pipeline.Backend, k *pipeline.Kernel, slots, streams, inputs int) (float64, error) {
	cfg := pipeline.Float32Config(inputs, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams, cfg.Host = 1, slots, streams, pipeline.HostPinned
	p, err := pipeline.New(b, cfg)
	if err != nil {
		return 0, err
	}
	defer p.Close()
	var bufs []pipeline.Buffer
	for i := 0; i <= inputs; i++ {
		h, err := b.AllocPinned(4 * engineLong)
		if err != nil {
			return 0, err
		}
		defer h.Close()
		bufs = append(bufs, pipeline.Pinned(h))
	}
	job := pipeline.Job{Kernel: k, Inputs: bufs[:inputs], Outputs: bufs[inputs:]}
	timeRuns := func(n int) (time.Duration, error) {
		job.N = n
		var took [3]time.Duration
		for rep := range took {
			r, err := p.Run(context.Background(), job)
			if err != nil {
				return 0, fmt.Errorf("timing the engine's issue loop: %w", err)
			}
			took[rep] = r.Elapsed
		}
		return median(took[:]), nil
	}
	short, err := timeRuns(engineShort)
	if err != nil {
		return 0, err
	}
	long, err := timeRuns(engineLong)
	if err != nil {
		return 0, err
	}
	return max(0, float64(long-short)) / (engineLong - engineShort), nil
}

// stagingDMASizes are the copy sizes at which measureStagingDMA measures:
// the chunks of 1M and 16M float32s, the smallest and largest that the
// validation stages.
var stagingDMASizes = []int{4 << 20, 64 << 20}

// measureStagingDMA measures Profile.StagingDMABySize and StagingDMA: two
// staging copies at once (stageIn(each) and stageOut(each), over total
// bytes each) alone, and while the device copies pinned memory host to
// device, device to host, or both ways on two streams throughout, best of
// stagingReps each. StagingDMA, which older simulators read, is the share at 4 MiB
// both ways.
func measureStagingDMA(b pipeline.Backend, p *sim.Profile, stageIn, stageOut func(each int) func() error, total int) error {
	// Larger than a chunk of the validation's largest staged row, so that
	// the DMA's memory does not stay in the host's caches either.
	const dmaBytes = 64 << 20
	iss, err := b.Issuer()
	if err != nil {
		return err
	}
	defer iss.Release()
	var closers []func() error
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	var sts [2]pipeline.Stream
	for i := range sts {
		if sts[i], err = b.NewStream(); err != nil {
			return err
		}
		closers = append(closers, sts[i].Close)
	}
	hin, err := b.AllocPinned(dmaBytes)
	if err != nil {
		return err
	}
	closers = append(closers, hin.Close)
	hout, err := b.AllocPinned(dmaBytes)
	if err != nil {
		return err
	}
	closers = append(closers, hout.Close)
	din, err := b.AllocDevice(dmaBytes)
	if err != nil {
		return err
	}
	closers = append(closers, din.Close)
	dout, err := b.AllocDevice(dmaBytes)
	if err != nil {
		return err
	}
	closers = append(closers, dout.Close)
	// One copy's time, for how many make the hold.
	t0 := pipeline.Now(b)
	if err := iss.CopyToDevice(sts[0], din, 0, hin, 0, dmaBytes); err != nil {
		return err
	}
	if err := sts[0].Synchronize(); err != nil {
		return err
	}
	per := pipeline.Now(b) - t0
	// pair times the two staging copies while the device copies for hold
	// (none when 0) in the directions asked.
	pair := func(each int, hold time.Duration, h2d, d2h bool) (time.Duration, error) {
		best := time.Duration(math.MaxInt64)
		for rep := 0; rep < stagingReps; rep++ {
			if hold > 0 {
				for i := 0; i <= int(hold/max(per, 1)); i++ {
					if h2d {
						if err := iss.CopyToDevice(sts[0], din, 0, hin, 0, dmaBytes); err != nil {
							return 0, err
						}
					}
					if d2h {
						if err := iss.CopyToHost(sts[1], hout, 0, dout, 0, dmaBytes); err != nil {
							return 0, err
						}
					}
				}
			}
			t0 := pipeline.Now(b)
			if err := goTogether(b, stageIn(each), stageOut(each)); err != nil {
				return 0, err
			}
			best = min(best, pipeline.Now(b)-t0)
			for _, st := range sts {
				if err := st.Synchronize(); err != nil {
					return 0, err
				}
			}
		}
		return best, nil
	}
	var notes []string
	p.StagingDMABySize = nil
	for _, each := range stagingDMASizes {
		alone, err := pair(each, 0, false, false)
		if err != nil {
			return err
		}
		// The device copies for 4 times the pair alone (at least 20 ms),
		// so that it outlasts the pair slowed down.
		hold := max(20*time.Millisecond, 4*alone)
		share := sim.StagingDMAShare{Bytes: each}
		for _, m := range []struct {
			h2d, d2h bool
			to       *float64
		}{{true, false, &share.H2D}, {false, true, &share.D2H}, {true, true, &share.Both}} {
			with, err := pair(each, hold, m.h2d, m.d2h)
			if err != nil {
				return err
			}
			*m.to = min(1, float64(alone)/float64(with))
		}
		p.StagingDMABySize = append(p.StagingDMABySize, share)
		if each == 4<<20 {
			p.StagingDMA = share.Both
		}
		notes = append(notes, fmt.Sprintf("%s: %v alone", bytesText(int64(each)), alone))
	}
	p.Notes["staging_dma"] = fmt.Sprintf("staging in and out at once over %d MiB each, in copies of each size, alone and while the device copies %d MiB of pinned memory host to device, device to host, or both ways on two streams throughout, best of %d; the ratios (%s); staging_dma is the both-ways share at 4 MiB", total>>20, dmaBytes>>20, stagingReps, strings.Join(notes, "; "))
	return nil
}

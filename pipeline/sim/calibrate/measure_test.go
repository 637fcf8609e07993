package calibrate

import (
	"context"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMeasureValidateSim guards issue 11: Measure and Validate, which the
// lead runs on the GPU (overlap profile --validate --out FILE), run end
// to end on the simulator, where measuring the simulator must give back
// the profile it runs on, and predicting from that profile must match
// what it measures.
func TestMeasureValidateSim(t *testing.T) {
	if raceEnabled {
		t.Skip("computes millions of elements on the CPU; the run without the race detector covers it")
	}
	// The truth is the built-in profile with every call at its cost alone
	// whatever its stream's state, unscaled: the command times calls of
	// one kind back to back, each finding the op before it in flight,
	// which the simulator prices at a _busy kind, and the per-call costs
	// and issue_scale cannot be told apart (TestMeasureIssue and
	// TestMeasureStateCosts guard those). Everything else, dep_ns,
	// registered copies and staging_dma included, is the built-in one's.
	want := sim.BuiltinProfile()
	for k := range want.IssueNs {
		if strings.HasSuffix(k, "_busy") || strings.HasSuffix(k, "_pending") {
			delete(want.IssueNs, k)
		}
	}
	want.IssueScale, want.IssueSequenceNs, want.IssueLoops = 0, 0, nil
	// The staging goroutines' time per chunk is measured where they set
	// a staged run's pace, at the smallest of the staged chunks; at this
	// test's 64K elements that chunk is 32 elements, whose run the
	// issuing goroutine paces, so the command rightly reports 0 there
	// (TestMeasureStagingInRun recovers it at a size where it shows).
	want.StagingChunkNs = 0
	require.Positive(t, want.DepNs)
	require.Positive(t, want.BothFixedNs)
	require.Positive(t, want.H2DRegistered.GBps)
	require.Positive(t, want.StagingDMA)
	dev := Device{Backend: sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(want)}
	var said []string
	o := Options{Elems: 64 << 10, Rounds: 1, Progress: func(what string) { said = append(said, what) }}
	got, err := Measure(context.Background(), dev, o)
	require.NoError(t, err)
	require.NoError(t, got.Check())
	assert.Contains(t, said, "the engine's issue loop", "Measure says what it measures")
	assert.Equal(t, "simulator of "+want.Device, got.Device)
	assert.Contains(t, got.Source, "measured by calibrate.Measure on simulator of "+want.Device)
	v, err := Validate(context.Background(), dev, got, o)
	require.NoError(t, err)
	assert.Contains(t, said, "round 1 of 1: the host's figures", "Validate says what it measures")

	near := func(what string, g, w float64) {
		t.Helper()
		// 1%, and for fixed costs 2 ns more: the simulator's clock counts
		// whole nanoseconds, which a fit over two chunk sizes turns into a
		// few ns of the intercept.
		tol := w/100 + 1e-9
		switch {
		case strings.HasSuffix(what, "fixed_ns"):
			tol += 2
		case what == "wait_ns":
			tol++ // a wait of 12.8 ns holds the simulator's stream 12
		}
		assert.InDelta(t, w, g, tol, "%s: measured %v, the simulator runs on %v", what, g, w)
	}
	// Per chunk, back to back on one stream, an operation takes its own
	// time or its issue cost, whichever is longer; the command fits a
	// line through chunks of 32K and 128K elements on the simulator.
	const small, large = 32 << 10, 128 << 10
	fit := func(issue, fixed, per float64) (float64, float64) {
		t1, t2 := max(issue, fixed+per*small), max(issue, fixed+per*large)
		slope := (t2 - t1) / (large - small)
		return t1 - slope*small, slope
	}
	f, per := fit(want.IssueNs["copy"], want.H2D.FixedNs, 4/want.H2D.GBps)
	near("h2d.fixed_ns", got.H2D.FixedNs, f)
	near("h2d.gbps", got.H2D.GBps, 4/per)
	f, per = fit(want.IssueNs["copy"], want.D2H.FixedNs, 4/want.D2H.GBps)
	near("d2h.fixed_ns", got.D2H.FixedNs, f)
	near("d2h.gbps", got.D2H.GBps, 4/per)
	// Copies of registered memory at their own costs.
	f, per = fit(want.IssueNs["copy_registered"], want.H2DRegistered.FixedNs, 4/want.H2DRegistered.GBps)
	near("h2d_registered.fixed_ns", got.H2DRegistered.FixedNs, f)
	near("h2d_registered.gbps", got.H2DRegistered.GBps, 4/per)
	f, per = fit(want.IssueNs["copy_registered"], want.D2HRegistered.FixedNs, 4/want.D2HRegistered.GBps)
	near("d2h_registered.fixed_ns", got.D2HRegistered.FixedNs, f)
	near("d2h_registered.gbps", got.D2HRegistered.GBps, 4/per)
	// Copies both ways at once pay both_fixed_ns too, which measureLink
	// takes for rate: 1.3% of its 8 MiB copies on the simulator at the
	// built-in 2.1 µs (0.08% of the GPU's 128 MiB ones).
	assert.InEpsilon(t, want.BothGBps, got.BothGBps, 0.02, "both_gbps")
	assert.LessOrEqual(t, got.BothGBps, want.BothGBps, "both_gbps: both_fixed_ns slows the copies, never speeds them")
	near("pageable_h2d_gbps", got.PageableH2DGBps, want.PageableH2DGBps)
	near("pageable_d2h_gbps", got.PageableD2HGBps, want.PageableD2HGBps)
	for _, k := range []string{"seed", "saxpy", "lerp"} {
		w := want.Kernels[k]
		iters := 0.0
		if k == "seed" {
			iters = 100
		}
		f, _ := fit(want.IssueNs["launch"], w.FixedNs, w.NsPerElem+iters*w.NsPerElemPerIter)
		_, per0 := fit(want.IssueNs["launch"], w.FixedNs, w.NsPerElem)
		near(k+".fixed_ns", got.Kernels[k].FixedNs, f)
		near(k+".ns_per_elem", got.Kernels[k].NsPerElem, per0)
		if k == "seed" {
			_, per100 := fit(want.IssueNs["launch"], w.FixedNs, w.NsPerElem+100*w.NsPerElemPerIter)
			near(k+".ns_per_elem_per_iter", got.Kernels[k].NsPerElemPerIter, (per100-per0)/100)
		}
	}
	for _, k := range []string{"copy", "launch", "record", "wait"} {
		near("issue_ns."+k, got.IssueNs[k], want.IssueNs[k])
	}
	// A chunk's calls cost the sum of theirs, unscaled.
	near("issue_ns.copy_registered", got.IssueNs["copy_registered"], want.IssueNs["copy_registered"])
	var seq float64
	for k, n := range sim.IssueSequence() {
		seq += float64(n) * want.IssueNs[k]
	}
	near("issue_sequence_ns", got.IssueSequenceNs, seq)
	near("sync_ns", got.SyncNs, want.SyncNs)
	// The simulator's kernels overlap their fixed costs whole, and its
	// staging goroutines take no time beside their copies: so measured.
	assert.InDelta(t, 0, got.KernelFixedSerial, 0.02, "kernel_fixed_serial")
	assert.Len(t, got.StagingInRun, len(stagingRunChunks(32<<10)), "staging timed in staged runs of half the 64K validation job")
	near("wait_ns", got.WaitNs, want.WaitNs)
	near("dep_ns", got.DepNs, want.DepNs)
	near("both_fixed_ns", got.BothFixedNs, want.BothFixedNs)
	near("staging_dma", got.StagingDMA, want.StagingDMA)
	// The calls' costs by state, which the truth lacks, are those of idle
	// calls; the issue loops are predicted exactly.
	for _, k := range []string{"copy", "launch", "record", "wait"} {
		near("issue_ns."+k+"_busy", got.IssueNs[k+"_busy"], want.IssueNs[k])
	}
	near("issue_ns.wait_pending", got.IssueNs["wait_pending"], want.IssueNs["wait"])
	require.Len(t, got.IssueLoops, len(loopShapes))
	near("issue_scale", got.IssueScale, 1)
	near("run_ns", got.RunNs, want.RunNs)
	near("register_ms_per_gib", got.RegisterMsPerGiB, want.RegisterMsPerGiB)
	for _, r := range want.Staging {
		found := false
		for _, g := range got.Staging {
			if g.Bytes == r.Bytes {
				near("staging alone at "+strconv.Itoa(r.Bytes)+" bytes", g.GBps, r.GBps)
				near("staging two at once at "+strconv.Itoa(r.Bytes)+" bytes", g.PairGBps, r.PairGBps)
				found = true
			}
		}
		assert.True(t, found, "staging at %d bytes measured", r.Bytes)
	}

	// The table: 26 configurations, each predicted within 1%, but saxpy
	// within 10%: a known bias of the command (issue 11). On the
	// simulator it times kernels at 32K and 128K elements, where saxpy
	// (0 ns + 0.0041 ns/elem: 134 and 537 ns) is shorter than a launch's
	// issue cost (3.65 us), so the compute stage alone is issue-bound at
	// both points and the fit gives saxpy 3.65 us + 0 ns/elem (see
	// saxpy.fixed_ns above); its predictions then err by up to +9.5% (8K
	// chunks) and +1.1% (512 chunks). A short kernel's small point on the
	// GPU (64K elements) is issue-bound in the same way.
	require.Len(t, v.Rows, 26)
	modes := map[string]bool{}
	var errs []float64
	for i, r := range v.Rows {
		assert.Equal(t, Configs(64 << 10)[i], r.Config)
		tol := 0.01
		if r.Config.Kernel == "saxpy" {
			tol = 0.10
		}
		assert.InDelta(t, 0, r.Err, tol, r.Config.String())
		assert.InDelta(t, float64(r.Predicted-r.Measured)/float64(r.Measured), r.Err, 1e-12, r.Config.String())
		modes[r.Config.Host.String()+" "+r.Config.Kernel] = true
		errs = append(errs, math.Abs(r.Err))
		assert.LessOrEqual(t, math.Abs(r.Err), math.Abs(v.Worst.Err), r.Config.String())
	}
	assert.Len(t, modes, 6, "every host mode for seed and saxpy: %v", modes)
	assert.Equal(t, median(errs), v.Median)
	assert.Contains(t, v.Rows, v.Worst)
	assert.Contains(t, got.Notes["issue_loops"], "replaced by its one round's timing", "Validate sets the profile's host figures")
}

// TestMeasureWait guards issue 11's device wait cost: overlap profile
// gives back the wait_ns that a simulated device runs on, whatever it is
// (0 in the built-in profile, which predates it).
func TestMeasureWait(t *testing.T) {
	if raceEnabled {
		t.Skip("computes seed kernels of thousands of iterations on the CPU")
	}
	for _, waitNs := range []float64{0, 2500, 9000} {
		truth := sim.BuiltinProfile()
		truth.WaitNs = waitNs
		sdev := sim.NewHost(sim.HostOptions{}).NewDevice(truth)
		got := &sim.Profile{Notes: map[string]string{}}
		require.NoError(t, measureWait(sdev, kernelSet{}, got))
		assert.InDelta(t, waitNs, got.WaitNs, 1, "wait_ns")
		assert.Contains(t, got.Notes["wait"], "back to back on one stream")
	}
}

// TestMeasureIssue guards issue 11's host costs in a run: overlap profile
// gives back the copy cost from registered memory and a chunk's calls in a
// steady loop that a simulated device runs on. The simulator charges
// every call at its cost alone scaled by the sequence's ratio, so the
// calls measured alone come back scaled and the sequence as it is.
func TestMeasureIssue(t *testing.T) {
	// The truth prices calls alone, whatever their stream's state, and
	// scales them by IssueSequenceNs (no IssueScale): the calls timed
	// here run back to back, so each finds the op before it still in
	// flight, which the simulator prices at the _busy kinds that the
	// built-in profile has (TestMeasureStateCosts guards those).
	truth := sim.BuiltinProfile()
	for k := range truth.IssueNs {
		if strings.HasSuffix(k, "_busy") || strings.HasSuffix(k, "_pending") {
			delete(truth.IssueNs, k)
		}
	}
	truth.IssueScale, truth.IssueLoops = 0, nil
	truth.IssueNs["copy_registered"] = 5000
	var sum float64
	for k, n := range sim.IssueSequence() {
		sum += float64(n) * truth.IssueNs[k]
	}
	truth.IssueSequenceNs = 0.7 * sum
	sdev := sim.NewHost(sim.HostOptions{}).NewDevice(truth)
	got := &sim.Profile{IssueNs: map[string]float64{}, Notes: map[string]string{}}
	require.NoError(t, measureIssue(sdev, kernelSet{}, got))
	for _, k := range []string{"copy", "copy_registered", "launch", "record", "wait"} {
		// The clock counts whole nanoseconds per call.
		assert.InDelta(t, 0.7*truth.IssueNs[k], got.IssueNs[k], 1, k)
	}
	assert.InDelta(t, truth.IssueSequenceNs, got.IssueSequenceNs, 10, "issue_sequence_ns")
	assert.Contains(t, got.Notes["issue_sequence"], "in the engine's order")
}

// TestMeasureStateCosts guards issue 11's host costs by state and the
// device's latency of a dependency between streams: overlap profile gives
// back the costs of calls on a busy stream, of a wait for a pending event
// and the dep_ns that a simulated device runs on, and predicts its issue
// loops exactly (scale 1). A simulator that priced calls without their
// state, or ignored dep_ns, would give back the idle costs and 0.
func TestMeasureStateCosts(t *testing.T) {
	truth := sim.BuiltinProfile()
	truth.IssueNs["wait_pending"] = 3100
	truth.IssueNs["wait_busy"] = 900
	truth.IssueNs["launch_busy"] = 6200
	truth.IssueNs["copy_busy"] = 3300
	truth.IssueNs["copy_registered_busy"] = 3400
	truth.IssueNs["record_busy"] = 800
	truth.DepNs = 7000
	// Calls at their own costs: the built-in profile scales them by its
	// issue_scale, which this test measures as 1.
	truth.IssueScale, truth.IssueSequenceNs, truth.IssueLoops = 0, 0, nil
	// A wait's own hold, which dep_ns replaces rather than adds to: a
	// measurement that subtracted it gave 6500 (issue 11).
	truth.WaitNs = 500
	sdev := sim.NewHost(sim.HostOptions{}).NewDevice(truth)
	got := truth.Clone()
	got.DepNs = 0
	for _, k := range []string{"wait_pending", "wait_busy", "launch_busy", "copy_busy", "copy_registered_busy", "record_busy"} {
		delete(got.IssueNs, k)
	}
	require.NoError(t, measureBusy(sdev, kernelSet{}, got))
	for _, k := range []string{"wait_pending", "wait_busy", "launch_busy", "copy_busy", "copy_registered_busy", "record_busy"} {
		assert.InDelta(t, truth.IssueNs[k], got.IssueNs[k], 1, k)
	}
	require.NoError(t, measureDep(sdev, kernelSet{}, got, 32<<10))
	assert.InDelta(t, truth.DepNs, got.DepNs, 5, "dep_ns")
	require.NoError(t, measureLoops(sdev, kernelSet{}, got))
	require.Len(t, got.IssueLoops, len(loopShapes))
	for _, l := range got.IssueLoops {
		assert.InDelta(t, l.Ns, l.PredictedNs, 1, "%+v", l)
	}
	assert.InDelta(t, 1, got.IssueScale, 1e-3)
}

// TestMeasureStagingDMA guards issue 11's staging under DMA: overlap
// profile gives back the share of their rate that staging copies keep
// while the simulated device copies one way or both, at each size it
// measures (TestMeasureValidateSim: all of it when the profile says
// nothing).
func TestMeasureStagingDMA(t *testing.T) {
	if raceEnabled {
		t.Skip("copies hundreds of MiB on the CPU")
	}
	truth := sim.BuiltinProfile()
	truth.StagingDMABySize = []sim.StagingDMAShare{
		{Bytes: 4 << 20, H2D: 0.9, D2H: 0.8, Both: 0.6},
		{Bytes: 64 << 20, H2D: 0.7, D2H: 0.65, Both: 0.5},
	}
	sdev := sim.NewHost(sim.HostOptions{}).NewDevice(truth)
	got := &sim.Profile{IssueNs: map[string]float64{}, Notes: map[string]string{}}
	require.NoError(t, measureHost(sdev, got, 128<<20))
	require.Len(t, got.StagingDMABySize, len(truth.StagingDMABySize))
	for i, w := range truth.StagingDMABySize {
		g := got.StagingDMABySize[i]
		assert.Equal(t, w.Bytes, g.Bytes)
		assert.InDelta(t, w.H2D, g.H2D, 0.01, "h2d share at %d bytes", w.Bytes)
		assert.InDelta(t, w.D2H, g.D2H, 0.01, "d2h share at %d bytes", w.Bytes)
		assert.InDelta(t, w.Both, g.Both, 0.01, "both-ways share at %d bytes", w.Bytes)
	}
	assert.InDelta(t, 0.6, got.StagingDMA, 0.01, "staging_dma: the both-ways share at 4 MiB")
	assert.Contains(t, got.Notes["staging_dma"], "both ways")
}

// stagingTruth is the built-in profile with in-run staging rates at each
// of stagingRunChunks(n), different by size and direction, so low that
// the staging goroutines set the pace even at the smallest chunk (as on
// the H200 host), faster alone by a boost that differs by size and from
// the staging table's, and 3 µs a chunk besides the copies; and a
// timing-only simulator of it.
//
// Its issue lags grow with the copies' size, as on the H200 host.
func stagingTruth(n int) (*sim.Profile, *sim.Sim) {
	truth := sim.BuiltinProfile()
	truth.StagingInRun = nil
	for i, chunk := range stagingRunChunks(n) {
		truth.StagingInRun = append(truth.StagingInRun, sim.StagingInRun{Bytes: 4 * chunk, InGBps: 0.3 * (1 + float64(i)), OutGBps: 0.2 * (1 + 1.5*float64(i)), AloneBoost: 1.25 + 0.1*float64(i), IssueLagNs: truthLags[i]})
	}
	truth.StagingChunkNs = 3000
	return truth, sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(truth)
}

// truthLags are stagingTruth's issue lags, by stagingRunChunks.
var truthLags = []float64{0, 5e3, 20e3, 60e3, 150e3}

// TestMeasureStagingInRun: measureStagingInRun recovers the in-run staging
// rates that a simulated host runs on, at each chunk size, by direction
// (the time each copy ran alone, faster by the boost, reckoned back), and
// the staging goroutines' time per chunk besides the copies, and the
// issuer's lag after a staging handoff, by size.
func TestMeasureStagingInRun(t *testing.T) {
	const n = 1 << 20
	truth, sdev := stagingTruth(n)
	got := truth.Clone()
	got.StagingInRun, got.StagingChunkNs = nil, 0
	seed := kernelSet{}.kernel(kernels.Seed, 0)
	require.NoError(t, measureStagingInRun(context.Background(), sdev, seed, got, n))
	assert.InEpsilon(t, 3000, got.StagingChunkNs, 0.03, "the staging goroutines' time per chunk besides the copies")
	require.Len(t, got.StagingInRun, len(truth.StagingInRun))
	for i, w := range truth.StagingInRun {
		g := got.StagingInRun[i]
		assert.Equal(t, w.Bytes, g.Bytes)
		assert.InEpsilon(t, w.InGBps, g.InGBps, 0.01, "in, %d bytes", w.Bytes)
		assert.InEpsilon(t, w.OutGBps, g.OutGBps, 0.01, "out, %d bytes", w.Bytes)
		assert.InEpsilon(t, w.AloneBoost, g.AloneBoost, 0.01, "alone boost fitted to the spans, %d bytes (the staging table's: %.3f)", w.Bytes, truth.StagingTableBoost(w.Bytes))
		assert.InDelta(t, w.IssueLagNs, g.IssueLagNs, math.Max(1e3, 0.05*w.IssueLagNs), "issue lag, %d bytes: the measured lateness less the simulator's without a lag", w.Bytes)
	}
	assert.Contains(t, got.Notes["staging_in_run"], "stage-in and stage-out spans")
	assert.Contains(t, got.Notes["staging_issue_lag"], "stage-in to its H2D copy")
	assert.ErrorContains(t, measureStagingInRun(context.Background(), sdev, seed, got, 0), "0 elements")
	got.Staging = nil
	assert.ErrorContains(t, measureStagingInRun(context.Background(), sdev, seed, got, n), "staging table")
}

// TestMeasureKernelSerial: measureKernelSerial recovers the share of the
// kernels' fixed cost that a simulated device runs apart from other
// kernels, and the simulator's kernels on several streams take longer as
// that share grows.
func TestMeasureKernelSerial(t *testing.T) {
	const n = 64 << 10
	var last time.Duration
	for _, share := range []float64{0, 0.3, 0.6, 1} {
		truth := sim.BuiltinProfile()
		truth.KernelFixedSerial = share
		sdev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(truth)
		took, err := kernelsOnStreams(sdev, kernelSet{}, n, 40)
		require.NoError(t, err)
		assert.Greater(t, took, last, "share %v", share)
		last = took
		got := truth.Clone()
		got.KernelFixedSerial = 0.5
		require.NoError(t, measureKernelSerial(sdev, kernelSet{}, got, n))
		assert.InDelta(t, share, got.KernelFixedSerial, 0.02)
		assert.Contains(t, got.Notes["kernel_fixed_serial"], "round robin on 4 streams")
	}
}

// TestHostSamplesMedian: over several rounds each host figure is the
// median of the rounds' timings, so that one round's outlier, on either
// side, moves none of them, and the notes count the rounds.
func TestHostSamplesMedian(t *testing.T) {
	truth, _ := stagingTruth(1 << 20)
	p := truth.Clone()
	p.IssueLoops = nil
	for _, sh := range loopShapes {
		p.IssueLoops = append(p.IssueLoops, sim.IssueLoop{Slots: sh[0], Streams: sh[1], Inputs: sh[2], Ns: 99e3, PredictedNs: 10e3})
	}
	s, err := newHostSamples(p)
	require.NoError(t, err)
	// Three rounds, by hand: in each figure's samples an outlier far on
	// one side, so that the median is neither the first, the last nor the
	// mean.
	for round := range 3 {
		for i := range s.loops {
			s.loops[i] = append(s.loops[i], []float64{40e3, 12e3, 11e3}[round])
		}
		for i, r := range truth.StagingInRun {
			s.in[i] = append(s.in[i], []float64{r.InGBps * 4, r.InGBps * 1.1, r.InGBps}[round])
			s.out[i] = append(s.out[i], []float64{r.OutGBps * 1.1, r.OutGBps, r.OutGBps / 4}[round])
			s.boost[i] = append(s.boost[i], []float64{r.AloneBoost * 4, r.AloneBoost * 1.1, r.AloneBoost}[round])
			s.lag[i] = append(s.lag[i], []float64{r.IssueLagNs + 9e6, r.IssueLagNs + 1e3, r.IssueLagNs}[round])
		}
		s.chunkNs = append(s.chunkNs, []float64{9e6, 3e3, 1e3}[round])
	}
	s.apply(p)
	for i, l := range p.IssueLoops {
		assert.Equal(t, 12e3, l.Ns, "loop %d: the median of 40, 12 and 11 µs", i)
	}
	assert.InEpsilon(t, 1.2, p.IssueScale, 1e-9, "the scale from the medians")
	for i, r := range p.StagingInRun {
		w := truth.StagingInRun[i]
		assert.InEpsilon(t, w.InGBps*1.1, r.InGBps, 1e-9, "staging in, rate %d", i)
		assert.InEpsilon(t, w.OutGBps, r.OutGBps, 1e-9, "staging out, rate %d", i)
		assert.InEpsilon(t, w.AloneBoost*1.1, r.AloneBoost, 1e-9, "boost %d", i)
		assert.Equal(t, w.IssueLagNs+1e3, r.IssueLagNs, "issue lag %d", i)
	}
	assert.Equal(t, 3e3, p.StagingChunkNs)
	for _, k := range []string{"issue_loops", "staging_in_run", "staging_chunk_ns", "staging_issue_lag"} {
		assert.Contains(t, p.Notes[k], "replaced by the median of 3 rounds' timings", k)
	}
}

// TestHostSamples: --validate's rounds time the profile's host figures
// again, and the profile takes the median of each over the rounds alone:
// a slow spell when the profile was measured is left out, the
// staging time per chunk is reckoned against each round's own rates, and
// a profile whose figures do not match what a round times is refused.
func TestHostSamples(t *testing.T) {
	const n = 1 << 20
	truth, sdev := stagingTruth(n)
	seed := kernelSet{}.kernel(kernels.Seed, 0)
	in, out := stagingMemory(n)
	p := truth.Clone()
	require.NoError(t, measureLoops(sdev, kernelSet{}, p))
	want := append([]sim.IssueLoop(nil), p.IssueLoops...)
	wantScale := p.IssueScale
	require.Positive(t, wantScale)
	// A slow spell when the profile was measured.
	for i := range p.IssueLoops {
		p.IssueLoops[i].Ns *= 1.5
	}
	p.IssueScale *= 1.5
	for i := range p.StagingInRun {
		p.StagingInRun[i].InGBps /= 2
		p.StagingInRun[i].OutGBps /= 2
		p.StagingInRun[i].IssueLagNs = 3*p.StagingInRun[i].IssueLagNs + 40e3
	}
	p.StagingChunkNs = 0
	s, err := newHostSamples(p)
	require.NoError(t, err)
	unchanged := p.Clone()
	s.apply(unchanged)
	assert.Equal(t, p, unchanged, "no round timed: the profile as it was")
	// One round: the profile's own figures would move any median of them
	// and the round's.
	require.NoError(t, s.round(context.Background(), sdev, kernelSet{}, seed, p, in, out))
	s.apply(p)
	for i, w := range want {
		assert.InEpsilon(t, w.Ns, p.IssueLoops[i].Ns, 1e-9, "loop %d: the round's timing, not the slow one", i)
		assert.Equal(t, w.PredictedNs, p.IssueLoops[i].PredictedNs, "loop %d: the prediction stays", i)
	}
	assert.InEpsilon(t, wantScale, p.IssueScale, 1e-9)
	for i, r := range p.StagingInRun {
		assert.InEpsilon(t, truth.StagingInRun[i].InGBps, r.InGBps, 0.01, "staging in, rate %d", i)
		assert.InEpsilon(t, truth.StagingInRun[i].OutGBps, r.OutGBps, 0.01, "staging out, rate %d", i)
		assert.InDelta(t, truth.StagingInRun[i].IssueLagNs, r.IssueLagNs, math.Max(1e3, 0.05*truth.StagingInRun[i].IssueLagNs), "issue lag %d", i)
	}
	assert.InEpsilon(t, 3000, p.StagingChunkNs, 0.03, "each round's time per chunk, against that round's rates")
	for _, k := range []string{"issue_loops", "staging_in_run", "staging_chunk_ns", "staging_issue_lag"} {
		assert.Contains(t, p.Notes[k], "replaced by its one round's timing", k)
	}

	q := truth.Clone()
	q.IssueLoops = nil
	_, err = newHostSamples(q)
	assert.ErrorContains(t, err, "0 issue loops")
	require.NoError(t, measureLoops(sdev, kernelSet{}, q))
	q.IssueLoops[1].Slots++
	_, err = newHostSamples(q)
	assert.ErrorContains(t, err, "issue loop 1 has 7 slots")
	q.IssueLoops[1].Slots--
	q.StagingInRun = q.StagingInRun[1:]
	s, err = newHostSamples(q)
	require.NoError(t, err)
	assert.ErrorContains(t, s.round(context.Background(), sdev, kernelSet{}, seed, q, in, out), "in-run staging rates timed")
	assert.Empty(t, s.loops[0], "a round that fails adds no sample")
	q.StagingInRun = append([]sim.StagingInRun(nil), truth.StagingInRun...)
	q.StagingInRun[2].Bytes++
	s, err = newHostSamples(q)
	require.NoError(t, err)
	assert.ErrorContains(t, s.round(context.Background(), sdev, kernelSet{}, seed, q, in, out), "rate 2 timed at")
}

// TestMeasureBothFixed: measureBothFixed recovers the extra fixed cost of
// a copy beside the other direction that a simulated device charges, and
// the copies both ways take longer as it grows.
func TestMeasureBothFixed(t *testing.T) {
	const bytes = 256 << 10
	var last time.Duration
	for _, extra := range []float64{0, 500, 1900, 4000, 6000} {
		truth := sim.BuiltinProfile()
		truth.BothFixedNs = extra
		sdev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(truth)
		took, err := bothCopies(sdev, bytes, bothCopyCount)
		require.NoError(t, err)
		assert.Greater(t, took, last, "both_fixed_ns %v", extra)
		last = took
		got := truth.Clone()
		got.BothFixedNs = 777
		require.NoError(t, measureBothFixed(sdev, got, bytes))
		assert.InDelta(t, extra, got.BothFixedNs, 0.01*max(extra, 200), "both_fixed_ns %v", extra)
		assert.Contains(t, got.Notes["both_fixed"], "each way")
	}
}

package sim_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStagingDMAShares guards how the simulator slows staging copies while
// DMA runs: by the directions in flight and the copy's size, measured
// shares exactly at the sizes measured, log-interpolated between them, the
// nearest outside, and the older single share for profiles without them.
func TestStagingDMAShares(t *testing.T) {
	p := sim.BuiltinProfile()
	p.StagingDMA = 0.75
	p.StagingDMABySize = nil
	assert.Equal(t, 1.0, sim.ProfileStagingDMA(p, 4<<20, false, false), "no DMA in flight")
	assert.Equal(t, 0.75, sim.ProfileStagingDMA(p, 4<<20, true, false), "an older profile: one share for any DMA")
	assert.Equal(t, 0.75, sim.ProfileStagingDMA(p, 64<<20, true, true))

	p.StagingDMABySize = []sim.StagingDMAShare{
		{Bytes: 64 << 20, H2D: 0.7, D2H: 0.6, Both: 0.5},
		{Bytes: 4 << 20, H2D: 0.9, D2H: 0.8, Both: 0.7},
	}
	assert.Equal(t, 1.0, sim.ProfileStagingDMA(p, 4<<20, false, false))
	assert.Equal(t, 0.9, sim.ProfileStagingDMA(p, 4<<20, true, false))
	assert.Equal(t, 0.8, sim.ProfileStagingDMA(p, 4<<20, false, true))
	assert.Equal(t, 0.7, sim.ProfileStagingDMA(p, 4<<20, true, true))
	assert.Equal(t, 0.5, sim.ProfileStagingDMA(p, 64<<20, true, true))
	assert.Equal(t, 0.7, sim.ProfileStagingDMA(p, 1<<20, true, true), "below the smallest size measured")
	assert.Equal(t, 0.5, sim.ProfileStagingDMA(p, 1<<30, true, true), "above the largest")
	// 16 MiB is halfway between 4 and 64 MiB on a log scale.
	assert.InDelta(t, 0.6, sim.ProfileStagingDMA(p, 16<<20, true, true), 1e-9)
	assert.InDelta(t, 0.8, sim.ProfileStagingDMA(p, 16<<20, true, false), 1e-9)
}

// TestStagingDMASharesValidated: a share outside (0, 1] or a size below one
// byte is refused by name when a profile is read.
func TestStagingDMASharesValidated(t *testing.T) {
	for _, c := range []struct {
		share sim.StagingDMAShare
		want  string
	}{
		{sim.StagingDMAShare{Bytes: 4 << 20, H2D: 0, D2H: 0.5, Both: 0.5}, "staging_dma_by_size h2d at 4194304 bytes is 0"},
		{sim.StagingDMAShare{Bytes: 4 << 20, H2D: 0.5, D2H: 1.5, Both: 0.5}, "staging_dma_by_size d2h at 4194304 bytes is 1.5"},
		{sim.StagingDMAShare{Bytes: 0, H2D: 0.5, D2H: 0.5, Both: 0.5}, "staging_dma_by_size has a size of 0 bytes"},
	} {
		p := sim.BuiltinProfile()
		p.StagingDMABySize = []sim.StagingDMAShare{c.share}
		refused(t, p, c.want)
	}
}

// TestStagingInRunRates: the in-run staging rate by direction, exact at the
// sizes measured, log-interpolated between them, the nearest outside, and
// 0 for a profile without it; and bad entries refused by name.
func TestStagingInRunRates(t *testing.T) {
	p := sim.BuiltinProfile()
	p.StagingInRun = nil
	assert.Zero(t, sim.ProfileStagingInRun(p, 4<<20, true), "a profile without it")
	p.StagingInRun = []sim.StagingInRun{{Bytes: 64 << 20, InGBps: 30, OutGBps: 20}, {Bytes: 4 << 20, InGBps: 10, OutGBps: 8}}
	assert.Equal(t, 10.0, sim.ProfileStagingInRun(p, 4<<20, true))
	assert.Equal(t, 8.0, sim.ProfileStagingInRun(p, 4<<20, false))
	assert.Equal(t, 30.0, sim.ProfileStagingInRun(p, 64<<20, true))
	assert.Equal(t, 8.0, sim.ProfileStagingInRun(p, 1<<20, false), "below the smallest size measured")
	assert.Equal(t, 20.0, sim.ProfileStagingInRun(p, 1<<30, false), "above the largest")
	assert.InDelta(t, 20.0, sim.ProfileStagingInRun(p, 16<<20, true), 1e-9, "halfway on a log scale")
	assert.InDelta(t, 14.0, sim.ProfileStagingInRun(p, 16<<20, false), 1e-9)
	assert.Equal(t, p.StagingTableBoost(16<<20), p.StagingAloneBoost(16<<20), "no boost fitted: the staging table's")
	p.StagingInRun[0].AloneBoost, p.StagingInRun[1].AloneBoost = 1.2, 1.6
	assert.InDelta(t, 1.4, p.StagingAloneBoost(16<<20), 1e-9, "fitted boosts, halfway on a log scale")
	assert.Equal(t, 1.6, p.StagingAloneBoost(1<<20), "below the smallest size measured")

	for _, c := range []struct {
		r    sim.StagingInRun
		want string
	}{
		{sim.StagingInRun{Bytes: 4 << 20, InGBps: 0, OutGBps: 5}, "staging_in_run in_gbps at 4194304 bytes"},
		{sim.StagingInRun{Bytes: 4 << 20, InGBps: 5, OutGBps: -1}, "staging_in_run out_gbps at 4194304 bytes"},
		{sim.StagingInRun{Bytes: 0, InGBps: 5, OutGBps: 5}, "staging_in_run has a size of 0 bytes"},
		{sim.StagingInRun{Bytes: 4 << 20, InGBps: 5, OutGBps: 5, AloneBoost: -1}, "staging_in_run alone_boost at 4194304 bytes is -1"},
		{sim.StagingInRun{Bytes: 4 << 20, InGBps: 5, OutGBps: 5, IssueLagNs: -1}, "staging_in_run issue_lag_ns at 4194304 bytes is -1"},
		{sim.StagingInRun{Bytes: 4 << 20, InGBps: 5, OutGBps: 5, IssueLagNs: 2e9}, "staging_in_run issue_lag_ns at 4194304 bytes is 2e+09; at most 1e+09 (1 s)"},
	} {
		q := sim.BuiltinProfile()
		q.StagingInRun = []sim.StagingInRun{c.r}
		refused(t, q, c.want)
	}
}

// TestSimStagingInRun: with Profile.StagingInRun, the simulator runs a
// staged run's staging copies at the in-run rate of their direction while
// the other staging goroutine copies, faster by the profile's boost while
// it does not, and the staging stages timed alone (StageTimes) at the rate
// alone; without it, the run's copies at neither in-run rate. On real
// data, every element checked.
func TestSimStagingInRun(t *testing.T) {
	const chunk, chunks = 256 << 10, 10 // 1 MiB copies
	const n = chunk * chunks
	const bytes = 4 * chunk
	run := func(p *sim.Profile) (in, out map[int]time.Duration, _ pipeline.StageTimes) {
		rep, alone := stagedSimRun(t, p, chunk, chunks, true)
		in, out = map[int]time.Duration{}, map[int]time.Duration{}
		for _, s := range rep.Spans {
			switch s.Stage {
			case pipeline.StageIn:
				in[s.Chunk] = s.End - s.Start
			case pipeline.StageOut:
				out[s.Chunk] = s.End - s.Start
			}
		}
		require.Len(t, in, chunks)
		require.Len(t, out, chunks)
		return in, out, alone
	}
	p := testProfile(t)
	// Rates no profile has, far below the host's: the copies set the pace,
	// stage-in and stage-out side by side.
	p.StagingInRun = []sim.StagingInRun{{Bytes: 1 << 20, InGBps: 0.5, OutGBps: 0.5}}
	boost := p.StagingAloneBoost(bytes)
	require.Greater(t, boost, 1.05, "the test profile's copies go faster alone")
	in, out, alone := run(p)
	assert.InEpsilon(t, float64(bytes)/(0.5*boost), float64(in[0]), 0.01, "the first stage-in, alone: faster by the boost")
	assert.InEpsilon(t, float64(bytes)/(0.5*boost), float64(out[chunks-1]), 0.01, "the last stage-out, alone")
	for c := 1; c < chunks; c++ {
		assert.InEpsilon(t, float64(bytes)/0.5, float64(in[c]), 0.02, "stage-in of chunk %d beside a stage-out: the in-run rate", c)
		assert.InEpsilon(t, float64(bytes)/0.5, float64(out[c-1]), 0.02, "stage-out of chunk %d beside a stage-in", c-1)
	}
	solo, _ := p.StagingRates(bytes)
	assert.InEpsilon(t, chunks*float64(bytes)/solo, float64(alone.In), 0.02, "staging in timed alone: at the rate alone")
	assert.InEpsilon(t, chunks*float64(bytes)/solo, float64(alone.Out), 0.02, "staging out timed alone: at the rate alone")
	// A boost fitted in staged runs replaces the staging table's.
	p.StagingInRun[0].AloneBoost = 1.4
	require.Equal(t, 1.4, p.StagingAloneBoost(bytes))
	in, out, _ = run(p)
	assert.InEpsilon(t, float64(bytes)/(0.5*1.4), float64(in[0]), 0.01, "the first stage-in, alone: faster by the fitted boost")
	assert.InEpsilon(t, float64(bytes)/(0.5*1.4), float64(out[chunks-1]), 0.01, "the last stage-out, alone")
	assert.InEpsilon(t, float64(bytes)/0.5, float64(in[chunks/2]), 0.02, "beside a stage-out: the in-run rate")
	p.StagingInRun = nil
	in, out, _ = run(p)
	for c := 0; c < chunks; c++ {
		assert.Less(t, float64(in[c]), 0.5*float64(bytes)/0.5, "chunk %d: without StagingInRun, the profile's other rates", c)
		assert.Less(t, float64(out[c]), 0.5*float64(bytes)/0.5, "chunk %d", c)
	}
}

// TestKernelFixedSerialValidated: a share outside 0..1 is refused by name
// when a profile is read.
func TestKernelFixedSerialValidated(t *testing.T) {
	for _, share := range []float64{-0.1, 1.5} {
		p := sim.BuiltinProfile()
		p.KernelFixedSerial = share
		refused(t, p, "kernel_fixed_serial is")
	}
}

// refused checks that p, written as JSON and read back, is refused with
// an error that says want.
func refused(t *testing.T, p *sim.Profile, want string) {
	t.Helper()
	b, err := json.Marshal(p)
	require.NoError(t, err)
	_, err = sim.ParseProfile(b)
	assert.ErrorContains(t, err, want)
}

// TestSimBothFixed: a copy that starts while the other direction copies
// pays Profile.BothFixedNs more; a copy alone does not. It fails if the
// extra cost is dropped, charged to copies alone, or charged to only one
// direction.
func TestSimBothFixed(t *testing.T) {
	const bytes, count = 256 << 10, 20
	// copies times toDev copies of bytes to the device on one stream and
	// toHost back on another, issued in turns: each stream's time on the
	// device, from timing events around its copies.
	copies := func(p *sim.Profile, toDev, toHost int) (h2d, d2h time.Duration) {
		dev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(p)
		iss, err := dev.Issuer()
		require.NoError(t, err)
		defer iss.Release()
		host, err := dev.AllocPinned(2 * bytes)
		require.NoError(t, err)
		defer host.Close()
		var devs [2]pipeline.DeviceMem
		var sts [2]pipeline.Stream
		var evs [4]pipeline.Event
		for i := range devs {
			devs[i], err = dev.AllocDevice(bytes)
			require.NoError(t, err)
			defer devs[i].Close()
			sts[i], err = dev.NewStream()
			require.NoError(t, err)
			defer sts[i].Close()
		}
		for i := range evs {
			evs[i], err = dev.NewEvent(true)
			require.NoError(t, err)
			defer evs[i].Close()
		}
		require.NoError(t, iss.Record(evs[0], sts[0]))
		require.NoError(t, iss.Record(evs[2], sts[1]))
		for i := 0; i < max(toDev, toHost); i++ {
			if i < toDev {
				require.NoError(t, iss.CopyToDevice(sts[0], devs[0], 0, host, 0, bytes))
			}
			if i < toHost {
				require.NoError(t, iss.CopyToHost(sts[1], host, bytes, devs[1], 0, bytes))
			}
		}
		require.NoError(t, iss.Record(evs[1], sts[0]))
		require.NoError(t, iss.Record(evs[3], sts[1]))
		for _, st := range sts {
			require.NoError(t, st.Synchronize())
		}
		h2d, err = evs[0].Elapsed(evs[1])
		require.NoError(t, err)
		d2h, err = evs[2].Elapsed(evs[3])
		require.NoError(t, err)
		return h2d, d2h
	}
	const extra = 1500
	for _, shared := range []bool{false, true} {
		p := testProfile(t)
		p.IssueNs = map[string]float64{} // the host issues at once: the device sets the pace
		if !shared {
			// The directions do not share the link, so that a copy's
			// time is its fixed cost, any extra, and its bytes at its
			// own rate.
			p.BothGBps = p.H2D.GBps + p.D2H.GBps
		}
		type times struct{ alone, h2d, d2h time.Duration }
		measure := func(both float64) (r times) {
			p.BothFixedNs = both
			r.alone, _ = copies(p, count, 0)
			// Each direction's copies, with more the other way, so
			// that every one of them has the other direction beside it.
			r.h2d, _ = copies(p, count, count+5)
			_, r.d2h = copies(p, count+5, count)
			return r
		}
		without, with := measure(0), measure(extra)
		assert.Equal(t, without.alone, with.alone, "copies in one direction pay nothing more")
		for _, c := range []struct {
			what        string
			with, witho time.Duration
		}{{"H2D", with.h2d, without.h2d}, {"D2H", with.d2h, without.d2h}} {
			grew := float64(c.with - c.witho)
			if shared {
				// The bytes overlap less while the other direction is in
				// its fixed part: they take longer, by less.
				assert.Greater(t, grew, float64(count*extra)/4, "%s copies, link shared: the extra shows", c.what)
				assert.Less(t, grew, float64(count*extra)*1.02, "%s copies, link shared", c.what)
				continue
			}
			// The first copy may start before the other direction's.
			assert.GreaterOrEqual(t, grew, float64((count-1)*extra)*0.99, "%s copies beside the other direction: each pays both_fixed_ns", c.what)
			assert.LessOrEqual(t, grew, float64(count*extra)*1.01, "%s copies: no more than once each", c.what)
		}
	}
}

// TestSimStagingIssueLag: with StagingInRun's IssueLagNs, the simulator
// issues each host-to-device copy that a staging handoff lets go that much
// later than the handoff, by the size of the staging copy, and the run
// takes longer; without it, at the issue costs alone. On real data, every
// element checked.
func TestSimStagingIssueLag(t *testing.T) {
	const chunk, chunks = 256 << 10, 10 // 1 MiB copies
	run := func(p *sim.Profile) (gaps []time.Duration, elapsed time.Duration) {
		rep, _ := stagedSimRun(t, p, chunk, chunks, false)
		staged, issued := map[int]time.Duration{}, map[int]time.Duration{}
		for _, s := range rep.Spans {
			switch s.Stage {
			case pipeline.StageIn:
				staged[s.Chunk] = s.End
			case pipeline.StageH2D:
				issued[s.Chunk] = s.Start
			}
		}
		require.Len(t, staged, chunks)
		require.Len(t, issued, chunks)
		for c := 0; c < chunks; c++ {
			gaps = append(gaps, issued[c]-staged[c])
		}
		return gaps, rep.Elapsed
	}
	p := testProfile(t)
	// Staging slow enough to set the pace: each host-to-device copy waits
	// for its chunk's staging, so the handoff is what lets it go.
	p.StagingInRun = []sim.StagingInRun{{Bytes: 1 << 20, InGBps: 0.5, OutGBps: 0.5}, {Bytes: 4 << 20, InGBps: 0.5, OutGBps: 0.5, IssueLagNs: 900e3}}
	base, baseElapsed := run(p)
	const lag = 50 * time.Microsecond
	p.StagingInRun[0].IssueLagNs = float64(lag)
	lagged, laggedElapsed := run(p)
	for c := range chunks {
		assert.InDelta(t, float64(base[c]+lag), float64(lagged[c]), float64(2*time.Microsecond),
			"chunk %d: issued %v after its staging, %v without the lag (the 4 MiB entry's lag is not used for 1 MiB copies)", c, lagged[c], base[c])
	}
	t.Logf("elapsed %v without the lag, %v with it", baseElapsed, laggedElapsed)
	assert.Greater(t, laggedElapsed, baseElapsed+lag, "the run takes longer: at least the last chunk's lag")
}

// stagedSimRun runs a staged job of chunks chunks of chunk elements, 3
// slots and 1 compute stream, with Config.Timing, on a simulator of p,
// checks every element, and returns its report and, if alone, its stages
// timed alone (StageTimes).
func stagedSimRun(t *testing.T, p *sim.Profile, chunk, chunks int, alone bool) (*pipeline.Report, pipeline.StageTimes) {
	t.Helper()
	n := chunk * chunks
	dev := sim.NewHost(sim.HostOptions{}).NewDevice(p)
	pp, err := pipeline.New(dev, pipeline.Config{ChunkElems: chunk, Slots: 3, ComputeStreams: 1, Inputs: []int{4}, Outputs: []int{4}, Timing: true, Host: pipeline.HostStaged})
	require.NoError(t, err)
	defer pp.Close()
	src, dst := make([]float32, n), make([]float32, n)
	kernels.FillPattern(src, 0)
	job := pipeline.Job{N: n, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(src)}, Outputs: []pipeline.Buffer{pipeline.Slice(dst)}}
	rep, err := pp.Run(context.Background(), job)
	require.NoError(t, err)
	require.NoError(t, verifySeed(src, dst, 1))
	var st pipeline.StageTimes
	if alone {
		st, err = pp.StageTimes(context.Background(), job)
		require.NoError(t, err)
	}
	return rep, st
}

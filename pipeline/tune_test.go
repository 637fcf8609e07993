package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestModelPredict(t *testing.T) {
	m := pipeline.Model{
		H2D:     pipeline.StageCost{Fixed: 10 * time.Microsecond, PerElem: 0.07},
		Compute: pipeline.StageCost{Fixed: 20 * time.Microsecond, PerElem: 0.1},
		D2H:     pipeline.StageCost{Fixed: 10 * time.Microsecond, PerElem: 0.07},
	}
	// One chunk: every stage in series.
	assert.Equal(t, m.H2D.At(1000)+m.Compute.At(1000)+m.D2H.At(1000), m.Predict(1000, 1000, 3, 1))
	// Many chunks: about k times the slowest stage, plus fill.
	n, c := 128<<20, 4<<20
	got := m.Predict(n, c, 3, 1)
	bound := time.Duration(32) * m.Compute.At(c)
	assert.Greater(t, got, bound)
	assert.Less(t, got, bound+m.H2D.At(c)+m.D2H.At(c)+time.Millisecond)
	// Small chunks pay the fixed cost; more compute streams hide part of it.
	assert.Less(t, m.Predict(n, 64<<10, 6, 4), m.Predict(n, 64<<10, 6, 1))
	// ... but only as many as the slots allow.
	assert.Equal(t, m.Predict(n, 64<<10, 2, 1), m.Predict(n, 64<<10, 2, 4))
	assert.Equal(t, time.Duration(0), m.Predict(0, 10, 3, 1))
}

func TestModelBestAvoidsExtremes(t *testing.T) {
	m := pipeline.Model{
		H2D:     pipeline.StageCost{Fixed: 8 * time.Microsecond, PerElem: 0.072},
		Compute: pipeline.StageCost{Fixed: 15 * time.Microsecond, PerElem: 0.103},
		D2H:     pipeline.StageCost{Fixed: 8 * time.Microsecond, PerElem: 0.072},
	}
	best := m.Best(128 << 20)
	// Tiny chunks drown in fixed costs, huge ones in fill and drain.
	assert.GreaterOrEqual(t, best.ChunkElems, 256<<10)
	assert.LessOrEqual(t, best.ChunkElems, 16<<20)
	assert.GreaterOrEqual(t, best.Slots, best.ComputeStreams+1)
	for _, c := range []int{64 << 10, 32 << 20, 128 << 20} {
		assert.LessOrEqual(t, best.Predicted, m.Predict(128<<20, c, 3, 1))
	}
	assert.NotEmpty(t, m.Candidates(128<<20))
}

func TestFitRecoversSyntheticCosts(t *testing.T) {
	truth := pipeline.StageCost{Fixed: 12 * time.Microsecond, PerElem: 0.25}
	chunks := []int{1 << 18, 1 << 20, 1 << 22}
	var st []pipeline.StageTimes
	for _, c := range chunks {
		st = append(st, pipeline.StageTimes{H2D: truth.At(c), Compute: 2 * truth.At(c), D2H: truth.At(c)})
	}
	m, err := pipeline.Fit(chunks, st)
	require.NoError(t, err)
	assert.InDelta(t, float64(truth.Fixed), float64(m.H2D.Fixed), float64(time.Microsecond))
	assert.InDelta(t, truth.PerElem, m.H2D.PerElem, 1e-6)
	assert.InDelta(t, 2*truth.PerElem, m.Compute.PerElem, 1e-6)
	_, err = pipeline.Fit(chunks[:1], st[:1])
	assert.Error(t, err)
}

// TestFitClampsToZero: a fit that would give a negative cost gives zero,
// and the other stages are fitted exactly.
func TestFitClampsToZero(t *testing.T) {
	chunks := []int{1000, 2000, 4000}
	st := []pipeline.StageTimes{
		{H2D: 30 * time.Microsecond, Compute: 5 * time.Microsecond, D2H: 1 * time.Microsecond}, // falling: slope < 0
		{H2D: 20 * time.Microsecond, Compute: 7 * time.Microsecond, D2H: 3 * time.Microsecond},
		{H2D: 10 * time.Microsecond, Compute: 11 * time.Microsecond, D2H: 7 * time.Microsecond}, // D2H: -1µs + 2ns/elem
	}
	m, err := pipeline.Fit(chunks, st)
	require.NoError(t, err)
	assert.Equal(t, 0.0, m.H2D.PerElem, "a falling cost is clamped to no cost per element")
	assert.InDelta(t, 2.0, m.Compute.PerElem, 1e-9)
	assert.InDelta(t, float64(3*time.Microsecond), float64(m.Compute.Fixed), 1)
	assert.InDelta(t, 2.0, m.D2H.PerElem, 1e-9)
	assert.Equal(t, time.Duration(0), m.D2H.Fixed, "a negative fixed cost is clamped to zero")
}

// TestProbeOnSim fits the simulator's costs: its kernel runs the seed
// kernel's CPU stand-in, so the fitted compute cost per element must be
// about what that stand-in costs here, measured directly, and far above
// the copies'. Issue 10: this test asserted only PerElem >= 0, which Fit
// guarantees.
func TestProbeOnSim(t *testing.T) {
	const n, iters = 1 << 20, 200
	// The fit needs times, not data: a timing-only host computes nothing.
	dev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(nil)
	cfg := pipeline.Float32Config(1, 1)
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	k := seedKernel(nil, iters)
	m, err := pipeline.Probe(context.Background(), dev, cfg, pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	assert.Empty(t, dev.Live())

	// The simulator's clock follows its profile, so the fit must recover
	// the profile's own costs: a kernel's per-element work and a copy's
	// bytes over its rate (issue 10: the fit was once only checked >= 0).
	prof := dev.Profile()
	_, work, err := prof.KernelTime(k, 1<<20)
	require.NoError(t, err)
	wantCompute := float64(work) / (1 << 20)
	wantH2D := 4 / prof.H2D.GBps
	t.Logf("fitted compute %.4f ns/elem (profile %.4f), H2D %.4f ns/elem (profile %.4f)", m.Compute.PerElem, wantCompute, m.H2D.PerElem, wantH2D)
	assert.InEpsilon(t, wantCompute, m.Compute.PerElem, 0.15)
	assert.InEpsilon(t, wantH2D, m.H2D.PerElem, 0.15)
}

package pipeline_test

import (
	"context"
	"testing"
	"time"

	. "github.com/purecuda/overlap/pipeline"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestModelPredict(t *testing.T) {
	m := Model{
		H2D:     StageCost{Fixed: 10 * time.Microsecond, PerElem: 0.07},
		Compute: StageCost{Fixed: 20 * time.Microsecond, PerElem: 0.1},
		D2H:     StageCost{Fixed: 10 * time.Microsecond, PerElem: 0.07},
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
	m := Model{
		H2D:     StageCost{Fixed: 8 * time.Microsecond, PerElem: 0.072},
		Compute: StageCost{Fixed: 15 * time.Microsecond, PerElem: 0.103},
		D2H:     StageCost{Fixed: 8 * time.Microsecond, PerElem: 0.072},
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
	truth := StageCost{Fixed: 12 * time.Microsecond, PerElem: 0.25}
	chunks := []int{1 << 18, 1 << 20, 1 << 22}
	var st []StageTimes
	for _, c := range chunks {
		st = append(st, StageTimes{H2D: truth.At(c), Compute: 2 * truth.At(c), D2H: truth.At(c)})
	}
	m, err := Fit(chunks, st)
	require.NoError(t, err)
	assert.InDelta(t, float64(truth.Fixed), float64(m.H2D.Fixed), float64(time.Microsecond))
	assert.InDelta(t, truth.PerElem, m.H2D.PerElem, 1e-6)
	assert.InDelta(t, 2*truth.PerElem, m.Compute.PerElem, 1e-6)
	_, err = Fit(chunks[:1], st[:1])
	assert.Error(t, err)
}

func TestProbeOnSim(t *testing.T) {
	sim := NewSim(1, 0)
	cfg := Float32Config(1, 1)
	in, out := make([]float32, 3000), make([]float32, 3000)
	m, err := Probe(context.Background(), sim, cfg, Job{N: 3000, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, m.Compute.PerElem, 0.0)
	assert.Empty(t, sim.Live())
}

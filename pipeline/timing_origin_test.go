package pipeline_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
)

// TestReportOrigin guards Report.Origin: with Config.Timing, a
// Pipeline's spans and a group of one's count from an origin event that
// the run records after its fixed cost (the simulator charges
// Profile.RunNs first), so Origin is positive and every span shifted by it
// lies inside the run's Elapsed; a group of two puts its spans on the
// run's clock itself, and its Origin is 0. Without Timing it is 0.
func TestReportOrigin(t *testing.T) {
	const n = 8 * 4096
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 1)
	job := pipeline.Job{N: n, Kernel: seedKernel(nil, 5), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Timing = 4096, true
	inside := func(what string, rep *pipeline.Report) {
		t.Helper()
		require.NotEmpty(t, rep.Spans, what)
		for _, sp := range rep.Spans {
			assert.GreaterOrEqual(t, sp.Start+rep.Origin, rep.Origin, "%s: %+v", what, sp)
			assert.LessOrEqual(t, sp.End+rep.Origin, rep.Elapsed, "%s: %+v", what, sp)
		}
	}

	// Each twice: the second run starts later than the first's clock's
	// zero, which an Origin on the backend's clock would not fit.
	p, err := pipeline.New(sim.New(1, 0), cfg)
	require.NoError(t, err)
	defer p.Close()
	for range 2 {
		rep, err := p.Run(context.Background(), job)
		require.NoError(t, err)
		assert.Positive(t, rep.Origin, "the pipeline's origin comes after the run's fixed cost")
		inside("pipeline", rep)
	}

	g, _ := simGroup(t, sim.HostOptions{}, cfg, false)
	for range 2 {
		rep, err := g.Run(context.Background(), job)
		require.NoError(t, err)
		assert.Positive(t, rep.Origin, "a group of one")
		inside("a group of one", rep)
	}

	g2, _ := simGroup(t, sim.HostOptions{}, cfg, false, false)
	for range 2 {
		rep, err := g2.Run(context.Background(), job)
		require.NoError(t, err)
		assert.Zero(t, rep.Origin, "a group of two: its spans are on the run's clock")
		inside("a group of two", rep)
	}

	cfg.Timing = false
	q, err := pipeline.New(sim.New(1, 0), cfg)
	require.NoError(t, err)
	defer q.Close()
	rep, err := q.Run(context.Background(), job)
	require.NoError(t, err)
	assert.Zero(t, rep.Origin)
	assert.Empty(t, rep.Spans)
}

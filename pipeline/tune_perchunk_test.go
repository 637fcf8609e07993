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

// TestProbePicksASmallJobsChunk guards the tuner on a small whole job: 1M
// elements of the seed kernel on the simulator. Stage costs measured alone
// do not see what each chunk costs the issue loop (Model.PerChunk): with
// them, this job's pick (128K-element chunks) was predicted at 120 µs and
// took 163 µs, and with 100 iterations the pick was 64K chunks, 1.5 times
// slower than 128K. The chunk Best picks must run within 10% of the fastest
// power-of-two chunk, and its prediction within 25% of its time.
func TestProbePicksASmallJobsChunk(t *testing.T) {
	const n, iters = 1 << 20, 30
	sim := sim.New(1, 0)
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	job := pipeline.Job{N: n, Kernel: seedKernel(nil, iters), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	ctx := context.Background()
	cfg := pipeline.Float32Config(1, 1)

	m, err := pipeline.Probe(ctx, sim, cfg, job)
	require.NoError(t, err)
	assert.Positive(t, m.PerChunk, "the probe measured no cost per chunk")
	choice := m.Best(n)

	elapsed := func(chunk, slots, streams int) time.Duration {
		c := cfg
		c.ChunkElems, c.Slots, c.ComputeStreams = chunk, slots, streams
		p, err := pipeline.New(sim, c)
		require.NoError(t, err)
		defer p.Close()
		var rep *pipeline.Report
		for range 2 { // the second run, as the probe times it
			rep, err = p.Run(ctx, job)
			require.NoError(t, err)
		}
		require.NoError(t, verifySeed(in, out, iters))
		return rep.Elapsed - rep.Register
	}
	got := elapsed(choice.ChunkElems, choice.Slots, choice.ComputeStreams)
	best := time.Duration(1 << 62)
	for chunk := 64 << 10; chunk <= n; chunk *= 2 {
		d := elapsed(chunk, choice.Slots, choice.ComputeStreams)
		t.Logf("chunk %7d: %v", chunk, d)
		best = min(best, d)
	}
	t.Logf("picked chunk %d, %d slots, %d streams: predicted %v, took %v; per chunk at least %v", choice.ChunkElems, choice.Slots, choice.ComputeStreams, choice.Predicted, got, m.PerChunk)
	assert.LessOrEqual(t, float64(got), 1.10*float64(best), "the picked chunk runs more than 10%% slower than the best")
	assert.InEpsilon(t, float64(got), float64(choice.Predicted), 0.25, "the prediction is off")
	assert.Empty(t, sim.Live())
}

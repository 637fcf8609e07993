package calibrate

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

// TestIssueLateness: the issuer's lateness counts only the chunks whose
// stage-in is the last of what their H2D copy waited for.
func TestIssueLateness(t *testing.T) {
	us := func(v int) time.Duration { return time.Duration(v) * time.Microsecond }
	span := func(c int, st pipeline.Stage, start, end int) pipeline.Span {
		return pipeline.Span{Chunk: c, Stage: st, Start: us(start), End: us(end)}
	}
	spans := []pipeline.Span{
		span(0, pipeline.StageIn, 0, 100), span(0, pipeline.StageH2D, 110, 200), // late by 10
		span(1, pipeline.StageIn, 100, 150), span(1, pipeline.StageH2D, 200, 300), // held back by chunk 0's H2D
		span(2, pipeline.StageIn, 150, 400), span(2, pipeline.StageH2D, 430, 500), // late by 30, or held back by chunk 0's stage-out (1 slot)
		span(0, pipeline.StageOut, 300, 600),
		span(3, pipeline.StageIn, 400, 550), span(3, pipeline.StageH2D, 660, 700), // late by 110, or held back by chunk 0's stage-out (2 slots)
		span(4, pipeline.StageIn, 700, 800), // no H2D: not counted
	}
	assert.Equal(t, lateness{mean: us(60), chunks: 2}, issueLateness(spans, 1), "with 1 slot, chunk 0's stage-out holds chunk 2 back, and none of these chunk 3")
	assert.Equal(t, lateness{mean: us(20), chunks: 2}, issueLateness(spans, 2), "with 2 slots, chunk 0's stage-out holds chunk 3 back")
	assert.Equal(t, lateness{}, issueLateness(nil, 1))
}

// TestIssueLagsCarried: a size whose run has too few chunks to judge by
// takes the previous size's lag; the first such size takes none.
func TestIssueLagsCarried(t *testing.T) {
	const n = 1 << 16
	in, out := make([]float32, n), make([]float32, n)
	p := sim.BuiltinProfile()
	rates := []sim.StagingInRun{{Bytes: 4 * n / 64, InGBps: 1, OutGBps: 1}, {Bytes: 4 * n / 16, InGBps: 1, OutGBps: 1}, {Bytes: 4 * n / 4, InGBps: 1, OutGBps: 1}}
	seed := kernelSet{}.kernel(kernels.Seed, 0)
	measured := []lateness{{mean: time.Millisecond, chunks: 1}, {mean: time.Millisecond, chunks: 20}, {mean: time.Hour, chunks: minLagChunks - 1}}
	require.NoError(t, issueLags(context.Background(), seed, p, in, out, rates, measured))
	assert.Zero(t, rates[0].IssueLagNs, "the first size, too few chunks: none")
	assert.Greater(t, rates[1].IssueLagNs, float64(500*time.Microsecond), "a millisecond measured, less the simulator's issue costs")
	assert.Less(t, rates[1].IssueLagNs, float64(time.Millisecond))
	assert.Equal(t, rates[1].IssueLagNs, rates[2].IssueLagNs, "too few chunks: the previous size's")
}

// TestIssueLagsSimulatedTooFew: a size whose measured run has chunks
// enough to judge by, but whose run on the simulator has too few, takes
// the previous size's lag too: its measured mean, less nothing simulated,
// would count the issue costs as lag.
func TestIssueLagsSimulatedTooFew(t *testing.T) {
	const n = 1 << 16
	in, out := make([]float32, n), make([]float32, n)
	p := sim.BuiltinProfile()
	rates := []sim.StagingInRun{{Bytes: 4 * n / 16, InGBps: 1, OutGBps: 1}, {Bytes: 4 * n / 2, InGBps: 1, OutGBps: 1}}
	seed := kernelSet{}.kernel(kernels.Seed, 0)
	q := p.Clone()
	q.StagingInRun = append([]sim.StagingInRun(nil), rates...)
	two, err := stagedLateness(context.Background(), sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(q), seed, in, out, n/2)
	require.NoError(t, err)
	require.Less(t, two.chunks, minLagChunks, "the premise: a run of two chunks has too few on the simulator")
	measured := []lateness{{mean: time.Millisecond, chunks: 20}, {mean: time.Hour, chunks: 20}}
	require.NoError(t, issueLags(context.Background(), seed, p, in, out, rates, measured))
	assert.Greater(t, rates[0].IssueLagNs, float64(500*time.Microsecond), "a millisecond measured, less the simulator's issue costs")
	assert.Equal(t, rates[0].IssueLagNs, rates[1].IssueLagNs, "too few chunks simulated: the previous size's lag, not an hour's")
}

// TestStagedLatenessRepeatable: the simulator's lateness, with issue lags,
// is the same in every run, to within staleNs: the lag follows the clocks,
// not whether the issuer came to a handoff before or after it in real
// time (when it did, the mean moved by up to 800 ns between runs).
//
// staleNs allows for a smaller dependence on real time that remains: a
// call's issue cost depends on whether its stream is busy, which the
// simulator reads at its own clock, and that can trail the caller's while
// another goroutine has not yet caught up in real time. On a loaded
// machine about 1 run in 300 came out 2 ns lower (22.266 against 22.268
// µs); with the busy state left out of the costs, none of 7500 did.
func TestStagedLatenessRepeatable(t *testing.T) {
	const staleNs = 10
	const n = 1 << 20
	_, sdev := stagingTruth(n)
	in, out := stagingMemory(n)
	seed := kernelSet{}.kernel(kernels.Seed, 0)
	var first lateness
	for run := range 6 {
		l, err := stagedLateness(context.Background(), sdev, seed, in, out, n/64)
		require.NoError(t, err)
		require.GreaterOrEqual(t, l.chunks, minLagChunks)
		if run == 0 {
			first = l
			assert.Greater(t, l.mean, time.Duration(truthLags[2]), "the lag at this size, and the issue costs")
			continue
		}
		assert.Equal(t, first.chunks, l.chunks, "run %d", run)
		assert.InDelta(t, first.mean, l.mean, staleNs, "run %d", run)
	}
}

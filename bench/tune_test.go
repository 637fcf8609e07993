package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTuneOnSim tunes the seed job on the simulator: the candidates come
// fastest predicted first, the best is run and verified, and a wrong
// output or a nil backend is an error.
func TestTuneOnSim(t *testing.T) {
	b := sim.NewHost(sim.HostOptions{Seed: 1}).NewDevice(sim.BuiltinProfile())
	kernel, err := kernels.Seed.Pipeline(nil, 10)
	require.NoError(t, err)
	d, err := newSeedData(b, kernel, 1<<20, false)
	require.NoError(t, err)
	defer d.close()
	verify := func(out []float32) error { return kernels.Seed.Verify([][]float32{d.in}, out, 10) }
	o := TuneOptions{Config: pipeline.Float32Config(1, 1), Job: d.job, Host: pipeline.HostStaged, Repeat: 2, Output: d.out, Verify: verify}
	res, err := Tune(context.Background(), b, o)
	require.NoError(t, err)
	require.NotEmpty(t, res.Candidates)
	for i := 1; i < len(res.Candidates); i++ {
		assert.LessOrEqual(t, res.Candidates[i-1].Predicted, res.Candidates[i].Predicted)
	}
	assert.Positive(t, res.Measured)
	assert.True(t, res.Verified)
	assert.Positive(t, res.Model.PerChunk)

	o.Verify = func([]float32) error { return errors.New("element 0 is wrong") }
	_, err = Tune(context.Background(), b, o)
	assert.EqualError(t, err, "bench: Tune: element 0 is wrong")
	_, err = Tune(context.Background(), nil, TuneOptions{})
	assert.EqualError(t, err, "bench: Tune: nil backend")
}

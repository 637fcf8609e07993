package bench

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTuneOnSim tunes the seed job on the simulator: the candidates come
// fastest predicted first, the best is run and its first run verified
// (on an output filled with NaN, after a warm-up when asked), and a wrong
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

	// With a warm-up and progress: the warm-up comes first and runs work
	// on the device, and the output is all NaN before the chosen
	// candidate's first run, the one Verify checks, so that Verify sees
	// what that run wrote and not a probe's output; so are its device
	// slots.
	launches := func(o TuneOptions) int {
		before := b.Count("launch")
		_, err := Tune(context.Background(), b, o)
		require.NoError(t, err)
		return b.Count("launch") - before
	}
	cold := launches(o)
	var msgs []string
	poisoned := 0
	o.Warm = time.Millisecond
	o.Progress = func(m string) {
		msgs = append(msgs, m)
		if !strings.HasPrefix(m, "run 1 of 2") {
			return
		}
		if allNaN(t, m, d.out) {
			poisoned++
		}
	}
	fills := b.Count("fill")
	assert.Greater(t, launches(o), cold, "the warm-up launches kernels")
	assert.Equal(t, 2, b.Count("fill")-fills, "the chosen candidate's input and output slots filled with NaN before its checked run (Pipeline.PoisonSlots)")
	assert.Equal(t, []string{"warming up the GPU before the probes…", "probing the stage costs…",
		"run 1 of 2 of the chosen candidate…", "verifying run 1…", "run 2 of 2 of the chosen candidate…"}, msgs)
	assert.Equal(t, 1, poisoned)

	o.Progress = nil
	o.Verify = func([]float32) error { return errors.New("element 0 is wrong") }
	_, err = Tune(context.Background(), b, o)
	assert.EqualError(t, err, "bench: Tune: run 1 of the chosen candidate gave wrong results: element 0 is wrong")
	o.Warm = -time.Second
	_, err = Tune(context.Background(), b, o)
	assert.EqualError(t, err, "bench: Tune: warm-up of -1s: want 0 or more")
	_, err = Tune(context.Background(), nil, TuneOptions{})
	assert.EqualError(t, err, "bench: Tune: nil backend")
}

package calibrate

import (
	"context"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUMeasureGemm: the GEMM entries' fit on the GPU gives rates
// between 5 and 400 TFLOP/s and a fixed cost under 100 µs.
func TestGPUMeasureGemm(t *testing.T) {
	ctx := gputest.Context(t)
	if kernels.GemmPTX() == nil {
		t.Skip("gemm.ptx is not embedded yet (make ptx generates it from gemm.cu)")
	}
	g := new(kernels.GemmModules)
	defer g.Close()
	p := &sim.Profile{Kernels: map[string]sim.KernelCost{}, Notes: map[string]string{}}
	require.NoError(t, measureGemm(pipeline.GPU(ctx), g, p, gemmShapes[:4]))
	for _, k := range []string{"gemm_f32", "gemm_tf32"} {
		c := p.Kernels[k]
		assert.Less(t, c.NsPerFlop, 1/5e3, k)
		assert.Greater(t, c.NsPerFlop, 1/400e3, k)
		assert.Less(t, c.FixedNs, 100e3, k)
		t.Logf("%s: %s", k, p.Notes[k])
	}
}

// TestGPUMeasure: Measure on a GPU Device without Modules loads its own
// kernels, names the GPU and its driver, reads the device's memory, and
// gives a profile that passes Check; Validate of it at a small job gives
// the 26 rows, each predicted within 50% (--validate's table on the H200
// is within a few percent at 128M; this is a check of the wiring).
func TestGPUMeasure(t *testing.T) {
	ctx := gputest.Context(t)
	name, err := ctx.Device().Name()
	require.NoError(t, err)
	d := Device{Backend: pipeline.GPU(ctx), Context: ctx}
	var said []string
	o := Options{Elems: 8 << 20, Rounds: 1, Progress: func(what string) { said = append(said, what) }}
	p, err := Measure(context.Background(), d, o)
	require.NoError(t, err)
	require.NoError(t, p.Check())
	assert.Equal(t, name, p.Device)
	assert.Contains(t, p.Source, "measured by calibrate.Measure on "+name)
	assert.Contains(t, p.Source, ", driver CUDA ")
	assert.Positive(t, p.DeviceMemoryBytes)
	assert.Contains(t, said, "the GEMM kernels")
	v, err := Validate(context.Background(), d, p, o)
	require.NoError(t, err)
	require.Len(t, v.Rows, 26)
	for _, r := range v.Rows {
		assert.Positive(t, r.Measured, r.Config.String())
		assert.InDelta(t, 0, r.Err, 0.5, "%s: measured %v, predicted %v", r.Config, r.Measured, r.Predicted)
	}
	t.Logf("median |error| %.1f%%, worst %.1f%% (%s)", 100*v.Median, 100*v.Worst.Err, v.Worst.Config)
}

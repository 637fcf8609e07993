package calibrate

import (
	"testing"

	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFitGemm: points on a line give it back; a line through negative
// time at no arithmetic is refitted through the origin.
func TestFitGemm(t *testing.T) {
	for _, c := range []struct {
		name       string
		flops, ns  []float64
		fixed, per float64
	}{
		{"line", []float64{1e3, 1e6, 1e9}, []float64{4000 + 1e3*2e-5, 4000 + 1e6*2e-5, 4000 + 1e9*2e-5}, 4000, 2e-5},
		{"rate alone", []float64{1e6, 2e6}, []float64{10, 20}, 0, 1e-5},
		{"negative fixed", []float64{1e6, 2e6}, []float64{5, 20}, 0, (1e6*5/25 + 2e6*20/400) / (1e12/25 + 4e12/400)},
	} {
		t.Run(c.name, func(t *testing.T) {
			fixed, per := fitGemm(c.flops, c.ns)
			assert.InDelta(t, c.fixed, fixed, 1e-6)
			assert.InEpsilon(t, c.per, per, 1e-9)
		})
	}
}

// TestMeasureGemm: measureGemm recovers the GEMM entries' fixed cost and
// FLOP rate that a sdevulated device runs on, at the GPU's shapes, and
// notes how.
func TestMeasureGemm(t *testing.T) {
	truth := sim.BuiltinProfile()
	truth.Kernels["gemm_f32"] = sim.KernelCost{FixedNs: 4500, NsPerFlop: 1 / 40e3}
	truth.Kernels["gemm_tf32"] = sim.KernelCost{FixedNs: 7000, NsPerFlop: 1 / 150e3}
	sdev := sim.NewHost(sim.HostOptions{TimingOnly: true}).NewDevice(truth)
	got := truth.Clone()
	delete(got.Kernels, "gemm_f32")
	delete(got.Kernels, "gemm_tf32")
	require.NoError(t, measureGemm(sdev, nil, got, gemmShapes))
	for _, k := range []string{"gemm_f32", "gemm_tf32"} {
		w, g := truth.Kernels[k], got.Kernels[k]
		assert.InEpsilon(t, w.FixedNs, g.FixedNs, 0.05, k)
		assert.InEpsilon(t, w.NsPerFlop, g.NsPerFlop, 0.005, k)
		assert.Zero(t, g.NsPerElem, k)
		assert.Contains(t, got.Notes[k], "per FLOP of whole 128-wide output tiles", k)
		assert.Contains(t, got.Notes[k], "65536×768→3072", k)
	}
	require.NoError(t, got.Check())
}

// TestMeasureModelCostsSim: on the sdevulator (overlap profile --sdev),
// which computes every launch, the GEMM entries are measured at small
// shapes and the device's memory is the sdevulated profile's.
func TestMeasureModelCostsSim(t *testing.T) {
	truth := sim.BuiltinProfile()
	d := Device{Backend: sim.NewHost(sim.HostOptions{}).NewDevice(truth)}
	got := truth.Clone()
	delete(got.Kernels, "gemm_f32")
	delete(got.Kernels, "gemm_tf32")
	got.DeviceMemoryBytes = 0
	require.NoError(t, measureModelCosts(d, got))
	assert.Equal(t, truth.DeviceMemoryBytes, got.DeviceMemoryBytes)
	for _, k := range []string{"gemm_f32", "gemm_tf32"} {
		assert.InEpsilon(t, truth.Kernels[k].NsPerFlop, got.Kernels[k].NsPerFlop, 0.02, k)
	}
}

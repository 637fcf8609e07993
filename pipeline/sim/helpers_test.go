package sim_test

import (
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/require"
)

// testProfile is the profile the timing tests pin: the first H200
// profile, so that a new built-in profile moves no expectation.
func testProfile(t testing.TB) *sim.Profile {
	t.Helper()
	p, err := sim.ReadProfile("testdata/h200-provisional.json")
	require.NoError(t, err)
	return p
}

// seedKernel is the seed kernel of iters iterations, for the simulator
// (no modules).
func seedKernel(mods *kernels.Modules, iters int) *pipeline.Kernel {
	k, err := kernels.Seed.Pipeline(mods, float64(iters))
	if err != nil {
		panic(err)
	}
	return k
}

func verifySeed(in, out []float32, iters int) error {
	return kernels.Seed.Verify([][]float32{in}, out, float64(iters))
}

func saxpyKernel(mods *kernels.Modules, a float32) *pipeline.Kernel {
	k, err := kernels.Saxpy.Pipeline(mods, float64(a))
	if err != nil {
		panic(err)
	}
	return k
}

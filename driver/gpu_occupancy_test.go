package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUOccupancy asks the driver about add_scalar and checks the answers
// against the device's limits, and that a grid of the answers runs.
func TestGPUOccupancy(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	f, err := m.Function("add_scalar")
	require.NoError(t, err)
	sms, err := ctx.Device().Multiprocessors()
	require.NoError(t, err)

	per, err := f.MaxActiveBlocksPerSM(256, 0, OccupancyDefault)
	require.NoError(t, err)
	assert.True(t, per >= 1 && per <= 8, "blocks of 256 per SM: %d (at most 2048 threads)", per)
	perFlags, err := f.MaxActiveBlocksPerSM(256, 0, OccupancyDisableCachingOverride)
	require.NoError(t, err)
	assert.Equal(t, per, perFlags, "add_scalar does not touch the caching mode")
	withSmem, err := f.MaxActiveBlocksPerSM(256, 100<<10, OccupancyDefault)
	require.NoError(t, err)
	// More than 48 KiB needs the function's opt-in, which add_scalar has
	// not: the driver may answer 0.
	assert.True(t, withSmem >= 0 && withSmem <= 2, "blocks with 100 KiB of shared memory each: %d", withSmem)

	minGrid, block, err := f.MaxPotentialBlockSize(0, 0, OccupancyDefault)
	require.NoError(t, err)
	assert.True(t, block >= 32 && block <= 1024 && block%32 == 0, "block size %d", block)
	assert.GreaterOrEqual(t, minGrid, sms)
	_, limited, err := f.MaxPotentialBlockSize(0, 128, OccupancyDisableCachingOverride)
	require.NoError(t, err)
	assert.LessOrEqual(t, limited, 128)
	t.Logf("%d SMs, %d blocks of 256 per SM, best block %d with a grid of %d", sms, per, block, minGrid)

	smem, err := f.AvailableDynamicSMem(1, 256)
	require.NoError(t, err)
	assert.True(t, smem > 0 && smem <= 228<<10, "dynamic shared memory for one block: %d", smem)
	// Without an opt-in a block gets at most 48 KiB, which two blocks of an
	// SM still each have (228 KiB in all on an H200); eight do not.
	smem2, err := f.AvailableDynamicSMem(2, 256)
	require.NoError(t, err)
	assert.LessOrEqual(t, smem2, smem)
	smem8, err := f.AvailableDynamicSMem(8, 256)
	require.NoError(t, err)
	assert.Less(t, smem8, smem, "eight blocks of an SM share its shared memory")

	cfg := LaunchConfig{Grid: Dim3{X: 2 * sms}, Block: Dim3{X: 256}}
	size, err := f.MaxPotentialClusterSize(cfg, LaunchAttributes{})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, size, 8, "the H200 allows portable clusters of 8")
	clusters, err := f.MaxActiveClusters(cfg, LaunchAttributes{Cluster: Dim3{X: 2}})
	require.NoError(t, err)
	assert.Greater(t, clusters, 0)
	t.Logf("clusters: up to %d blocks, %d of 2 resident; dynamic shared memory %d (1 block), %d (2), %d blocks with 100 KiB",
		size, clusters, smem, smem2, withSmem)

	checkAddScalar(t, ctx, f, minGrid*block, LaunchConfig{Grid: Dim3{X: minGrid}, Block: Dim3{X: block}}, plainLaunch)
}

//go:build linux

package driver_test

import (
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	fakeCases = append(fakeCases,
		// The occupancy calls reach their entry points with the values
		// asked for: the fake's device has 4 SMs of 2048 threads and 32
		// blocks, 228 KiB of shared memory, 1 KiB reserved per block.
		fakeCase{"Occupancy", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			fn := fakeKernel(t, f, c)
			n, err := fn.MaxActiveBlocksPerSM(256, 0, driver.OccupancyDefault)
			require.NoError(t, err)
			assert.Equal(t, 8, n)
			n, err = fn.MaxActiveBlocksPerSM(32, 100<<10, driver.OccupancyDisableCachingOverride)
			require.NoError(t, err)
			assert.Equal(t, 2, n)
			assert.Equal(t, 1, f.Calls("cuOccupancyMaxActiveBlocksPerMultiprocessor"))
			assert.Equal(t, 1, f.Calls("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags"))

			grid, block, err := fn.MaxPotentialBlockSize(0, 0, driver.OccupancyDefault)
			require.NoError(t, err)
			assert.Equal(t, [2]int{8, 1024}, [2]int{grid, block})
			grid, block, err = fn.MaxPotentialBlockSize(0, 96, driver.OccupancyDisableCachingOverride)
			require.NoError(t, err)
			assert.Equal(t, [2]int{128, 64}, [2]int{grid, block}) // 32 blocks of 64 fill an SM; 21 of 96 do not
			assert.Equal(t, 1, f.Calls("cuOccupancyMaxPotentialBlockSizeWithFlags"))

			smem, err := fn.AvailableDynamicSMem(2, 256)
			require.NoError(t, err)
			assert.Equal(t, 114<<10-1024, smem)

			cfg := driver.LaunchConfig{Grid: driver.Dim3{X: 8}, Block: driver.Dim3{X: 128}}
			size, err := fn.MaxPotentialClusterSize(cfg, driver.LaunchAttributes{Cluster: driver.Dim3{X: 2}})
			require.NoError(t, err)
			assert.Equal(t, 8, size)
			clusters, err := fn.MaxActiveClusters(cfg, driver.LaunchAttributes{Cluster: driver.Dim3{X: 2}})
			require.NoError(t, err)
			assert.Equal(t, 32, clusters) // 4 SMs x 16 blocks / 2
		}},

		fakeCase{"OccupancyErrors", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			fn := fakeKernel(t, f, c)
			cfg := driver.LaunchConfig{Grid: driver.Dim3{X: 2}, Block: driver.Dim3{X: 64}}
			errs := map[string]error{}
			_, errs["block 0"] = fn.MaxActiveBlocksPerSM(0, 0, 0)
			_, errs["smem"] = fn.MaxActiveBlocksPerSM(32, -1, 0)
			_, errs["flags"] = fn.MaxActiveBlocksPerSM(32, 0, 4)
			_, _, errs["limit"] = fn.MaxPotentialBlockSize(0, -1, 0)
			_, _, errs["pflags"] = fn.MaxPotentialBlockSize(0, 0, 2)
			_, errs["nblocks"] = fn.AvailableDynamicSMem(0, 32)
			_, errs["bsize"] = fn.AvailableDynamicSMem(1, 0)
			_, errs["no cluster"] = fn.MaxActiveClusters(cfg, driver.LaunchAttributes{})
			_, errs["odd grid"] = fn.MaxActiveClusters(cfg, driver.LaunchAttributes{Cluster: driver.Dim3{X: 4}})
			_, errs["zero block"] = fn.MaxPotentialClusterSize(driver.LaunchConfig{Grid: driver.Dim3{X: 1}}, driver.LaunchAttributes{})
			_, errs["nil"] = (*driver.Function)(nil).MaxActiveBlocksPerSM(32, 0, 0)
			for name, err := range errs {
				assert.ErrorIs(t, err, driver.ErrInvalidArgument, name)
			}
			assert.Zero(t, f.Calls("cuOccupancyMaxActiveBlocksPerMultiprocessor")+f.Calls("cuOccupancyMaxActiveClusters"))
			f.Fail("cuOccupancyMaxActiveClusters", 1, 912)
			_, err := fn.MaxActiveClusters(cfg, driver.LaunchAttributes{Cluster: driver.Dim3{X: 2}})
			assert.ErrorContains(t, err, "cuda: cuOccupancyMaxActiveClusters: CUDA_ERROR_INVALID_CLUSTER_SIZE (912)")
		}},
	)
}

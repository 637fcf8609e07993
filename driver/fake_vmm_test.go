//go:build linux

package driver_test

import (
	"errors"
	"sync"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	fakeCases = append(fakeCases,
		// A virtual buffer is created, reserved, mapped and made
		// accessible, in that order, each once; copies and memsets use it
		// as any device buffer; Close unmaps, releases and frees, each once
		// (the fake reports a range freed while mapped, and an access
		// before cuMemSetAccess, as violations).
		fakeCase{"VirtualMemory", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			g, err := c.VirtualGranularity()
			require.NoError(t, err)
			assert.Equal(t, 1<<16, g)
			before := f.Live(fakecuda.DeviceMemory)
			b, err := c.AllocVirtual(100_000)
			require.NoError(t, err)
			assert.Equal(t, 100_000, b.Len())
			assert.Equal(t, before+3, f.Live(fakecuda.DeviceMemory), "an allocation, a range and a mapping")
			for _, name := range []string{"cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess"} {
				assert.Equal(t, 1, f.Calls(name), name)
			}
			src := pattern(100_000, 6)
			require.NoError(t, b.CopyFromHost(0, src))
			assert.Equal(t, src, deviceBytes(t, b))
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			require.NoError(t, s.Memset(b, 10, 20, 0x77))
			require.NoError(t, s.Synchronize())
			copy(src[10:30], filled(20, 0, 0, 0x77, 0, 1))
			assert.Equal(t, src, deviceBytes(t, b))

			require.NoError(t, b.Close())
			assert.Equal(t, before, f.Live(fakecuda.DeviceMemory))
			for _, name := range []string{"cuMemUnmap", "cuMemRelease", "cuMemAddressFree"} {
				assert.Equal(t, 1, f.Calls(name), name)
			}
			require.NoError(t, b.Close(), "a second Close")
			assert.Equal(t, 1, f.Calls("cuMemUnmap"))
			assert.ErrorIs(t, b.CopyFromHost(0, src[:1]), driver.ErrClosed)

			// One left open is closed by its Context's Close.
			c1 := gputest.FakeContext(t, 1)
			_, err = c1.AllocVirtual(1)
			require.NoError(t, err)
			require.NoError(t, c1.Close())
			assert.Equal(t, before, f.Live(fakecuda.DeviceMemory))
		}},

		// A failure at each step of AllocVirtual undoes the steps before it
		// (the case's leak check sees every fake object freed), and
		// reports the failed call.
		fakeCase{"VirtualMemoryUnwinds", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			for _, step := range []string{"cuMemGetAllocationGranularity", "cuMemCreate", "cuMemAddressReserve", "cuMemMap", "cuMemSetAccess"} {
				f.Fail(step, 1, 2)
				_, err := c.AllocVirtual(4096)
				assert.ErrorIs(t, err, driver.ErrOutOfMemory, step)
				assert.ErrorContains(t, err, "cuda: "+step+": CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
				assert.Zero(t, c.OpenObjects(), step)
			}
			_, err := c.AllocVirtual(0)
			assert.EqualError(t, err, "cuda: Context.AllocVirtual: invalid argument: size 0: must be positive")
			_, err = (*driver.Context)(nil).AllocVirtual(1)
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			_, err = (*driver.Context)(nil).VirtualGranularity()
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)

			// A failed step of Close does not stop the others.
			b, err := c.AllocVirtual(4096)
			require.NoError(t, err)
			calls := func() [3]int {
				return [3]int{f.Calls("cuMemUnmap"), f.Calls("cuMemRelease"), f.Calls("cuMemAddressFree")}
			}
			was := calls()
			f.Fail("cuCtxSynchronize", 1, 1)
			err = b.Close()
			assert.EqualError(t, err, "cuda: DeviceBuffer.Close: cuCtxSynchronize: CUDA_ERROR_INVALID_VALUE (1): invalid argument")
			assert.Equal(t, [3]int{was[0] + 1, was[1] + 1, was[2] + 1}, calls())
		}},

		// Copies racing Close of a virtual buffer (run with -race too).
		fakeCase{"VirtualMemoryRacesClose", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			for range 10 {
				b, err := c.AllocVirtual(4096)
				require.NoError(t, err)
				var wg sync.WaitGroup
				for range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 5 {
							if err := s.Memset(b, 0, 4096, 1); err != nil && !errors.Is(err, driver.ErrClosed) {
								t.Errorf("racing Close: %v", err)
							}
						}
					}()
				}
				wg.Add(2)
				go func() { defer wg.Done(); assert.NoError(t, b.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, b.Close()) }()
				wg.Wait()
			}
		}},
	)
}

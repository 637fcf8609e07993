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
		// Managed memory: the host writes it, the device copies it, the
		// advice and prefetches are seen by the range attributes, and the
		// location goes to the driver in the CUmemLocation it takes by value.
		fakeCase{"ManagedMemory", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			m, err := c.AllocManaged(64, driver.ManagedOptions{})
			require.NoError(t, err)
			assert.Equal(t, 64, m.Len())
			assert.Equal(t, m.Ptr(), m.Buffer().Ptr())
			copy(m.Bytes(), pattern(64, 4))
			d, err := c.Alloc(64)
			require.NoError(t, err)
			require.NoError(t, d.CopyFromDevice(0, m.Buffer(), 0, 64))
			assert.Equal(t, pattern(64, 4), deviceBytes(t, d))
			require.NoError(t, d.CopyFromHost(0, pattern(64, 8)))
			require.NoError(t, m.Buffer().CopyFromDevice(0, d, 0, 64))
			assert.Equal(t, pattern(64, 8), m.Bytes(), "the host sees what the device wrote")

			rm, err := m.ReadMostly()
			require.NoError(t, err)
			assert.False(t, rm)
			require.NoError(t, m.Advise(driver.AdviseReadMostly, driver.Location{}))
			rm, err = m.ReadMostly()
			require.NoError(t, err)
			assert.True(t, rm)
			_, ok, err := m.PreferredLocation()
			require.NoError(t, err)
			assert.False(t, ok, "no preferred location yet")
			gpu1 := driver.Location{Device: gputest.FakeContext(t, 1).Device()}
			require.NoError(t, m.Advise(driver.AdvisePreferredLocation, gpu1))
			loc, ok, err := m.PreferredLocation()
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, gpu1, loc)
			assert.Equal(t, "GPU 1", loc.String())
			gpu0 := driver.Location{Device: c.Device()}
			require.NoError(t, m.Advise(driver.AdvisePreferredLocation, gpu0))
			loc, _, err = m.PreferredLocation()
			require.NoError(t, err)
			assert.Equal(t, gpu0, loc, "the CUmemLocation by value names GPU 0")
			require.NoError(t, m.Advise(driver.AdvisePreferredLocation, driver.Location{Host: true}))
			loc, _, err = m.PreferredLocation()
			require.NoError(t, err)
			assert.Equal(t, driver.Location{Host: true}, loc)

			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			require.NoError(t, m.Prefetch(s, gpu1))
			require.NoError(t, s.Synchronize())
			loc, ok, err = m.LastPrefetch()
			require.NoError(t, err)
			assert.True(t, ok)
			assert.Equal(t, gpu1, loc)
			require.NoError(t, m.Prefetch(s, driver.Location{Host: true}))
			loc, _, err = m.LastPrefetch()
			require.NoError(t, err)
			assert.Equal(t, "host", loc.String())
			require.NoError(t, m.Close())
			assert.Nil(t, m.Bytes())
			require.NoError(t, m.Close(), "a second Close")
			assert.NoError(t, m.Buffer().Close(), "the DeviceBuffer view is closed with it")
		}},

		// More than the device has free is refused before cuMemAllocManaged,
		// with an error that matches ErrOutOfMemory; bad arguments and the
		// driver's failures have exact texts.
		fakeCase{"ManagedErrors", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			free, _, err := c.MemoryInfo()
			require.NoError(t, err)
			_, err = c.AllocManaged(int(free)+1, driver.ManagedOptions{})
			assert.ErrorIs(t, err, driver.ErrOutOfMemory)
			assert.EqualError(t, err, "cuda: Context.AllocManaged: 4294967297 bytes asked for, more than the 4294967296 bytes free on GPU 0: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
			assert.Zero(t, f.Calls("cuMemAllocManaged"))
			_, err = c.AllocManaged(0, driver.ManagedOptions{})
			assert.EqualError(t, err, "cuda: Context.AllocManaged: invalid argument: size 0: must be positive")
			_, err = (*driver.Context)(nil).AllocManaged(8, driver.ManagedOptions{})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)

			m, err := c.AllocManaged(32, driver.ManagedOptions{HostAttached: true})
			require.NoError(t, err)
			defer m.Close()
			assert.EqualError(t, m.Advise(driver.AdvisePreferredLocation, driver.Location{}), "cuda: ManagedBuffer.Advise: invalid argument: zero Location: set Host or Device")
			assert.EqualError(t, m.Advise(0, driver.Location{Host: true}), "cuda: ManagedBuffer.Advise: invalid argument: advice 0: not a CUmem_advise")
			assert.EqualError(t, m.Prefetch(nil, driver.Location{Host: true}), "cuda: ManagedBuffer.Prefetch: invalid argument: nil *Stream")
			other, err := gputest.FakeContext(t, 1).NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			assert.EqualError(t, m.Prefetch(other, driver.Location{Host: true}), "cuda: ManagedBuffer.Prefetch: objects of different contexts: an object of GPU 0's context used with one of GPU 1's")
			assert.EqualError(t, (*driver.ManagedBuffer)(nil).Advise(driver.AdviseAccessedBy, driver.Location{Host: true}), "cuda: ManagedBuffer.Advise: invalid argument: nil *ManagedBuffer")

			f.Fail("cuMemAllocManaged", 1, 2)
			_, err = c.AllocManaged(8, driver.ManagedOptions{})
			assert.EqualError(t, err, "cuda: cuMemAllocManaged: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
			f.Fail("cuMemAdvise_v2", 1, 101)
			assert.ErrorIs(t, m.Advise(driver.AdviseAccessedBy, driver.Location{Host: true}), driver.ErrInvalidDevice)
			f.Fail("cuMemRangeGetAttribute", 1, 1)
			_, err = m.ReadMostly()
			assert.EqualError(t, err, "cuda: cuMemRangeGetAttribute: CUDA_ERROR_INVALID_VALUE (1): invalid argument")

			require.NoError(t, m.Close())
			assert.ErrorIs(t, m.Advise(driver.AdviseReadMostly, driver.Location{}), driver.ErrClosed)
			_, _, err = m.PreferredLocation()
			assert.ErrorIs(t, err, driver.ErrClosed)
		}},

		// A managed buffer left open is closed by its Context's Close, and
		// Close racing a prefetch and advice is safe (run with -race too).
		fakeCase{"ManagedRacesClose", func(t *testing.T, f *fakecuda.Fake) {
			d0, err := driver.DeviceAt(0)
			require.NoError(t, err)
			for range 10 {
				c, err := driver.NewContext(d0)
				require.NoError(t, err)
				s, err := c.NewStream(driver.StreamOptions{})
				require.NoError(t, err)
				m, err := c.AllocManaged(4096, driver.ManagedOptions{})
				require.NoError(t, err)
				var wg sync.WaitGroup
				for g := range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 5 {
							var err error
							switch g {
							case 0:
								err = m.Prefetch(s, driver.Location{Device: d0})
							case 1:
								err = m.Advise(driver.AdviseReadMostly, driver.Location{})
							default:
								_, err = m.ReadMostly()
							}
							if err != nil && !errors.Is(err, driver.ErrClosed) {
								t.Errorf("racing Close: %v", err)
							}
						}
					}()
				}
				wg.Add(2)
				go func() { defer wg.Done(); assert.NoError(t, m.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, c.Close()) }()
				wg.Wait()
			}
			c := gputest.FakeContext(t, 0)
			_, err = c.AllocManaged(64, driver.ManagedOptions{})
			require.NoError(t, err)
			require.NoError(t, c.Close())
			assert.Zero(t, c.OpenObjects())
		}},
	)
}

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
		// A buffer's handle opens (the fake opens its own process's
		// handles) as a buffer of the same memory; the handle travels by
		// value, laid out by the platform's ABI, which the fake's C reads;
		// Close unmaps it once and leaves the exporter's memory.
		fakeCase{"IPCMemory", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			b, err := c.Alloc(128)
			require.NoError(t, err)
			require.NoError(t, b.CopyFromHost(0, pattern(128, 2)))
			h, err := b.IPCHandle()
			require.NoError(t, err)
			assert.Equal(t, "FAKEIPCM", string(h[:8]))
			o, err := c.OpenIPCMem(h, 100)
			require.NoError(t, err)
			assert.Equal(t, 100, o.Len())
			assert.Equal(t, b.Ptr(), o.Ptr(), "the fake maps it where it is")
			assert.Equal(t, pattern(128, 2)[:100], deviceBytes(t, o))
			require.NoError(t, o.CopyFromHost(0, pattern(100, 60)))
			assert.Equal(t, pattern(100, 60), deviceBytes(t, b)[:100], "the exporter sees the writes")
			require.NoError(t, o.Close())
			require.NoError(t, o.Close(), "a second Close")
			assert.Equal(t, 1, f.Calls("cuIpcCloseMemHandle"))
			assert.Equal(t, pattern(100, 60), deviceBytes(t, b)[:100], "the exporter's memory stays")

			// An opened buffer left open is closed by its Context's Close.
			_, err = c.OpenIPCMem(h, 128)
			require.NoError(t, err)
			require.NoError(t, c.Close())
			assert.Equal(t, 2, f.Calls("cuIpcCloseMemHandle"))
		}},

		// An interprocess event's handle opens as an event that waits for
		// the exporter's record.
		fakeCase{"IPCEvents", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			e, err := c.NewIPCEvent()
			require.NoError(t, err)
			f.ExecDelay(1000)
			b, err := c.Alloc(64)
			require.NoError(t, err)
			require.NoError(t, s.Memset(b, 0, 64, 0x3C))
			require.NoError(t, e.Record(s))
			h, err := e.IPCHandle()
			require.NoError(t, err)
			o, err := c.OpenIPCEvent(h)
			require.NoError(t, err)
			require.NoError(t, o.Synchronize())
			f.ExecDelay(0)
			done, err := e.Done()
			require.NoError(t, err)
			assert.True(t, done, "waiting on the opened event waited for the exporter's record")
			_, err = o.Elapsed(o)
			assert.Error(t, err, "interprocess events have no timing")
			require.NoError(t, o.Close())
			require.NoError(t, e.Close())

			plain, err := c.NewEvent(driver.EventOptions{})
			require.NoError(t, err)
			_, err = plain.IPCHandle()
			assert.EqualError(t, err, "cuda: cuIpcGetEventHandle: CUDA_ERROR_INVALID_VALUE (1): invalid argument")
		}},

		// Arguments refused before the driver, handles the driver refuses,
		// and the driver's failures, each undone.
		fakeCase{"IPCErrors", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			b, err := c.Alloc(64)
			require.NoError(t, err)
			h, err := b.IPCHandle()
			require.NoError(t, err)
			_, err = c.OpenIPCMem(h, 65)
			assert.EqualError(t, err, "cuda: Context.OpenIPCMem: length mismatch: shared memory span [0, 0+65) does not fit in 64 bytes")
			assert.Equal(t, 1, f.Calls("cuIpcCloseMemHandle"), "the mapping that did not fit is closed")
			_, err = c.OpenIPCMem(h, 0)
			assert.EqualError(t, err, "cuda: Context.OpenIPCMem: invalid argument: size 0: must be positive")
			_, err = (*driver.Context)(nil).OpenIPCMem(h, 1)
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			_, err = (*driver.Context)(nil).OpenIPCEvent(driver.IPCEventHandle{})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			_, err = (*driver.Context)(nil).NewIPCEvent()
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			_, err = (*driver.DeviceBuffer)(nil).IPCHandle()
			assert.EqualError(t, err, "cuda: DeviceBuffer.IPCHandle: invalid argument: nil *DeviceBuffer")
			_, err = (*driver.Event)(nil).IPCHandle()
			assert.EqualError(t, err, "cuda: Event.IPCHandle: invalid argument: nil *Event")
			m, err := c.AllocManaged(64, driver.ManagedOptions{})
			require.NoError(t, err)
			defer m.Close()
			_, err = m.Buffer().IPCHandle()
			assert.EqualError(t, err, "cuda: DeviceBuffer.IPCHandle: invalid argument: a managed buffer cannot be shared between processes: only Alloc's memory can")

			torn := h
			torn[63] = 1
			_, err = c.OpenIPCMem(torn, 8)
			assert.ErrorIs(t, err, driver.ErrInvalidValue, "every byte of the handle reaches the driver")
			_, err = c.OpenIPCEvent(driver.IPCEventHandle{})
			assert.EqualError(t, err, "cuda: cuIpcOpenEventHandle: CUDA_ERROR_INVALID_VALUE (1): invalid argument")
			f.Fail("cuMemGetAddressRange_v2", 1, 500)
			_, err = c.OpenIPCMem(h, 8)
			assert.ErrorIs(t, err, driver.ErrNotFound)
			assert.Equal(t, 2, f.Calls("cuIpcCloseMemHandle"), "a failed range query closes the mapping")
			f.Fail("cuIpcGetMemHandle", 1, 1)
			_, err = b.IPCHandle()
			assert.EqualError(t, err, "cuda: cuIpcGetMemHandle: CUDA_ERROR_INVALID_VALUE (1): invalid argument")

			require.NoError(t, b.Close())
			_, err = b.IPCHandle()
			assert.ErrorIs(t, err, driver.ErrClosed)
			_, err = c.OpenIPCMem(h, 8)
			assert.ErrorIs(t, err, driver.ErrInvalidValue, "the exporter's memory is gone")
		}},

		// An opened buffer's copies racing its Close (run with -race too).
		fakeCase{"IPCRacesClose", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			b, err := c.Alloc(4096)
			require.NoError(t, err)
			h, err := b.IPCHandle()
			require.NoError(t, err)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			for range 10 {
				o, err := c.OpenIPCMem(h, 4096)
				require.NoError(t, err)
				var wg sync.WaitGroup
				for range 3 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 5 {
							if err := s.CopyDevice(b, 0, o, 0, 4096); err != nil && !errors.Is(err, driver.ErrClosed) {
								t.Errorf("racing Close: %v", err)
							}
						}
					}()
				}
				wg.Add(2)
				go func() { defer wg.Done(); assert.NoError(t, o.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, o.Close()) }()
				wg.Wait()
			}
		}},
	)
}

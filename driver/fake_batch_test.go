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
		// One call queues copies in every direction; each moves its bytes,
		// empty ones are left out, and the host memory is kept until the
		// host sees the batch done.
		fakeCase{"CopyBatch", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			a, err := c.Alloc(64)
			require.NoError(t, err)
			b, err := c.Alloc(64)
			require.NoError(t, err)
			h, err := c.AllocHost(64, driver.HostAllocOptions{})
			require.NoError(t, err)
			out, err := c.AllocHost(64, driver.HostAllocOptions{})
			require.NoError(t, err)
			copy(h.Bytes(), pattern(64, 1))
			require.NoError(t, b.CopyFromHost(0, pattern(64, 90)))
			f.ExecDelay(500)
			require.NoError(t, s.CopyBatch([]driver.BatchCopy{
				{DstDevice: a, SrcHost: h, N: 32},                          // H2D
				{DstDevice: a, DstOff: 32, SrcDevice: b, SrcOff: 8, N: 16}, // D2D
				{DstHost: out, DstOff: 4, SrcDevice: b, N: 20},             // D2H
				{DstDevice: a, SrcHost: h, N: 0},                           // left out
			}, driver.BatchOptions{PreferOverlap: true}))
			require.NoError(t, h.Close(), "Close waits for the queued batch")
			require.NoError(t, s.Synchronize())
			f.ExecDelay(0)
			got := deviceBytes(t, a)
			assert.Equal(t, pattern(64, 1)[:32], got[:32])
			assert.Equal(t, pattern(64, 90)[8:24], got[32:48])
			assert.Equal(t, pattern(64, 90)[:20], out.Bytes()[4:24])
			assert.Equal(t, 1, f.Calls("cuMemcpyBatchAsync_v2"))
			require.NoError(t, s.CopyBatch(nil, driver.BatchOptions{}))
			require.NoError(t, s.CopyBatch([]driver.BatchCopy{{DstDevice: a, SrcDevice: b}}, driver.BatchOptions{}))
			assert.Equal(t, 1, f.Calls("cuMemcpyBatchAsync_v2"), "a batch of nothing calls nothing")
		}},

		// Every copy is checked before the call; exact texts.
		fakeCase{"CopyBatchErrors", func(t *testing.T, f *fakecuda.Fake) {
			c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
			s, err := c0.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			a, err := c0.Alloc(64)
			require.NoError(t, err)
			other, err := c1.Alloc(64)
			require.NoError(t, err)
			h, err := c0.AllocHost(64, driver.HostAllocOptions{})
			require.NoError(t, err)
			for _, tc := range []struct {
				name   string
				copies []driver.BatchCopy
				want   string
			}{
				{"no destination", []driver.BatchCopy{{SrcDevice: a, N: 1}}, "cuda: Stream.CopyBatch: invalid argument: copy 0: no destination"},
				{"two sources", []driver.BatchCopy{{DstDevice: a, SrcDevice: a}, {DstDevice: a, SrcDevice: a, SrcHost: h, N: 1}}, "cuda: Stream.CopyBatch: invalid argument: copy 1: both a device and a host source"},
				{"nil host", []driver.BatchCopy{{DstDevice: a, SrcHost: (*driver.HostBuffer)(nil), N: 1}}, "cuda: Stream.CopyBatch: invalid argument: copy 0: no source"},
				{"negative", []driver.BatchCopy{{DstDevice: a, SrcDevice: a, N: -1}}, "cuda: Stream.CopyBatch: invalid argument: copy 0: size -1: must not be negative"},
				{"zero buffer", []driver.BatchCopy{{DstDevice: &driver.DeviceBuffer{}, SrcDevice: a, N: 1}}, "cuda: Stream.CopyBatch: invalid argument: copy 0: zero destination *DeviceBuffer"},
				{"span", []driver.BatchCopy{{DstDevice: a, SrcHost: h, SrcOff: 60, N: 8}}, "cuda: Stream.CopyBatch: length mismatch: copy 0's source span [60, 60+8) does not fit in 64 bytes"},
				{"foreign", []driver.BatchCopy{{DstDevice: a, SrcDevice: other, N: 8}}, "cuda: Stream.CopyBatch: objects of different contexts: an object of GPU 1's context used with one of GPU 0's"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					assert.EqualError(t, s.CopyBatch(tc.copies, driver.BatchOptions{}), tc.want)
				})
			}
			assert.EqualError(t, (*driver.Stream)(nil).CopyBatch(nil, driver.BatchOptions{}), "cuda: Stream.CopyBatch: invalid argument: nil *Stream")
			assert.Zero(t, f.Calls("cuMemcpyBatchAsync_v2"))
			f.Fail("cuMemcpyBatchAsync_v2", 1, 801)
			err = s.CopyBatch([]driver.BatchCopy{{DstDevice: a, SrcHost: h, N: 8}}, driver.BatchOptions{})
			assert.ErrorIs(t, err, driver.ErrNotSupported)
			require.NoError(t, h.Close())
			assert.ErrorIs(t, s.CopyBatch([]driver.BatchCopy{{DstDevice: a, SrcHost: h, N: 8}}, driver.BatchOptions{}), driver.ErrClosed)
		}},

		// Batches racing the Close of their objects, locked in one order
		// whatever the batch's (run with -race too).
		fakeCase{"CopyBatchRacesClose", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			for range 10 {
				a, err := c.Alloc(256)
				require.NoError(t, err)
				b, err := c.Alloc(256)
				require.NoError(t, err)
				h, err := c.AllocHost(256, driver.HostAllocOptions{})
				require.NoError(t, err)
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						x, y := a, b
						if g%2 == 1 {
							x, y = b, a
						}
						for range 5 {
							err := s.CopyBatch([]driver.BatchCopy{
								{DstDevice: x, SrcDevice: y, N: 64}, {DstDevice: y, SrcHost: h, N: 64},
							}, driver.BatchOptions{})
							if err != nil && !errors.Is(err, driver.ErrClosed) {
								t.Errorf("racing Close: %v", err)
							}
						}
					}()
				}
				wg.Add(3)
				go func() { defer wg.Done(); assert.NoError(t, a.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, b.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, h.Close()) }()
				wg.Wait()
			}
		}},
	)
}

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
		// Two fake devices: peer access one way, then the other, each
		// enabled once; the copies between them move the bytes, queued on
		// a stream of either side.
		fakeCase{"PeerAccessAndCopies", func(t *testing.T, f *fakecuda.Fake) {
			c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
			d0, d1 := c0.Device(), c1.Device()
			can, err := d0.CanAccessPeer(d1)
			require.NoError(t, err)
			assert.True(t, can)
			can, err = d0.CanAccessPeer(d0)
			require.NoError(t, err)
			assert.False(t, can, "a device is not its own peer")

			require.NoError(t, c0.EnablePeerAccess(c1))
			err = c0.EnablePeerAccess(c1)
			assert.ErrorIs(t, err, driver.ErrPeerAccessAlreadyEnabled)
			assert.EqualError(t, err, "cuda: cuCtxEnablePeerAccess: CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED (704): unrecognized error code")
			require.NoError(t, c1.EnablePeerAccess(c0), "the other way is another access")
			require.NoError(t, c0.DisablePeerAccess(c1))
			assert.ErrorIs(t, c0.DisablePeerAccess(c1), driver.ErrPeerAccessNotEnabled)
			require.NoError(t, c1.DisablePeerAccess(c0))

			a, err := c0.Alloc(64)
			require.NoError(t, err)
			b, err := c1.Alloc(64)
			require.NoError(t, err)
			require.NoError(t, a.CopyFromHost(0, pattern(64, 9)))
			require.NoError(t, b.Memset(0xEE))
			require.NoError(t, b.CopyFromPeer(8, a, 4, 40))
			want := filled(64, 0, 0, 0xEE, 0, 1)
			copy(want[8:48], pattern(64, 9)[4:44])
			assert.Equal(t, want, deviceBytes(t, b))

			s0, err := c0.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			s1, err := c1.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			require.NoError(t, b.CopyFromHost(0, pattern(64, 50)))
			require.NoError(t, s0.CopyPeer(a, 0, b, 0, 64), "on the source's stream")
			require.NoError(t, s0.Synchronize())
			assert.Equal(t, pattern(64, 50), deviceBytes(t, a))
			require.NoError(t, a.CopyFromHost(0, pattern(64, 77)))
			require.NoError(t, s1.CopyPeer(b, 16, a, 0, 32), "on the destination's stream")
			require.NoError(t, s1.Synchronize())
			want = pattern(64, 50)
			copy(want[16:48], pattern(64, 77))
			assert.Equal(t, want, deviceBytes(t, b))
			assert.Equal(t, 2, f.Calls("cuMemcpyPeerAsync"))
			assert.Equal(t, 1, f.Calls("cuMemcpyPeer"))
		}},

		// Access ends with the primary context: closing the last Context of
		// a device and opening another lets the access be enabled again.
		fakeCase{"PeerAccessEndsWithContext", func(t *testing.T, f *fakecuda.Fake) {
			c0 := gputest.FakeContext(t, 0)
			d1, err := driver.DeviceAt(1)
			require.NoError(t, err)
			c1, err := driver.NewContext(d1)
			require.NoError(t, err)
			require.NoError(t, c0.EnablePeerAccess(c1))
			require.NoError(t, c1.Close())
			assert.ErrorIs(t, c0.EnablePeerAccess(c1), driver.ErrClosed)
			c1 = gputest.FakeContext(t, 1)
			require.NoError(t, c0.EnablePeerAccess(c1))
		}},

		// Arguments refused before the driver, and the driver's refusals.
		fakeCase{"PeerErrors", func(t *testing.T, f *fakecuda.Fake) {
			c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
			other := gputest.FakeContext(t, 0)
			s0, err := c0.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			a, err := c0.Alloc(64)
			require.NoError(t, err)
			b, err := c1.Alloc(64)
			require.NoError(t, err)
			b2, err := c1.Alloc(64)
			require.NoError(t, err)

			_, err = driver.Device{}.CanAccessPeer(c1.Device())
			assert.EqualError(t, err, "cuda: Device.CanAccessPeer: invalid argument: zero Device; use DeviceAt")
			_, err = c0.Device().CanAccessPeer(driver.Device{})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			assert.EqualError(t, c0.EnablePeerAccess(nil), "cuda: Context.EnablePeerAccess: invalid argument: nil peer *Context")
			assert.EqualError(t, (*driver.Context)(nil).DisablePeerAccess(c1), "cuda: Context.DisablePeerAccess: invalid argument: nil *Context")
			assert.EqualError(t, c0.EnablePeerAccess(other), "cuda: Context.EnablePeerAccess: invalid argument: a context of GPU 0 is not its own peer")
			assert.EqualError(t, s0.CopyPeer(b, 0, b2, 0, 8), "cuda: Stream.CopyPeer: objects of different contexts: an object of GPU 1's context used with one of GPU 0's")
			assert.EqualError(t, s0.CopyPeer(a, 60, b, 0, 8), "cuda: Stream.CopyPeer: length mismatch: destination span [60, 60+8) does not fit in 64 bytes")
			assert.EqualError(t, b.CopyFromPeer(0, a, 0, 65), "cuda: DeviceBuffer.CopyFromPeer: length mismatch: destination span [0, 0+65) does not fit in 64 bytes")
			assert.EqualError(t, s0.CopyPeer(nil, 0, b, 0, 8), "cuda: Stream.CopyPeer: invalid argument: nil destination *DeviceBuffer")
			assert.EqualError(t, (*driver.Stream)(nil).CopyPeer(a, 0, b, 0, 8), "cuda: Stream.CopyPeer: invalid argument: nil *Stream")
			assert.EqualError(t, a.CopyFromPeer(0, nil, 0, 8), "cuda: DeviceBuffer.CopyFromPeer: invalid argument: nil *DeviceBuffer")
			require.NoError(t, s0.CopyPeer(a, 0, b, 0, 0))
			assert.Zero(t, f.Calls("cuMemcpyPeerAsync"), "a copy of nothing calls nothing")

			f.Fail("cuCtxEnablePeerAccess", 1, 217)
			err = c0.EnablePeerAccess(c1)
			assert.ErrorIs(t, err, driver.ErrPeerAccessUnsupported)
			f.Fail("cuMemcpyPeerAsync", 1, 1)
			assert.EqualError(t, s0.CopyPeer(a, 0, b, 0, 8), "cuda: cuMemcpyPeerAsync: CUDA_ERROR_INVALID_VALUE (1): invalid argument")
			f.Fail("cuDeviceCanAccessPeer", 1, 101)
			_, err = c0.Device().CanAccessPeer(c1.Device())
			assert.ErrorIs(t, err, driver.ErrInvalidDevice)

			require.NoError(t, b.Close())
			assert.ErrorIs(t, a.CopyFromPeer(0, b, 0, 8), driver.ErrClosed)
			assert.ErrorIs(t, s0.CopyPeer(a, 0, b, 0, 8), driver.ErrClosed)
		}},

		// Peer copies and peer access racing the Close of both contexts'
		// objects and of the contexts themselves (run with -race too).
		fakeCase{"PeerRacesClose", func(t *testing.T, f *fakecuda.Fake) {
			for range 10 {
				d0, _ := driver.DeviceAt(0)
				d1, _ := driver.DeviceAt(1)
				c0, err := driver.NewContext(d0)
				require.NoError(t, err)
				c1, err := driver.NewContext(d1)
				require.NoError(t, err)
				s, err := c0.NewStream(driver.StreamOptions{})
				require.NoError(t, err)
				a, err := c0.Alloc(64)
				require.NoError(t, err)
				b, err := c1.Alloc(64)
				require.NoError(t, err)
				var wg sync.WaitGroup
				ok := func(err error) {
					if err != nil && !errors.Is(err, driver.ErrClosed) && !errors.Is(err, driver.ErrPeerAccessAlreadyEnabled) {
						t.Errorf("racing Close: %v", err)
					}
				}
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 5 {
							switch g {
							case 0:
								ok(s.CopyPeer(a, 0, b, 0, 64))
							case 1:
								ok(b.CopyFromPeer(0, a, 0, 64))
							case 2:
								ok(c0.EnablePeerAccess(c1))
							case 3:
								ok(c1.EnablePeerAccess(c0))
							}
						}
					}()
				}
				wg.Add(2)
				go func() { defer wg.Done(); assert.NoError(t, c0.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, c1.Close()) }()
				wg.Wait()
			}
		}},
	)
}

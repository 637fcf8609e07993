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

// pitchedRef applies c to dst from src on the CPU: the reference that the
// 2D and 3D copies must match.
func pitchedRef(dst, src []byte, c driver.Copy3D) {
	for z := 0; z < c.Depth; z++ {
		for r := 0; r < c.Height; r++ {
			d := c.DstOff + (z*c.DstHeight+r)*c.DstPitch
			s := c.SrcOff + (z*c.SrcHeight+r)*c.SrcPitch
			copy(dst[d:d+c.Width], src[s:s+c.Width])
		}
	}
}

// as3D is c as the equivalent one-slice Copy3D.
func as3D(c driver.Copy2D) driver.Copy3D {
	return driver.Copy3D{Width: c.Width, Height: c.Height, Depth: 1,
		DstOff: c.DstOff, DstPitch: c.DstPitch, DstHeight: c.Height,
		SrcOff: c.SrcOff, SrcPitch: c.SrcPitch, SrcHeight: c.Height}
}

// pattern returns n bytes that differ from their neighbours.
func pattern(n int, seed byte) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(i*7) + seed
	}
	return out
}

func init() {
	fakeCases = append(fakeCases,
		// Every 2D and 3D copy, synchronous and queued, in each direction,
		// moves exactly the rows its description names, and nothing else.
		fakeCase{"Copy2D3DData", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			const n = 256
			c2 := driver.Copy2D{Width: 5, Height: 7, DstOff: 3, DstPitch: 11, SrcOff: 2, SrcPitch: 9}
			c3 := driver.Copy3D{Width: 3, Height: 4, Depth: 3, DstOff: 1, DstPitch: 6, DstHeight: 5,
				SrcOff: 4, SrcPitch: 4, SrcHeight: 6}
			for _, tc := range []struct {
				name string
				c    driver.Copy3D
				run  func(dst, src *driver.DeviceBuffer, hdst, hsrc *driver.HostBuffer, gsrc, gdst []byte) error
				// what it writes: device (dst) or host (hdst / gdst)
				toHost, goMem bool
			}{
				{"2D from host", as3D(c2), func(d, _ *driver.DeviceBuffer, _, _ *driver.HostBuffer, gs, _ []byte) error {
					return d.Copy2DFromHost(c2, gs)
				}, false, true},
				{"2D to host", as3D(c2), func(_, sd *driver.DeviceBuffer, _, _ *driver.HostBuffer, _, gd []byte) error {
					return sd.Copy2DToHost(gd, c2)
				}, true, true},
				{"2D device", as3D(c2), func(d, sd *driver.DeviceBuffer, _, _ *driver.HostBuffer, _, _ []byte) error {
					return d.Copy2DFromDevice(c2, sd)
				}, false, false},
				{"2D queued to device", as3D(c2), func(d, _ *driver.DeviceBuffer, _, hs *driver.HostBuffer, _, _ []byte) error {
					return s.Copy2DToDevice(d, hs, c2)
				}, false, false},
				{"2D queued to host", as3D(c2), func(_, sd *driver.DeviceBuffer, hd, _ *driver.HostBuffer, _, _ []byte) error {
					return s.Copy2DToHost(hd, sd, c2)
				}, true, false},
				{"2D queued device", as3D(c2), func(d, sd *driver.DeviceBuffer, _, _ *driver.HostBuffer, _, _ []byte) error {
					return s.Copy2DDevice(d, sd, c2)
				}, false, false},
				{"3D from host", c3, func(d, _ *driver.DeviceBuffer, _, _ *driver.HostBuffer, gs, _ []byte) error {
					return d.Copy3DFromHost(c3, gs)
				}, false, true},
				{"3D to host", c3, func(_, sd *driver.DeviceBuffer, _, _ *driver.HostBuffer, _, gd []byte) error {
					return sd.Copy3DToHost(gd, c3)
				}, true, true},
				{"3D device", c3, func(d, sd *driver.DeviceBuffer, _, _ *driver.HostBuffer, _, _ []byte) error {
					return d.Copy3DFromDevice(c3, sd)
				}, false, false},
				{"3D queued to device", c3, func(d, _ *driver.DeviceBuffer, _, hs *driver.HostBuffer, _, _ []byte) error {
					return s.Copy3DToDevice(d, hs, c3)
				}, false, false},
				{"3D queued to host", c3, func(_, sd *driver.DeviceBuffer, hd, _ *driver.HostBuffer, _, _ []byte) error {
					return s.Copy3DToHost(hd, sd, c3)
				}, true, false},
				{"3D queued device", c3, func(d, sd *driver.DeviceBuffer, _, _ *driver.HostBuffer, _, _ []byte) error {
					return s.Copy3DDevice(d, sd, c3)
				}, false, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					src, before := pattern(n, 1), pattern(n, 100)
					dst, err := c.Alloc(n)
					require.NoError(t, err)
					defer dst.Close()
					sd, err := c.Alloc(n)
					require.NoError(t, err)
					defer sd.Close()
					hd, err := c.AllocHost(n, driver.HostAllocOptions{})
					require.NoError(t, err)
					defer hd.Close()
					hs, err := c.AllocHost(n, driver.HostAllocOptions{})
					require.NoError(t, err)
					defer hs.Close()
					require.NoError(t, dst.CopyFromHost(0, before))
					require.NoError(t, sd.CopyFromHost(0, src))
					copy(hd.Bytes(), before)
					copy(hs.Bytes(), src)
					gd := append([]byte(nil), before...)
					require.NoError(t, tc.run(dst, sd, hd, hs, src, gd))
					require.NoError(t, s.Synchronize())
					want := append([]byte(nil), before...)
					pitchedRef(want, src, tc.c)
					switch {
					case tc.toHost && tc.goMem:
						assert.Equal(t, want, gd)
					case tc.toHost:
						assert.Equal(t, want, hd.Bytes())
					default:
						assert.Equal(t, want, deviceBytes(t, dst))
					}
				})
			}
			assert.Equal(t, 3, f.Calls("cuMemcpy2D_v2"))
			assert.Equal(t, 3, f.Calls("cuMemcpy2DAsync_v2"))
			assert.Equal(t, 3, f.Calls("cuMemcpy3D_v2"))
			assert.Equal(t, 3, f.Calls("cuMemcpy3DAsync_v2"))
		}},

		// A queued 2D copy keeps its host memory: Close of the buffer waits
		// for the copy, which the fake would report as a copy that ran on
		// freed memory otherwise.
		fakeCase{"Copy2DKeepsHostMemory", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			d, err := c.Alloc(64)
			require.NoError(t, err)
			h, err := c.AllocHost(64, driver.HostAllocOptions{})
			require.NoError(t, err)
			copy(h.Bytes(), pattern(64, 3))
			f.ExecDelay(2000)
			require.NoError(t, s.Copy2DToDevice(d, h, driver.Copy2D{Width: 8, Height: 8, DstPitch: 8, SrcPitch: 8}))
			require.NoError(t, h.Close())
			f.ExecDelay(0)
			assert.Equal(t, pattern(64, 3), deviceBytes(t, d))
		}},

		// Copies racing the Close of their buffers and stream: each copy
		// either runs on live memory or gets ErrClosed, and the fake sees
		// no handle destroyed under a call (run with -race too).
		fakeCase{"Copy2DRacesClose", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			for range 20 {
				s, err := c.NewStream(driver.StreamOptions{})
				require.NoError(t, err)
				a, err := c.Alloc(256)
				require.NoError(t, err)
				b, err := c.Alloc(256)
				require.NoError(t, err)
				cp := driver.Copy2D{Width: 16, Height: 16, DstPitch: 16, SrcPitch: 16}
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 10 {
							var err error
							if g%2 == 0 {
								err = s.Copy2DDevice(a, b, cp)
							} else {
								err = a.Copy2DFromDevice(cp, b)
							}
							if err != nil && !errors.Is(err, driver.ErrClosed) {
								t.Errorf("copy racing Close: %v", err)
							}
						}
					}()
				}
				wg.Add(3)
				go func() { defer wg.Done(); assert.NoError(t, a.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, b.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, s.Close()) }()
				wg.Wait()
				assert.NoError(t, a.Close(), "a second Close")
			}
		}},

		// Nil, closed and foreign objects, spans that do not fit, and the
		// driver's failures, each with its exact text.
		fakeCase{"Copy2D3DErrors", func(t *testing.T, f *fakecuda.Fake) {
			c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
			s, err := c0.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			b, err := c0.Alloc(64)
			require.NoError(t, err)
			other, err := c1.Alloc(64)
			require.NoError(t, err)
			h, err := c0.AllocHost(64, driver.HostAllocOptions{})
			require.NoError(t, err)
			ok := driver.Copy2D{Width: 8, Height: 8, DstPitch: 8, SrcPitch: 8}
			big := driver.Copy2D{Width: 8, Height: 9, DstPitch: 8, SrcPitch: 8}

			assert.EqualError(t, (*driver.DeviceBuffer)(nil).Copy2DFromHost(ok, make([]byte, 64)), "cuda: DeviceBuffer.Copy2DFromHost: invalid argument: nil *DeviceBuffer")
			assert.EqualError(t, b.Copy2DFromDevice(ok, nil), "cuda: DeviceBuffer.Copy2DFromDevice: invalid argument: nil *DeviceBuffer")
			assert.EqualError(t, b.Copy2DFromHost(big, make([]byte, 72)), "cuda: DeviceBuffer.Copy2DFromHost: length mismatch: destination span [0, 0+72) does not fit in 64 bytes")
			assert.EqualError(t, b.Copy2DToHost(make([]byte, 63), ok), "cuda: DeviceBuffer.Copy2DToHost: length mismatch: destination span [0, 0+64) does not fit in 63 bytes")
			assert.EqualError(t, b.Copy2DFromDevice(ok, other), "cuda: DeviceBuffer.Copy2DFromDevice: objects of different contexts: an object of GPU 0's context used with one of GPU 1's")
			assert.EqualError(t, s.Copy2DToDevice(nil, h, ok), "cuda: Stream.Copy2DToDevice: invalid argument: nil destination *DeviceBuffer")
			assert.EqualError(t, s.Copy2DToDevice(b, nil, ok), "cuda: Stream.Copy2DToDevice: invalid argument: nil source HostMemory")
			assert.EqualError(t, s.Copy2DToHost((*driver.HostBuffer)(nil), b, ok), "cuda: Stream.Copy2DToHost: invalid argument: nil destination *HostBuffer")
			assert.EqualError(t, (*driver.Stream)(nil).Copy3DDevice(b, b, driver.Copy3D{}), "cuda: Stream.Copy3DDevice: invalid argument: nil *Stream")
			assert.EqualError(t, s.Copy2DDevice(b, other, ok), "cuda: Stream.Copy2DDevice: objects of different contexts: an object of GPU 1's context used with one of GPU 0's")
			assert.EqualError(t, s.Copy2DToDevice(b, h, big), "cuda: Stream.Copy2DToDevice: length mismatch: destination span [0, 0+72) does not fit in 64 bytes")
			assert.EqualError(t, s.Copy3DToHost(h, b, driver.Copy3D{Width: 8, Height: 2, Depth: 2, DstPitch: 8, DstHeight: 1, SrcPitch: 8, SrcHeight: 2}),
				"cuda: Stream.Copy3DToHost: invalid argument: destination height 1: less than the copy's 2 rows")
			// An empty copy between open objects calls nothing.
			require.NoError(t, s.Copy2DDevice(b, b, driver.Copy2D{}))
			require.NoError(t, b.Copy3DFromHost(driver.Copy3D{Width: 4}, nil))
			assert.Zero(t, f.Calls("cuMemcpy2DAsync_v2")+f.Calls("cuMemcpy3D_v2"))

			f.Fail("cuMemcpy2D_v2", 1, 1)
			assert.EqualError(t, b.Copy2DFromHost(ok, make([]byte, 64)), "cuda: cuMemcpy2D_v2: CUDA_ERROR_INVALID_VALUE (1): invalid argument")
			f.Fail("cuMemcpy3DAsync_v2", 1, 400)
			err = s.Copy3DToDevice(b, h, driver.Copy3D{Width: 8, Height: 8, Depth: 1, DstPitch: 8, DstHeight: 8, SrcPitch: 8, SrcHeight: 8})
			assert.ErrorIs(t, err, driver.ErrInvalidHandle)
			assert.EqualError(t, err, "cuda: cuMemcpy3DAsync_v2: CUDA_ERROR_INVALID_HANDLE (400): invalid resource handle")

			require.NoError(t, h.Close())
			assert.ErrorIs(t, s.Copy2DToDevice(b, h, ok), driver.ErrClosed)
			require.NoError(t, b.Close())
			assert.ErrorIs(t, b.Copy2DToHost(make([]byte, 64), ok), driver.ErrClosed)
			assert.ErrorIs(t, s.Copy2DDevice(other, b, ok), driver.ErrClosed)
			require.NoError(t, s.Close())
			assert.ErrorIs(t, s.Copy2DDevice(other, other, ok), driver.ErrClosed)
		}},
	)
}

//go:build linux

package driver_test

import (
	"encoding/binary"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deviceBytes copies the whole of b to the host.
func deviceBytes(t *testing.T, b *driver.DeviceBuffer) []byte {
	t.Helper()
	out := make([]byte, b.Len())
	require.NoError(t, b.CopyToHost(out, 0))
	return out
}

// filled returns n bytes: pre, then v in width-byte elements from off to
// off+count, then pre again.
func filled(n, off, count int, pre byte, v uint32, width int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = pre
	}
	for i := off; i < off+count; i += width {
		switch width {
		case 2:
			binary.LittleEndian.PutUint16(out[i:], uint16(v))
		case 4:
			binary.LittleEndian.PutUint32(out[i:], v)
		}
	}
	return out
}

func init() {
	fakeCases = append(fakeCases,
		// The 16- and 32-bit memsets, synchronous on the whole buffer and
		// queued on a span of it, set every element, and nothing else,
		// each through its own entry point.
		fakeCase{"Memset16And32", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			b, err := c.Alloc(64)
			require.NoError(t, err)
			require.NoError(t, b.Memset16(0xABCD))
			assert.Equal(t, filled(64, 0, 64, 0, 0xABCD, 2), deviceBytes(t, b))
			require.NoError(t, b.Memset32(0xDEADBEEF))
			assert.Equal(t, filled(64, 0, 64, 0, 0xDEADBEEF, 4), deviceBytes(t, b))
			assert.Equal(t, 1, f.Calls("cuMemsetD16_v2"))
			assert.Equal(t, 1, f.Calls("cuMemsetD32_v2"))

			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			require.NoError(t, b.Memset(0x11))
			require.NoError(t, s.Memset16(b, 6, 10, 0x1234))
			require.NoError(t, s.Synchronize())
			assert.Equal(t, filled(64, 6, 10, 0x11, 0x1234, 2), deviceBytes(t, b))
			require.NoError(t, b.Memset(0x22))
			require.NoError(t, s.Memset32(b, 8, 48, 0x89ABCDEF))
			require.NoError(t, s.Synchronize())
			assert.Equal(t, filled(64, 8, 48, 0x22, 0x89ABCDEF, 4), deviceBytes(t, b))
			assert.Equal(t, 1, f.Calls("cuMemsetD16Async"))
			assert.Equal(t, 1, f.Calls("cuMemsetD32Async"))
			assert.Zero(t, f.Calls("cuMemsetD8Async"))

			// Nothing to do, between open objects: no driver call.
			require.NoError(t, s.Memset16(b, 2, 0, 1))
			require.NoError(t, s.Memset32(b, 64, 0, 1))
			assert.Equal(t, 1, f.Calls("cuMemsetD16Async"))
			assert.Equal(t, 1, f.Calls("cuMemsetD32Async"))
		}},

		// Misaligned spans and buffers, spans that do not fit, and nil,
		// closed and foreign objects are refused before the driver; the
		// driver's own failures name the entry point.
		fakeCase{"Memset16And32Errors", func(t *testing.T, f *fakecuda.Fake) {
			c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
			s, err := c0.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			b, err := c0.Alloc(64)
			require.NoError(t, err)
			odd, err := c0.Alloc(62)
			require.NoError(t, err)
			other, err := c1.Alloc(64)
			require.NoError(t, err)

			assert.EqualError(t, odd.Memset32(1), "cuda: DeviceBuffer.Memset32: invalid argument: buffer of 62 bytes: not a whole number of 4-byte elements")
			assert.NoError(t, odd.Memset16(1), "62 bytes are 31 16-bit elements")
			assert.EqualError(t, s.Memset16(b, 1, 4, 1), "cuda: Stream.Memset16: invalid argument: offset 1 and size 4: must be multiples of 2 bytes")
			assert.EqualError(t, s.Memset32(b, 4, 6, 1), "cuda: Stream.Memset32: invalid argument: offset 4 and size 6: must be multiples of 4 bytes")
			assert.EqualError(t, s.Memset32(b, 8, 60, 1), "cuda: Stream.Memset32: length mismatch: destination span [8, 8+60) does not fit in 64 bytes")
			assert.EqualError(t, s.Memset16(nil, 0, 2, 1), "cuda: Stream.Memset16: invalid argument: nil destination *DeviceBuffer")
			assert.EqualError(t, (*driver.Stream)(nil).Memset32(b, 0, 4, 1), "cuda: Stream.Memset32: invalid argument: nil *Stream")
			assert.EqualError(t, (*driver.DeviceBuffer)(nil).Memset16(1), "cuda: DeviceBuffer.Memset16: invalid argument: nil destination *DeviceBuffer")
			assert.EqualError(t, s.Memset32(other, 0, 4, 1), "cuda: Stream.Memset32: objects of different contexts: an object of GPU 1's context used with one of GPU 0's")

			f.Fail("cuMemsetD16_v2", 1, 2)
			assert.EqualError(t, b.Memset16(1), "cuda: cuMemsetD16_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory")
			f.Fail("cuMemsetD32Async", 1, 400)
			err = s.Memset32(b, 0, 64, 1)
			assert.ErrorIs(t, err, driver.ErrInvalidHandle)
			assert.EqualError(t, err, "cuda: cuMemsetD32Async: CUDA_ERROR_INVALID_HANDLE (400): invalid resource handle")

			require.NoError(t, odd.Close())
			assert.ErrorIs(t, odd.Memset16(1), driver.ErrClosed)
			assert.ErrorIs(t, s.Memset16(odd, 0, 2, 1), driver.ErrClosed)
			require.NoError(t, s.Synchronize())
		}},

		// A captured 32-bit memset runs at each launch of the graph, and
		// its buffer is one the graph keeps and checks.
		fakeCase{"Memset32Captured", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			b, err := c.Alloc(32)
			require.NoError(t, err)
			require.NoError(t, b.Memset(0))
			g, err := s.Capture(func(bd *driver.Bound) error { return s.Memset32(b, 0, 32, 0x01020304) })
			require.NoError(t, err)
			assert.Equal(t, make([]byte, 32), deviceBytes(t, b), "a captured memset runs nothing")
			e, err := g.Instantiate()
			require.NoError(t, err)
			require.NoError(t, e.Launch(s))
			require.NoError(t, s.Synchronize())
			assert.Equal(t, filled(32, 0, 32, 0, 0x01020304, 4), deviceBytes(t, b))
			require.NoError(t, b.Close())
			assert.ErrorIs(t, e.Launch(s), driver.ErrClosed)
		}},
	)
}

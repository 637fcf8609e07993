package driver

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// checkElements fails t, once, at the first element of b[off:off+n] that is
// not v (in width-byte elements), and at the first byte outside it that is
// not rest.
func checkElements(t *testing.T, what string, b []byte, off, n, width int, v uint32, rest byte) {
	t.Helper()
	for i := 0; i < len(b); {
		if i < off || i >= off+n {
			if b[i] != rest {
				t.Errorf("%s: byte %d is %#x, want %#x (outside the span)", what, i, b[i], rest)
				return
			}
			i++
			continue
		}
		var got uint32
		switch width {
		case 2:
			got = uint32(binary.LittleEndian.Uint16(b[i:]))
		case 4:
			got = binary.LittleEndian.Uint32(b[i:])
		}
		if got != v {
			t.Errorf("%s: element at byte %d is %#x, want %#x", what, i, got, v)
			return
		}
		i += width
	}
}

// TestGPUMemset16And32 sets a buffer of a little over a MiB with each of
// the 16- and 32-bit memsets, synchronous on the whole buffer and queued on
// a span, and checks every element, and every byte around the spans.
func TestGPUMemset16And32(t *testing.T) {
	ctx := requireGPU(t)
	const n = 1<<20 + 12
	d, err := ctx.Alloc(n)
	require.NoError(t, err)
	defer d.Close()
	got := make([]byte, n)

	require.NoError(t, d.Memset16(0xBEEF))
	require.NoError(t, d.CopyToHost(got, 0))
	checkElements(t, "Memset16", got, 0, n, 2, 0xBEEF, 0)

	one := math.Float32bits(1)
	require.NoError(t, d.Memset32(one))
	require.NoError(t, d.CopyToHost(got, 0))
	checkElements(t, "Memset32", got, 0, n, 4, one, 0)
	for i, x := range View[float32](got) {
		if x != 1 {
			t.Fatalf("Memset32(Float32bits(1)): float %d is %v", i, x)
		}
	}

	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	h, err := ctx.AllocHost(n, HostAllocOptions{})
	require.NoError(t, err)
	defer h.Close()

	require.NoError(t, s.Memset(d, 0, n, 0x5A))
	require.NoError(t, s.Memset16(d, 2, n-6, 0x1234))
	require.NoError(t, s.CopyToHost(h, 0, d, 0, n))
	require.NoError(t, s.Synchronize())
	checkElements(t, "Stream.Memset16", h.Bytes(), 2, n-6, 2, 0x1234, 0x5A)

	require.NoError(t, s.Memset(d, 0, n, 0xA5))
	require.NoError(t, s.Memset32(d, 4, n-8, 0xCAFEF00D))
	require.NoError(t, s.CopyToHost(h, 0, d, 0, n))
	require.NoError(t, s.Synchronize())
	checkElements(t, "Stream.Memset32", h.Bytes(), 4, n-8, 4, 0xCAFEF00D, 0xA5)

	// Misaligned spans never reach the driver.
	assert.ErrorIs(t, s.Memset16(d, 1, 2, 0), ErrInvalidArgument)
	assert.ErrorIs(t, s.Memset32(d, 0, 6, 0), ErrInvalidArgument)
	odd, err := ctx.Alloc(6)
	require.NoError(t, err)
	defer odd.Close()
	assert.ErrorIs(t, odd.Memset32(0), ErrInvalidArgument)
}

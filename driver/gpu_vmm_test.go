package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUVirtualMemory allocates through the virtual memory calls, runs
// add_scalar from one virtual buffer into another, and checks every
// element; a one-byte buffer rounds its mapping up to the granularity and
// still copies its byte; Close is idempotent and unmaps before the next
// allocation reuses the space.
func TestGPUVirtualMemory(t *testing.T) {
	ctx := requireGPU(t)
	ok, err := ctx.Device().Attribute(AttrVirtualMemoryManagementSupported)
	require.NoError(t, err)
	require.Equal(t, 1, ok, "an H200 supports virtual memory management")
	g, err := ctx.VirtualGranularity()
	require.NoError(t, err)
	assert.Greater(t, g, 0)
	assert.Zero(t, g&(g-1), "a power of two")

	one, err := ctx.AllocVirtual(1)
	require.NoError(t, err)
	require.NoError(t, one.CopyFromHost(0, []byte{0xA7}))
	b := []byte{0}
	require.NoError(t, one.CopyToHost(b, 0))
	assert.Equal(t, byte(0xA7), b[0])
	require.NoError(t, one.Close())
	require.NoError(t, one.Close())

	const n = 16<<20 + 3
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i) * 0.25
	}
	for round := range 3 { // the space is given back and taken again
		dx, err := ctx.AllocVirtual(n * 4)
		require.NoError(t, err)
		dy, err := ctx.AllocVirtual(n * 4)
		require.NoError(t, err)
		require.NoError(t, dx.CopyFromHost(0, Bytes(x)))
		s, err := ctx.NewStream(StreamOptions{})
		require.NoError(t, err)
		m := loadTestKernels(t, ctx)
		f, err := m.Function("add_scalar")
		require.NoError(t, err)
		require.NoError(t, f.Launch(s, GridFor(n, 256), NewArgs().Buffer(dy, 0).Buffer(dx, 0).Float32(2).Uint32(n)))
		require.NoError(t, s.Synchronize())
		y := make([]float32, n)
		require.NoError(t, dy.CopyToHost(Bytes(y), 0))
		for i := range y {
			if y[i] != x[i]+2 {
				t.Fatalf("round %d: y[%d] = %v, want %v", round, i, y[i], x[i]+2)
			}
		}
		require.NoError(t, m.Close())
		require.NoError(t, s.Close())
		require.NoError(t, dx.Close())
		require.NoError(t, dy.Close())
	}
}

package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUManaged fills 16 MiB of managed memory from the host, prefetches
// it to the GPU, runs add_scalar on it in place of a device buffer (y =
// x + 1.25, x managed, y managed), prefetches y back and checks every
// element from the host's view; the advice and prefetches are read back
// through the range attributes. A request for more than the free memory
// is refused before the driver.
func TestGPUManaged(t *testing.T) {
	ctx := requireGPU(t)
	dev := ctx.Device()
	free, _, err := ctx.MemoryInfo()
	require.NoError(t, err)
	_, err = ctx.AllocManaged(int(free)+1, ManagedOptions{})
	assert.ErrorIs(t, err, ErrOutOfMemory)

	const n = 4<<20 + 3
	x, err := ctx.AllocManaged(n*4, ManagedOptions{})
	require.NoError(t, err)
	defer x.Close()
	y, err := ctx.AllocManaged(n*4, ManagedOptions{})
	require.NoError(t, err)
	defer y.Close()
	xs := View[float32](x.Bytes())
	for i := range xs {
		xs[i] = float32(i) * 0.5
	}
	gpu := Location{Device: dev}
	require.NoError(t, x.Advise(AdviseReadMostly, Location{}))
	rm, err := x.ReadMostly()
	require.NoError(t, err)
	assert.True(t, rm)
	require.NoError(t, y.Advise(AdvisePreferredLocation, gpu))
	loc, ok, err := y.PreferredLocation()
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, gpu, loc)
	require.NoError(t, x.Advise(AdviseAccessedBy, gpu))

	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, x.Prefetch(s, gpu))
	require.NoError(t, y.Prefetch(s, gpu))
	m := loadTestKernels(t, ctx)
	defer m.Close()
	f, err := m.Function("add_scalar")
	require.NoError(t, err)
	args := NewArgs().Buffer(y.Buffer(), 0).Buffer(x.Buffer(), 0).Float32(1.25).Uint32(n)
	require.NoError(t, f.Launch(s, GridFor(n, 256), args))
	require.NoError(t, y.Prefetch(s, Location{Host: true}))
	require.NoError(t, s.Synchronize())
	loc, ok, err = y.LastPrefetch()
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, Location{Host: true}, loc)
	for i, v := range View[float32](y.Bytes()) {
		if want := float32(i)*0.5 + 1.25; v != want {
			t.Fatalf("y[%d] = %v, want %v", i, v, want)
		}
	}
	// The managed memory is a DeviceBuffer for copies too.
	d, err := ctx.Alloc(n * 4)
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.CopyFromDevice(0, y.Buffer(), 0, n*4))
	got := make([]float32, n)
	require.NoError(t, d.CopyToHost(Bytes(got), 0))
	for i, v := range got {
		if want := float32(i)*0.5 + 1.25; v != want {
			t.Fatalf("copy of y: [%d] = %v, want %v", i, v, want)
		}
	}
}

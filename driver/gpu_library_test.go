package driver

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPULibraryEveryDevice loads testdata's PTX once as a library, with
// no context, and runs its add_scalar on the primary context of every
// device of the machine through Kernel.Function, checking every element:
// whether one library serves every device of a pipeline.Group. Then its
// Close makes the Functions unusable.
func TestGPULibraryEveryDevice(t *testing.T) {
	requireGPU(t)
	src, err := os.ReadFile("testdata/kernels.ptx")
	require.NoError(t, err)
	lib, err := LoadLibrary(src, ModuleOptions{})
	require.NoError(t, err)
	k, err := lib.Kernel("add_scalar")
	require.NoError(t, err)
	n, err := DeviceCount()
	require.NoError(t, err)
	t.Logf("%d device(s)", n)
	var fns []*Function
	var streams []*Stream
	for dev := range n {
		d, err := DeviceAt(dev)
		require.NoError(t, err)
		c, err := NewContext(d)
		require.NoError(t, err)
		defer func() { assert.NoError(t, c.Close()) }()
		f, err := k.Function(c)
		require.NoError(t, err, "device %d", dev)
		p, ok := f.Params()
		require.True(t, ok)
		assert.Len(t, p, 4)
		checkAddScalar(t, c, f, 1<<20+7, LaunchConfig{}, plainLaunch)
		m, err := lib.Module(c)
		require.NoError(t, err)
		mf, err := m.Function("add_scalar")
		require.NoError(t, err)
		checkAddScalar(t, c, mf, 1000, LaunchConfig{}, plainLaunch)
		s, err := c.NewStream(StreamOptions{})
		require.NoError(t, err)
		defer s.Close()
		fns, streams = append(fns, f), append(streams, s)
	}
	_, err = lib.Kernel("no_such_kernel")
	assert.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, lib.Close())
	for i, f := range fns {
		assert.ErrorIs(t, f.Launch(streams[i], GridFor(1, 1), NewArgs()), ErrClosed)
	}
}

// TestGPULibraryCubin loads a cubin that the JIT linker made as a library.
func TestGPULibraryCubin(t *testing.T) {
	ctx := requireGPU(t)
	src, err := os.ReadFile("testdata/kernels.ptx")
	require.NoError(t, err)
	l, err := ctx.NewLinker(ModuleOptions{})
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, l.Add(src, ""))
	cubin, err := l.Complete()
	require.NoError(t, err)
	lib, err := LoadLibrary(cubin, ModuleOptions{})
	require.NoError(t, err)
	defer lib.Close()
	k, err := lib.Kernel("add_scalar")
	require.NoError(t, err)
	f, err := k.Function(ctx)
	require.NoError(t, err)
	checkAddScalar(t, ctx, f, 4099, LaunchConfig{}, plainLaunch)
}

package driver

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUHostFunc queues host functions between kernels and copies on two
// streams: each sees the copy queued before it complete, in order, and a
// million of them share the one callback and leave the dispatch table
// empty.
func TestGPUHostFunc(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	f, err := m.Function("add_scalar")
	require.NoError(t, err)
	const n = 1 << 16
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)
	}
	dx, err := ctx.Alloc(4 * n)
	require.NoError(t, err)
	defer dx.Close()
	require.NoError(t, dx.CopyFromHost(0, Bytes(x)))
	before := hostFuncsQueued()
	start := time.Now()
	var calls, wrong atomic.Int64
	for si := range 2 {
		s, err := ctx.NewStream(StreamOptions{})
		require.NoError(t, err)
		defer s.Close()
		dy, err := ctx.Alloc(4 * n)
		require.NoError(t, err)
		defer dy.Close()
		h, err := ctx.AllocHost(4*n, HostAllocOptions{})
		require.NoError(t, err)
		defer h.Close()
		for round := range 10 {
			a := float32(si*100 + round)
			require.NoError(t, f.Launch(s, GridFor(n, 256), NewArgs().Buffer(dy, 0).Buffer(dx, 0).Float32(a).Uint32(n)))
			require.NoError(t, s.CopyToHost(h, 0, dy, 0, 4*n))
			require.NoError(t, s.LaunchHostFunc(func() {
				y := h.Float32s()
				for i := range y {
					if y[i] != x[i]+a {
						wrong.Add(1)
						return
					}
				}
				calls.Add(1)
			}))
		}
		for range 500_000 {
			require.NoError(t, s.LaunchHostFunc(func() { calls.Add(1) }))
		}
	}
	require.NoError(t, ctx.Synchronize())
	t.Logf("a million host functions in %v", time.Since(start))
	assert.Zero(t, wrong.Load(), "a host function saw a copy queued before it incomplete")
	assert.Equal(t, int64(2*(10+500_000)), calls.Load())
	assert.Equal(t, before, hostFuncsQueued())
}

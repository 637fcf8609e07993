package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPULaunchEx runs add_scalar through cuLaunchKernelEx with each
// attribute (a cluster of 2 blocks, cooperative, a priority)
// and through cuLaunchCooperativeKernel, checking every element; a
// cooperative grid larger than the device holds is the driver's error.
func TestGPULaunchEx(t *testing.T) {
	ctx := requireGPU(t)
	m := loadTestKernels(t, ctx)
	defer m.Close()
	f, err := m.Function("add_scalar")
	require.NoError(t, err)
	const n = 1<<20 + 9
	for name, a := range map[string]LaunchAttributes{
		"none":        {},
		"cluster":     {Cluster: Dim3{X: 2}},
		"priority":    {Priority: -1, SetPriority: true},
		"cooperative": {Cooperative: true},
	} {
		t.Run(name, func(t *testing.T) {
			count := n
			if a.Cooperative {
				count = 64 * 256 // 64 blocks: resident at once on any GPU that launches cooperatively
			}
			cfg := GridFor(count, 256)
			if a.Cluster.X == 2 && cfg.Grid.X%2 != 0 {
				cfg.Grid.X++ // the extra threads are past n: add_scalar skips them
			}
			checkAddScalar(t, ctx, f, count, cfg, func(f *Function, s *Stream, cfg LaunchConfig, args *Args) error {
				return f.LaunchEx(s, cfg, a, args)
			})
		})
	}
	checkAddScalar(t, ctx, f, 64*256, GridFor(64*256, 256), func(f *Function, s *Stream, cfg LaunchConfig, args *Args) error {
		return f.LaunchCooperative(s, cfg, args)
	})

	per, err := f.MaxActiveBlocksPerSM(256, 0, OccupancyDefault)
	require.NoError(t, err)
	sms, err := ctx.Device().Multiprocessors()
	require.NoError(t, err)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	d, err := ctx.Alloc(4)
	require.NoError(t, err)
	defer d.Close()
	big := LaunchConfig{Grid: Dim3{X: per*sms + 1}, Block: Dim3{X: 256}}
	err = f.LaunchCooperative(s, big, NewArgs().Buffer(d, 0).Buffer(d, 0).Float32(0).Uint32(0))
	assert.ErrorContains(t, err, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE")
	err = f.LaunchEx(s, LaunchConfig{Grid: Dim3{X: 3}, Block: Dim3{X: 32}}, LaunchAttributes{Cluster: Dim3{X: 2}}, NewArgs())
	assert.ErrorIs(t, err, ErrInvalidArgument)
	require.NoError(t, s.Synchronize())
}

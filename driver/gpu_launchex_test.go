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

// gridCountPTX is a kernel that only a co-resident grid finishes: thread 0
// of each block counts its block in, then spins until every block of the
// grid has, and writes the count it saw. A block that is not resident
// while the others spin would hang them; a cooperative launch guarantees
// residency.
const gridCountPTX = `.version 7.0
.target sm_70
.address_size 64

.visible .entry grid_count(.param .u64 counter, .param .u64 out)
{
	.reg .pred %p<3>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<6>;
	ld.param.u64 %rd1, [counter];
	ld.param.u64 %rd2, [out];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	mov.u32 %r1, %tid.x;
	mov.u32 %r2, %nctaid.x;
	mov.u32 %r3, %ctaid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra DONE;
	atom.global.add.u32 %r4, [%rd1], 1;
SPIN:
	ld.volatile.global.u32 %r5, [%rd1];
	setp.lt.u32 %p2, %r5, %r2;
	@%p2 bra SPIN;
	mul.wide.u32 %rd3, %r3, 4;
	add.u64 %rd4, %rd2, %rd3;
	st.global.u32 [%rd4], %r5;
DONE:
	ret;
}
`

// TestGPUCooperativeGrid launches grid_count cooperatively, through
// cuLaunchCooperativeKernel and through cuLaunchKernelEx's cooperative
// attribute, on as many blocks as the device holds at once (the occupancy
// calculation's answer), and checks that every block saw the whole grid.
func TestGPUCooperativeGrid(t *testing.T) {
	ctx := requireGPU(t)
	m, err := ctx.LoadModule([]byte(gridCountPTX), ModuleOptions{})
	require.NoError(t, err)
	defer m.Close()
	f, err := m.Function("grid_count")
	require.NoError(t, err)
	per, err := f.MaxActiveBlocksPerSM(128, 0, OccupancyDefault)
	require.NoError(t, err)
	sms, err := ctx.Device().Multiprocessors()
	require.NoError(t, err)
	blocks := per * sms
	t.Logf("%d SMs x %d blocks of 128", sms, per)
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	counter, err := ctx.Alloc(4)
	require.NoError(t, err)
	defer counter.Close()
	out, err := ctx.Alloc(4 * blocks)
	require.NoError(t, err)
	defer out.Close()
	cfg := LaunchConfig{Grid: Dim3{X: blocks}, Block: Dim3{X: 128}}
	for name, launch := range map[string]func(args *Args) error{
		"cuLaunchCooperativeKernel": func(args *Args) error { return f.LaunchCooperative(s, cfg, args) },
		"cuLaunchKernelEx":          func(args *Args) error { return f.LaunchEx(s, cfg, LaunchAttributes{Cooperative: true}, args) },
	} {
		require.NoError(t, counter.Memset(0))
		require.NoError(t, out.Memset(0))
		require.NoError(t, launch(NewArgs().Buffer(counter, 0).Buffer(out, 0)), name)
		require.NoError(t, s.Synchronize(), name)
		got := make([]uint32, blocks)
		require.NoError(t, out.CopyToHost(Bytes(got), 0))
		for b, v := range got {
			if v != uint32(blocks) {
				t.Fatalf("%s: block %d saw %d of %d blocks", name, b, v, blocks)
			}
		}
	}
}

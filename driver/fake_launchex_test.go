//go:build linux

package driver_test

import (
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyKernel loads the fake's fake_copy(out, in, n) on c.
func copyKernel(t *testing.T, f *fakecuda.Fake, c *driver.Context) *driver.Function {
	t.Helper()
	m, err := c.LoadModule([]byte("// fake_copy"), driver.ModuleOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	f.SetParams(8, 8, 4) // before the lookup, which reads the layout
	fn, err := m.Function("fake_copy")
	require.NoError(t, err)
	return fn
}

func init() {
	fakeCases = append(fakeCases,
		// LaunchEx and LaunchCooperative run the kernel through their own
		// entry points, with the attributes asked for and nothing else.
		fakeCase{"LaunchExAttributes", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			fn := copyKernel(t, f, c)
			for _, tc := range []struct {
				name  string
				attrs driver.LaunchAttributes
				want  fakecuda.LaunchEx
			}{
				{"none", driver.LaunchAttributes{}, fakecuda.LaunchEx{}},
				{"cluster", driver.LaunchAttributes{Cluster: driver.Dim3{X: 2}},
					fakecuda.LaunchEx{Cluster: [3]int{2, 1, 1}, Attrs: 1}},
				{"all", driver.LaunchAttributes{Cluster: driver.Dim3{X: 4}, Cooperative: true, Priority: -1, SetPriority: true},
					fakecuda.LaunchEx{Cooperative: true, Cluster: [3]int{4, 1, 1}, Priority: -1, HasPriority: true, Attrs: 3}},
				{"priority 0", driver.LaunchAttributes{SetPriority: true}, fakecuda.LaunchEx{HasPriority: true, Attrs: 1}},
			} {
				runFakeCopy(t, c, fn, 128, func(fn *driver.Function, s *driver.Stream, cfg driver.LaunchConfig, args *driver.Args) error {
					return fn.LaunchEx(s, cfg, tc.attrs, args)
				})
				assert.Equal(t, tc.want, f.LastLaunchEx(), tc.name)
				dims, _ := f.LastLaunch()
				assert.Equal(t, [7]uint32{4, 1, 1, 32, 1, 1, 0}, dims, tc.name)
			}
			assert.Equal(t, 4, f.Calls("cuLaunchKernelEx"))
			runFakeCopy(t, c, fn, 64, func(fn *driver.Function, s *driver.Stream, cfg driver.LaunchConfig, args *driver.Args) error {
				return fn.LaunchCooperative(s, cfg, args)
			})
			assert.Equal(t, fakecuda.LaunchEx{Cooperative: true}, f.LastLaunchEx())
			assert.Equal(t, 1, f.Calls("cuLaunchCooperativeKernel"))
			assert.Zero(t, f.Calls("cuLaunchKernel"))
		}},

		// LaunchEx and LaunchCooperative allocate nothing per launch: the
		// arguments go through the pinned slabs, the config through a
		// pinned exSlab.
		fakeCase{"LaunchExAllocs", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			fn := copyKernel(t, f, c)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			b, err := c.Alloc(64)
			require.NoError(t, err)
			args := driver.NewArgs().Buffer(b, 0).Buffer(b, 0).Uint32(16)
			cfg := driver.LaunchConfig{Grid: driver.Dim3{X: 2}, Block: driver.Dim3{X: 8}}
			attrs := driver.LaunchAttributes{Cluster: driver.Dim3{X: 2}, SetPriority: true}
			launch := func() {
				require.NoError(t, fn.LaunchEx(s, cfg, attrs, args))
				require.NoError(t, fn.LaunchCooperative(s, cfg, args))
			}
			launch()
			if allocs := testing.AllocsPerRun(100, launch); !raceEnabled {
				assert.Zero(t, allocs, "allocations per LaunchEx and LaunchCooperative")
			}
			require.NoError(t, s.Synchronize())
			require.NoError(t, b.Close())
		}},

		// Bad shapes, clusters and arguments are refused before the
		// driver; the driver's refusals name the entry point.
		fakeCase{"LaunchExErrors", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			fn := copyKernel(t, f, c)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			b, err := c.Alloc(64)
			require.NoError(t, err)
			args := driver.NewArgs().Buffer(b, 0).Buffer(b, 0).Uint32(0)
			one := driver.GridFor(1, 1)
			for _, tc := range []struct {
				name string
				err  error
			}{
				{"odd grid", fn.LaunchEx(s, driver.LaunchConfig{Grid: driver.Dim3{X: 3}, Block: driver.Dim3{X: 1}}, driver.LaunchAttributes{Cluster: driver.Dim3{X: 2}}, args)},
				{"bad cluster", fn.LaunchEx(s, one, driver.LaunchAttributes{Cluster: driver.Dim3{X: 1, Y: -1}}, args)},
				{"zero block", fn.LaunchEx(s, driver.LaunchConfig{Grid: driver.Dim3{X: 1}}, driver.LaunchAttributes{}, args)},
				{"shared", fn.LaunchCooperative(s, driver.LaunchConfig{Grid: driver.Dim3{X: 1}, Block: driver.Dim3{X: 1}, SharedMem: -1}, args)},
				{"nil args", fn.LaunchEx(s, one, driver.LaunchAttributes{}, nil)},
				{"nil stream", fn.LaunchCooperative(nil, one, args)},
				{"nil function", (*driver.Function)(nil).LaunchEx(s, one, driver.LaunchAttributes{}, args)},
			} {
				assert.ErrorIs(t, tc.err, driver.ErrInvalidArgument, tc.name)
			}
			assert.ErrorIs(t, fn.LaunchEx(s, one, driver.LaunchAttributes{}, driver.NewArgs().Uint32(1)), driver.ErrArguments)
			assert.Zero(t, f.Calls("cuLaunchKernelEx")+f.Calls("cuLaunchCooperativeKernel"))

			// The fake holds 4 SMs of 32 blocks of 32 threads: a
			// cooperative grid of 129 blocks does not fit.
			big := driver.LaunchConfig{Grid: driver.Dim3{X: 129}, Block: driver.Dim3{X: 32}}
			err = fn.LaunchCooperative(s, big, args)
			assert.ErrorContains(t, err, "cuda: cuLaunchCooperativeKernel: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE (720)")
			err = fn.LaunchEx(s, big, driver.LaunchAttributes{Cooperative: true}, args)
			assert.ErrorContains(t, err, "cuda: cuLaunchKernelEx: CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE (720)")
			err = fn.LaunchEx(s, driver.LaunchConfig{Grid: driver.Dim3{X: 16}, Block: driver.Dim3{X: 1}}, driver.LaunchAttributes{Cluster: driver.Dim3{X: 16}}, args)
			assert.ErrorContains(t, err, "cuda: cuLaunchKernelEx: CUDA_ERROR_INVALID_CLUSTER_SIZE (912)")

			// Another context's stream, and closed objects.
			c1 := gputest.FakeContext(t, 1)
			s1, err := c1.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			assert.ErrorIs(t, fn.LaunchEx(s1, one, driver.LaunchAttributes{}, args), driver.ErrWrongContext)
			require.NoError(t, s.Close())
			assert.ErrorIs(t, fn.LaunchCooperative(s, one, args), driver.ErrClosed)
			require.NoError(t, b.Close())
		}},
	)
}

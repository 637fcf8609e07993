//go:build linux

package driver_test

import (
	"sync"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runFakeCopy launches fn (the fake's fake_copy) on a new stream of c over
// n floats, and checks that they arrived.
func runFakeCopy(t *testing.T, c *driver.Context, fn *driver.Function, n int,
	launch func(fn *driver.Function, s *driver.Stream, cfg driver.LaunchConfig, args *driver.Args) error) {
	t.Helper()
	in := make([]float32, n)
	for i := range in {
		in[i] = float32(i) + 0.5
	}
	src, err := c.Alloc(4 * n)
	require.NoError(t, err)
	defer src.Close()
	dst, err := c.Alloc(4 * n)
	require.NoError(t, err)
	defer dst.Close()
	require.NoError(t, src.CopyFromHost(0, driver.Bytes(in)))
	s, err := c.NewStream(driver.StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	args := driver.NewArgs().Buffer(dst, 0).Buffer(src, 0).Uint32(uint32(n))
	require.NoError(t, launch(fn, s, driver.GridFor(n, 32), args))
	require.NoError(t, s.Synchronize())
	out := make([]float32, n)
	require.NoError(t, dst.CopyToHost(driver.Bytes(out), 0))
	assert.Equal(t, in, out)
}

func plainLaunch(fn *driver.Function, s *driver.Stream, cfg driver.LaunchConfig, args *driver.Args) error {
	return fn.Launch(s, cfg, args)
}

func init() {
	fakeCases = append(fakeCases,
		// One library serves both fake devices: a kernel gives a Function
		// on each context, of the library's module there, and both run.
		fakeCase{"LibraryServesEveryContext", func(t *testing.T, f *fakecuda.Fake) {
			lib, err := driver.LoadLibrary([]byte(".version 8.0"), driver.ModuleOptions{})
			require.NoError(t, err)
			assert.Equal(t, 1, f.Live(fakecuda.Libraries))
			assert.Equal(t, "fake JIT: library of kind 0", lib.InfoLog())
			k, err := lib.Kernel("fake_copy")
			require.NoError(t, err)
			assert.Equal(t, "fake_copy", k.Name())
			f.SetParams(8, 8, 4)
			for dev := range 2 {
				c := gputest.FakeContext(t, dev)
				fn, err := k.Function(c)
				require.NoError(t, err)
				p, ok := fn.Params()
				require.True(t, ok)
				assert.Len(t, p, 3)
				runFakeCopy(t, c, fn, 100, plainLaunch)
				m, err := lib.Module(c)
				require.NoError(t, err)
				require.NoError(t, m.Close(), "a library's module: Close does nothing")
				mf, err := m.Function("fake_copy")
				require.NoError(t, err)
				runFakeCopy(t, c, mf, 10, plainLaunch)
			}
			_, err = lib.Kernel("missing_k")
			assert.ErrorIs(t, err, driver.ErrNotFound)
			assert.Contains(t, err.Error(), `no kernel named "missing_k"`)
			require.NoError(t, lib.Close())
			require.NoError(t, lib.Close())
			assert.Zero(t, f.Live(fakecuda.Libraries))
		}},

		// Closing the library makes its Functions, modules and kernels
		// unusable; closing a context first leaves the library working on
		// the others.
		fakeCase{"LibraryLifetimes", func(t *testing.T, f *fakecuda.Fake) {
			lib, err := driver.LoadLibrary(fakeCubin(), driver.ModuleOptions{})
			require.NoError(t, err)
			k, err := lib.Kernel("fake_copy")
			require.NoError(t, err)
			f.SetParams(8, 8, 4)
			c0, c1 := gputest.FakeContext(t, 0), gputest.FakeContext(t, 1)
			fn0, err := k.Function(c0)
			require.NoError(t, err)
			fn1, err := k.Function(c1)
			require.NoError(t, err)
			s1, err := c1.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			require.NoError(t, c0.Close())
			_, err = k.Function(c0)
			assert.ErrorIs(t, err, driver.ErrClosed)
			runFakeCopy(t, c1, fn1, 64, plainLaunch)
			_, err = fn0.Attribute(driver.FuncMaxThreadsPerBlock)
			assert.ErrorIs(t, err, driver.ErrClosed)
			require.NoError(t, lib.Close())
			err = fn1.Launch(s1, driver.GridFor(1, 1), driver.NewArgs())
			assert.ErrorIs(t, err, driver.ErrClosed)
			_, err = k.Function(c1)
			assert.ErrorIs(t, err, driver.ErrClosed)
			_, err = lib.Kernel("fake_copy")
			assert.ErrorIs(t, err, driver.ErrClosed)
			_, err = lib.Module(c1)
			assert.ErrorIs(t, err, driver.ErrClosed)
			assert.Zero(t, f.Live(fakecuda.Libraries))
		}},

		// Bad images never reach the driver; the JIT's failure carries its
		// log; zero and nil objects are errors.
		fakeCase{"LibraryErrors", func(t *testing.T, f *fakecuda.Fake) {
			_, err := driver.LoadLibrary([]byte{0x1f, 0x8b}, driver.ModuleOptions{})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			assert.Zero(t, f.Calls("cuLibraryLoadData"))
			_, err = driver.LoadLibrary([]byte("error"), driver.ModuleOptions{})
			var e *driver.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, "ptxas fake: line 1; error : the library asks for an error", e.Detail)
			var zero driver.Library
			_, err = zero.Kernel("k")
			assert.EqualError(t, err, "cuda: Library.Kernel: invalid argument: zero Library (use LoadLibrary)")
			lib, err := driver.LoadLibrary(fakeFatbin(4), driver.ModuleOptions{})
			require.NoError(t, err)
			defer lib.Close()
			k, err := lib.Kernel("k")
			require.NoError(t, err)
			_, err = k.Function(nil)
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			_, err = lib.Module(nil)
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
		}},

		// Close races launches of the library's Function and lookups: the
		// library's module is never unloaded under a call (the fake
		// records that), and each call works or reports ErrClosed.
		fakeCase{"LibraryConcurrentClose", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			f.Delay("cuLaunchKernel", 200*time.Microsecond)
			for range 10 {
				lib, err := driver.LoadLibrary([]byte(".version 8.0"), driver.ModuleOptions{})
				require.NoError(t, err)
				k, err := lib.Kernel("k")
				require.NoError(t, err)
				fn, err := k.Function(c)
				require.NoError(t, err)
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range 5 {
							var err error
							if g%2 == 0 {
								err = fn.Launch(s, driver.GridFor(1, 1), driver.NewArgs())
							} else {
								_, err = k.Function(c)
							}
							if err != nil {
								assert.ErrorIs(t, err, driver.ErrClosed)
							}
						}
					}()
				}
				wg.Add(2)
				go func() { defer wg.Done(); assert.NoError(t, lib.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, lib.Close()) }()
				wg.Wait()
			}
			require.NoError(t, s.Synchronize())
			assert.Zero(t, f.Live(fakecuda.Libraries))
		}},
	)
}

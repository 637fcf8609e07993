//go:build linux

package driver_test

import (
	"sync"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	fakeCases = append(fakeCases,
		// A link of PTX and a cubin completes into a cubin that loads;
		// the PTX reaches the driver NUL-terminated (the fake records a
		// violation otherwise); the cubin is a copy that outlives Close.
		fakeCase{"LinkerLinks", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			l, err := c.NewLinker(driver.ModuleOptions{OptimizationLevel: 3, Verbose: true})
			require.NoError(t, err)
			_, err = l.Complete()
			assert.EqualError(t, err, "cuda: Linker.Complete: invalid argument: nothing added to link")
			require.NoError(t, l.Add([]byte(".version 8.0\n.target sm_90"), "a.ptx"))
			require.NoError(t, l.Add(fakeCubin(), ""))
			assert.Equal(t, "fake linker: 2 input(s), last input 1", l.InfoLog())
			cubin, err := l.Complete()
			require.NoError(t, err)
			kind, err := driver.CheckImage(cubin)
			require.NoError(t, err)
			assert.Equal(t, driver.ImageCubin, kind)
			assert.Equal(t, 1, f.Live(fakecuda.Linkers))
			require.NoError(t, l.Close())
			require.NoError(t, l.Close())
			assert.Zero(t, f.Live(fakecuda.Linkers))
			assert.Equal(t, "inputs 2", string(cubin[64:72]), "the cubin was copied before cuLinkDestroy poisoned it")
			m, err := c.LoadImage(cubin)
			require.NoError(t, err)
			require.NoError(t, m.Close())
			assert.ErrorIs(t, l.Add(fakeCubin(), "late"), driver.ErrClosed)
			_, err = l.Complete()
			assert.ErrorIs(t, err, driver.ErrClosed)
			assert.Equal(t, "", l.InfoLog())
		}},

		// Bad inputs are refused before the driver, the JIT's failure
		// carries its log, and a linker left open is destroyed with its
		// context.
		fakeCase{"LinkerErrors", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			l, err := c.NewLinker(driver.ModuleOptions{})
			require.NoError(t, err)
			err = l.Add([]byte{0x1f, 0x8b}, "gz")
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			assert.ErrorIs(t, l.Add([]byte("x"), "a\x00b"), driver.ErrInvalidArgument)
			assert.Zero(t, f.Calls("cuLinkAddData_v2"))
			err = l.Add([]byte("error here"), "bad.ptx")
			var e *driver.Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, driver.ErrInvalidPTX, e.Code)
			assert.Equal(t, "ptxas fake: bad.ptx, line 1; error : the input asks for an error", e.Detail)
			f.Fail("cuLinkCreate_v2", 1, 2)
			_, err = c.NewLinker(driver.ModuleOptions{})
			assert.ErrorIs(t, err, driver.ErrOutOfMemory)
			_, err = (*driver.Context)(nil).NewLinker(driver.ModuleOptions{})
			assert.ErrorIs(t, err, driver.ErrInvalidArgument)
			require.NoError(t, l.Add(fakeFatbin(8), "fat"))
			require.NoError(t, c.Close())
			assert.Zero(t, f.Live(fakecuda.Linkers))
			assert.ErrorIs(t, l.Add(fakeCubin(), ""), driver.ErrClosed)
		}},

		// Close races Add and Complete from other goroutines: no link
		// state is destroyed under a call (the fake records that), and
		// each call either works or reports ErrClosed.
		fakeCase{"LinkerConcurrentClose", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			for range 20 {
				l, err := c.NewLinker(driver.ModuleOptions{})
				require.NoError(t, err)
				require.NoError(t, l.Add(fakeCubin(), ""))
				var wg sync.WaitGroup
				for g := range 4 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						var err error
						if g%2 == 0 {
							err = l.Add(fakeCubin(), "")
						} else {
							_, err = l.Complete()
						}
						if err != nil {
							assert.ErrorIs(t, err, driver.ErrClosed)
						}
					}()
				}
				wg.Add(2)
				go func() { defer wg.Done(); assert.NoError(t, l.Close()) }()
				go func() { defer wg.Done(); assert.NoError(t, l.Close()) }()
				wg.Wait()
			}
			assert.Zero(t, f.Live(fakecuda.Linkers))
		}},
	)
}

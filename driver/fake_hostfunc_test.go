//go:build linux

package driver_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	fakeCases = append(fakeCases,
		// A million host functions share one callback: each runs once, in
		// its stream's order, and its slot of the table is freed, so the
		// table never holds more than what is queued. purego makes at
		// most 2000 callbacks: one per call would fail long before.
		fakeCase{"HostFuncMillion", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			const n = 1_000_000
			before := f.HostCalls()
			var next, bad atomic.Int64
			for i := range int64(n) {
				require.NoError(t, s.LaunchHostFunc(func() {
					if next.Add(1)-1 != i {
						bad.Add(1)
					}
				}))
				if i%100_000 == 0 {
					assert.LessOrEqual(t, driver.HostFuncsQueued(), int(i)+1)
				}
			}
			require.NoError(t, s.Synchronize())
			assert.Equal(t, int64(n), next.Load())
			assert.Zero(t, bad.Load(), "host functions ran out of order")
			assert.Equal(t, n, f.HostCalls()-before)
			assert.Zero(t, driver.HostFuncsQueued())
		}},

		// A host function runs after the copies queued before it, and the
		// stream waits for it; several streams queue at once.
		fakeCase{"HostFuncOrderAndStreams", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			h, err := c.AllocHost(64, driver.HostAllocOptions{})
			require.NoError(t, err)
			defer h.Close()
			b, err := c.Alloc(64)
			require.NoError(t, err)
			defer b.Close()
			require.NoError(t, b.Memset(7))
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s, err := c.NewStream(driver.StreamOptions{})
					require.NoError(t, err)
					defer s.Close()
					if g == 0 {
						require.NoError(t, s.CopyToHost(h, 0, b, 0, 64))
						require.NoError(t, s.LaunchHostFunc(func() { assert.Equal(t, byte(7), h.Bytes()[63]) }))
					}
					for range 1000 {
						require.NoError(t, s.LaunchHostFunc(func() {}))
					}
					require.NoError(t, s.Synchronize())
				}()
			}
			wg.Wait()
			assert.Zero(t, driver.HostFuncsQueued())
		}},

		// Refused calls free their slot at once; nil and closed streams,
		// a nil func and a capturing stream are errors.
		fakeCase{"HostFuncErrors", func(t *testing.T, f *fakecuda.Fake) {
			c := gputest.FakeContext(t, 0)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			ran := false
			f.Fail("cuLaunchHostFunc", 1, 1)
			err = s.LaunchHostFunc(func() { ran = true })
			assert.ErrorContains(t, err, "cuda: cuLaunchHostFunc: CUDA_ERROR_INVALID_VALUE (1)")
			assert.Zero(t, driver.HostFuncsQueued())
			assert.ErrorIs(t, s.LaunchHostFunc(nil), driver.ErrInvalidArgument)
			assert.ErrorIs(t, (*driver.Stream)(nil).LaunchHostFunc(func() {}), driver.ErrInvalidArgument)
			g, err := s.Capture(func(*driver.Bound) error {
				err := s.LaunchHostFunc(func() {})
				assert.ErrorIs(t, err, driver.ErrInvalidArgument)
				return nil
			})
			if err == nil {
				require.NoError(t, g.Close())
			}
			require.NoError(t, s.Close())
			assert.ErrorIs(t, s.LaunchHostFunc(func() {}), driver.ErrClosed)
			assert.False(t, ran)
			assert.Zero(t, driver.HostFuncsQueued())
		}},
	)
}

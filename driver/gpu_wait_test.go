//go:build linux

package driver_test

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// processCPU is the process's user and system CPU time so far.
func processCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestGPUWaitModes guards issue 14: each wait mode reaches the driver. A
// context made in a mode reports it; a second context in the same mode
// shares the primary context, one in another mode is refused with
// ErrWaitMode while the first is open; and waiting about 100 ms for a
// kernel costs the process a core's worth of CPU time when spinning, and
// less than half of that when blocking. It runs in a fresh process, where
// no other test holds the primary context.
func TestGPUWaitModes(t *testing.T) {
	if !gputest.Fresh(t) {
		return
	}
	src, err := os.ReadFile("testdata/kernels.ptx")
	require.NoError(t, err)
	dev, err := driver.DeviceAt(0)
	require.NoError(t, err)
	for _, w := range []driver.Wait{driver.WaitSpin, driver.WaitYield, driver.WaitBlock, driver.WaitAuto} {
		t.Run(w.String(), func(t *testing.T) {
			c, err := driver.NewContextWith(dev, driver.ContextOptions{Wait: w})
			require.NoError(t, err)
			defer func() { assert.NoError(t, c.Close()) }()
			got, err := c.Wait()
			require.NoError(t, err)
			assert.Equal(t, w, got)

			same, err := driver.NewContextWith(dev, driver.ContextOptions{Wait: w})
			require.NoError(t, err)
			require.NoError(t, same.Close())
			other := driver.WaitBlock
			if w == driver.WaitBlock {
				other = driver.WaitSpin
			}
			_, err = driver.NewContextWith(dev, driver.ContextOptions{Wait: other})
			assert.ErrorIs(t, err, driver.ErrWaitMode)
			joined, err := driver.NewContext(dev) // WaitDefault joins what is active
			require.NoError(t, err)
			got, err = joined.Wait()
			assert.NoError(t, err)
			assert.Equal(t, w, got)
			require.NoError(t, joined.Close())

			m, err := c.LoadModule(src, driver.ModuleOptions{})
			require.NoError(t, err)
			spin, err := m.Function("spin")
			require.NoError(t, err)
			s, err := c.NewStream(driver.StreamOptions{})
			require.NoError(t, err)
			args := driver.NewArgs().Uint64(200_000_000) // cycles: about 100 ms at 2 GHz
			one := driver.LaunchConfig{Grid: driver.Dim3{X: 1}, Block: driver.Dim3{X: 1}}
			require.NoError(t, spin.Launch(s, one, args)) // warm up
			require.NoError(t, s.Synchronize())
			cpu0, t0 := processCPU(t), time.Now()
			require.NoError(t, spin.Launch(s, one, args))
			require.NoError(t, s.Synchronize())
			wall, cpu := time.Since(t0), processCPU(t)-cpu0
			t.Logf("%s: waited %v for the kernel, %v of CPU time (%.0f%%)", w, wall, cpu, 100*float64(cpu)/float64(wall))
			require.Greater(t, wall, 20*time.Millisecond, "the spin kernel should take about 100 ms")
			switch w {
			case driver.WaitSpin:
				assert.Greater(t, cpu, wall/2, "spinning should keep a core busy")
			case driver.WaitBlock:
				assert.Less(t, cpu, wall/2, "blocking should leave the core idle")
			}
		})
	}
}

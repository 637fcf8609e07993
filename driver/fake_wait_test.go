//go:build linux

package driver_test

import (
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/loader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func init() {
	fakeCases = append(fakeCases, fakeCase{"WaitModes", func(t *testing.T, f *fakecuda.Fake) {
		// Issue 14: the default asks the driver nothing new, so it works
		// on a driver without the scheduling-flag calls; a mode asked for
		// on such a driver fails by naming the missing entry point, with
		// nothing retained (the case's cleanup checks the primary
		// context's references).
		d, err := driver.DeviceAt(0)
		require.NoError(t, err)
		c, err := driver.NewContextWith(d, driver.ContextOptions{})
		require.NoError(t, err)
		require.NoError(t, c.Close())
		_, err = driver.NewContextWith(d, driver.ContextOptions{Wait: driver.WaitBlock})
		if err == nil {
			t.Skip("the fake driver now has cuDevicePrimaryCtxGetState; test the modes there")
		}
		assert.ErrorIs(t, err, loader.ErrMissingSymbol)
		assert.ErrorContains(t, err, "cuDevicePrimaryCtxGetState")
	}})
}

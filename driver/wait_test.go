package driver

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWaitNames guards issue 14: every wait mode's name parses back to it,
// and the flags each asks for are the CU_CTX_SCHED_* values of cuda.h.
func TestWaitNames(t *testing.T) {
	cases := []struct {
		name  string
		w     Wait
		flags uint32
	}{
		{"default", WaitDefault, 0},
		{"spin", WaitSpin, 0x1},
		{"yield", WaitYield, 0x2},
		{"block", WaitBlock, 0x4},
		{"auto", WaitAuto, 0x0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w, err := ParseWait(tc.name)
			require.NoError(t, err)
			assert.Equal(t, tc.w, w)
			assert.Equal(t, tc.name, w.String())
			if w != WaitDefault {
				assert.Equal(t, tc.flags, waitFlags[w])
				// Other flag bits (CU_CTX_MAP_HOST, 0x8) do not change the mode.
				assert.Equal(t, w, waitOf(tc.flags|0x8))
			}
		})
	}
	_, err := ParseWait("busy")
	assert.EqualError(t, err, `cuda: ParseWait: unknown wait mode "busy": want spin, yield, block, auto or default`)
	assert.Equal(t, "Wait(9)", Wait(9).String())
}

// TestNewContextWithBadOptions guards issue 14: options are checked before
// any driver call, so these errors need no GPU.
func TestNewContextWithBadOptions(t *testing.T) {
	_, err := NewContextWith(Device{ordinal: 0, valid: true}, ContextOptions{Wait: Wait(9)})
	assert.EqualError(t, err, "cuda: NewContextWith: invalid argument: unknown wait mode 9")
	assert.ErrorIs(t, err, ErrInvalidArgument)
	_, err = NewContextWith(Device{}, ContextOptions{Wait: WaitBlock})
	assert.EqualError(t, err, "cuda: NewContextWith: invalid argument: zero Device; use DeviceAt")
}

// TestWaitModeError guards issue 14: the refusal names the mode in force,
// the mode asked for, and what to do.
func TestWaitModeError(t *testing.T) {
	err := waitModeError("NewContext", Device{ordinal: 1, valid: true}, WaitBlock, 0x9)
	assert.ErrorIs(t, err, ErrWaitMode)
	assert.EqualError(t, err, "cuda: NewContext: primary context already active with another wait mode: "+
		"GPU 1's primary context is active with wait mode spin, not block; close every Context on it first, or ask for spin")
}

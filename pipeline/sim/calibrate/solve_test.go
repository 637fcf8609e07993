package calibrate

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSolveFrom: a figure whose prediction grows faster than linearly is
// found closer by the secant step than by the line through 0 and the
// trial, from either side of the trial; a measurement below the
// prediction at 0 gives 0 without another prediction.
func TestSolveFrom(t *testing.T) {
	// 1 ms plus 100 ns per unit plus a square term: not linear.
	curve := func(v float64) time.Duration { return time.Duration(1e6 + 100*v + 0.02*v*v) }
	const trial = 2000.0
	at := [2]time.Duration{curve(0), curve(trial)}
	for _, want := range []float64{300, 1200, 3500} {
		calls := 0
		got, atX, err := solveFrom(curve(want), trial, at, func(v float64) (time.Duration, error) {
			calls++
			return curve(v), nil
		})
		require.NoError(t, err)
		assert.Equal(t, 1, calls, "one more prediction")
		linear := trial * float64(curve(want)-at[0]) / float64(at[1]-at[0])
		assert.Equal(t, curve(linear), atX, "the prediction at the linear estimate")
		assert.Less(t, abs(got-want), abs(linear-want)/2, "want %v: the secant step %v is closer than the line's %v, by half", want, got, linear)
	}
	got, atX, err := solveFrom(at[0]-1000, trial, at, func(float64) (time.Duration, error) {
		t.Fatal("no prediction needed below the one at 0")
		return 0, nil
	})
	require.NoError(t, err)
	assert.Zero(t, got)
	assert.Zero(t, atX)
}

func abs(x float64) float64 { return max(x, -x) }

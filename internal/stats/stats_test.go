package stats

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestMedian: the middle value, or the mean of the two middle ones, of
// values in any order, which it leaves in place.
func TestMedian(t *testing.T) {
	xs := []float64{5, 1, 3}
	assert.Equal(t, 3.0, Median(xs))
	assert.Equal(t, []float64{5, 1, 3}, xs)
	assert.Equal(t, 2.5, Median([]float64{4, 1, 3, 2}))
	assert.Equal(t, 7*time.Millisecond, Median([]time.Duration{9 * time.Millisecond, 7 * time.Millisecond, 1 * time.Millisecond}))
	assert.Equal(t, int64(5), Median([]int64{4, 6}))
	assert.Zero(t, Median([]float64(nil)))
}

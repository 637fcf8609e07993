package ntstore

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFill fills windows of every length from 0 to 70 at both 4-byte
// alignments inside a larger slice, and a large one: every element of the
// window holds v, and no element outside it changed (a wrong tail,
// alignment step or block count fails it).
func TestFill(t *testing.T) {
	nan := float32(math.NaN())
	for _, n := range append(rangeTo(70), 1<<20+3) {
		for start := 0; start < 3; start++ {
			buf := make([]float32, n+start+5)
			for i := range buf {
				buf[i] = float32(i)
			}
			Fill(buf[start:start+n], nan)
			for i, v := range buf {
				inside := i >= start && i < start+n
				if inside && !math.IsNaN(float64(v)) || !inside && v != float32(i) {
					require.Failf(t, "wrong element", "n=%d start=%d: element %d is %g", n, start, i, v)
				}
			}
		}
	}
	Fill(nil, 1) // nothing to write
}

func rangeTo(n int) []int {
	s := make([]int, n+1)
	for i := range s {
		s[i] = i
	}
	return s
}

// BenchmarkFill is the cost of poisoning a 1M-element output.
func BenchmarkFill(b *testing.B) {
	buf := make([]float32, 1<<20)
	b.SetBytes(4 << 20)
	for b.Loop() {
		Fill(buf, 1)
	}
}

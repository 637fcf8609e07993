package ntstore

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFill fills windows of every length from 0 to 70 at three 4-byte
// offsets inside a larger slice, and a large one, with a value whose two
// halves of an 8-byte store differ from any neighbour's: every element of
// the window holds its exact bits, and no element outside it changed (a
// wrong tail, alignment step, block count or 8-byte pattern fails it).
func TestFill(t *testing.T) {
	const bits = 0xdeadbeef
	v := math.Float32frombits(bits)
	for _, n := range append(rangeTo(70), 1<<20+3) {
		for start := 0; start < 3; start++ {
			buf := make([]float32, n+start+5)
			for i := range buf {
				buf[i] = float32(i)
			}
			Fill(buf[start:start+n], v)
			for i, got := range buf {
				inside := i >= start && i < start+n
				if inside && math.Float32bits(got) != bits || !inside && got != float32(i) {
					require.Failf(t, "wrong element", "n=%d start=%d: element %d is %#x", n, start, i, math.Float32bits(got))
				}
			}
		}
	}
	Fill(nil, 1) // nothing to write
	nan := []float32{1, 2}
	Fill(nan, float32(math.NaN()))
	require.True(t, math.IsNaN(float64(nan[0])) && math.IsNaN(float64(nan[1])), "a NaN, as bench's poison writes it")
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

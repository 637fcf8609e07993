// Package stats holds the summary figures that overlap's benchmarks,
// calibration and commands compute alike, so that each is computed one
// way everywhere.
//
// # Concurrency
//
// The functions are pure: call them from any goroutine.
//
// # Memory
//
// Nothing is retained between calls; Median copies what it sorts.
package stats

import "slices"

// Median is the middle value of xs, or the mean of the two middle ones
// for an even count; 0 for none. xs is left as it was.
func Median[T ~int64 | ~float64](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

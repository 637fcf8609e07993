package calibrate

import (
	"strconv"

	"github.com/purecuda/overlap/internal/stats"
	"github.com/purecuda/overlap/internal/units"
)

// median is stats.Median.
func median[T ~int64 | ~float64](xs []T) T { return stats.Median(xs) }

// bytesText writes a byte count as "4.0 MiB", "256.0 KiB" or "12 B".
func bytesText(b int64) string { return units.Bytes(b) }

// elemsText writes an element count as "16M" or "64K" where it is a whole
// number of them, else in digits.
func elemsText(n int) string {
	for _, u := range [...]struct {
		shift uint
		unit  string
	}{{20, "M"}, {10, "K"}} {
		if n >= 1<<u.shift && n%(1<<u.shift) == 0 {
			return strconv.Itoa(n>>u.shift) + u.unit
		}
	}
	return strconv.Itoa(n)
}

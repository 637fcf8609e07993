package bench

import (
	"fmt"
	"strconv"
	"time"

	"github.com/purecuda/overlap/internal/stats"
)

// Error is a benchmark's failure: the function that failed (Op, such as
// "SmallJobs") and why. Its text is "bench: Op: Err".
type Error struct {
	Op  string
	Err error
}

func (e *Error) Error() string { return "bench: " + e.Op + ": " + e.Err.Error() }

func (e *Error) Unwrap() error { return e.Err }

// say tells progress, when there is one, what runs next.
func say(progress func(string), format string, args ...any) {
	if progress != nil {
		progress(fmt.Sprintf(format, args...))
	}
}

// median is stats.Median.
func median[T ~int64 | ~float64](xs []T) T { return stats.Median(xs) }

// Elems writes an element count as overlap's tables do: 4K, 1M, or the
// number itself where it is no whole K or M.
func Elems(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.Itoa(n)
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// gbps is bytes over d in GB/s; 0 when d is not positive.
func gbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / d.Seconds() / 1e9
}

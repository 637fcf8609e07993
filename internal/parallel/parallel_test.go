package parallel_test

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/purecuda/overlap/internal/parallel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// withProcs runs the test body with GOMAXPROCS set to n.
func withProcs(t *testing.T, n int) {
	t.Helper()
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// pieces records the pieces For gives fn, sorted.
func pieces(n, minPiece int) [][2]int {
	var mu sync.Mutex
	var got [][2]int
	parallel.For(n, minPiece, func(lo, hi int) {
		mu.Lock()
		got = append(got, [2]int{lo, hi})
		mu.Unlock()
	})
	slices.SortFunc(got, func(a, b [2]int) int { return a[0] - b[0] })
	return got
}

func TestFor(t *testing.T) {
	withProcs(t, 4)
	cases := []struct {
		name        string
		n, minPiece int
		want        [][2]int
	}{
		{"uneven split", 10, 1, [][2]int{{0, 2}, {2, 5}, {5, 7}, {7, 10}}},
		{"n smaller than the workers", 3, 1, [][2]int{{0, 1}, {1, 2}, {2, 3}}},
		{"minPiece limits the pieces", 10, 4, [][2]int{{0, 5}, {5, 10}}},
		{"n smaller than minPiece", 5, 100, [][2]int{{0, 5}}},
		{"minPiece 0 counts as 1", 2, 0, [][2]int{{0, 1}, {1, 2}}},
		{"n = 0", 0, 1, nil},
		{"n < 0", -3, 1, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, pieces(c.n, c.minPiece))
			assert.Equal(t, len(c.want), parallel.Workers(c.n, c.minPiece))
		})
	}
}

// TestForCoversOnce checks every element is visited once for many sizes.
func TestForCoversOnce(t *testing.T) {
	withProcs(t, 7)
	for _, n := range []int{1, 6, 7, 8, 100, 1001} {
		seen := make([]atomic.Int32, n)
		parallel.For(n, 3, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			require.Equal(t, int32(1), seen[i].Load(), "n=%d: element %d", n, i)
		}
	}
}

func TestForOneWorkerRunsInline(t *testing.T) {
	withProcs(t, 1)
	assert.Equal(t, [][2]int{{0, 1000}}, pieces(1000, 1))
}

func TestForErr(t *testing.T) {
	withProcs(t, 4)
	var ran atomic.Int32
	err := parallel.ForErr(10, 1, func(lo, hi int) error {
		ran.Add(1)
		if lo == 2 || lo == 7 { // the second and fourth pieces
			return fmt.Errorf("piece [%d, %d) failed", lo, hi)
		}
		return nil
	})
	assert.EqualError(t, err, "piece [2, 5) failed", "the first failing piece in range order")
	assert.Equal(t, int32(4), ran.Load(), "every piece runs")

	assert.NoError(t, parallel.ForErr(10, 1, func(lo, hi int) error { return nil }))
	assert.NoError(t, parallel.ForErr(0, 1, func(lo, hi int) error { return errors.New("not called") }))
	single := errors.New("one piece")
	assert.ErrorIs(t, parallel.ForErr(3, 10, func(lo, hi int) error { return single }), single)
}

func TestBlocks(t *testing.T) {
	withProcs(t, 3)
	var mu sync.Mutex
	var got [][2]int
	var workers atomic.Int32
	parallel.Blocks(10, 3, func() func(lo, hi int) {
		workers.Add(1)
		return func(lo, hi int) {
			mu.Lock()
			got = append(got, [2]int{lo, hi})
			mu.Unlock()
		}
	})
	slices.SortFunc(got, func(a, b [2]int) int { return a[0] - b[0] })
	assert.Equal(t, [][2]int{{0, 3}, {3, 6}, {6, 9}, {9, 10}}, got)
	assert.Equal(t, int32(3), workers.Load(), "one worker per CPU when there are more blocks")

	workers.Store(0)
	parallel.Blocks(4, 3, func() func(lo, hi int) { workers.Add(1); return func(lo, hi int) {} })
	assert.Equal(t, int32(2), workers.Load(), "no more workers than blocks")

	parallel.Blocks(0, 3, func() func(lo, hi int) { t.Error("newWorker called for n = 0"); return nil })
}

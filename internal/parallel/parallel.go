// Package parallel splits a range of work across the CPUs: the one
// parallel for loop of overlap's CPU references, verifiers and stand-ins,
// so that each of them need not start and join goroutines by hand.
//
// # Concurrency
//
// [For], [ForErr] and [Blocks] return once every piece has run. The
// pieces run at once on their own goroutines, at most one per CPU
// (runtime.GOMAXPROCS(0)), so fn must be safe to call concurrently on
// disjoint ranges. A panic in fn is not recovered: it ends the process, as
// a panic on any goroutine does.
//
// # Memory
//
// Nothing is retained; each call starts at most GOMAXPROCS goroutines and
// allocates nothing else but ForErr's slice of errors.
package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Workers returns how many pieces For cuts n elements into: one per CPU,
// but no more than pieces of at least minPiece elements allow, and at
// least 1 for n > 0; 0 for n <= 0. A minPiece below 1 counts as 1.
func Workers(n, minPiece int) int {
	if n <= 0 {
		return 0
	}
	minPiece = max(minPiece, 1)
	return max(1, min(runtime.GOMAXPROCS(0), n/minPiece))
}

// For calls fn on contiguous pieces [lo, hi) that cover [0, n) once, each
// at least minPiece long (but when n itself is shorter), at most one per
// CPU ([Workers]), and returns when all have returned. Pieces differ in
// length by at most one. With one piece, fn runs on the calling
// goroutine; with n <= 0 it is not called.
func For(n, minPiece int, fn func(lo, hi int)) {
	split(n, Workers(n, minPiece), func(_, lo, hi int) { fn(lo, hi) })
}

// ForErr is For for pieces that can fail. Every piece runs; the error
// returned is that of the first piece, in the order of the range, that
// failed, so that the same input gives the same error however the pieces
// were scheduled. Nil when none failed or n <= 0.
func ForErr(n, minPiece int, fn func(lo, hi int) error) error {
	workers := Workers(n, minPiece)
	if workers == 0 {
		return nil
	}
	errs := make([]error, workers)
	split(n, workers, func(w, lo, hi int) { errs[w] = fn(lo, hi) })
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// split calls fn(w, lo, hi) for each of the workers pieces of [0, n), on
// a goroutine each unless there is only one.
func split(n, workers int, fn func(w, lo, hi int)) {
	switch workers {
	case 0:
		return
	case 1:
		fn(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	for w := range workers {
		// In int64: n*w overflows a 32-bit int from 2^27 elements on 16 CPUs.
		lo, hi := int(int64(n)*int64(w)/int64(workers)), int(int64(n)*int64(w+1)/int64(workers))
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn(w, lo, hi)
		}()
	}
	wg.Wait()
}

// Blocks runs fn over [0, n) in blocks of block elements (the last may be
// shorter), which workers take in turn, one worker per CPU but no more
// than there are blocks: for work whose cost varies along the range.
// newWorker is called once on each worker's goroutine and returns that
// worker's fn, so that each may keep scratch state of its own. With n <=
// 0 nothing is called. A block below 1 counts as 1.
func Blocks(n, block int, newWorker func() func(lo, hi int)) {
	if n <= 0 {
		return
	}
	block = max(block, 1)
	blocks := (n + block - 1) / block
	workers := min(runtime.GOMAXPROCS(0), blocks)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := newWorker()
			for {
				b := int(next.Add(1) - 1)
				if b >= blocks {
					return
				}
				work(b*block, min(n, (b+1)*block))
			}
		}()
	}
	wg.Wait()
}

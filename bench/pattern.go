package bench

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx/kernels"
)

// patternBlock is the elements that WritePattern and WritePatternAt fill
// and write at a time.
const patternBlock = 1 << 20

// WritePattern writes n little-endian float32 elements of overlap's
// standard input pattern (kernels.PatternValue), from pattern index
// offset, to w in order: an input file for a streaming run, as overlap
// gen writes it. Its error is a *[Error].
func WritePattern(w io.Writer, n, offset int) error {
	buf := make([]float32, min(n, patternBlock))
	for done := 0; done < n; {
		b := buf[:min(len(buf), n-done)]
		kernels.FillPattern(b, offset+done)
		if _, err := w.Write(driver.Bytes(b)); err != nil {
			return &Error{Op: "WritePattern", Err: err}
		}
		done += len(b)
	}
	return nil
}

// WritePatternAt writes what WritePattern does at the start of w, a
// file, in blocks that one goroutine per CPU fills and writes at their
// offsets. The first write that fails stops them all, and is the error,
// a *[Error] (each goroutine's, joined, said a full disk's error once a
// goroutine).
func WritePatternAt(w io.WriterAt, n, offset int) error {
	if w == nil {
		return &Error{Op: "WritePatternAt", Err: errors.New("nil writer")}
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	var failed atomic.Bool
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]float32, patternBlock)
			for !failed.Load() {
				lo := int(next.Add(patternBlock)) - patternBlock
				if lo >= n {
					return
				}
				b := buf[:min(patternBlock, n-lo)]
				for i := range b {
					b[i] = kernels.PatternValue(offset + lo + i)
				}
				if _, err := w.WriteAt(driver.Bytes(b), int64(lo)*4); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					failed.Store(true)
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return &Error{Op: "WritePatternAt", Err: first}
	}
	return nil
}

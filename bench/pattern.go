package bench

import (
	"context"
	"errors"
	"fmt"
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
// gen writes it. It looks at ctx (nil: never ends) before each block of
// 4 MiB, and stops with its error once it ends. Its error is a *[Error].
func WritePattern(ctx context.Context, w io.Writer, n, offset int) error {
	if err := checkPatternArgs(w == nil, n, offset); err != nil {
		return &Error{Op: "WritePattern", Err: err}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	buf := make([]float32, min(n, patternBlock))
	for done := 0; done < n; {
		if err := ctx.Err(); err != nil {
			return &Error{Op: "WritePattern", Err: err}
		}
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
// goroutine); so does ctx's end (nil: never ends), which each goroutine
// looks at before each block. What was written stays: the caller decides
// whether a part of the pattern is worth keeping.
func WritePatternAt(ctx context.Context, w io.WriterAt, n, offset int) error {
	if err := checkPatternArgs(w == nil, n, offset); err != nil {
		return &Error{Op: "WritePatternAt", Err: err}
	}
	if ctx == nil {
		ctx = context.Background()
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
				err := ctx.Err()
				if err == nil {
					_, err = w.WriteAt(driver.Bytes(b), int64(lo)*4)
				}
				if err != nil {
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

// checkPatternArgs refuses a nil writer and a negative count or offset,
// which would otherwise panic (a nil interface's Write, a negative make).
func checkPatternArgs(nilWriter bool, n, offset int) error {
	switch {
	case nilWriter:
		return errors.New("nil writer")
	case n < 0:
		return fmt.Errorf("%d elements: negative", n)
	case offset < 0:
		return fmt.Errorf("pattern offset %d: negative", offset)
	}
	return nil
}

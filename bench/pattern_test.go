package bench

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type failWriter struct{}

func (failWriter) Write([]byte) (int, error)          { return 0, errors.New("disk full") }
func (failWriter) WriteAt([]byte, int64) (int, error) { return 0, errors.New("disk full") }

// TestWritePattern: in order and at offsets, over more than one block,
// both write the pattern from the offset given; a failing writer's error
// is returned.
func TestWritePattern(t *testing.T) {
	n, offset := 2*patternBlock+5, 7
	want := make([]float32, n)
	for i := range want {
		want[i] = kernels.PatternValue(offset + i)
	}
	var b bytes.Buffer
	require.NoError(t, WritePattern(context.Background(), &b, n, offset))
	assert.True(t, bytes.Equal(driver.Bytes(want), b.Bytes()), "in order")
	path := filepath.Join(t.TempDir(), "in.f32")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, WritePatternAt(context.Background(), f, n, offset))
	require.NoError(t, f.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(driver.Bytes(want), got), "at offsets")

	assert.EqualError(t, WritePattern(context.Background(), failWriter{}, 3, 0), "bench: WritePattern: disk full")
	assert.EqualError(t, WritePatternAt(context.Background(), failWriter{}, 3, 0), "bench: WritePatternAt: disk full")
	// Many blocks, one goroutine a CPU: the first failure, once (each
	// goroutine's error was joined, one line a goroutine).
	assert.EqualError(t, WritePatternAt(context.Background(), failWriter{}, 64*patternBlock, 0), "bench: WritePatternAt: disk full")
	assert.EqualError(t, WritePatternAt(context.Background(), nil, 3, 0), "bench: WritePatternAt: nil writer")
	assert.EqualError(t, WritePattern(context.Background(), nil, 3, 0), "bench: WritePattern: nil writer", "it panicked")
	assert.EqualError(t, WritePattern(context.Background(), &b, -1, 0), "bench: WritePattern: -1 elements: negative", "it panicked in make")
	assert.EqualError(t, WritePatternAt(context.Background(), failWriter{}, 3, -2), "bench: WritePatternAt: pattern offset -2: negative")
	assert.NoError(t, WritePattern(context.Background(), failWriter{}, 0, 0), "nothing to write")
}

// countingWriterAt counts its writes and cancels a context at the one of
// index at: a signal arriving while gen writes.
type countingWriterAt struct {
	mu     sync.Mutex
	writes int
	at     int
	cancel context.CancelFunc
}

func (c *countingWriterAt) WriteAt(p []byte, _ int64) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	if c.writes == c.at {
		c.cancel()
	}
	return len(p), nil
}

// TestWritePatternStopsWithItsContext: once the context ends, no block is
// written past the ones already under way (at most one a goroutine), and
// the error is the context's; an ended context writes nothing.
func TestWritePatternStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	w := &countingWriterAt{at: 3, cancel: cancel}
	err := WritePatternAt(ctx, w, 64*patternBlock, 0)
	require.ErrorIs(t, err, context.Canceled)
	assert.EqualError(t, err, "bench: WritePatternAt: context canceled")
	assert.LessOrEqual(t, w.writes, 3+runtime.GOMAXPROCS(0)-1, "blocks written after the cancel: only those already past their look at ctx")
	var b bytes.Buffer
	err = WritePattern(ctx, &b, 3*patternBlock, 0)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, b.Len(), "an ended context writes nothing")
}

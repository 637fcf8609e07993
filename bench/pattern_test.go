package bench

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
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
	require.NoError(t, WritePattern(&b, n, offset))
	assert.True(t, bytes.Equal(driver.Bytes(want), b.Bytes()), "in order")
	path := filepath.Join(t.TempDir(), "in.f32")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, WritePatternAt(f, n, offset))
	require.NoError(t, f.Close())
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(driver.Bytes(want), got), "at offsets")

	assert.EqualError(t, WritePattern(failWriter{}, 3, 0), "bench: WritePattern: disk full")
	assert.EqualError(t, WritePatternAt(failWriter{}, 3, 0), "bench: WritePatternAt: disk full")
	// Many blocks, one goroutine a CPU: the first failure, once (each
	// goroutine's error was joined, one line a goroutine).
	assert.EqualError(t, WritePatternAt(failWriter{}, 64*patternBlock, 0), "bench: WritePatternAt: disk full")
	assert.EqualError(t, WritePatternAt(nil, 3, 0), "bench: WritePatternAt: nil writer")
	assert.NoError(t, WritePattern(failWriter{}, 0, 0), "nothing to write")
}

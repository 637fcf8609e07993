//go:build linux

package pipeline_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStreamOnFakeDriver runs streaming runs through the GPU backend and
// package driver against the fake driver (internal/fakecuda), which
// checks every handle and every host range it is given: the slots that
// pread fills and pwrite empties must be live pinned memory, the events
// the readers and writers wait on (from their own goroutines) live
// events, and nothing may be left alive after Close. The fake does not
// compute, so the bytes are not checked here; the H200 tests check them.
// Issue 13.
func TestStreamOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctx := gputest.FakeContext(t, 0)
	f.ClosedBeforeContexts(t)
	mods := new(kernels.Modules)
	const chunk = 1 << 14
	n := 5*chunk + 123
	x := make([]float32, n)
	kernels.FillPattern(x, 0)
	path := filepath.Join(t.TempDir(), "in.f32")
	require.NoError(t, os.WriteFile(path, driver.Bytes(x), 0o644))

	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = chunk, 3, 2
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	require.NoError(t, err)
	k := seedKernel(mods, 1)

	t.Run("file to file", func(t *testing.T) {
		in, err := os.Open(path)
		require.NoError(t, err)
		defer in.Close()
		outPath := filepath.Join(t.TempDir(), "out.f32")
		out, err := os.Create(outPath)
		require.NoError(t, err)
		defer out.Close()
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{in}, Outputs: []io.Writer{out}, Kernel: k, Readers: 4, Writers: 3, PieceBytes: 16 << 10})
		require.NoError(t, err)
		assert.Equal(t, int64(n), rep.N)
		assert.Equal(t, 6, rep.Chunks)
		assert.Equal(t, []int64{int64(4 * n)}, rep.OutputBytes)
		st, err := os.Stat(outPath)
		require.NoError(t, err)
		assert.Equal(t, int64(4*n), st.Size())
	})
	t.Run("pipe to buffer, then a bad tail", func(t *testing.T) {
		var out bytes.Buffer
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{struct{ io.Reader }{bytes.NewReader(driver.Bytes(x))}},
			Outputs: []io.Writer{&out}, Kernel: k})
		require.NoError(t, err)
		assert.Equal(t, 4*n, out.Len())
		assert.Zero(t, rep.Readers)
		out.Reset()
		rep, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{bytes.NewReader(append(driver.Bytes(x), 1))},
			Outputs: []io.Writer{&out}, Kernel: k})
		assert.ErrorIs(t, err, pipeline.ErrPartialElement)
		assert.Equal(t, 4*5*chunk, out.Len(), "the whole chunks before the bad one")
		assert.Equal(t, int64(4*5*chunk), rep.OutputBytes[0])
	})
	t.Run("batches", func(t *testing.T) {
		lens := []int{3, chunk, 0, 2*chunk + 1}
		i := 0
		for out, err := range pipeline.Batches[float32, float32](context.Background(), p, k, func(yield func([]float32) bool) {
			for _, l := range lens {
				if !yield(x[:l]) {
					return
				}
			}
		}) {
			require.NoError(t, err)
			assert.Len(t, out, lens[i])
			i++
		}
		assert.Equal(t, len(lens), i)
	})
	require.NoError(t, p.Close())
	require.NoError(t, mods.Close())
}

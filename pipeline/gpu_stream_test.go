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

// The streaming run on a GPU (issue 13). Each output is verified element
// by element against the CPU reference, from what was written.

// gpuStreamFile writes n pattern elements to a file and returns its path
// and contents.
func gpuStreamFile(t *testing.T, n int) (string, []float32) {
	x := make([]float32, n)
	kernels.FillPattern(x, 0)
	path := filepath.Join(t.TempDir(), "in.f32")
	require.NoError(t, os.WriteFile(path, driver.Bytes(x), 0o644))
	return path, x
}

// TestGPUStreamFileToFile streams a file that is not a whole number of
// chunks, file to file (pread and pwrite), pipe to buffer (in order),
// and, where the file system allows it, from O_DIRECT and to an O_DIRECT
// output, preallocated.
func TestGPUStreamFileToFile(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	const chunk = 1 << 20
	n := 9*chunk + 12345
	path, x := gpuStreamFile(t, n)
	objs0 := ctx.OpenObjects()
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = chunk
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	require.NoError(t, err)
	k := seedKernel(ks, 100)
	verifyOut := func(t *testing.T, got []byte) {
		t.Helper()
		require.Len(t, got, 4*n)
		require.NoError(t, verifySeed(x, driver.View[float32](got), 100))
	}

	t.Run("file to file", func(t *testing.T) {
		in, err := os.Open(path)
		require.NoError(t, err)
		defer in.Close()
		outPath := filepath.Join(t.TempDir(), "out.f32")
		out, err := os.Create(outPath)
		require.NoError(t, err)
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{in}, Outputs: []io.Writer{out}, Kernel: k, Readers: 8, Writers: 4})
		require.NoError(t, err)
		require.NoError(t, out.Close())
		assert.Equal(t, int64(n), rep.N)
		assert.Equal(t, 8, rep.Readers)
		assert.Equal(t, 4, rep.Writers)
		t.Logf("file to file: %v, read busy %v, write busy %v", rep.Elapsed, rep.Read, rep.Write)
		got, err := os.ReadFile(outPath)
		require.NoError(t, err)
		verifyOut(t, got)
	})
	t.Run("pipe to buffer", func(t *testing.T) {
		pr, pw := io.Pipe()
		go func() {
			f, err := os.Open(path)
			if err != nil {
				pw.CloseWithError(err)
				return
			}
			defer f.Close()
			_, err = io.Copy(pw, f)
			pw.CloseWithError(err)
		}()
		var out bytes.Buffer
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{pr}, Outputs: []io.Writer{&out}, Kernel: k})
		require.NoError(t, err)
		assert.Zero(t, rep.Readers, "a pipe is read in order")
		verifyOut(t, out.Bytes())
	})
	t.Run("O_DIRECT", func(t *testing.T) {
		in, err := pipeline.OpenDirect(path)
		if err != nil {
			t.Logf("O_DIRECT unsupported for %s: %v; only the buffered paths were tested", path, err)
			return
		}
		defer in.Close()
		var out bytes.Buffer
		_, err = p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{in}, Outputs: []io.Writer{&out}, Kernel: k})
		require.NoError(t, err)
		verifyOut(t, out.Bytes())
	})
	t.Run("O_DIRECT output, preallocated", func(t *testing.T) {
		// n is not a whole number of pages: the last piece is written
		// with O_DIRECT cleared, and the file ends exactly at 4n bytes.
		outPath := filepath.Join(t.TempDir(), "out.f32")
		out, err := pipeline.CreateDirect(outPath)
		if err != nil {
			t.Logf("O_DIRECT unsupported for %s: %v; only the buffered paths were tested", outPath, err)
			return
		}
		defer out.Close()
		in, err := os.Open(path)
		require.NoError(t, err)
		defer in.Close()
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{in}, Outputs: []io.Writer{out}, Kernel: k,
			Readers: 8, Writers: 4, Preallocate: []int64{4 * int64(n)}})
		require.NoError(t, err)
		assert.Equal(t, []int64{4 * int64(n)}, rep.OutputBytes)
		t.Logf("file to O_DIRECT file: %v, write busy %v, preallocated %v", rep.Elapsed, rep.Write, rep.Preallocated)
		got, err := os.ReadFile(outPath)
		require.NoError(t, err)
		verifyOut(t, got)
	})
	t.Run("partial element", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.f32")
		require.NoError(t, os.WriteFile(bad, append(driver.Bytes(x[:3*chunk+7]), 1), 0o644))
		in, err := os.Open(bad)
		require.NoError(t, err)
		defer in.Close()
		var out bytes.Buffer
		rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Inputs: []io.Reader{in}, Outputs: []io.Writer{&out}, Kernel: k})
		var se *pipeline.StreamError
		require.ErrorAs(t, err, &se)
		assert.ErrorIs(t, err, pipeline.ErrPartialElement)
		assert.Equal(t, int64(4*(3*chunk+7)), se.Offset)
		assert.Equal(t, int64(4*3*chunk), rep.OutputBytes[0], "the whole chunks before the bad one")
		require.Equal(t, 4*3*chunk, out.Len())
		require.NoError(t, verifySeed(x[:3*chunk], driver.View[float32](out.Bytes()), 100))
	})
	require.NoError(t, p.Close())
	assert.Equal(t, objs0, ctx.OpenObjects(), "the pipeline closed everything it opened")
}

// TestGPUBatches feeds batches of uneven sizes and checks each result.
func TestGPUBatches(t *testing.T) {
	ctx := gputest.Context(t)
	ks := gpuKernels(t, ctx)
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = 1 << 20
	p, err := pipeline.New(pipeline.GPU(ctx), cfg)
	require.NoError(t, err)
	defer p.Close()
	lens := []int{0, 1, 1 << 20, 3<<20 + 1, 1000, 0, 5 << 20}
	gen := func(yield func([]float32) bool) {
		off := 0
		for _, n := range lens {
			b := make([]float32, n)
			kernels.FillPattern(b, off)
			off += n
			if !yield(b) {
				return
			}
		}
	}
	i, off := 0, 0
	for out, err := range pipeline.Batches[float32, float32](context.Background(), p, seedKernel(ks, 100), gen) {
		require.NoError(t, err)
		require.Len(t, out, lens[i])
		in := make([]float32, lens[i])
		kernels.FillPattern(in, off)
		require.NoError(t, verifySeed(in, out, 100), "batch %d", i)
		off += lens[i]
		i++
	}
	assert.Equal(t, len(lens), i)
}

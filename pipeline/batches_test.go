package pipeline_test

import (
	"context"
	"iter"
	"runtime"
	"testing"
	"time"

	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// loader yields batches of the given lengths, numbered through the
// pattern, from one buffer that it overwrites after each yield, as a
// loader that recycles its memory does.
func loader(lens []int, stopped *bool) iter.Seq[[]float32] {
	return func(yield func([]float32) bool) {
		buf := make([]float32, 0, 256)
		off := 0
		for _, n := range lens {
			buf = buf[:n]
			kernels.FillPattern(buf, off)
			off += n
			if !yield(buf) {
				*stopped = true
				return
			}
			for i := range buf {
				buf[i] = -99 // the pipeline must have copied it already
			}
		}
	}
}

func seedOf(n, off int) []float32 {
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, off)
	kernels.SeedCPU(out, in, streamIters)
	return out
}

// TestBatches feeds batches of awkward lengths (empty ones, ones smaller
// and larger than a chunk, chunks spanning batches) and checks that each
// result arrives in order with exactly its batch's outputs. Issue 13.
func TestBatches(t *testing.T) {
	lens := []int{0, 5, 64, 1, 0, 200, 63, 16, 0}
	p, _ := streamPipeline(t, 11, 16, 1)
	var stopped bool
	i, off := 0, 0
	for out, err := range pipeline.Batches[float32, float32](context.Background(), p, seedKernel(nil, streamIters), loader(lens, &stopped)) {
		require.NoError(t, err)
		require.Less(t, i, len(lens), "more results than batches")
		require.Len(t, out, lens[i], "batch %d", i)
		assert.Equal(t, seedOf(lens[i], off), out, "batch %d", i)
		off += lens[i]
		i++
	}
	assert.Equal(t, len(lens), i, "one result per batch")
	assert.False(t, stopped)
}

// TestBatchesStopEarly breaks out of the results: the run is cancelled
// and drained, the loader is stopped, and nothing is left running.
func TestBatchesStopEarly(t *testing.T) {
	p, dev := streamPipeline(t, 12, 16, 1)
	before := runtime.NumGoroutine()
	live := dev.Live()
	lens := make([]int, 100)
	for i := range lens {
		lens[i] = 37
	}
	var stopped bool
	got := 0
	for out, err := range pipeline.Batches[float32, float32](context.Background(), p, seedKernel(nil, streamIters), loader(lens, &stopped)) {
		require.NoError(t, err)
		assert.Equal(t, seedOf(37, 37*got), out)
		got++
		if got == 3 {
			break
		}
	}
	assert.Equal(t, 3, got)
	assert.True(t, stopped, "the loader saw its yield return false")
	assert.Equal(t, live, dev.Live())
	settle(before)
	assert.LessOrEqual(t, runtime.NumGoroutine(), before+2)
	// The pipeline runs again afterwards.
	n := 0
	for _, err := range pipeline.Batches[float32, float32](context.Background(), p, seedKernel(nil, streamIters), loader([]int{10, 20}, &stopped)) {
		require.NoError(t, err)
		n++
	}
	assert.Equal(t, 2, n)
}

// TestBatchesCancel ends the sequence with ctx's error after the results
// already written.
func TestBatchesCancel(t *testing.T) {
	p, _ := streamPipeline(t, 13, 16, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	endless := func(yield func([]float32) bool) {
		b := make([]float32, 16)
		for off := 0; ; off += 16 {
			kernels.FillPattern(b, off)
			if !yield(b) {
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	// Cancelled once three results are in, rather than after a wall-clock
	// delay, which a loaded machine could spend before the first result.
	var last error
	results := 0
	for out, err := range pipeline.Batches[float32, float32](ctx, p, seedKernel(nil, streamIters), endless) {
		if err != nil {
			last = err
			continue
		}
		require.Nil(t, last, "no result after the error")
		assert.Equal(t, seedOf(16, 16*results), out)
		results++
		if results == 3 {
			cancel()
		}
	}
	assert.ErrorIs(t, last, context.Canceled)
	assert.GreaterOrEqual(t, results, 3, "results came before the cancellation")
}

// TestBatchesWrongShape needs one input and one output of the element
// types' sizes.
func TestBatchesWrongShape(t *testing.T) {
	p, _ := streamPipeline(t, 14, 16, 2)
	var stopped bool
	for _, err := range pipeline.Batches[float32, float32](context.Background(), p, saxpyKernel(nil, 1), loader([]int{3}, &stopped)) {
		assert.EqualError(t, err, "pipeline: Batches needs a pipeline of one input of 4-byte values or rows of them and one output of 4-byte values or rows of them; this one has inputs [4 4] and outputs [4]")
	}
	for _, err := range pipeline.Batches[float64, float32](context.Background(), p, saxpyKernel(nil, 1), nil) {
		assert.Error(t, err)
	}
}

// TestBatchesPanicInLoop: a panic in the caller's loop body still cancels
// the run, which ends without anyone reading its results, and leaves the
// pipeline usable.
func TestBatchesPanicInLoop(t *testing.T) {
	p, _ := streamPipeline(t, 15, 16, 1)
	lens := make([]int, 50)
	for i := range lens {
		lens[i] = 40
	}
	var stopped bool
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		for range pipeline.Batches[float32, float32](context.Background(), p, seedKernel(nil, streamIters), loader(lens, &stopped)) {
			panic("boom")
		}
	}()
	n := 0
	for out, err := range pipeline.Batches[float32, float32](context.Background(), p, seedKernel(nil, streamIters), loader([]int{7}, &stopped)) {
		require.NoError(t, err)
		assert.Equal(t, seedOf(7, 0), out)
		n++
	}
	assert.Equal(t, 1, n, "the pipeline runs again once the cancelled run has drained")
}

// TestBatchesOneByteElements runs batches of bytes, whose lengths put a
// chunk's end one element before a batch's end (the batch of 17 at 16 to
// 33, chunks of 16): a batch must be yielded only once its last byte is
// written, with exactly its own bytes. With 4-byte elements a batch is
// never one byte short, so only bytes show this (issue 28's mutation run:
// a batch handed over one byte early survived every other test).
func TestBatchesOneByteElements(t *testing.T) {
	dev := sim.New(28, 20*time.Microsecond)
	cfg := pipeline.Config{Inputs: []int{1}, Outputs: []int{1}, ChunkElems: 16, Slots: 3, ComputeStreams: 2}
	p, err := pipeline.New(dev, cfg)
	require.NoError(t, err)
	defer func() {
		require.NoError(t, p.Close())
		assert.Empty(t, dev.Hazards())
	}()
	not := &pipeline.Kernel{Name: "not", CPU: func(c pipeline.HostChunk) {
		for i, b := range c.Inputs[0] {
			c.Outputs[0][i] = ^b
		}
	}}
	lens := []int{15, 1, 17, 31, 2, 0, 16, 3, 1}
	next := byte(0)
	loader := func(yield func([]uint8) bool) {
		for _, n := range lens {
			b := make([]uint8, n)
			for i := range b {
				b[i] = next
				next++
			}
			if !yield(b) {
				return
			}
		}
	}
	i, want := 0, byte(0)
	for out, err := range pipeline.Batches[uint8, uint8](context.Background(), p, not, loader) {
		require.NoError(t, err)
		require.Less(t, i, len(lens), "more results than batches")
		require.Len(t, out, lens[i], "batch %d", i)
		for j, b := range out {
			require.Equal(t, ^want, b, "batch %d, element %d", i, j)
			want++
		}
		i++
	}
	assert.Equal(t, len(lens), i, "one result per batch")
}

package pipeline_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpFrontJobErrors: each mistake is one clear error before any work is
// issued. Issue 10: a []float64 ran in a float32 job, and a kernel without
// a CPU stand-in failed only at chunk 0 with "pipeline: chunk 0, compute:
// pipeline: sim: ...".
func TestUpFrontJobErrors(t *testing.T) {
	dev := sim.New(1, 0)
	p, err := pipeline.New(dev, pipeline.Float32Config(1, 1))
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, 100), make([]float32, 100)
	wide := make([]float64, 100)
	noCPU := &pipeline.Kernel{Name: "gpu-only"}
	cases := []struct {
		name string
		job  pipeline.Job
		want string
	}{
		{"float64 input", pipeline.Job{N: 100, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(wide)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}},
			"pipeline: input 0 is a slice of 8-byte elements, but the pipeline's Config says 4-byte elements"},
		{"float64 output", pipeline.Job{N: 50, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(wide)}},
			"pipeline: output 0 is a slice of 8-byte elements, but the pipeline's Config says 4-byte elements"},
		{"no CPU stand-in", pipeline.Job{N: 100, Kernel: noCPU, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}},
			`sim: kernel "gpu-only" has no CPU stand-in, so the simulator cannot run it`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := p.Run(context.Background(), tc.job)
			assert.Nil(t, rep)
			assert.EqualError(t, err, tc.want)
			_, err = p.StageTimes(context.Background(), tc.job)
			assert.EqualError(t, err, tc.want)
			for _, kind := range []string{"copy", "launch", "record", "wait"} {
				assert.Zero(t, dev.Count(kind), "%s: nothing was issued", kind)
			}
		})
	}
	_, err = pipeline.Synchronous(context.Background(), dev, pipeline.Float32Config(1, 1), pipeline.Job{N: 100, Kernel: noCPU, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	assert.EqualError(t, err, `sim: kernel "gpu-only" has no CPU stand-in, so the simulator cannot run it`)
	// Raw bytes carry no element size and are taken as they are.
	_, err = p.Run(context.Background(), pipeline.Job{N: 100, Kernel: seedKernel(nil, 1), Inputs: []pipeline.Buffer{{Data: make([]byte, 400)}}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	assert.NoError(t, err)
}

// TestStageErrorSaysPipelineOnce: a wrapped engine error does not repeat
// the package word.
func TestStageErrorSaysPipelineOnce(t *testing.T) {
	err := &pipeline.StageError{Chunk: 3, Stage: pipeline.StageCompute, Err: pipeline.ErrRegistered}
	assert.EqualError(t, err, "pipeline: chunk 3, compute: memory is already registered")
	assert.ErrorIs(t, err, pipeline.ErrRegistered)
	err = &pipeline.StageError{Chunk: -1, Stage: pipeline.StageSetup, Err: assert.AnError}
	assert.EqualError(t, err, "pipeline: setup: "+assert.AnError.Error())
}

func TestFunctionOnRefusesOtherContexts(t *testing.T) {
	a, b := new(driver.Context), new(driver.Context)
	fn := new(driver.Function)
	resolve := pipeline.FunctionOn(a, fn)
	got, err := resolve(a)
	require.NoError(t, err)
	assert.Same(t, fn, got)
	got, err = resolve(b)
	assert.Nil(t, got)
	assert.EqualError(t, err, "pipeline: kernel function was loaded on another context")
}

// TestChunkOffsets: each chunk's Offset is where its elements start in the
// job, in every host mode, and the last chunk is short. Issue 10: no test
// checked Chunk.Offset.
func TestChunkOffsets(t *testing.T) {
	const n, chunk = 1000, 96 // 11 chunks, the last of 40
	for _, mode := range []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered, pipeline.HostPinned} {
		t.Run(mode.String(), func(t *testing.T) {
			dev := sim.New(3, time.Microsecond)
			cfg := pipeline.Float32Config(1, 1)
			cfg.ChunkElems, cfg.Host = chunk, mode
			p, err := pipeline.New(dev, cfg)
			require.NoError(t, err)
			defer p.Close()
			var mu sync.Mutex
			seen := map[int][2]int{} // index -> offset, n
			k := &pipeline.Kernel{Name: "where", CPU: func(c pipeline.HostChunk) {
				mu.Lock()
				seen[c.Index] = [2]int{c.Offset, c.N}
				mu.Unlock()
				out, in := driver.View[float32](c.Outputs[0]), driver.View[float32](c.Inputs[0])
				for j := range out {
					out[j] = in[j] + float32(c.Offset+j)
				}
			}}
			in, out := make([]float32, n), make([]float32, n)
			for i := range in {
				in[i] = 0.5
			}
			job := pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
			if mode == pipeline.HostPinned {
				hin, err := dev.AllocPinned(n * 4)
				require.NoError(t, err)
				defer hin.Close()
				hout, err := dev.AllocPinned(n * 4)
				require.NoError(t, err)
				defer hout.Close()
				copy(driver.View[float32](hin.Bytes()), in)
				job.Inputs, job.Outputs = []pipeline.Buffer{pipeline.Pinned(hin)}, []pipeline.Buffer{pipeline.Pinned(hout)}
				out = driver.View[float32](hout.Bytes())
			}
			rep, err := p.Run(context.Background(), job)
			require.NoError(t, err)
			assert.Equal(t, 11, rep.Chunks)
			for i := range out {
				require.Equal(t, float32(i)+0.5, out[i], "element %d", i)
			}
			require.Len(t, seen, 11)
			for c := 0; c < 11; c++ {
				want := [2]int{c * chunk, min(chunk, n-c*chunk)}
				assert.Equal(t, want, seen[c], "chunk %d: offset and length", c)
			}
			assert.Empty(t, dev.Hazards())
		})
	}
}

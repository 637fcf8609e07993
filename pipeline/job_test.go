package pipeline_test

import (
	"context"
	"testing"

	"github.com/purecuda/overlap/driver"
	. "github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestUpFrontJobErrors: each mistake is one clear error before any work is
// issued. Issue 10: a []float64 ran in a float32 job, and a kernel without
// a CPU stand-in failed only at chunk 0 with "pipeline: chunk 0, compute:
// pipeline: sim: ...".
func TestUpFrontJobErrors(t *testing.T) {
	sim := NewSim(1, 0)
	p, err := New(sim, Float32Config(1, 1))
	require.NoError(t, err)
	defer p.Close()
	in, out := make([]float32, 100), make([]float32, 100)
	wide := make([]float64, 100)
	noCPU := &Kernel{Name: "gpu-only"}
	cases := []struct {
		name string
		job  Job
		want string
	}{
		{"float64 input", Job{N: 100, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(wide)}, Outputs: []Buffer{Slice(out)}},
			"pipeline: input 0 is a slice of 8-byte elements, but the pipeline's Config says 4-byte elements"},
		{"float64 output", Job{N: 50, Kernel: seedKernel(nil, 1), Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(wide)}},
			"pipeline: output 0 is a slice of 8-byte elements, but the pipeline's Config says 4-byte elements"},
		{"no CPU stand-in", Job{N: 100, Kernel: noCPU, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}},
			`pipeline: sim: kernel "gpu-only" has no CPU stand-in, so the simulator cannot run it`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := p.Run(context.Background(), tc.job)
			assert.Nil(t, rep)
			assert.EqualError(t, err, tc.want)
			_, err = p.StageTimes(context.Background(), tc.job)
			assert.EqualError(t, err, tc.want)
			for _, kind := range []string{"copy", "launch", "record", "wait"} {
				assert.Zero(t, sim.Count(kind), "%s: nothing was issued", kind)
			}
		})
	}
	_, err = Synchronous(context.Background(), sim, Float32Config(1, 1), Job{N: 100, Kernel: noCPU, Inputs: []Buffer{Slice(in)}, Outputs: []Buffer{Slice(out)}})
	assert.EqualError(t, err, `pipeline: sim: kernel "gpu-only" has no CPU stand-in, so the simulator cannot run it`)
	// Raw bytes carry no element size and are taken as they are.
	_, err = p.Run(context.Background(), Job{N: 100, Kernel: seedKernel(nil, 1), Inputs: []Buffer{{Data: make([]byte, 400)}}, Outputs: []Buffer{Slice(out)}})
	assert.NoError(t, err)
}

// TestStageErrorSaysPipelineOnce: a wrapped engine error does not repeat
// the package word.
func TestStageErrorSaysPipelineOnce(t *testing.T) {
	err := &StageError{Chunk: 3, Stage: StageCompute, Err: ErrRegistered}
	assert.EqualError(t, err, "pipeline: chunk 3, compute: memory is already registered")
	assert.ErrorIs(t, err, ErrRegistered)
	err = &StageError{Chunk: -1, Stage: StageSetup, Err: assert.AnError}
	assert.EqualError(t, err, "pipeline: setup: "+assert.AnError.Error())
}

func TestFunctionOnRefusesOtherContexts(t *testing.T) {
	a, b := new(driver.Context), new(driver.Context)
	fn := new(driver.Function)
	resolve := FunctionOn(a, fn)
	got, err := resolve(a)
	require.NoError(t, err)
	assert.Same(t, fn, got)
	got, err = resolve(b)
	assert.Nil(t, got)
	assert.EqualError(t, err, "pipeline: kernel function was loaded on another context")
}

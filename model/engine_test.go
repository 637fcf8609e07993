package model

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file run a model's kernel through the engine on the
// simulator: its steps, resident parameters and scratch buffers.

// TestEngineRunsTheModel runs a model of three layers over rows that end
// in a partial chunk, on one and on two simulated devices, and checks
// every output value.
func TestEngineRunsTheModel(t *testing.T) {
	for _, devices := range []int{1, 2} {
		m, err := Random([]int{20, 48, 33, 6}, GELU, 4)
		require.NoError(t, err)
		k, err := m.Kernel(KernelOptions{Precision: TF32})
		require.NoError(t, err)
		cfg, err := m.Config(128)
		require.NoError(t, err)
		host := sim.NewHost(sim.HostOptions{Seed: 1})
		var bs []pipeline.Backend
		for range devices {
			bs = append(bs, host.NewDevice(sim.BuiltinProfile()))
		}
		g, err := pipeline.NewGroup(bs, cfg)
		require.NoError(t, err)
		defer g.Close()
		const rows = 1000 + 37
		x := pattern(rows, m.In())
		y := make([]float32, rows*m.Out())
		rep, err := g.Run(context.Background(), pipeline.Job{N: rows, Kernel: k,
			Inputs: []pipeline.Buffer{pipeline.Rows(x, m.In())}, Outputs: []pipeline.Buffer{pipeline.Rows(y, m.Out())}})
		require.NoError(t, err)
		assert.Equal(t, 9, rep.Chunks)
		require.NoError(t, m.Verify(x, y, VerifyOptions{Precision: TF32}))
		want, err := m.Forward32(x)
		require.NoError(t, err)
		assert.Equal(t, want, y, "the simulator computes the stand-ins")
	}
}

// TestEngineStreamsTheModel streams rows through the model with
// RunStream, reporting progress, and checks every output value.
func TestEngineStreamsTheModel(t *testing.T) {
	m, err := Random([]int{8, 16, 4}, ReLU, 2)
	require.NoError(t, err)
	k, err := m.Kernel(KernelOptions{})
	require.NoError(t, err)
	cfg, err := m.Config(256)
	require.NoError(t, err)
	p, err := pipeline.New(sim.New(1, 0), cfg)
	require.NoError(t, err)
	defer p.Close()
	const rows = 5000
	x := pattern(rows, 8)
	var out bytes.Buffer
	var last pipeline.Progress
	rep, err := p.RunStream(context.Background(), pipeline.StreamJob{Kernel: k,
		Inputs: []io.Reader{bytes.NewReader(driver.Bytes(x))}, Outputs: []io.Writer{&out},
		Progress: func(pr pipeline.Progress) { last = pr }})
	require.NoError(t, err)
	assert.Equal(t, int64(rows), rep.N)
	assert.Equal(t, int64(rows), last.ElemsWritten)
	assert.Equal(t, int64(rows*16), last.BytesWritten)
	y := driver.View[float32](out.Bytes())
	require.NoError(t, m.Verify(x, y, VerifyOptions{}))
}

// TestEngineRefusesRowsOfAnotherWidth: a job's rows must be the model's.
func TestEngineRefusesRowsOfAnotherWidth(t *testing.T) {
	m, err := Random([]int{8, 4}, ReLU, 2)
	require.NoError(t, err)
	k, err := m.Kernel(KernelOptions{})
	require.NoError(t, err)
	cfg, err := m.Config(64)
	require.NoError(t, err)
	p, err := pipeline.New(sim.New(1, 0), cfg)
	require.NoError(t, err)
	defer p.Close()
	x := make([]float32, 100*9)
	y := make([]float32, 100*4)
	_, err = p.Run(context.Background(), pipeline.Job{N: 100, Kernel: k,
		Inputs: []pipeline.Buffer{pipeline.Rows(x, 9)}, Outputs: []pipeline.Buffer{pipeline.Rows(y, 4)}})
	assert.Error(t, err, "rows of 9 values for a model of 8 inputs")
}

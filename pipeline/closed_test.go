package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestErrClosedMatchesDriver guards issue 28: the package had two
// unrelated sentinels for a closed object, driver.ErrClosed and its own.
// A closed pipeline's or group's error, alone or wrapped, matches both;
// the text stays the pipeline's own. A driver.ErrClosed is not a
// pipeline.ErrClosed: the pipeline is not closed when a driver object
// under it is.
func TestErrClosedMatchesDriver(t *testing.T) {
	p, err := pipeline.New(sim.New(1, 0), pipeline.Float32Config(1, 1))
	require.NoError(t, err)
	require.NoError(t, p.Close())
	_, runErr := p.Run(context.Background(), pipeline.Job{N: 1, Kernel: seedKernel(nil, 1),
		Inputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 1))}, Outputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 1))}})
	h := sim.NewHost(sim.HostOptions{})
	g, err := pipeline.NewGroup([]pipeline.Backend{h.NewDevice(sim.BuiltinProfile()), h.NewDevice(sim.BuiltinProfile())}, pipeline.Float32Config(1, 1))
	require.NoError(t, err)
	require.NoError(t, g.Close())
	_, groupErr := g.Run(context.Background(), pipeline.Job{N: 1, Kernel: seedKernel(nil, 1),
		Inputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 1))}, Outputs: []pipeline.Buffer{pipeline.Slice(make([]float32, 1))}})
	for _, tc := range []struct {
		name string
		err  error
		text string
	}{
		{"the sentinel", pipeline.ErrClosed, "pipeline: closed"},
		{"Run after Close", runErr, "pipeline: closed"},
		{"Group.Run after Close", groupErr, "pipeline: closed"},
		{"wrapped", fmt.Errorf("%w after a failure: boom", pipeline.ErrClosed), "pipeline: closed after a failure: boom"},
		{"in a StageError", &pipeline.StageError{Chunk: -1, Stage: pipeline.StageSetup, Err: pipeline.ErrClosed}, "pipeline: setup: closed"},
	} {
		assert.EqualError(t, tc.err, tc.text, tc.name)
		assert.ErrorIs(t, tc.err, pipeline.ErrClosed, tc.name)
		assert.ErrorIs(t, tc.err, driver.ErrClosed, tc.name)
	}
	assert.False(t, errors.Is(driver.ErrClosed, pipeline.ErrClosed))
	assert.False(t, errors.Is(pipeline.ErrClosed, driver.ErrInvalidArgument))
}

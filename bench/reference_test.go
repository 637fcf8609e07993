package bench

import (
	"context"
	"errors"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sample is the reference pipeline's output on the H200 (2026-11-29).
const sample = `stage chunk=1048576 h2d_ms=10.198 compute_ms=14.387 d2h_ms=9.997 bound_ms=14.387
pipeline chunk=1048576 slots=2 elems=134217728 iters=100 best_ms=14.565 mean_ms=14.600 mismatches=0
pipeline chunk=4194304 slots=2 elems=134217728 iters=100 best_ms=14.297 mean_ms=14.299 mismatches=0
`

func TestParsePipelineOutput(t *testing.T) {
	res, err := ParsePipelineOutput([]byte(sample))
	require.NoError(t, err)
	require.Len(t, res, 2)
	assert.Equal(t, 4194304, res[1].Chunk)
	assert.Equal(t, 2, res[1].Slots)
	assert.Equal(t, 14.297, res[1].BestMs)
	assert.Equal(t, 14.387, res[1].StageBoundMs)
	assert.True(t, res[0].HasStageEstimate)
	_, err = ParsePipelineOutput([]byte("garbage\n"))
	assert.Error(t, err)
}

// multiSample is the multi-GPU reference's output on two H200s.
const multiSample = `multi devices=2 chunk=1048576 slots=6 compute_streams=4 elems=134217728 iters=100 best_ms=7.503 mean_ms=7.612 mismatches=0
multidev device=0 elems=67108864 best_ms=7.401
multidev device=1 elems=67108864 best_ms=7.455
`

// TestParseMultiOutput guards issue 12: the multi-GPU reference's lines
// are read, and output without a result is an error.
func TestParseMultiOutput(t *testing.T) {
	m, err := ParseMultiOutput([]byte(multiSample))
	require.NoError(t, err)
	assert.Equal(t, RefMulti{Devices: 2, Chunk: 1 << 20, Slots: 6, ComputeStreams: 4, Iters: 100, Elems: 128 << 20,
		BestMs: 7.503, MeanMs: 7.612, PerDevice: []RefMultiDevice{{0, 64 << 20, 7.401}, {1, 64 << 20, 7.455}}}, m)
	_, err = ParseMultiOutput([]byte("multidev device=0 elems=1 best_ms=1\n"))
	assert.ErrorContains(t, err, "no result")
}

func TestBuildReferenceWithoutNVCC(t *testing.T) {
	if _, err := exec.LookPath("nvcc"); err == nil {
		t.Skip("nvcc is present; the GPU run builds the reference for real")
	}
	_, err := BuildReference(context.Background(), t.TempDir(), "sm_90")
	assert.True(t, errors.Is(err, ErrNoNVCC))
}

func TestEmbeddedReferenceSources(t *testing.T) {
	for _, name := range []string{"reference/pipeline.cu", "reference/launch.cu", "reference/multi.cu", "reference/common.h"} {
		b, err := referenceFiles.ReadFile(name)
		require.NoError(t, err, name)
		assert.NotEmpty(t, b)
	}
}

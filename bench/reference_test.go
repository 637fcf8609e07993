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

// smallJobsSample is the shape of the small-jobs reference's output (the
// figures are made up), with a warning line from the runtime to skip.
const smallJobsSample = `smalljobs wait=block elems=4096 workers=1 iters=100 jobs=20481 seconds=0.5001 jobs_per_s=40954.2 p50_us=23.10 p99_us=31.75 cpu_us_per_job=9.412 mismatches=0
note: something the runtime printed
smalljobs wait=block elems=1048576 workers=16 iters=100 jobs=3012 seconds=0.5123 jobs_per_s=5879.4 p50_us=2701.00 p99_us=3105.50 cpu_us_per_job=21.000 mismatches=3
`

// TestParseSmallJobsOutput guards issue 14: each cell's line is read in
// full, and output without a cell, or a cell without a rate, is an error.
func TestParseSmallJobsOutput(t *testing.T) {
	res, err := ParseSmallJobsOutput([]byte(smallJobsSample))
	require.NoError(t, err)
	assert.Equal(t, []RefSmallJobs{
		{Wait: "block", Elems: 4096, Workers: 1, Iters: 100, Jobs: 20481, Seconds: 0.5001, JobsPerSec: 40954.2, P50us: 23.10, P99us: 31.75, CPUusPerJob: 9.412},
		{Wait: "block", Elems: 1 << 20, Workers: 16, Iters: 100, Jobs: 3012, Seconds: 0.5123, JobsPerSec: 5879.4, P50us: 2701, P99us: 3105.5, CPUusPerJob: 21, Mismatches: 3},
	}, res)
	_, err = ParseSmallJobsOutput([]byte("note: nothing\n"))
	assert.ErrorContains(t, err, "no result")
	_, err = ParseSmallJobsOutput([]byte("smalljobs wait=spin elems=4096 workers=1 jobs_per_s=0\n"))
	assert.ErrorContains(t, err, "bad line")
}

func TestBuildReferenceWithoutNVCC(t *testing.T) {
	if _, err := exec.LookPath("nvcc"); err == nil {
		t.Skip("nvcc is present; the GPU run builds the reference for real")
	}
	_, err := BuildReference(context.Background(), t.TempDir(), "sm_90")
	assert.True(t, errors.Is(err, ErrNoNVCC))
}

func TestEmbeddedReferenceSources(t *testing.T) {
	for _, name := range []string{"reference/pipeline.cu", "reference/launch.cu", "reference/multi.cu", "reference/smalljobs.cu", "reference/common.h", "reference/seed_check.h"} {
		b, err := referenceFiles.ReadFile(name)
		require.NoError(t, err, name)
		assert.NotEmpty(t, b)
	}
}

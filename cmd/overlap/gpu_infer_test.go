package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireGemm skips a GPU test without a driver, or without gemm.ptx in
// the build.
func requireGemm(t *testing.T) {
	t.Helper()
	gputest.Context(t)
	if kernels.GemmPTX() == nil {
		t.Skip("gemm.ptx is not embedded yet (make ptx generates it from gemm.cu)")
	}
}

// TestGPUInferBound runs the 768→256→16 model in memory on GPU 0 at two
// chunk sizes, every value verified: the copies both ways at once are
// timed and in the bound, the efficiency is against it, and the GPU has
// no simulator's notes; then a stream with --bound, bounded memory and
// every value verified.
func TestGPUInferBound(t *testing.T) {
	requireGemm(t)
	dir := t.TempDir()
	mp := filepath.Join(dir, "m.safetensors")
	code, _, errOut := runCLI("infer", "--gen-model", mp, "--widths", "768,256,16")
	require.Equal(t, exitOK, code, errOut)
	code, out, errOut := runCLI("infer", "--model", mp, "--rows", "256K", "--chunk", "16K,64K", "--verify", "--json", "--repeat", "2", "--devices", "0")
	require.Equal(t, exitOK, code, errOut)
	var res inferResult
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	st := res.Stages
	assert.Positive(t, st.CopiesMs)
	assert.GreaterOrEqual(t, st.CopiesMs, 0.9*st.H2DMs, "both ways at once take at least about one way alone")
	assert.Equal(t, max(st.H2DMs, st.ComputeMs, st.D2HMs, st.CopiesMs), st.BoundMs)
	assert.Greater(t, res.Efficiency, 0.5)
	assert.Less(t, res.Efficiency, 1.2)
	assert.Empty(t, res.Notes)
	assert.Contains(t, res.Verified, "every value of 2 run(s) matched")
	assert.Positive(t, res.VerifyMs)

	in, outFile := filepath.Join(dir, "in.f32"), filepath.Join(dir, "out.f32")
	code, _, errOut = runCLI("infer", "--model", mp, "--gen-input", in, "--rows", "512K")
	require.Equal(t, exitOK, code, errOut)
	// VmHWM is the process's peak since it started, and the in-memory run
	// above ran in this process: give its memory back to the system and
	// reset the peak (Linux's clear_refs), so that the stream's peak is
	// its own.
	debug.FreeOSMemory()
	peakReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	code, out, errOut = runCLI("infer", "--model", mp, "--in", in, "--out", outFile, "--bound", "--verify", "--json", "--devices", "0")
	require.Equal(t, exitOK, code, errOut)
	var sr inferStreamResult
	require.NoError(t, json.Unmarshal([]byte(out), &sr))
	require.NotNil(t, sr.Bound)
	assert.Positive(t, sr.Bound.ReadMs)
	assert.Positive(t, sr.Bound.PipelineMs)
	assert.Positive(t, sr.Bound.Efficiency)
	if peakReset {
		assert.Less(t, sr.PeakRSS, int64(1<<30), "a stream's memory is its slots'")
	} else {
		t.Log("the peak RSS could not be reset (/proc/self/clear_refs), so it is not checked")
	}
	assert.Contains(t, sr.Verified, "every one of the 524288 rows")
}

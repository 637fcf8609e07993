package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStreamDirectOutputOnSim streams an input of a length that is not
// a whole number of pages into an output created with O_DIRECT and
// preallocated, each alone and both, with the bound and the read-back
// check: each output is byte for byte the plain run's, of its exact
// length, and the result and the write stage say how it was written. It
// skips where the test's directory refuses O_DIRECT (tmpfs does, with
// EINVAL).
func TestStreamDirectOutputOnSim(t *testing.T) {
	dir := t.TempDir()
	probe, err := pipeline.CreateDirect(filepath.Join(dir, "probe"))
	if err != nil {
		t.Skipf("skipping: O_DIRECT refused here (tmpfs refuses it with EINVAL): %v", err)
	}
	probe.Close()
	const n = 64<<10 + 123 // elements: 262636 bytes, not whole pages
	in := patternFile(t, dir, "in.f32", n)
	plain := filepath.Join(dir, "plain.f32")
	_, err = Stream(context.Background(), simDevices(1)[0], StreamOptions{Inputs: []string{in}, Output: plain, Iters: 5, ChunkElems: 16 << 10})
	require.NoError(t, err)
	want, err := os.ReadFile(plain)
	require.NoError(t, err)
	require.Len(t, want, 4*n)
	for _, tc := range []struct {
		direct, prealloc bool
		how              string
	}{
		{false, true, "while writing, 2 pwrite goroutine(s), preallocated"},
		{true, false, "while writing, 2 pwrite goroutine(s), O_DIRECT"},
		{true, true, "while writing, 2 pwrite goroutine(s), O_DIRECT, preallocated"},
	} {
		t.Run(fmt.Sprintf("direct %v preallocate %v", tc.direct, tc.prealloc), func(t *testing.T) {
			out := filepath.Join(dir, fmt.Sprintf("out-%v-%v.f32", tc.direct, tc.prealloc))
			res, err := Stream(context.Background(), simDevices(1)[0], StreamOptions{Inputs: []string{in}, Output: out, Iters: 5, ChunkElems: 16 << 10,
				Writers: 2, DirectOutput: tc.direct, Preallocate: tc.prealloc, Bound: true, Verify: true})
			require.NoError(t, err)
			assert.Equal(t, tc.direct, res.DirectOutput)
			if tc.prealloc {
				assert.Equal(t, int64(4*n), res.Preallocated)
			} else {
				assert.Zero(t, res.Preallocated)
			}
			assert.Equal(t, "write", res.Stages[4].Stage)
			assert.Equal(t, tc.how, res.Stages[4].How)
			require.NotNil(t, res.Bound)
			assert.True(t, res.Bound.WriteMeasured)
			got, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Len(t, got, 4*n, "the output's exact length")
			assert.True(t, bytes.Equal(want, got), "the output differs from the plain run's")
			left, err := filepath.Glob(filepath.Join(dir, ".overlap-bound-*"))
			require.NoError(t, err)
			assert.Empty(t, left, "the bound's scratch file is removed")
		})
	}
}

// TestStreamOutputOptionsRefused: DirectOutput and Preallocate need a
// file output, and Preallocate a file input.
func TestStreamOutputOptionsRefused(t *testing.T) {
	dir := t.TempDir()
	in := patternFile(t, dir, "in.f32", 1024)
	out := filepath.Join(dir, "out.f32")
	var sink bytes.Buffer
	for _, tc := range []struct {
		o    StreamOptions
		want string
	}{
		{StreamOptions{Inputs: []string{in}, Output: "-", Stdout: &sink, DirectOutput: true}, "bench: Stream: the options DirectOutput and Preallocate write a file: - is not a regular file"},
		{StreamOptions{Inputs: []string{in}, Output: "-", Stdout: &sink, Preallocate: true}, "bench: Stream: the options DirectOutput and Preallocate write a file: - is not a regular file"},
		{StreamOptions{Inputs: []string{"-"}, Stdin: strings.NewReader(""), Output: out, Preallocate: true}, "bench: Stream: the option Preallocate takes the output's size from the input file's: the input is stdin (-)"},
	} {
		_, err := Stream(context.Background(), simDevices(1)[0], tc.o)
		assert.EqualError(t, err, tc.want)
	}
	_, err := os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing was created")
}

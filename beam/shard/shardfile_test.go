package shard

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dirNames lists the names in dir, hidden temporary files included.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestProcessShard(t *testing.T) {
	kp, err := NewKernel(simSpec, 0)
	require.NoError(t, err)
	defer kp.Close()
	in, out := t.TempDir(), t.TempDir()
	path, x := writeShard(t, in, "a.f32", 50000, 0)

	res, err := ProcessShard(context.Background(), kp, path, out)
	require.NoError(t, err)
	verifySeed(t, x, filepath.Join(out, "a.f32.out"), testIters)
	assert.Equal(t, []string{"a.f32.out"}, dirNames(t, out), "only the final output is left")
	assert.Equal(t, Result{Shard: path, Output: filepath.Join(out, "a.f32.out"), Rows: 50000, InBytes: 200000, OutBytes: 200000,
		EngineMicros: res.EngineMicros, WallMicros: res.WallMicros, Bound: res.Bound, Backend: "simulator"}, res)
	assert.Positive(t, res.EngineMicros)

	// A second attempt (a retried bundle) replaces the output whole.
	require.NoError(t, os.WriteFile(filepath.Join(out, "a.f32.out"), []byte("stale"), 0o644))
	_, err = ProcessShard(context.Background(), kp, path, out)
	require.NoError(t, err)
	verifySeed(t, x, filepath.Join(out, "a.f32.out"), testIters)
	assert.Equal(t, []string{"a.f32.out"}, dirNames(t, out))
}

func TestProcessShardDataErrors(t *testing.T) {
	kp, err := NewKernel(simSpec, 0)
	require.NoError(t, err)
	defer kp.Close()
	in, out := t.TempDir(), t.TempDir()
	bad := filepath.Join(in, "bad.f32")
	require.NoError(t, os.WriteFile(bad, make([]byte, 4*1000+3), 0o644))
	missing := filepath.Join(in, "missing.f32")

	_, err = ProcessShard(context.Background(), kp, bad, out)
	require.EqualError(t, err, "shard: "+bad+" (4003 bytes) is not a whole number of 4-byte rows: the row at byte offset 4000 is cut short")
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, int64(4000), re.Offset)
	assert.True(t, IsDataError(err))

	_, err = ProcessShard(context.Background(), kp, missing, out)
	assert.ErrorIs(t, err, ErrBadInput)
	assert.ErrorIs(t, err, os.ErrNotExist)
	assert.True(t, IsDataError(err))

	_, err = ProcessShard(context.Background(), kp, in, out)
	assert.EqualError(t, err, "shard: the shard cannot be read: "+in+" is not a regular file (d---------)")
	assert.True(t, IsDataError(err))

	_, err = ProcessShard(context.Background(), nil, bad, out)
	assert.EqualError(t, err, "shard: ProcessShard needs a processor, a shard and an output directory")
	assert.False(t, IsDataError(err))

	assert.Empty(t, dirNames(t, out), "a failed shard leaves nothing")
}

// failingProc writes half of its input and then fails, or panics.
type failingProc struct{ panics bool }

func (failingProc) RowBytes() int { return 4 }
func (p failingProc) Process(ctx context.Context, in io.Reader, out io.Writer) (Stats, error) {
	b, err := io.ReadAll(in)
	if err != nil {
		return Stats{}, err
	}
	if _, err := out.Write(b[:len(b)/2]); err != nil {
		return Stats{}, err
	}
	if p.panics {
		panic("failingProc")
	}
	return Stats{Rows: int64(len(b) / 8)}, errors.New("the device fell over")
}
func (failingProc) Close() error { return nil }

// TestProcessShardFailsMidShard checks that a processor that fails (or
// panics) after writing part of its output leaves no output at all.
func TestProcessShardFailsMidShard(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	path, _ := writeShard(t, in, "a.f32", 1000, 0)
	_, err := ProcessShard(context.Background(), failingProc{}, path, out)
	require.EqualError(t, err, "shard: "+path+": the device fell over")
	assert.False(t, IsDataError(err), "an engine failure is for the runner to retry")
	assert.Empty(t, dirNames(t, out))

	func() {
		defer func() { assert.Equal(t, "failingProc", recover()) }()
		ProcessShard(context.Background(), failingProc{panics: true}, path, out)
	}()
	assert.Empty(t, dirNames(t, out), "a panic leaves nothing either")

	// A previous attempt's whole output stays whole.
	prev := filepath.Join(out, "a.f32.out")
	require.NoError(t, os.WriteFile(prev, []byte("whole"), 0o644))
	_, err = ProcessShard(context.Background(), failingProc{}, path, out)
	require.Error(t, err)
	b, err := os.ReadFile(prev)
	require.NoError(t, err)
	assert.Equal(t, "whole", string(b))
	assert.Equal(t, []string{"a.f32.out"}, dirNames(t, out))
}

func TestProcessShardCancelled(t *testing.T) {
	kp, err := NewKernel(simSpec, 0)
	require.NoError(t, err)
	defer kp.Close()
	in, out := t.TempDir(), t.TempDir()
	path, _ := writeShard(t, in, "a.f32", 50000, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = ProcessShard(ctx, kp, path, out)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, IsDataError(err))
	assert.Empty(t, dirNames(t, out))
}

func TestOutputName(t *testing.T) {
	assert.Equal(t, filepath.Join("out", "a.f32.out"), OutputName("out", filepath.Join("data", "a.f32")))
	assert.Equal(t, filepath.Join("o", "x.out"), OutputName("o", "x"))
}

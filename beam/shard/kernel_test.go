package shard

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/pipeline/sim"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testIters keeps the seed kernel's CPU stand-in and reference cheap.
const testIters = 20

// simSpec is a simulated seed kernel with small chunks, so that a 64K-row
// shard takes several.
var simSpec = Spec{Sim: true, Iters: testIters, ChunkElems: 16 << 10}

// writeShard writes n float32 rows of overlap's standard pattern, starting
// at pattern index offset, to dir/name and returns its path and rows.
func writeShard(t *testing.T, dir, name string, n, offset int) (string, []float32) {
	t.Helper()
	x := make([]float32, n)
	kernels.FillPattern(x, offset)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, driver.Bytes(x), 0o644))
	return path, x
}

// verifySeed checks every row of the output file against the seed kernel's
// float64 reference.
func verifySeed(t *testing.T, in []float32, outPath string, iters int) {
	t.Helper()
	b, err := os.ReadFile(outPath)
	require.NoError(t, err)
	require.Len(t, b, 4*len(in), "%s", outPath)
	require.NoError(t, kernels.Seed.Verify([][]float32{in}, driver.View[float32](b), float64(iters)), "%s", outPath)
}

// liveZero asserts that a simulator holds no stream, event or memory.
func liveZero(t *testing.T, b pipeline.Backend) {
	t.Helper()
	sim, ok := b.(*sim.Sim)
	require.True(t, ok, "backend %T", b)
	for kind, n := range sim.Live() {
		assert.Zero(t, n, "the simulator still holds %d %s object(s)", n, kind)
	}
}

func TestKernelOnSim(t *testing.T) {
	kp, err := NewKernel(simSpec, 0)
	require.NoError(t, err)
	const n = 40000 // not a whole number of chunks
	x := make([]float32, n)
	kernels.FillPattern(x, 11)
	var out bytes.Buffer
	st, err := kp.Process(context.Background(), bytes.NewReader(driver.Bytes(x)), &out)
	require.NoError(t, err)
	require.NoError(t, kernels.Seed.Verify([][]float32{x}, driver.View[float32](out.Bytes()), testIters))
	assert.Equal(t, int64(n), st.Rows)
	assert.Equal(t, int64(4*n), st.InBytes)
	assert.Equal(t, int64(4*n), st.OutBytes)
	assert.Equal(t, "simulator", st.Backend)
	assert.Positive(t, st.Elapsed)
	assert.ElementsMatch(t, stageOrder, keys(st.Stages))
	assert.Contains(t, stageOrder, st.Bound)
	for _, s := range []string{StageH2D, StageCompute, StageD2H} {
		assert.Positive(t, st.Stages[s], s)
		assert.LessOrEqual(t, st.Stages[s], st.Stages[st.Bound], "%s is slower than the bound %s", s, st.Bound)
	}

	// A stream that ends inside a float32: the offset is where it starts.
	_, err = kp.Process(context.Background(), bytes.NewReader(make([]byte, 4*16384+6)), &out)
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, RowError{Shard: "input", Offset: 4*16384 + 4, Size: -1, RowBytes: 4}, *re)

	_, err = kp.Process(context.Background(), nil, &out)
	assert.EqualError(t, err, "shard: Process needs an input and an output")

	require.NoError(t, kp.Close())
	require.NoError(t, kp.Close(), "a second Close is a no-op")
	liveZero(t, kp.Backend())
}

func keys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func TestNewKernelErrors(t *testing.T) {
	_, err := NewKernel(Spec{Sim: true, Kernel: "lerp"}, 0)
	assert.EqualError(t, err, "shard: kernel lerp has 2 input(s) and 1 output(s); a shard is one input and one output ([axpb seed] qualify)")
	_, err = NewKernel(Spec{Sim: true}, -1)
	assert.EqualError(t, err, "shard: device -1: must not be negative")
	_, err = NewKernel(Spec{Sim: true, Slots: 1}, 0)
	assert.ErrorContains(t, err, "pipeline: ")
}

func TestSlowest(t *testing.T) {
	tests := []struct {
		stages map[string]int
		want   string
	}{
		{map[string]int{StageRead: 1, StageCompute: 3, StageWrite: 2}, StageCompute},
		{map[string]int{StageH2D: 2, StageD2H: 2}, StageH2D},
		{map[string]int{StageWrite: 5, StageRead: 5}, StageRead},
		{map[string]int{}, ""},
	}
	for _, tt := range tests {
		m := map[string]time.Duration{}
		for k, v := range tt.stages {
			m[k] = time.Duration(v)
		}
		assert.Equal(t, tt.want, slowest(m), "%v", tt.stages)
	}
}

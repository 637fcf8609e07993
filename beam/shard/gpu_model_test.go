package shard

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/purecuda/overlap/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUModelShard streams a shard that is not a whole number of chunks
// through an MLP (768→256→16) on GPU 0, in each precision, and checks
// every output value against the model's float64 reference.
func TestGPUModelShard(t *testing.T) {
	requireGPUs(t)
	dir := t.TempDir()
	path, m := writeModel(t, dir, []int{768, 256, 16}, model.ReLU)
	const rows = 50000 + 37
	shard, x := writeRows(t, dir, "a.f32", rows, 768, 0)
	for _, prec := range []model.Precision{model.FP32, model.TF32} {
		t.Run(prec.String(), func(t *testing.T) {
			mp, err := NewMLP(Spec{Processor: "mlp", Model: path, Precision: prec.String(), ChunkElems: 4096}, 0)
			require.NoError(t, err)
			defer mp.Close()
			out := t.TempDir()
			res, err := ProcessShard(context.Background(), mp, shard, out)
			require.NoError(t, err)
			verifyModel(t, m, prec, x, res.Output)
			assert.Equal(t, []int64{rows, 4 * 768 * rows, 4 * 16 * rows}, []int64{res.Rows, res.InBytes, res.OutBytes})
			assert.True(t, strings.HasPrefix(res.Backend, "NVIDIA"), "backend %q", res.Backend)
			assert.Contains(t, StageNames(), res.Bound)
			t.Logf("%d rows of %s in %s on %s: %.2f ms on the GPU's clock, bounded by %s", rows, m, prec, res.Backend, float64(res.EngineMicros)/1000, res.Bound)
			assert.Equal(t, []string{"a.f32.out"}, dirNames(t, out))
			require.NoError(t, mp.Close())
		})
	}
	assert.Zero(t, modelsOpen())
}

// TestGPUModelPipelineOnPrism runs shards through an MLP over every GPU of
// the host, each worker process (here, this one) holding one engine per
// GPU with the weights resident on each, and checks every output value.
func TestGPUModelPipelineOnPrism(t *testing.T) {
	gpus := requireGPUs(t)
	in, out := t.TempDir(), t.TempDir()
	path, m := writeModel(t, t.TempDir(), []int{768, 256, 16}, model.GELU)
	const rows = 20000
	shards := map[string][]float32{}
	for i := range 2 * gpus {
		name := fmt.Sprintf("s%02d.f32", i)
		_, x := writeRows(t, in, name, rows, 768, i*rows*768)
		shards[name] = x
	}
	spec := Spec{Processor: "mlp", Model: path, Precision: "tf32", Devices: AllDevices}
	_, err := runOnPrism(context.Background(), func(s beam.Scope) {
		Build(s, Options{Input: filepath.Join(in, "*.f32"), Output: out, Spec: spec})
	})
	require.NoError(t, err)
	waitClosed(t)
	assert.Zero(t, modelsOpen(), "the model was given back")
	for name, x := range shards {
		verifyModel(t, m, model.TF32, x, filepath.Join(out, name+".out"))
	}
	done := readLines[Result](t, filepath.Join(out, DoneFile))
	require.Len(t, done, len(shards))
	for _, r := range done {
		assert.Equal(t, int64(rows), r.Rows, r.Shard)
		t.Logf("%s: %.2f ms on the GPU's clock, %.2f ms wall, bounded by %s (%s)", filepath.Base(r.Shard), float64(r.EngineMicros)/1000, float64(r.WallMicros)/1000, r.Bound, r.Backend)
	}
}

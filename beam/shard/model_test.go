package shard

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests in this file run the mlp processor on the simulator: a tiny
// model written into the test's directory, as overlap infer --gen-model
// writes one.

// writeModel writes a random model of widths to dir/mlp.safetensors and
// returns its path and the model as the processor reads it back.
func writeModel(t *testing.T, dir string, widths []int, act model.Activation) (string, *model.Model) {
	t.Helper()
	m, err := model.Random(widths, act, 5)
	require.NoError(t, err)
	path := filepath.Join(dir, "mlp.safetensors")
	require.NoError(t, m.WriteFile(path))
	back, err := model.Load(path, model.Options{})
	require.NoError(t, err)
	return path, back
}

// writeRows writes rows of width float32 of overlap's standard pattern,
// starting at pattern index offset, to dir/name.
func writeRows(t *testing.T, dir, name string, rows, width, offset int) (string, []float32) {
	t.Helper()
	x := make([]float32, rows*width)
	kernels.FillPattern(x, offset)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, driver.Bytes(x), 0o644))
	return path, x
}

// verifyModel checks every value of the output file against the model's
// float64 reference.
func verifyModel(t *testing.T, m *model.Model, prec model.Precision, x []float32, outPath string) {
	t.Helper()
	b, err := os.ReadFile(outPath)
	require.NoError(t, err)
	rows := len(x) / m.In()
	require.Len(t, b, 4*rows*m.Out(), "%s", outPath)
	require.NoError(t, m.Verify(x, driver.View[float32](b), model.VerifyOptions{Precision: prec}), "%s", outPath)
}

// modelsOpen counts the models open in this process.
func modelsOpen() int {
	models.mu.Lock()
	defer models.mu.Unlock()
	return len(models.m)
}

func TestMLPOnSim(t *testing.T) {
	path, m := writeModel(t, t.TempDir(), []int{8, 16, 4}, model.GELU)
	mp, err := NewMLP(Spec{Processor: "mlp", Sim: true, Model: path, Precision: "tf32", ChunkElems: 256}, 0)
	require.NoError(t, err)
	defer mp.Close()
	assert.Equal(t, 32, mp.RowBytes())
	assert.Equal(t, model.TF32, mp.Precision())
	assert.Equal(t, "8→16→4, gelu", mp.Model().String())
	const n = 3000 // not a whole number of chunks
	x := make([]float32, n*8)
	kernels.FillPattern(x, 3)
	var out bytes.Buffer
	st, err := mp.Process(context.Background(), bytes.NewReader(driver.Bytes(x)), &out)
	require.NoError(t, err)
	require.NoError(t, m.Verify(x, driver.View[float32](out.Bytes()), model.VerifyOptions{Precision: model.TF32}))
	assert.Equal(t, []int64{n, 32 * n, 16 * n}, []int64{st.Rows, st.InBytes, st.OutBytes})
	assert.Equal(t, "simulator", st.Backend)
	assert.Positive(t, st.Elapsed)
	assert.ElementsMatch(t, stageOrder, keys(st.Stages))
	assert.Contains(t, stageOrder, st.Bound)
	for _, s := range []string{StageH2D, StageCompute, StageD2H} {
		assert.Positive(t, st.Stages[s], s)
		assert.LessOrEqual(t, st.Stages[s], st.Stages[st.Bound], "%s is slower than the bound %s", s, st.Bound)
	}

	// A stream that ends inside a row: the offset is where the row starts.
	_, err = mp.Process(context.Background(), bytes.NewReader(make([]byte, 32*300+12)), &out)
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, RowError{Shard: "input", Offset: 32 * 300, Size: -1, RowBytes: 32, Row: "8 float32, the input of the model 8→16→4, gelu"}, *re)

	_, err = mp.Process(context.Background(), nil, &out)
	assert.EqualError(t, err, "shard: Process needs an input and an output")

	require.NoError(t, mp.Close())
	require.NoError(t, mp.Close(), "a second Close is a no-op")
	liveZero(t, mp.Backend())
	assert.Zero(t, modelsOpen(), "the model was given back")
}

func TestNewMLPErrors(t *testing.T) {
	dir := t.TempDir()
	path, _ := writeModel(t, dir, []int{8, 4}, model.ReLU)
	missing := filepath.Join(dir, "missing.safetensors")
	notModel := filepath.Join(dir, "rows.f32")
	require.NoError(t, os.WriteFile(notModel, make([]byte, 64), 0o644))
	tests := []struct {
		name   string
		spec   Spec
		device int
		want   string
	}{
		{name: "no model", spec: Spec{Sim: true},
			want: "shard: the mlp processor needs a model (Spec.Model: a safetensors file)"},
		{name: "a kernel", spec: Spec{Sim: true, Model: path, Kernel: "seed"},
			want: `shard: the mlp processor runs a model, not an embedded kernel (kernel "seed", iters 0)`},
		{name: "iterations", spec: Spec{Sim: true, Model: path, Iters: 5},
			want: `shard: the mlp processor runs a model, not an embedded kernel (kernel "", iters 5)`},
		{name: "precision", spec: Spec{Sim: true, Model: path, Precision: "fp16"},
			want: `shard: precision "fp16": want fp32 or tf32`},
		{name: "activation", spec: Spec{Sim: true, Model: path, Activation: "tanh"},
			want: `shard: activation "tanh": want relu or gelu`},
		{name: "device", spec: Spec{Sim: true, Model: path}, device: -1,
			want: "shard: device -1: must not be negative"},
		{name: "missing file", spec: Spec{Sim: true, Model: missing},
			want: "shard: model: open " + missing + ": no such file or directory"},
		{name: "not a model", spec: Spec{Sim: true, Model: notModel},
			want: "shard: model: " + notModel + ": the header length is 0 bytes: too short for a JSON object"},
		{name: "chunk too large for the GEMM", spec: Spec{Sim: true, Model: path, ChunkElems: 1 << 30},
			want: "shard: model: a chunk of 1073741824 rows through 0.weight: gemm: 1073741824 rows need 8388608 blocks along y, more than the 65535 a grid may have: at most 8388480 rows a launch"},
		{name: "slots", spec: Spec{Sim: true, Model: path, Slots: 1},
			want: "pipeline: 1 slots: at least 2 are needed to overlap anything"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMLP(tt.spec, tt.device)
			assert.EqualError(t, err, tt.want)
			assert.Zero(t, modelsOpen(), "nothing stays open")
		})
	}
}

// TestMLPLoadsTheModelOncePerSpec opens the mlp processor on two simulated
// devices: one load of the file, one model shared by both, given back when
// the processor closes; a later lease loads it afresh.
func TestMLPLoadsTheModelOncePerSpec(t *testing.T) {
	path, _ := writeModel(t, t.TempDir(), []int{8, 16, 4}, model.ReLU)
	var loads atomic.Int32
	old := loadModel
	loadModel = func(p string, o model.Options) (*model.Model, error) {
		loads.Add(1)
		return old(p, o)
	}
	t.Cleanup(func() { loadModel = old })

	spec := Spec{Processor: "mlp", Sim: true, Model: path, Devices: []int{0, 1}, ChunkElems: 128}
	l, err := Acquire(spec)
	require.NoError(t, err)
	defer l.Release()
	assert.Equal(t, int32(1), loads.Load())
	require.NoError(t, l.Use(func(p Processor) error {
		pl, ok := p.(*pool)
		require.True(t, ok, "%T", p)
		require.Len(t, pl.procs, 2)
		assert.Same(t, pl.procs[0].(*MLP).Model(), pl.procs[1].(*MLP).Model(), "one model for both devices")
		assert.Equal(t, "8 float32, the input of the model 8→16→4, relu", describeRow(p), "the pool says what its rows are")
		return nil
	}))
	assert.Equal(t, 1, modelsOpen())
	require.NoError(t, l.Release())
	assert.Zero(t, modelsOpen())

	l, err = Acquire(spec)
	require.NoError(t, err)
	defer l.Release()
	assert.Equal(t, int32(2), loads.Load(), "loaded again once closed")
	require.NoError(t, l.Release())
	assert.Zero(t, modelsOpen())
}

// TestProcessShardModelOfAnotherWidth runs shards written for a model of 8
// inputs through a model of 7: the shard that 28-byte rows do not divide is
// refused, naming the model's input; the one they happen to divide is not
// told apart (its rows are whole, if not the ones meant).
func TestProcessShardModelOfAnotherWidth(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	path, _ := writeModel(t, dir, []int{7, 16, 3}, model.ReLU)
	mp, err := NewMLP(Spec{Sim: true, Model: path, ChunkElems: 128}, 0)
	require.NoError(t, err)
	defer mp.Close()
	shard, _ := writeRows(t, dir, "a.f32", 1000, 8, 0) // 32000 bytes: 1142 rows of 28 and 24 bytes over
	_, err = ProcessShard(context.Background(), mp, shard, out)
	var re *RowError
	require.ErrorAs(t, err, &re)
	assert.True(t, IsDataError(err))
	assert.EqualError(t, err, "shard: "+shard+" (32000 bytes) is not a whole number of 28-byte rows (7 float32, the input of the model 7→16→3, relu): the row at byte offset 31976 is cut short")
	assert.Empty(t, dirNames(t, out))
}

// runModelShards runs three shards of a few thousand rows and one cut
// inside a row through a model on the simulator, on runner, and checks
// every output value against the model's reference, the list of results,
// the dead letter, and that the engines and the model are closed after.
func runModelShards(t *testing.T, runner string, prec model.Precision) {
	in, out := t.TempDir(), filepath.Join(t.TempDir(), "out")
	path, m := writeModel(t, t.TempDir(), []int{12, 32, 5}, model.GELU)
	rows := map[string]int{"a.f32": 3000, "b.f32": 4000, "c.f32": 5000}
	shards := map[string][]float32{}
	offset := 0
	for _, name := range []string{"a.f32", "b.f32", "c.f32"} {
		_, x := writeRows(t, in, name, rows[name], 12, offset)
		shards[name] = x
		offset += len(x)
	}
	bad, _ := writeRows(t, in, "d.f32", 2000, 12, 0)
	require.NoError(t, os.Truncate(bad, 48*1500+20)) // inside row 1500

	spec := Spec{Processor: "mlp", Sim: true, Model: path, Precision: prec.String(), ChunkElems: 512}
	_, err := runOn(context.Background(), runner, func(s beam.Scope) {
		Build(s, Options{Input: filepath.Join(in, "*.f32"), Output: out, Spec: spec})
	})
	require.NoError(t, err)
	waitClosed(t)
	assert.Zero(t, modelsOpen(), "the model was given back")

	for name, x := range shards {
		verifyModel(t, m, prec, x, filepath.Join(out, name+".out"))
	}
	assert.ElementsMatch(t, []string{"a.f32.out", "b.f32.out", "c.f32.out", DoneFile, FailedFile}, dirNames(t, out),
		"the outputs and the lists, nothing of the bad shard, no temporary file")
	done := readLines[Result](t, filepath.Join(out, DoneFile))
	require.Len(t, done, 3)
	for _, r := range done {
		name := filepath.Base(r.Shard)
		n := int64(rows[name])
		assert.Equal(t, filepath.Join(out, name+".out"), r.Output)
		assert.Equal(t, []int64{n, 48 * n, 20 * n}, []int64{r.Rows, r.InBytes, r.OutBytes}, name)
		assert.Contains(t, StageNames(), r.Bound, name)
		assert.Equal(t, "simulator", r.Backend, name)
		assert.Positive(t, r.EngineMicros, name)
	}
	assert.Equal(t, []Failure{{Shard: bad, Offset: 48 * 1500,
		Error: fmt.Sprintf("shard: %s (%d bytes) is not a whole number of 48-byte rows (12 float32, the input of the model 12→32→5, gelu): the row at byte offset %d is cut short", bad, 48*1500+20, 48*1500)}},
		readLines[Failure](t, filepath.Join(out, FailedFile)))
}

func TestModelPipelineOnPrism(t *testing.T) { runModelShards(t, "prism", model.TF32) }

func TestModelPipelineOnDirect(t *testing.T) { runModelShards(t, "direct", model.FP32) }

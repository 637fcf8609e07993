package model

import (
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func refs(rs ...pipeline.Ref) []pipeline.Ref { return rs }

var (
	in0  = pipeline.Ref{Kind: pipeline.RefInput, Index: 0}
	out0 = pipeline.Ref{Kind: pipeline.RefOutput, Index: 0}
)

func scr(i int) pipeline.Ref { return pipeline.Ref{Kind: pipeline.RefScratch, Index: i} }
func par(i int) pipeline.Ref { return pipeline.Ref{Kind: pipeline.RefParam, Index: i} }

// TestKernelShape: one step per layer, reading the input, the scratch
// buffers in turn and the layer's parameters, writing the next scratch
// buffer or the output; two scratch buffers at most, each as wide as the
// widest layer output it holds.
func TestKernelShape(t *testing.T) {
	cases := []struct {
		widths  []int
		scratch []int
		reads   [][]pipeline.Ref
		writes  []pipeline.Ref
	}{
		{[]int{8, 4}, nil, [][]pipeline.Ref{refs(in0, par(0), par(1))}, refs(out0)},
		{[]int{8, 16, 4}, []int{64}, [][]pipeline.Ref{refs(in0, par(0), par(1)), refs(scr(0), par(2), par(3))}, refs(scr(0), out0)},
		{[]int{8, 16, 32, 4}, []int{64, 128},
			[][]pipeline.Ref{refs(in0, par(0), par(1)), refs(scr(0), par(2), par(3)), refs(scr(1), par(4), par(5))}, refs(scr(0), scr(1), out0)},
		{[]int{8, 16, 32, 64, 4}, []int{256, 128},
			[][]pipeline.Ref{refs(in0, par(0), par(1)), refs(scr(0), par(2), par(3)), refs(scr(1), par(4), par(5)), refs(scr(0), par(6), par(7))},
			refs(scr(0), scr(1), scr(0), out0)},
	}
	for _, c := range cases {
		m, err := Random(c.widths, GELU, 1)
		require.NoError(t, err)
		for _, p := range []Precision{FP32, TF32} {
			k, err := m.Kernel(KernelOptions{Precision: p})
			require.NoError(t, err)
			assert.Equal(t, c.scratch, k.Scratch, "%v", c.widths)
			require.Len(t, k.Steps, len(c.widths)-1)
			require.Len(t, k.Params, 2*(len(c.widths)-1))
			for i, s := range k.Steps {
				assert.Equal(t, map[Precision]string{FP32: "gemm_f32", TF32: "gemm_tf32"}[p], s.Name)
				assert.Equal(t, c.reads[i], s.Reads, "%v step %d", c.widths, i)
				assert.Equal(t, refs(c.writes[i]), s.Writes, "%v step %d", c.widths, i)
				assert.Equal(t, 2*float64(c.widths[i]*128), s.FlopsPerElem, "2·in·out, out in whole 128-wide tiles")
				assert.Nil(t, s.Function, "no GPU function without KernelOptions.Gemm")
				// gemm_f32 runs 256 threads a block, gemm_tf32 128 (the
				// TF32 steps were once launched with 256), both on 128×128
				// tiles.
				block := map[Precision]int{FP32: 256, TF32: 128}[p]
				assert.Equal(t, driver.LaunchConfig{Grid: driver.Dim3{X: (c.widths[i+1] + 127) / 128, Y: 8}, Block: driver.Dim3{X: block}},
					s.Launch(pipeline.Chunk{N: 1000}), "%v step %d", p, i)
				assert.Equal(t, driver.Bytes(m.Layers[i].Weight), k.Params[2*i].Data)
				assert.Equal(t, driver.Bytes(m.Layers[i].Bias), k.Params[2*i+1].Data)
				assert.Equal(t, m.Layers[i].WeightName, k.Params[2*i].Name)
			}
			assert.Nil(t, k.Function)
			assert.Nil(t, k.CPU)
		}
	}
}

// TestKernelArgs: each step's arguments have the GEMM's layout, with the
// chunk's buffers in the places the step's Refs say and M = the chunk's
// rows.
func TestKernelArgs(t *testing.T) {
	m, err := Random([]int{8, 16, 32, 4}, ReLU, 1)
	require.NoError(t, err)
	k, err := m.Kernel(KernelOptions{})
	require.NoError(t, err)
	c := pipeline.Chunk{N: 77, Inputs: []driver.DevicePtr{0x1000}, Outputs: []driver.DevicePtr{0x2000},
		Scratch: []driver.DevicePtr{0x3000, 0x4000}, Params: []driver.DevicePtr{0x10, 0x20, 0x30, 0x40, 0x50, 0x60}}
	for i, s := range k.Steps {
		a := driver.NewArgs()
		s.Args(a, c)
		require.NoError(t, a.Err())
		want := kernels.Gemm.F32.Args(driver.NewArgs(), 0, 0, 0, 0, 0, 0, 0, 0)
		assert.Equal(t, want.Layout(), a.Layout(), "step %d", i)
		assert.Equal(t, chunkPtr(c, s.Writes[0]), []driver.DevicePtr{0x3000, 0x4000, 0x2000}[i])
		assert.Equal(t, chunkPtr(c, s.Reads[0]), []driver.DevicePtr{0x1000, 0x3000, 0x4000}[i])
		assert.Equal(t, chunkPtr(c, s.Reads[1]), c.Params[2*i])
		assert.Equal(t, chunkPtr(c, s.Reads[2]), c.Params[2*i+1])
	}
	assert.Equal(t, kernels.GemmReLU, gemmAct(ReLU))
	assert.Equal(t, kernels.GemmGELU, gemmAct(GELU))
}

// TestKernelStandIns: the steps' CPU stand-ins, run in order over a
// chunk's buffers as the simulator runs them, compute Forward32.
func TestKernelStandIns(t *testing.T) {
	m, err := Random([]int{12, 40, 24, 5}, GELU, 9)
	require.NoError(t, err)
	k, err := m.Kernel(KernelOptions{Precision: TF32})
	require.NoError(t, err)
	const rows, chunk = 150, 200 // a partial chunk: the scratch slots hold more rows
	x := pattern(rows, 12)
	out := make([]float32, rows*5)
	hc := pipeline.HostChunk{N: rows, Inputs: [][]byte{driver.Bytes(x)}, Outputs: [][]byte{driver.Bytes(out)}}
	for _, p := range k.Params {
		hc.Params = append(hc.Params, p.Data)
	}
	for _, s := range k.Scratch {
		hc.Scratch = append(hc.Scratch, make([]byte, s*chunk))
	}
	for _, s := range k.Steps {
		s.CPU(hc)
	}
	want, err := m.Forward32(x)
	require.NoError(t, err)
	assert.Equal(t, want, out)
	require.NoError(t, m.Verify(x, out, VerifyOptions{}))
}

// TestKernelWithGemm: with GEMM modules, each step resolves its entry
// through them (here without gemm.ptx or a GPU: the error says why).
func TestKernelWithGemm(t *testing.T) {
	m, err := Random([]int{8, 4}, ReLU, 1)
	require.NoError(t, err)
	var g kernels.GemmModules
	defer g.Close()
	k, err := m.Kernel(KernelOptions{Gemm: &g, Precision: TF32})
	require.NoError(t, err)
	require.NotNil(t, k.Steps[0].Function)
	_, err = k.Steps[0].Function(nil)
	assert.EqualError(t, err, "ptx: gemm: nil context")
	if kernels.GemmPTX() == nil {
		_, err = k.Steps[0].Function(new(driver.Context))
		assert.ErrorIs(t, err, kernels.ErrNoGemm)
	}
	_, err = m.Kernel(KernelOptions{Precision: 5})
	assert.EqualError(t, err, "model: unknown precision Precision(5)")
}

func TestConfig(t *testing.T) {
	m, err := Random([]int{768, 256, 16}, ReLU, 1)
	require.NoError(t, err)
	cfg, err := m.Config(0)
	require.NoError(t, err)
	assert.Equal(t, pipeline.Config{ChunkElems: 16384, Inputs: []int{3072}, Outputs: []int{64}}, cfg)
	cfg, err = m.Config(1000)
	require.NoError(t, err)
	assert.Equal(t, 1000, cfg.ChunkElems)
	_, err = m.Config(3 << 20)
	assert.EqualError(t, err, "model: a chunk of 3145728 rows through 0.weight: gemm: X of 3145728 × 768 elements is more than the 2147483647 the kernels index with int")
	_, err = m.Config(-1)
	assert.EqualError(t, err, "model: a chunk of -1 rows")
	wide, err := Random([]int{8192, 4}, ReLU, 1)
	require.NoError(t, err)
	assert.Equal(t, 2048, wide.DefaultChunkRows(), "64 MiB of input a chunk")
	tiny, err := Random([]int{8, 16, 4}, ReLU, 1)
	require.NoError(t, err)
	assert.Equal(t, 16384, tiny.DefaultChunkRows())
}

// TestStepFlops: a step costs 2·in·out a row with out in whole 128-wide
// tiles, as the GEMM's blocks compute them.
func TestStepFlops(t *testing.T) {
	for _, c := range []struct {
		in, out int
		want    float64
	}{
		{768, 256, 2 * 768 * 256},
		{768, 3072, 2 * 768 * 3072},
		{256, 16, 2 * 256 * 128},
		{10, 129, 2 * 10 * 256},
		{1, 1, 2 * 128},
	} {
		assert.Equal(t, c.want, StepFlops(c.in, c.out), "%d→%d", c.in, c.out)
	}
}

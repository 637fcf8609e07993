package model

import (
	"context"
	"fmt"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/require"
)

// TestGPUModels runs models through the GEMM kernels on the GPU in both
// precisions and checks every output value against the float64
// reference: single layers, whose bound is tight (the kernels'
// arithmetic), of shapes that leave partial tiles in every direction, and
// stacks of layers (the steps, the scratch buffers and the activation
// between them). It needs the engine's Steps and gemm.ptx.
func TestGPUModels(t *testing.T) {
	ctx := gputest.Context(t)
	if kernels.GemmPTX() == nil {
		t.Skip("gemm.ptx is not embedded yet (make ptx generates it from gemm.cu)")
	}
	var g kernels.GemmModules
	defer g.Close()
	cases := []struct {
		widths []int
		act    Activation
		rows   int
		chunk  int
	}{
		{[]int{768, 256}, ReLU, 20000, 4096},
		{[]int{37, 129}, ReLU, 1000, 0},
		{[]int{1, 1}, ReLU, 3, 0},
		{[]int{8, 16, 4}, ReLU, 100003, 8192},
		{[]int{100, 300, 200, 7}, GELU, 40000, 3000},
		{[]int{768, 256, 16}, ReLU, 200000, 0},
		{[]int{768, 256, 16}, GELU, 50000, 16384},
	}
	for _, c := range cases {
		for _, p := range []Precision{FP32, TF32} {
			t.Run(fmt.Sprintf("%v %s %s", c.widths, c.act, p), func(t *testing.T) {
				m, err := Random(c.widths, c.act, 1)
				require.NoError(t, err)
				k, err := m.Kernel(KernelOptions{Precision: p, Gemm: &g})
				require.NoError(t, err)
				cfg, err := m.Config(c.chunk)
				require.NoError(t, err)
				pl, err := pipeline.New(pipeline.GPU(ctx), cfg)
				require.NoError(t, err)
				defer pl.Close()
				x := pattern(c.rows, m.In())
				y := make([]float32, c.rows*m.Out())
				_, err = pl.Run(context.Background(), pipeline.Job{N: c.rows, Kernel: k,
					Inputs: []pipeline.Buffer{pipeline.Rows(x, m.In())}, Outputs: []pipeline.Buffer{pipeline.Rows(y, m.Out())}})
				require.NoError(t, err)
				require.NoError(t, m.Verify(x, y, VerifyOptions{Precision: p}))
			})
		}
	}
}

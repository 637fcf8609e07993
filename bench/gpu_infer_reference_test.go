package bench

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/model"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUInferReference runs the PyTorch twin on the GPU and ours on GPU
// 0 over its rows, where a Python whose torch sees CUDA is installed:
// both sides timed, every value of ours within the tolerance of
// PyTorch's, and the temporary folder's input read back as ours.
func TestGPUInferReference(t *testing.T) {
	ctx := gputest.Context(t)
	if kernels.GemmPTX() == nil {
		t.Skip("gemm.ptx is not embedded yet (make ptx generates it from gemm.cu)")
	}
	if exec.Command("python3", "-c", "import torch; assert torch.cuda.is_available()").Run() != nil {
		t.Skip("no python3 here whose torch sees CUDA")
	}
	m, err := model.Random([]int{768, 256, 16}, model.ReLU, 1)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "m.safetensors")
	require.NoError(t, m.WriteFile(path))
	g := new(kernels.GemmModules)
	defer g.Close()
	k, err := m.Kernel(model.KernelOptions{Gemm: g})
	require.NoError(t, err)
	const rows = 64 << 10
	res, err := InferReference(context.Background(), []pipeline.Backend{pipeline.GPU(ctx)}, k, m, InferReferenceOptions{
		InferOptions: InferOptions{Rows: rows, Chunks: []int{8192, 16384}, Repeat: 2}, ModelFile: path})
	require.NoError(t, err)
	assert.Equal(t, int64(rows*16), res.Comparison.Values)
	assert.Zero(t, res.Comparison.Outside, "%+v", res.Comparison.First)
	assert.Positive(t, res.SpeedVsPyTorch)
	assert.Positive(t, res.PyTorchOfBound)
	assert.Positive(t, res.OursOfBound)
	assert.Len(t, res.Ours.Chunks, 2)
	assert.Equal(t, []int{768, 256, 16}, res.PyTorch.Dims)
	t.Logf("ours / PyTorch's fastest: %.3f×; max |ours − PyTorch| %.3g", res.SpeedVsPyTorch, res.Comparison.MaxAbs)
}

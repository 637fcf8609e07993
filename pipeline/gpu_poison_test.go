package pipeline_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
)

// TestGPUPoisonSlots is TestPoisonSlots on the GPU (cuMemsetD32Async on
// the pipeline's H2D stream), with noopPTX as the launch that writes
// nothing.
func TestGPUPoisonSlots(t *testing.T) {
	ctx := gputest.Context(t)
	prog, err := ptx.Load(ctx, "noop.ptx", []byte(noopPTX), "noop", driver.ModuleOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { prog.Close() })
	lazy := kernels.Elementwise("lazy", pipeline.FunctionOn(ctx, prog.Function))
	lazy.Scratch = []int{4}
	checkPoisonSlots(t, pipeline.GPU(ctx), seedKernel(gpuKernels(t, ctx), 100), lazy, pipeline.ScheduleAuto, pipeline.HostRegistered)
}

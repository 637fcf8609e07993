//go:build linux

package pipeline_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/require"
)

// TestPoisonSlotsOnFakeDriver guards the GPU backend's PoisonSlots
// through package driver: a group of the fake's two GPUs fills every slot
// buffer of each with PoisonWord (cuMemsetD32Async, which the fake
// performs and checks), after a run and before the next, and leaves
// nothing alive (gputest.Fake). The fake does not compute, so the runs'
// results are not checked here; TestGPUPoisonSlots checks them.
func TestPoisonSlotsOnFakeDriver(t *testing.T) {
	if gputest.Fake(t) == nil {
		return
	}
	ctxs := gputest.FakeContexts(t)
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems, cfg.Slots, cfg.ComputeStreams = 1<<12, 3, 2
	g, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctxs[0]), pipeline.GPU(ctxs[1])}, cfg)
	require.NoError(t, err)
	defer g.Close()
	mods := new(kernels.Modules)
	defer mods.Close()
	n := 6 << 12
	in, out := make([]float32, n), make([]float32, n)
	job := pipeline.Job{N: n, Kernel: seedKernel(mods, 1), Host: pipeline.HostRegistered, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}}
	_, err = g.Run(context.Background(), job)
	require.NoError(t, err)
	require.NoError(t, g.PoisonSlots())
	for d := range 2 {
		p := pipeline.GroupPipeline(g, d)
		bufs := pipeline.SlotBuffers(p)
		require.Len(t, bufs, 2)
		for i, m := range bufs {
			got := make([]byte, m.Len())
			require.NoError(t, p.Backend().CopyToHostSync(got, m, 0))
			for j := 0; j < len(got); j += 4 {
				if w := binary.LittleEndian.Uint32(got[j:]); w != pipeline.PoisonWord {
					t.Fatalf("device %d, slot buffer %d, byte %d: %#x, want PoisonWord", d, i, j, w)
				}
			}
		}
	}
	_, err = g.Run(context.Background(), job)
	require.NoError(t, err, "a run after PoisonSlots")
}

//go:build linux

package pipeline_test

import (
	"context"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGroupOnFakeDriver guards issue 12 through package driver: a group
// over the fake driver's two GPUs, each with its own context, runs staged,
// registered and pinned jobs; the fake driver checks every handle and host
// range (a registration made through device 0 must be usable by device 1's
// streams, which it is only when portable), both devices take chunks, and
// nothing is left alive after Close (gputest.Fake). Pinned memory that is not portable is
// refused by device 1 with an error that names it. The fake does not
// compute; the H200 tests check the bytes.
func TestGroupOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctxs := gputest.FakeContexts(t)
	ctx0, ctx1 := ctxs[0], ctxs[1]
	f.ClosedBeforeContexts(t)
	mods := new(kernels.Modules)

	const chunk = 1 << 14
	n := 40*chunk + 5
	cfg := pipeline.Float32Config(1, 1)
	cfg.ChunkElems = chunk
	g, err := pipeline.NewGroup([]pipeline.Backend{pipeline.GPU(ctx0), pipeline.GPU(ctx1)}, cfg)
	require.NoError(t, err)
	in, out := make([]float32, n), make([]float32, n)
	k := seedKernel(mods, 1)
	for _, host := range []pipeline.HostMode{pipeline.HostStaged, pipeline.HostRegistered} {
		rep, err := g.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Host: host, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
		require.NoError(t, err, host)
		require.Len(t, rep.Devices, 2)
		assert.Equal(t, 41, rep.Devices[0].Chunks+rep.Devices[1].Chunks, host)
		assert.Positive(t, rep.Devices[1].Chunks, "device 1 took chunks (%s)", host)
	}
	st, err := g.StageTimes(context.Background(), pipeline.Job{N: n, Kernel: k, Host: pipeline.HostRegistered, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err)
	assert.Positive(t, st.Copies)

	portable, err := ctx0.AllocHost(4*n, driver.HostAllocOptions{Portable: true})
	require.NoError(t, err)
	_, err = g.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Pinned(portable)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err, "portable pinned memory serves both devices")

	local, err := ctx0.AllocHost(4*n, driver.HostAllocOptions{})
	require.NoError(t, err)
	_, err = g.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Host: pipeline.HostPinned, Inputs: []pipeline.Buffer{pipeline.Pinned(local)}, Outputs: []pipeline.Buffer{pipeline.Pinned(portable)}})
	require.ErrorIs(t, err, driver.ErrWrongContext)
	var de *pipeline.DeviceError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, 1, de.Device)
	_, err = g.Run(context.Background(), pipeline.Job{N: n, Kernel: k, Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)}})
	require.NoError(t, err, "the group runs on after the refusal")

	require.NoError(t, g.Close())
	require.NoError(t, local.Close())
	require.NoError(t, portable.Close())
	require.NoError(t, mods.Close())
}

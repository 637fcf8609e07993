package bench

import (
	"context"
	"errors"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGPUMachine opens every GPU with the seed kernel and runs a pinned
// workload through Run, every run verified; a user's kernel that is not
// element-wise is refused with its parameter named; and where NVRTC is
// installed, a CUDA C kernel compiled for each GPU computes 3x+1.
func TestGPUMachine(t *testing.T) {
	gputest.Context(t) // skips without a driver
	n, err := driver.DeviceCount()
	require.NoError(t, err)
	m, err := OpenMachine(MachineOptions{AllDevices: true, Kernel: "seed"})
	require.NoError(t, err)
	defer m.Close()
	assert.Len(t, m.Backends, n)
	require.NotNil(t, m.Context)
	require.NotNil(t, m.Modules)
	w, err := m.NewWorkload(WorkloadOptions{Elems: 1 << 20, Pinned: true, Scalars: map[string]float64{"iters": 10}})
	require.NoError(t, err)
	defer w.Close()
	cfg := w.Config
	cfg.ChunkElems = 256 << 10
	res, err := Run(context.Background(), m.Backends, RunOptions{Config: cfg, Job: w.Job, Output: w.Outputs[0], Verify: w.Verify, Repeat: 2, Ordinals: m.Ordinals})
	require.NoError(t, err)
	assert.Equal(t, 3, res.Verified, "the baseline and two pipelined runs")

	_, err = OpenMachine(MachineOptions{PTXFile: "../ptx/testdata/nvcc/scale.ptx", Entry: "scale"})
	assert.EqualError(t, err, "bench: OpenMachine: kernel scale: parameter scale_param_2 is 4 bytes; every parameter but the last must be a pointer")

	if err := nvrtc.Load(); errors.Is(err, loader.ErrNoLibrary) {
		t.Skip("skipping the CUDA C kernel: no NVRTC library (set OVERLAP_NVRTC_LIBRARY): " + err.Error())
	}
	u, err := OpenMachine(MachineOptions{CUFile: "../nvrtc/testdata/scale.cu", Entry: "scale"})
	require.NoError(t, err)
	defer u.Close()
	assert.Equal(t, 1, u.UserInputs)
	assert.Nil(t, u.Modules)
	uw, err := u.NewWorkload(WorkloadOptions{Elems: 1 << 20})
	require.NoError(t, err)
	defer uw.Close()
	assert.Nil(t, uw.Verify, "no CPU reference for a user's kernel")
	ucfg := uw.Config
	ucfg.ChunkElems = 256 << 10
	p, err := pipeline.New(u.Backends[0], ucfg)
	require.NoError(t, err)
	defer p.Close()
	_, err = p.Run(context.Background(), uw.Job)
	require.NoError(t, err)
	in, out := uw.Inputs[0], uw.Outputs[0]
	bad := 0
	for i := range out {
		if out[i] != 3*in[i]+1 {
			bad++
		}
	}
	assert.Zero(t, bad, "elements that are not 3x+1")
}

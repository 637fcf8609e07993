package nvrtc_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/nvrtc"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireNVRTC gives a context on GPU 0 (skipping without a driver, as
// every GPU test does) and skips only when NVRTC is absent, saying what
// was looked for; NVRTC found but failing fails the test.
func requireNVRTC(t *testing.T) *driver.Context {
	t.Helper()
	ctx := gputest.Context(t)
	if err := nvrtc.Load(); err != nil {
		var oe *loader.OptionalError
		if errors.As(err, &oe) {
			t.Skip("skipping: " + oe.Brief())
		}
		t.Fatalf("NVRTC present but unusable: %v", err)
	}
	major, minor, err := nvrtc.Version()
	require.NoError(t, err)
	t.Logf("NVRTC %d.%d from %s", major, minor, nvrtc.LibraryPath())
	return ctx
}

// saxpySource uses a header, a macro from the flags and a __device__
// function that -default-device makes one.
const saxpySource = `#include "axpy.h"
float twice(float v) { return v + v; }
extern "C" __global__ void axpy(float *out, const float *x, const float *y, float a, unsigned n) {
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = AXPY(a, x[i], y[i]) + twice(OFFSET);
}
`

var saxpyHeaders = []nvrtc.Header{{Name: "axpy.h", Source: "#define AXPY(a, x, y) ((a) * (x) + (y))\n"}}

// runAxpy loads image on ctx, runs axpy over n elements and checks every
// one against the CPU: out = a*x + y + 2*offset, computed in float32 with
// each operation rounded (the kernels are compiled with -fmad=false).
func runAxpy(t *testing.T, ctx *driver.Context, image []byte, offset float32) {
	t.Helper()
	mod, err := ctx.LoadModule(image, driver.ModuleOptions{})
	require.NoError(t, err)
	defer mod.Close()
	fn, err := mod.Function("axpy")
	require.NoError(t, err)
	const n = 1<<20 + 3
	const a = float32(1.5)
	x, y := make([]float32, n), make([]float32, n)
	kernels.FillPattern(x, 0)
	kernels.FillPattern(y, 7919)
	bufs := make([]*driver.DeviceBuffer, 3)
	for i := range bufs {
		bufs[i], err = ctx.Alloc(4 * n)
		require.NoError(t, err)
		defer bufs[i].Close()
	}
	require.NoError(t, bufs[1].CopyFromHost(0, driver.Bytes(x)))
	require.NoError(t, bufs[2].CopyFromHost(0, driver.Bytes(y)))
	require.NoError(t, ctx.Synchronize()) // the stream below does not wait for the copies
	s, err := ctx.NewStream(driver.StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	args := driver.NewArgs().Buffer(bufs[0], 0).Buffer(bufs[1], 0).Buffer(bufs[2], 0).Float32(a).Uint32(n)
	require.NoError(t, fn.Launch(s, driver.GridFor(n, 256), args))
	require.NoError(t, s.Synchronize())
	out := make([]float32, n)
	require.NoError(t, bufs[0].CopyToHost(driver.Bytes(out), 0))
	bad := 0
	for i := range out {
		ax := float32(a * x[i])
		want := float32(ax+y[i]) + float32(offset+offset)
		if out[i] != want {
			if bad < 5 {
				t.Errorf("element %d: %v, want %v (x %v, y %v)", i, out[i], want, x[i], y[i])
			}
			bad++
		}
	}
	require.Zero(t, bad, "elements that differ from the CPU's")
}

// TestGPUCompileAndRun compiles a kernel at run time for GPU 0's compute
// capability, loads the PTX with package driver, runs it and checks every
// element.
func TestGPUCompileAndRun(t *testing.T) {
	ctx := requireNVRTC(t)
	major, minor, err := ctx.Device().ComputeCapability()
	require.NoError(t, err)
	res, err := nvrtc.Compile(saxpySource, "axpy.cu", nvrtc.Options{
		Device: ctx.Device(), DefaultDevice: true, Headers: saxpyHeaders,
		Flags: []string{"-fmad=false", "-DOFFSET=0.25f"},
	})
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("compute_%d%d", major, minor), res.Arch)
	assert.Nil(t, res.CUBIN, "a virtual architecture gives PTX only")
	f, err := ptx.Parse(res.PTX)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("sm_%d%d", major, minor), f.Target())
	t.Logf("PTX ISA %s, %d bytes; log %q", f.Version, len(res.PTX), res.Log)
	runAxpy(t, ctx, res.PTX, 0.25)
}

// TestGPUCUBIN compiles for the GPU's real architecture: the CUBIN loads
// without the driver's JIT and computes the same.
func TestGPUCUBIN(t *testing.T) {
	ctx := requireNVRTC(t)
	major, minor, err := ctx.Device().ComputeCapability()
	require.NoError(t, err)
	arch := fmt.Sprintf("sm_%d%d", major, minor)
	res, err := nvrtc.Compile(saxpySource, "axpy.cu", nvrtc.Options{
		Arch: arch, DefaultDevice: true, Headers: saxpyHeaders,
		Flags: []string{"-fmad=false", "-DOFFSET=-2.0f"},
	})
	require.NoError(t, err)
	require.NotEmpty(t, res.CUBIN, "NVRTC gave no CUBIN for %s", arch)
	assert.Equal(t, driver.ImageCubin, driver.DetectImage(res.CUBIN))
	t.Logf("%s: CUBIN %d bytes, PTX %d bytes", arch, len(res.CUBIN), len(res.PTX))
	runAxpy(t, ctx, res.Image(), -2)
}

// TestGPUCompileError: NVRTC's own log comes back in the error.
func TestGPUCompileError(t *testing.T) {
	requireNVRTC(t)
	_, err := nvrtc.Compile("extern \"C\" __global__ void k(float *p) { p[0] = undeclared_name; }\n", "broken.cu", nvrtc.Options{})
	require.Error(t, err)
	assert.True(t, errors.Is(err, nvrtc.ErrCompilation), "%v", err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "nvrtc: broken.cu: nvrtcCompileProgram: NVRTC_ERROR_COMPILATION (6):\n"), msg)
	assert.Contains(t, msg, "undeclared_name")
	assert.Contains(t, msg, "broken.cu(1)")
	t.Log(msg)

	_, err = nvrtc.Compile("extern \"C\" __global__ void k() {}\n", "opt.cu", nvrtc.Options{Flags: []string{"--no-such-option"}})
	require.Error(t, err)
	var e *nvrtc.Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, "nvrtcCompileProgram", e.Op)
	t.Log(err)
}

// TestGPUCompileKernelFile runs testdata/scale.cu as overlap run --cu
// does: compiled for the GPU, loaded as a --ptx kernel is, run through
// the pipeline, every element checked.
func TestGPUCompileKernelFile(t *testing.T) {
	ctx := requireNVRTC(t)
	path := filepath.Join("testdata", "scale.cu")
	res, err := nvrtc.CompileKernelFile(path, "scale", nvrtc.Options{Device: ctx.Device(), Flags: []string{"-fmad=false"}})
	require.NoError(t, err)
	prog, err := ptx.Load(ctx, path, res.PTX, "scale", driver.ModuleOptions{})
	require.NoError(t, err)
	defer prog.Close()
	require.Len(t, prog.Entry.Params, 3, "(out, in, n)")

	k := kernels.Elementwise("scale", pipeline.FunctionOn(ctx, prog.Function))
	p, err := pipeline.New(pipeline.GPU(ctx), pipeline.Float32Config(1, 1))
	require.NoError(t, err)
	defer p.Close()
	const n = 3<<20 + 11
	in, out := make([]float32, n), make([]float32, n)
	kernels.FillPattern(in, 0)
	_, err = p.Run(context.Background(), pipeline.Job{
		N: n, Kernel: k,
		Inputs: []pipeline.Buffer{pipeline.Slice(in)}, Outputs: []pipeline.Buffer{pipeline.Slice(out)},
	})
	require.NoError(t, err)
	bad := 0
	for i := range out {
		if want := float32(3*in[i]) + 1; out[i] != want {
			if bad < 5 {
				t.Errorf("element %d: %v, want %v", i, out[i], want)
			}
			bad++
		}
	}
	require.Zero(t, bad, "elements that differ from the CPU's")

	_, err = nvrtc.CompileKernelFile(path, "scal", nvrtc.Options{Device: ctx.Device()})
	require.Error(t, err)
	assert.Equal(t, `ptx: no such entry: testdata/scale.cu has no kernel "scal"; its kernels are: scale`, err.Error())
}

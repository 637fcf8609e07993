package driver

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// launchFunc launches f on s: Launch, LaunchEx or LaunchCooperative.
type launchFunc func(f *Function, s *Stream, cfg LaunchConfig, args *Args) error

func plainLaunch(f *Function, s *Stream, cfg LaunchConfig, args *Args) error {
	return f.Launch(s, cfg, args)
}

// checkAddScalar runs testdata's add_scalar (y = x + a) on ctx over n
// floats with cfg (GridFor(n, 256) when zero), through launch, and checks
// every element against the CPU's sum.
func checkAddScalar(t *testing.T, ctx *Context, f *Function, n int, cfg LaunchConfig, launch launchFunc) {
	t.Helper()
	if cfg.Grid.X == 0 {
		cfg = GridFor(n, 256)
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i)*0.25 - 7
	}
	dx, err := ctx.Alloc(n * 4)
	require.NoError(t, err)
	defer dx.Close()
	dy, err := ctx.Alloc(n * 4)
	require.NoError(t, err)
	defer dy.Close()
	require.NoError(t, dx.CopyFromHost(0, Bytes(x)))
	require.NoError(t, dy.Memset(0))
	s, err := ctx.NewStream(StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, launch(f, s, cfg, NewArgs().Buffer(dy, 0).Buffer(dx, 0).Float32(1.5).Uint32(uint32(n))))
	require.NoError(t, s.Synchronize())
	y := make([]float32, n)
	require.NoError(t, dy.CopyToHost(Bytes(y), 0))
	for i := range y {
		if y[i] != x[i]+1.5 {
			t.Fatalf("y[%d] = %v, want %v", i, y[i], x[i]+1.5)
		}
	}
}

// TestGPULinkAndLoadCubin links testdata's PTX into a cubin with the
// driver's JIT linker (no nvcc), loads the cubin with cuModuleLoadData,
// and runs its add_scalar beside the PTX-loaded one: both match the CPU.
func TestGPULinkAndLoadCubin(t *testing.T) {
	ctx := requireGPU(t)
	src, err := os.ReadFile("testdata/kernels.ptx")
	require.NoError(t, err)
	l, err := ctx.NewLinker(ModuleOptions{Verbose: true})
	require.NoError(t, err)
	require.NoError(t, l.Add(src, "kernels.ptx"))
	cubin, err := l.Complete()
	require.NoError(t, err)
	t.Logf("linked a %d-byte cubin; info log: %q", len(cubin), l.InfoLog())
	require.NoError(t, l.Close())
	kind, err := CheckImage(cubin)
	require.NoError(t, err, "the driver's cubin passes CheckImage")
	assert.Equal(t, ImageCubin, kind)
	assert.Equal(t, ImageCubin, DetectImage(cubin))

	fromCubin, err := ctx.LoadImage(cubin)
	require.NoError(t, err)
	defer fromCubin.Close()
	fromPTX := loadTestKernels(t, ctx)
	defer fromPTX.Close()
	for name, m := range map[string]*Module{"cubin": fromCubin, "ptx": fromPTX} {
		f, err := m.Function("add_scalar")
		require.NoError(t, err, name)
		p, ok := f.Params()
		require.True(t, ok, name)
		assert.Equal(t, []ParamInfo{{0, 8}, {8, 8}, {16, 4}, {20, 4}}, p, name)
		checkAddScalar(t, ctx, f, 1<<20+5, LaunchConfig{}, plainLaunch)
	}

	// The cubin reaches the linker as a cubin: the H200's driver JIT-links
	// PTX for sm_90a, an architecture-specific target that a plain link
	// state refuses to take back (CUDA_ERROR_NO_BINARY_FOR_GPU on driver
	// 580), where a cubin passed as PTX would fail as invalid PTX. A link
	// of garbage never reaches the driver.
	l2, err := ctx.NewLinker(ModuleOptions{})
	require.NoError(t, err)
	defer l2.Close()
	if err := l2.Add(cubin, "kernels.cubin"); err != nil {
		assert.ErrorIs(t, err, ErrNoBinaryForGPU, "the cubin was refused for another reason")
	} else {
		_, err = l2.Complete()
		require.NoError(t, err)
	}
	assert.ErrorIs(t, l2.Add([]byte{0x1f, 0x8b, 0, 1}, "gz"), ErrInvalidArgument)

	// PTX with an error fails in Add with the JIT's log.
	l3, err := ctx.NewLinker(ModuleOptions{})
	require.NoError(t, err)
	defer l3.Close()
	err = l3.Add([]byte(".version 7.0\n.target sm_52\n.address_size 64\nthis is not ptx\n"), "bad.ptx")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.NotEmpty(t, e.Detail, "the JIT's error log")
}

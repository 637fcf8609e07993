package ptx

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run1D uploads inputs, launches p over n elements with args built by
// build, and returns the output, all synchronously.
func run1D(t *testing.T, ctx *driver.Context, p *Program, n int, inputs [][]float32, scalars func(a *driver.Args)) []float32 {
	t.Helper()
	out, err := ctx.Alloc(n * 4)
	require.NoError(t, err)
	defer out.Close()
	args := driver.NewArgs().Buffer(out, 0)
	for _, in := range inputs {
		d, err := ctx.Alloc(n * 4)
		require.NoError(t, err)
		defer d.Close()
		require.NoError(t, d.CopyFromHost(0, driver.Bytes(in)))
		args.Buffer(d, 0)
	}
	scalars(args)
	s, err := ctx.NewStream(driver.StreamOptions{})
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, p.Function.Launch(s, driver.GridFor(n, 256), args))
	require.NoError(t, s.Synchronize())
	res := make([]float32, n)
	require.NoError(t, out.CopyToHost(driver.Bytes(res), 0))
	return res
}

func TestGPUEmbeddedKernelsMatchReferences(t *testing.T) {
	ctx := gputest.Context(t)
	const n = 1<<22 + 7
	x, y := make([]float32, n), make([]float32, n)
	FillPattern(x, 0)
	FillPattern(y, 12345)

	t.Run("seed", func(t *testing.T) {
		p, err := Seed.Load(ctx)
		require.NoError(t, err)
		defer p.Close()
		for _, iters := range []int{0, 1, 100} {
			out := run1D(t, ctx, p, n, [][]float32{x}, func(a *driver.Args) { a.Uint32(n).Int32(int32(iters)) })
			require.NoError(t, VerifySeed(x, out, iters), "iters %d", iters)
		}
	})
	t.Run("saxpy", func(t *testing.T) {
		p, err := Saxpy.Load(ctx)
		require.NoError(t, err)
		defer p.Close()
		out := run1D(t, ctx, p, n, [][]float32{x, y}, func(a *driver.Args) { a.Float32(2.5).Uint32(n) })
		require.NoError(t, VerifySaxpy(x, y, out, 2.5))
	})
	t.Run("lerp", func(t *testing.T) {
		p, err := Lerp.Load(ctx)
		require.NoError(t, err)
		defer p.Close()
		out := run1D(t, ctx, p, n, [][]float32{x, y}, func(a *driver.Args) { a.Float32(0.3).Float32(-1.5).Uint32(n) })
		require.NoError(t, VerifyLerp(x, y, out, 0.3, -1.5))
	})
	t.Run("empty", func(t *testing.T) {
		p, err := Empty.Load(ctx)
		require.NoError(t, err)
		defer p.Close()
		s, err := ctx.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		defer s.Close()
		require.NoError(t, p.Function.Launch(s, driver.GridFor(1, 1), driver.NewArgs()))
		require.NoError(t, s.Synchronize())
	})
	assert.Equal(t, 0, ctx.OpenObjects(), "nothing leaked")
}

func TestGPUBadPTX(t *testing.T) {
	ctx := gputest.Context(t)
	seed := string(Seed.PTX())
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		return p
	}
	cases := []struct {
		name  string
		src   []byte
		entry string
		want  []string
		is    error
	}{
		{"empty file", nil, "seed", []string{"empty PTX"}, nil},
		{"binary garbage", []byte("\x7fELF\x02\x01\x01\x00\xde\xad\xbe\xef"), "seed", []string{"binary data, not PTX text"}, nil},
		{"truncated", []byte(seed[:len(seed)*2/3]), "seed", []string{"never closed (truncated PTX?)"}, nil},
		{"missing entry", []byte(".version 7.0\n.target sm_75\n.address_size 64\n.func f()\n{\nret;\n}\n"), "seed", []string{"defines no .entry"}, ErrNoEntry},
		{"unknown entry name", []byte(seed), "sed", []string{`has no entry "sed"; its entries are: seed`}, ErrNoEntry},
		{"target too new", []byte(strings.Replace(seed, ".target sm_75", ".target sm_100", 1)), "seed", []string{"targets sm_100", "is sm_90"}, ErrUnsupported},
		{"version too new", []byte(strings.Replace(seed, ".version 7.0", ".version 9.9", 1)), "seed", []string{"declares PTX ISA 9.9", "reads PTX ISA up to"}, ErrUnsupported},
		{"JIT syntax error", []byte(strings.Replace(seed, "ret;", "frobnicate.u32 %r1;\n\tret;", 1)), "seed", []string{"CUDA_ERROR_INVALID_PTX", "ptxas application ptx input, line", "frobnicate"}, driver.ErrInvalidPTX},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := write(strings.ReplaceAll(tc.name, " ", "_")+".ptx", tc.src)
			p, err := LoadFile(ctx, path, tc.entry, driver.ModuleOptions{})
			require.Error(t, err)
			assert.Nil(t, p)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			t.Logf("%s: %v", tc.name, err)
			assert.Equal(t, 0, ctx.OpenObjects(), "nothing leaked")
		})
	}

	t.Run("100 MB of junk", func(t *testing.T) {
		path := write("junk.ptx", bytes.Repeat([]byte("junk\n"), 100<<20/5))
		_, err := LoadFile(ctx, path, "seed", driver.ModuleOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "larger than 64 MiB: not a PTX module")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadFile(ctx, filepath.Join(dir, "nope.ptx"), "seed", driver.ModuleOptions{})
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("arguments that do not match the parameters", func(t *testing.T) {
		p, err := Seed.Load(ctx)
		require.NoError(t, err)
		defer p.Close()
		s, err := ctx.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		defer s.Close()
		err = p.Function.Launch(s, driver.GridFor(1, 1), driver.NewArgs().Pointer(0).Uint32(1))
		assert.ErrorIs(t, err, driver.ErrArguments)
		assert.EqualError(t, err, "cuda: Launch seed: cuda: kernel arguments do not match parameters: kernel takes 4 argument(s), got 2")
	})
	assert.Equal(t, 0, ctx.OpenObjects())
}

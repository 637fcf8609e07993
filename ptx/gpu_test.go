package ptx

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// run1D uploads inputs, launches p over n elements with the output first,
// then the inputs, then what scalars adds, and returns the output, all
// synchronously.
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

// TestGPUNvccFixtures loads PTX exactly as nvcc wrote it (plain, -lineinfo,
// -G, and -G with several kernels: ISA 9.0, ".target sm_75, debug", .file,
// .loc and .section .debug_*) through Load, and runs every kernel. Issue
// 10: such files were refused by the parser.
func TestGPUNvccFixtures(t *testing.T) {
	ctx := gputest.Context(t)
	const n = 100003
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i%1000) - 500.5
		y[i] = float32(i%77) * 0.25
	}
	load := func(t *testing.T, file, entry string) *Program {
		p, err := Load(ctx, file, readFile(t, "testdata/nvcc/"+file), entry, driver.ModuleOptions{})
		require.NoError(t, err, "%s: %s", file, entry)
		t.Cleanup(func() { p.Close() })
		return p
	}
	for _, file := range []string{"scale.ptx", "scale_lineinfo.ptx", "scale_debug.ptx"} {
		t.Run(file, func(t *testing.T) {
			p := load(t, file, "scale")
			out := run1D(t, ctx, p, n, [][]float32{x}, func(a *driver.Args) { a.Float32(-1.75).Uint32(n) })
			for i := range out {
				require.Equal(t, -1.75*x[i], out[i], "element %d", i)
			}
		})
	}
	t.Run("multi_debug.ptx", func(t *testing.T) {
		out := run1D(t, ctx, load(t, "multi_debug.ptx", "add"), n, [][]float32{x, y}, func(a *driver.Args) { a.Uint32(n) })
		for i := range out {
			require.Equal(t, x[i]+y[i], out[i], "add: element %d", i)
		}
		out = run1D(t, ctx, load(t, "multi_debug.ptx", "double_it"), n, [][]float32{x}, func(a *driver.Args) { a.Uint32(n) })
		for i := range out {
			require.Equal(t, x[i]+x[i], out[i], "double_it: element %d", i)
		}
		// struct Pair { float a; int b; } by value: 8 bytes, 4-aligned.
		pair := make([]byte, 8)
		binary.LittleEndian.PutUint32(pair[0:], math.Float32bits(1.5))
		b := int32(-3)
		binary.LittleEndian.PutUint32(pair[4:], uint32(b))
		out = run1D(t, ctx, load(t, "multi_debug.ptx", "with_struct"), n, nil, func(a *driver.Args) { a.Raw(pair, 4).Uint32(n) })
		for i := range out {
			require.Equal(t, float32(-4.5), out[i], "with_struct: element %d", i)
		}
	})
	assert.Equal(t, 0, ctx.OpenObjects(), "nothing leaked")
}

func TestGPUBadPTX(t *testing.T) {
	ctx := gputest.Context(t)
	seed := string(readFile(t, "testdata/nvcc/scale.ptx"))
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
		{"empty file", nil, "scale", []string{"empty PTX"}, nil},
		{"binary garbage", []byte("\x7fELF\x02\x01\x01\x00\xde\xad\xbe\xef"), "scale", []string{"binary data, not PTX text"}, nil},
		{"truncated", []byte(seed[:len(seed)*2/3]), "scale", []string{"never closed (truncated PTX?)"}, nil},
		{"missing entry", []byte(".version 7.0\n.target sm_75\n.address_size 64\n.func f()\n{\nret;\n}\n"), "scale", []string{"defines no .entry"}, ErrNoEntry},
		{"unknown entry name", []byte(seed), "sacle", []string{`has no entry "sacle"; its entries are: scale`}, ErrNoEntry},
		{"target too new", []byte(strings.Replace(seed, ".target sm_75", ".target sm_100", 1)), "scale", []string{"targets sm_100", "is sm_90"}, ErrUnsupported},
		{"version too new", []byte(strings.Replace(seed, ".version 9.0", ".version 9.9", 1)), "scale", []string{"declares PTX ISA 9.9", "reads PTX ISA up to"}, ErrUnsupported},
		{"JIT syntax error", []byte(strings.Replace(seed, "ret;", "frobnicate.u32 %r1;\n\tret;", 1)), "scale", []string{"CUDA_ERROR_INVALID_PTX", "ptxas application ptx input, line", "frobnicate"}, driver.ErrInvalidPTX},
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
		_, err := LoadFile(ctx, path, "scale", driver.ModuleOptions{})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "larger than 64 MiB: not a PTX module")
	})
	t.Run("missing file", func(t *testing.T) {
		_, err := LoadFile(ctx, filepath.Join(dir, "nope.ptx"), "scale", driver.ModuleOptions{})
		assert.ErrorIs(t, err, os.ErrNotExist)
	})
	t.Run("arguments that do not match the parameters", func(t *testing.T) {
		p, err := Load(ctx, "scale.ptx", []byte(seed), "scale", driver.ModuleOptions{})
		require.NoError(t, err)
		defer p.Close()
		s, err := ctx.NewStream(driver.StreamOptions{})
		require.NoError(t, err)
		defer s.Close()
		err = p.Function.Launch(s, driver.GridFor(1, 1), driver.NewArgs().Pointer(0).Uint32(1))
		assert.ErrorIs(t, err, driver.ErrArguments)
		assert.EqualError(t, err, "cuda: Function.Launch: kernel arguments do not match parameters: kernel scale takes 4 argument(s), got 2")
	})
	assert.Equal(t, 0, ctx.OpenObjects())
}

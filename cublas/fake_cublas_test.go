//go:build linux

package cublas

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/loader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// buildFake compiles testdata/fakecublas.c and returns the library's
// path; it skips the test without a C compiler.
func buildFake(t *testing.T) string {
	t.Helper()
	cc := ""
	if f := strings.Fields(os.Getenv("CC")); len(f) > 0 {
		cc, _ = exec.LookPath(f[0])
	}
	for _, n := range []string{"cc", "gcc", "clang"} {
		if cc == "" {
			cc, _ = exec.LookPath(n)
		}
	}
	if cc == "" {
		t.Skip("skipping: no C compiler to build the fake cuBLAS (set CC)")
	}
	src, err := filepath.Abs(filepath.Join("testdata", "fakecublas.c"))
	require.NoError(t, err)
	out := filepath.Join(t.TempDir(), "libcublas.so.12")
	if msg, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", out, src, "-ldl", "-lm").CombinedOutput(); err != nil {
		t.Fatalf("building the fake cuBLAS: %v\n%s", err, msg)
	}
	return out
}

// fakeControls are the fake cuBLAS's controls, in the library this
// process opened.
type fakeControls struct{ syms map[string]uintptr }

func controls(t *testing.T) *fakeControls {
	t.Helper()
	l, err := loader.CUBLAS.OpenFirst([]string{os.Getenv(loader.CUBLAS.EnvVar)})
	require.NoError(t, err)
	c := &fakeControls{syms: map[string]uintptr{}}
	for _, n := range []string{"fake_live", "fake_violations", "fake_last", "fake_fail", "fake_lt_objects", "fake_lt_handles"} {
		p, err := l.Symbol(n)
		require.NoError(t, err)
		c.syms[n] = p
	}
	return c
}

func (c *fakeControls) int(name string) int {
	r, _, _ := purego.SyscallN(c.syms[name])
	return int(int32(r))
}
func (c *fakeControls) last() string {
	buf := make([]byte, 512)
	purego.SyscallN(c.syms["fake_last"], uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
	s, _, _ := strings.Cut(string(buf), "\x00")
	return s
}
func (c *fakeControls) fail(name string, code int) {
	b := append([]byte(name), 0)
	purego.SyscallN(c.syms["fake_fail"], uintptr(unsafe.Pointer(&b[0])), uintptr(code))
	runtime.KeepAlive(b)
}

// upload copies v into a new device buffer that the test closes.
func upload(t *testing.T, ctx *driver.Context, v []float32) *driver.DeviceBuffer {
	t.Helper()
	b, err := ctx.Alloc(4 * len(v))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	require.NoError(t, b.CopyFromHost(0, driver.Bytes(v)))
	return b
}

func download(t *testing.T, b *driver.DeviceBuffer) []float32 {
	t.Helper()
	out := make([]float32, b.Len()/4)
	require.NoError(t, b.CopyToHost(driver.Bytes(out), 0))
	return out
}

// seq is 1, 2, … n, small integers that every product keeps exact.
func seq(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = scale * float32(i%7+1)
	}
	return v
}

// TestFakeCUBLAS runs the binding on the fake driver and the fake cuBLAS:
// the calls, their arguments as cuBLAS receives them, the row-major
// helpers' results, the argument checks and the handle's lifetime.
func TestFakeCUBLAS(t *testing.T) {
	if os.Getenv(loader.CUBLAS.EnvVar) == "" || os.Getenv("OVERLAP_FAKECUDA_CHILD") == "" {
		lib := buildFake(t)
		t.Setenv(loader.CUBLAS.EnvVar, lib)
		t.Setenv(loader.CUBLASLt.EnvVar, lib) // the fake is both
	}
	if fakecuda.Run(t) == nil {
		return
	}
	fc := controls(t)
	ctx := gputest.Context(t)
	h, err := New(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, fc.int("fake_live"))
	s, err := ctx.NewStream(driver.StreamOptions{})
	require.NoError(t, err)
	defer s.Close()

	t.Run("version, stream, math", func(t *testing.T) {
		v, err := h.Version()
		require.NoError(t, err)
		assert.Equal(t, 120804, v)
		require.NoError(t, h.SetStream(s))
		assert.Equal(t, "cublasSetStream_v2 stream=set", fc.last())
		require.NoError(t, h.SetMath(TF32Math))
		m, err := h.Math()
		require.NoError(t, err)
		assert.Equal(t, TF32Math, m)
		require.NoError(t, h.SetMath(DefaultMath))
	})

	t.Run("each call makes the handle's context current", func(t *testing.T) {
		// Another device's context is current on this thread: every call
		// must switch to the handle's before it enters cuBLAS.
		dev1, err := driver.DeviceAt(1)
		require.NoError(t, err)
		ctx1, err := driver.NewContext(dev1)
		require.NoError(t, err)
		defer ctx1.Close()
		before := fc.int("fake_violations")
		for i := 0; i < 3; i++ {
			b1, err := ctx1.Bind()
			require.NoError(t, err)
			_, err = h.Version()
			assert.NoError(t, err)
			assert.NoError(t, h.SetMath(DefaultMath))
			b1.Release()
		}
		assert.Equal(t, before, fc.int("fake_violations"), "calls made with another context current")
	})

	t.Run("MatMul row-major", func(t *testing.T) {
		const m, k, n = 5, 3, 4
		a, b := seq(m*k, 1), seq(k*n, 0.5)
		ab, bb := upload(t, ctx, a), upload(t, ctx, b)
		cb := upload(t, ctx, make([]float32, m*n))
		require.NoError(t, h.MatMul(RowMajor{Buf: cb, Rows: m, Cols: n}, RowMajor{Buf: ab, Rows: m, Cols: k}, RowMajor{Buf: bb, Rows: k, Cols: n}, Compute32F))
		assert.Equal(t, "cublasGemmEx ta=0 tb=0 m=4 n=5 k=3 alpha=1 types=0,0,0 lda=4 ldb=3 beta=0 ldc=4 compute=68 algo=-1 stream=set", fc.last())
		got := download(t, cb)
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				var want float32
				for p := 0; p < k; p++ {
					want += a[i*k+p] * b[p*n+j]
				}
				assert.Equal(t, want, got[i*n+j], "C[%d][%d]", i, j)
			}
		}
	})

	t.Run("Linear is X·Wᵀ", func(t *testing.T) {
		const rows, in, out = 6, 3, 2
		x, w := seq(rows*in, 1), seq(out*in, 2)
		xb, wb := upload(t, ctx, x), upload(t, ctx, w)
		yb := upload(t, ctx, make([]float32, rows*out))
		require.NoError(t, h.Linear(RowMajor{Buf: yb, Rows: rows, Cols: out}, RowMajor{Buf: xb, Rows: rows, Cols: in}, RowMajor{Buf: wb, Rows: out, Cols: in}, Compute32FFastTF32))
		assert.Equal(t, "cublasGemmEx ta=1 tb=0 m=2 n=6 k=3 alpha=1 types=0,0,0 lda=3 ldb=3 beta=0 ldc=2 compute=77 algo=-1 stream=set", fc.last())
		got := download(t, yb)
		for r := 0; r < rows; r++ {
			for o := 0; o < out; o++ {
				var want float32
				for p := 0; p < in; p++ {
					want += x[r*in+p] * w[o*in+p]
				}
				assert.Equal(t, want, got[r*out+o], "Y[%d][%d]", r, o)
			}
		}
	})

	t.Run("Sgemm column-major with strides and offsets", func(t *testing.T) {
		// A is 2 × 3 in a 4 × 3 array from element 1; B 3 × 2 with LD 3.
		abuf := upload(t, ctx, seq(13, 1))
		bbuf := upload(t, ctx, seq(6, 1))
		cbuf := upload(t, ctx, []float32{10, 20, 30, 40})
		g := GEMM{A: Matrix{Buf: abuf, Off: 4, Rows: 2, Cols: 3, LD: 4}, B: Matrix{Buf: bbuf, Rows: 3, Cols: 2, LD: 3},
			C: Matrix{Buf: cbuf, Rows: 2, Cols: 2, LD: 2}, Alpha: 2, Beta: 1}
		require.NoError(t, h.Sgemm(g))
		assert.Equal(t, "cublasSgemm_v2 ta=0 tb=0 m=2 n=2 k=3 alpha=2 lda=4 ldb=3 beta=1 ldc=2 math=0 stream=set", fc.last())
		av, bv := seq(13, 1)[1:], seq(6, 1)
		c0 := []float32{10, 20, 30, 40}
		got := download(t, cbuf)
		for j := 0; j < 2; j++ {
			for i := 0; i < 2; i++ {
				var s float32
				for p := 0; p < 3; p++ {
					s += av[i+p*4] * bv[p+j*3]
				}
				assert.Equal(t, 2*s+c0[i+j*2], got[i+j*2], "C(%d,%d)", i, j)
			}
		}
	})

	t.Run("argument checks", func(t *testing.T) {
		small := upload(t, ctx, make([]float32, 5))
		big := upload(t, ctx, make([]float32, 64))
		mat := func(b *driver.DeviceBuffer, r, c int) Matrix { return Matrix{Buf: b, Rows: r, Cols: c, LD: r} }
		cases := []struct {
			name string
			call func() error
			want string
		}{
			{"nil buffer", func() error {
				return h.Sgemm(GEMM{A: Matrix{Rows: 2, Cols: 2, LD: 2}, B: mat(big, 2, 2), C: mat(big, 2, 2)})
			}, "cublas: invalid argument: Sgemm: A: nil or closed buffer"},
			{"too short", func() error { return h.Sgemm(GEMM{A: mat(small, 2, 3), B: mat(big, 3, 2), C: mat(big, 2, 2)}) },
				"cublas: invalid argument: Sgemm: A of 2 × 3 (leading dimension 2) from byte 0 needs 24 bytes, but the buffer has 20"},
			{"leading dimension", func() error {
				return h.Sgemm(GEMM{A: Matrix{Buf: big, Rows: 4, Cols: 2, LD: 3}, B: mat(big, 2, 2), C: mat(big, 4, 2)})
			}, "cublas: invalid argument: Sgemm: A: leading dimension 3 is less than its 4 rows"},
			{"shapes", func() error { return h.Sgemm(GEMM{A: mat(big, 2, 3), B: mat(big, 2, 2), C: mat(big, 2, 2)}) },
				"cublas: invalid argument: Sgemm: op(A) is 2 × 3, op(B) 2 × 2 and C 2 × 2: want M × K, K × N and M × N"},
			{"zero size", func() error { return h.Sgemm(GEMM{A: mat(big, 0, 3), B: mat(big, 3, 2), C: mat(big, 0, 2)}) },
				"cublas: invalid argument: Sgemm: A is 0 × 3: each must be positive and fit an int"},
			{"operation", func() error { return h.Sgemm(GEMM{TransA: 2, A: mat(big, 2, 2), B: mat(big, 2, 2), C: mat(big, 2, 2)}) },
				"cublas: invalid argument: Sgemm: operation 2: want NoTrans or Trans"},
			{"offset", func() error {
				return h.Sgemm(GEMM{A: Matrix{Buf: big, Off: 2, Rows: 2, Cols: 2, LD: 2}, B: mat(big, 2, 2), C: mat(big, 2, 2)})
			}, "cublas: invalid argument: Sgemm: A: offset 2 is not a non-negative multiple of 4"},
			{"compute type", func() error { return h.GemmEx(GEMM{A: mat(big, 2, 2), B: mat(big, 2, 2), C: mat(big, 2, 2)}, 70) },
				"cublas: invalid argument: GemmEx: Compute(70): want Compute32F, Compute32FPedantic or Compute32FFastTF32"},
			{"row-major shapes", func() error {
				return h.MatMul(RowMajor{Buf: big, Rows: 2, Cols: 2}, RowMajor{Buf: big, Rows: 2, Cols: 3}, RowMajor{Buf: big, Rows: 2, Cols: 2}, Compute32F)
			}, "cublas: invalid argument: GemmEx: op(A) is 2 × 2, op(B) 3 × 2 and C 2 × 2: want M × K, K × N and M × N"},
			{"math mode", func() error { return h.SetMath(1) }, "cublas: invalid argument: SetMath: Math(1) is not a math mode"},
			{"nil stream", func() error { return h.SetStream(nil) }, "cublas: invalid argument: SetStream: nil or closed stream"},
			{"nil handle", func() error {
				return (*Handle)(nil).Sgemm(GEMM{A: mat(big, 2, 2), B: mat(big, 2, 2), C: mat(big, 2, 2)})
			},
				"cublas: invalid argument: Sgemm: nil *Handle"},
			{"nil context", func() error { _, err := New(nil); return err }, "cublas: invalid argument: New: nil or closed context"},
		}
		before := fc.last()
		for _, tc := range cases {
			err := tc.call()
			require.Error(t, err, tc.name)
			assert.Equal(t, tc.want, err.Error(), tc.name)
			assert.True(t, errors.Is(err, ErrInvalidArgument), tc.name)
		}
		assert.Equal(t, before, fc.last(), "a refused call reached cuBLAS")
	})

	t.Run("statuses name the call", func(t *testing.T) {
		big := upload(t, ctx, make([]float32, 16))
		g := GEMM{A: Matrix{Buf: big, Rows: 2, Cols: 2, LD: 2}, B: Matrix{Buf: big, Rows: 2, Cols: 2, LD: 2}, C: Matrix{Buf: big, Rows: 2, Cols: 2, LD: 2}}
		fc.fail("cublasGemmEx", 13)
		err := h.GemmEx(g, Compute32F)
		assert.Equal(t, "cublas: cublasGemmEx: CUBLAS_STATUS_EXECUTION_FAILED (13)", err.Error())
		fc.fail("cublasSgemm_v2", 15)
		err = h.Sgemm(g)
		assert.Equal(t, "cublas: cublasSgemm_v2: CUBLAS_STATUS_NOT_SUPPORTED (15)", err.Error())
		assert.True(t, errors.Is(err, ErrNotSupported))
		fc.fail("cublasSetMathMode", 42)
		assert.Equal(t, "cublas: cublasSetMathMode: unknown cublasStatus_t (42)", h.SetMath(TF32Math).Error())
		fc.fail("", 0)
		var e *Error
		fc.fail("cublasCreate_v2", 3)
		_, err = New(ctx)
		fc.fail("", 0)
		require.True(t, errors.As(err, &e))
		assert.Equal(t, Error{Op: "cublasCreate_v2", Status: 3}, *e)
		assert.Equal(t, 1, fc.int("fake_live"), "the failed create left a handle")
	})

	t.Run("Lt.Linear: bias and activation in the matmul", func(t *testing.T) {
		lt, err := NewLt(ctx)
		require.NoError(t, err)
		defer lt.Close()
		assert.Equal(t, 1, fc.int("fake_lt_handles"))
		const rows, in, out = 6, 3, 2
		x, w := seq(rows*in, 1), seq(out*in, 1)
		for i := range w {
			w[i] -= 4 // some products negative, for the ReLU
		}
		bias := []float32{-3, 5}
		xb, wb, bb := upload(t, ctx, x), upload(t, ctx, w), upload(t, ctx, bias)
		yb := upload(t, ctx, make([]float32, rows*out))
		layer := LinearLayer{Y: RowMajor{Buf: yb, Rows: rows, Cols: out}, X: RowMajor{Buf: xb, Rows: rows, Cols: in},
			W: RowMajor{Buf: wb, Rows: out, Cols: in}, Bias: bb, Epilogue: EpilogueReLUBias}
		require.NoError(t, lt.Linear(s, layer))
		assert.Equal(t, "cublasLtMatmul compute=68 scale=0 ta=1 tb=0 ep=6 bias=set A=3x2/3 B=3x6/3 D=2x6/2 C=D:yes alpha=1 beta=0 algo=null ws=33554432 stream=set", fc.last())
		assert.Equal(t, 0, fc.int("fake_lt_objects"), "descriptors or layouts left")
		got := download(t, yb)
		negatives := 0
		for r := 0; r < rows; r++ {
			for o := 0; o < out; o++ {
				want := bias[o]
				for p := 0; p < in; p++ {
					want += x[r*in+p] * w[o*in+p]
				}
				if want < 0 {
					want, negatives = 0, negatives+1
				}
				assert.Equal(t, want, got[r*out+o], "Y[%d][%d]", r, o)
			}
		}
		assert.NotZero(t, negatives, "the test's data should exercise the ReLU")

		// Each failure destroys what was created.
		for _, fn := range []string{"cublasLtMatmulDescCreate", "cublasLtMatmulDescSetAttribute", "cublasLtMatrixLayoutCreate", "cublasLtMatmul"} {
			fc.fail(fn, 14)
			err := lt.Linear(s, layer)
			fc.fail("", 0)
			require.Error(t, err, fn)
			assert.Equal(t, "cublas: "+fn+": CUBLAS_STATUS_INTERNAL_ERROR (14)", err.Error())
			assert.Equal(t, 0, fc.int("fake_lt_objects"), "%s failed: descriptors or layouts left", fn)
		}

		short := upload(t, ctx, []float32{1})
		before := fc.last()
		for _, c := range []struct {
			change func(*LinearLayer)
			stream *driver.Stream
			want   string
		}{
			{func(l *LinearLayer) { l.Bias = nil }, s, "cublas: invalid argument: Lt.Linear: epilogue bias+relu needs a Bias buffer"},
			{func(l *LinearLayer) { l.Epilogue = EpilogueGELU }, s, "cublas: invalid argument: Lt.Linear: a Bias buffer, but epilogue gelu adds none"},
			{func(l *LinearLayer) { l.Bias = short }, s, "cublas: invalid argument: Lt.Linear: Bias has 4 bytes, fewer than the 8 of 2 outputs"},
			{func(l *LinearLayer) { l.Epilogue = 3 }, s, "cublas: invalid argument: Lt.Linear: Epilogue(3) is not an epilogue of a Linear layer"},
			{func(l *LinearLayer) { l.W.Cols = 4 }, s, "cublas: invalid argument: Lt.Linear: op(A) is 2 × 4, op(B) 3 × 6 and C 2 × 6: want M × K, K × N and M × N"},
			{func(*LinearLayer) {}, nil, "cublas: invalid argument: Lt.Linear: nil or closed stream"},
		} {
			bad := layer
			c.change(&bad)
			err := lt.Linear(c.stream, bad)
			require.Error(t, err, c.want)
			assert.Equal(t, c.want, err.Error())
			assert.True(t, errors.Is(err, ErrInvalidArgument))
		}
		assert.Equal(t, before, fc.last(), "a refused call reached cuBLASLt")
		require.NoError(t, lt.Close())
		assert.Equal(t, 0, fc.int("fake_lt_handles"))
		assert.NoError(t, lt.Close())
		assert.True(t, errors.Is(lt.Linear(s, layer), driver.ErrClosed))
	})

	t.Run("Close", func(t *testing.T) {
		require.NoError(t, h.Close())
		assert.Equal(t, 0, fc.int("fake_live"))
		assert.NoError(t, h.Close(), "a second Close")
		_, err := h.Version()
		assert.True(t, errors.Is(err, driver.ErrClosed), "%v", err)
		assert.Equal(t, "cublas: Version: use of closed object", err.Error())
		assert.NoError(t, (*Handle)(nil).Close())
	})

	t.Run("a dropped handle is destroyed", func(t *testing.T) {
		_, err := New(ctx)
		require.NoError(t, err)
		assert.Equal(t, 1, fc.int("fake_live"))
		for i := 0; i < 500 && fc.int("fake_live") != 0; i++ {
			runtime.GC()
			time.Sleep(2 * time.Millisecond)
		}
		assert.Equal(t, 0, fc.int("fake_live"), "the cleanup did not destroy the handle")
	})

	assert.Equal(t, 0, fc.int("fake_violations"), "calls without the handle's context current, or on a dead handle")
}

// childEnv marks the child process of TestAbsentLibrary.
const childEnv = "OVERLAP_CUBLAS_TEST_CHILD"

// TestAbsentLibrary: without cuBLAS, New says what was looked for and
// where, before it needs a context or a driver.
func TestAbsentLibrary(t *testing.T) {
	missing := "/nonexistent/overlap-test/libcublas.so.13"
	if os.Getenv(childEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestAbsentLibrary$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1", loader.CUBLAS.EnvVar+"="+missing)
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestAbsentLibrary") {
			t.Fatalf("in a child process: %v\n%s", err, out)
		}
		return
	}
	_, err := New(nil)
	require.Error(t, err)
	assert.True(t, errors.Is(err, loader.ErrNoLibrary), "%v", err)
	assert.Equal(t, "loader: cuBLAS not found; tried 1 path(s):\n\t"+missing+
		": cannot open shared object file: No such file or directory\nset OVERLAP_CUBLAS_LIBRARY to the library's path", err.Error())
	assert.Equal(t, err, Load())
	assert.Equal(t, "", LibraryPath())
}

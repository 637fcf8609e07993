package cublas_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/purecuda/overlap/cublas"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/loader"
	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/require"
)

// gpuEnv is a context on GPU 0, a stream and a cuBLAS handle on it.
type gpuEnv struct {
	ctx *driver.Context
	s   *driver.Stream
	h   *cublas.Handle
	lt  *cublas.Lt
}

// requireCUBLAS skips without a driver, as every GPU test does, and
// without cuBLAS, saying what was looked for; cuBLAS found but failing
// fails the test.
func requireCUBLAS(t testing.TB) gpuEnv {
	t.Helper()
	ctx := gputest.Context(t)
	if err := cublas.Load(); err != nil {
		var oe *loader.OptionalError
		if errors.As(err, &oe) {
			t.Skip("skipping: " + oe.Brief())
		}
		t.Fatalf("cuBLAS present but unusable: %v", err)
	}
	s, err := ctx.NewStream(driver.StreamOptions{})
	require.NoError(t, err)
	h, err := cublas.New(ctx)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Errorf("closing the handle: %v", err)
		}
		s.Close()
	})
	require.NoError(t, h.SetStream(s))
	v, err := h.Version()
	require.NoError(t, err)
	lt, err := cublas.NewLt(ctx)
	require.NoError(t, err, "cuBLAS is here, but not cuBLASLt beside it")
	t.Cleanup(func() {
		if err := lt.Close(); err != nil {
			t.Errorf("closing the cuBLASLt handle: %v", err)
		}
	})
	t.Logf("cuBLAS %d from %s, cuBLASLt from %s", v, cublas.LibraryPath(), cublas.LtLibraryPath())
	return gpuEnv{ctx, s, h, lt}
}

func randoms(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	v := make([]float32, n)
	for i := range v {
		v[i] = 2*r.Float32() - 1
	}
	return v
}

func (e gpuEnv) upload(t testing.TB, v []float32) *driver.DeviceBuffer {
	t.Helper()
	b, err := e.ctx.Alloc(4 * len(v))
	require.NoError(t, err)
	t.Cleanup(func() { b.Close() })
	require.NoError(t, b.CopyFromHost(0, driver.Bytes(v)))
	// From pageable memory, the copy may still be on its way to the
	// device when it returns; the tests' streams do not wait for it.
	require.NoError(t, e.ctx.Synchronize())
	return b
}

func download(t testing.TB, b *driver.DeviceBuffer) []float32 {
	t.Helper()
	out := make([]float32, b.Len()/4)
	require.NoError(t, b.CopyToHost(driver.Bytes(out), 0))
	return out
}

// tolerance is the bound on a dot product of k terms against float64,
// relative to the sum of the terms' magnitudes: 1e-4·sqrt(k) in fp32
// (about sqrt(k) roundings of 2⁻²⁴, with a wide margin), 1e-2 in TF32
// (inputs rounded to 10 mantissa bits: 2⁻¹¹ each, plus the sum's).
func tolerance(c cublas.Compute, math32 cublas.Math, k int) float64 {
	if c == cublas.Compute32FFastTF32 || math32 == cublas.TF32Math {
		return 1e-2
	}
	return 1e-4 * math.Sqrt(float64(k))
}

// checkLinear compares rows of y = x·wᵀ (row-major) with float64: every
// row when rows is nil. It returns the worst error relative to Σ|x||w|.
func checkLinear(t testing.TB, y, x, w []float32, in, out int, rows []int, tol float64, what string) float64 {
	t.Helper()
	if rows == nil {
		for r := 0; r < len(x)/in; r++ {
			rows = append(rows, r)
		}
	}
	worst, bad := 0.0, 0
	for _, r := range rows {
		xr := x[r*in : (r+1)*in]
		for o := 0; o < out; o++ {
			wo := w[o*in : (o+1)*in]
			var s, mag float64
			for p := range xr {
				s += float64(xr[p]) * float64(wo[p])
				mag += math.Abs(float64(xr[p]) * float64(wo[p]))
			}
			rel := math.Abs(float64(y[r*out+o])-s) / max(mag, 1e-30)
			worst = max(worst, rel)
			if rel > tol || math.IsNaN(float64(y[r*out+o])) {
				if bad < 5 {
					t.Errorf("%s: Y[%d][%d] = %v, want %v (error %.3g of Σ|x·w| %.3g; tolerance %.3g)", what, r, o, y[r*out+o], s, rel, mag, tol)
				}
				bad++
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%s: %d value(s) outside the tolerance", what, bad)
	}
	return worst
}

// TestGPULinear runs Y = X·Wᵀ through every path (GemmEx in fp32 and
// fast TF32, Sgemm in the default and TF32 math modes) on shapes that
// fill tiles and shapes that do not, and checks every element.
func TestGPULinear(t *testing.T) {
	e := requireCUBLAS(t)
	shapes := []struct{ rows, in, out int }{{1000, 768, 256}, {333, 100, 37}, {64, 17, 3072}, {1, 1, 1}}
	for _, sh := range shapes {
		x, w := randoms(sh.rows*sh.in, 1), randoms(sh.out*sh.in, 2)
		xb, wb := e.upload(t, x), e.upload(t, w)
		for _, v := range []struct {
			name    string
			compute cublas.Compute
			math    cublas.Math
			sgemm   bool
		}{
			{"GemmEx-fp32", cublas.Compute32F, cublas.DefaultMath, false},
			{"GemmEx-tf32-fast", cublas.Compute32FFastTF32, cublas.DefaultMath, false},
			{"Sgemm", 0, cublas.DefaultMath, true},
			{"Sgemm-TF32Math", 0, cublas.TF32Math, true},
		} {
			name := fmt.Sprintf("%dx%d→%d/%s", sh.rows, sh.in, sh.out, v.name)
			t.Run(name, func(t *testing.T) {
				yb := e.upload(t, make([]float32, sh.rows*sh.out))
				require.NoError(t, e.h.SetMath(v.math))
				defer e.h.SetMath(cublas.DefaultMath)
				y := cublas.RowMajor{Buf: yb, Rows: sh.rows, Cols: sh.out}
				xm := cublas.RowMajor{Buf: xb, Rows: sh.rows, Cols: sh.in}
				wm := cublas.RowMajor{Buf: wb, Rows: sh.out, Cols: sh.in}
				if v.sgemm {
					// The same product as Linear, spelt out column-major.
					require.NoError(t, e.h.Sgemm(cublas.GEMM{
						TransA: cublas.Trans, TransB: cublas.NoTrans,
						A:     cublas.Matrix{Buf: wb, Rows: sh.in, Cols: sh.out, LD: sh.in},
						B:     cublas.Matrix{Buf: xb, Rows: sh.in, Cols: sh.rows, LD: sh.in},
						C:     cublas.Matrix{Buf: yb, Rows: sh.out, Cols: sh.rows, LD: sh.out},
						Alpha: 1,
					}))
				} else {
					require.NoError(t, e.h.Linear(y, xm, wm, v.compute))
				}
				require.NoError(t, e.s.Synchronize())
				worst := checkLinear(t, download(t, yb), x, w, sh.in, sh.out, nil, tolerance(v.compute, v.math, sh.in), name)
				t.Logf("worst error %.3g of Σ|x·w|", worst)
			})
		}
	}
}

// TestGPUMatMul checks C = A·B (row-major) with alpha, beta and strides
// through MatMul and a raw GEMM, every element.
func TestGPUMatMul(t *testing.T) {
	e := requireCUBLAS(t)
	const m, k, n = 129, 65, 33
	a, b := randoms(m*k, 3), randoms(k*n, 4)
	ab, bb := e.upload(t, a), e.upload(t, b)
	cb := e.upload(t, make([]float32, m*n))
	require.NoError(t, e.h.MatMul(cublas.RowMajor{Buf: cb, Rows: m, Cols: n}, cublas.RowMajor{Buf: ab, Rows: m, Cols: k},
		cublas.RowMajor{Buf: bb, Rows: k, Cols: n}, cublas.Compute32FPedantic))
	require.NoError(t, e.s.Synchronize())
	c := download(t, cb)
	// B as wᵀ: w[j][p] = b[p][j], so checkLinear's X·Wᵀ is A·B.
	w := make([]float32, n*k)
	for p := 0; p < k; p++ {
		for j := 0; j < n; j++ {
			w[j*k+p] = b[p*n+j]
		}
	}
	checkLinear(t, c, a, w, k, n, nil, tolerance(cublas.Compute32FPedantic, cublas.DefaultMath, k), "MatMul")
}

// gemmRun is one way to compute Y = X·Wᵀ for the throughput table.
type gemmRun struct {
	name  string
	tol   func(k int) float64
	queue func() error
}

// gemmCase sets up X (rows × in), W (out × in), a zero bias and Y on
// the GPU and the ways to compute Y: cuBLAS fp32 and fast TF32, cuBLASLt
// with the bias in its epilogue (as package kernels' entries add theirs),
// and package kernels' gemm_f32 and gemm_tf32 as package model launches
// them.
func gemmCase(t testing.TB, e gpuEnv, mods *kernels.GemmModules, rows, in, out int) (x, w []float32, y *driver.DeviceBuffer, runs []gemmRun) {
	x, w = randoms(rows*in, 5), randoms(out*in, 6)
	xb, wb := e.upload(t, x), e.upload(t, w)
	y = e.upload(t, make([]float32, rows*out))
	bias := e.upload(t, make([]float32, out))
	fns, err := mods.Functions(e.ctx)
	require.NoError(t, err)
	linear := func(c cublas.Compute) func() error {
		return func() error {
			return e.h.Linear(cublas.RowMajor{Buf: y, Rows: rows, Cols: out}, cublas.RowMajor{Buf: xb, Rows: rows, Cols: in},
				cublas.RowMajor{Buf: wb, Rows: out, Cols: in}, c)
		}
	}
	ours := func(c kernels.GemmContract, fn *driver.Function) func() error {
		require.NoError(t, c.Check(rows, out, in))
		args := c.Args(driver.NewArgs(), y.Ptr(), xb.Ptr(), wb.Ptr(), bias.Ptr(), rows, out, in, kernels.GemmNone)
		cfg := c.Launch(rows, out)
		return func() error { return fn.Launch(e.s, cfg, args) }
	}
	fused := func(c cublas.Compute) func() error {
		layer := cublas.LinearLayer{Y: cublas.RowMajor{Buf: y, Rows: rows, Cols: out}, X: cublas.RowMajor{Buf: xb, Rows: rows, Cols: in},
			W: cublas.RowMajor{Buf: wb, Rows: out, Cols: in}, Bias: bias, Epilogue: cublas.EpilogueBias, Compute: c}
		return func() error { return e.lt.Linear(e.s, layer) }
	}
	fp32 := func(k int) float64 { return tolerance(cublas.Compute32F, cublas.DefaultMath, k) }
	tf32 := func(int) float64 { return 1e-2 }
	return x, w, y, []gemmRun{
		{"cuBLAS fp32", fp32, linear(cublas.Compute32F)},
		{"cuBLAS tf32-fast", tf32, linear(cublas.Compute32FFastTF32)},
		{"cuBLASLt fp32+bias", fp32, fused(cublas.Compute32F)},
		{"cuBLASLt tf32+bias", tf32, fused(cublas.Compute32FFastTF32)},
		{"gemm_f32", fp32, ours(kernels.Gemm.F32, fns.F32)},
		{"gemm_tf32", tf32, ours(kernels.Gemm.TF32, fns.TF32)},
	}
}

// timeRuns queues run n times between two events and returns the time
// per run.
func timeRuns(t testing.TB, e gpuEnv, n int, run func() error) time.Duration {
	t.Helper()
	start, err := e.ctx.NewEvent(driver.EventOptions{Timing: true})
	require.NoError(t, err)
	defer start.Close()
	end, err := e.ctx.NewEvent(driver.EventOptions{Timing: true})
	require.NoError(t, err)
	defer end.Close()
	require.NoError(t, start.Record(e.s))
	for i := 0; i < n; i++ {
		require.NoError(t, run())
	}
	require.NoError(t, end.Record(e.s))
	require.NoError(t, end.Synchronize())
	d, err := start.Elapsed(end)
	require.NoError(t, err)
	return d / time.Duration(n)
}

// gemmShapes are the layers the throughput table measures: 65536 rows of
// a 768→256 and a 768→3072 layer, the shapes of overlap infer's models.
var gemmShapes = []struct{ rows, in, out int }{{65536, 768, 256}, {65536, 768, 3072}}

// TestGPUGemmThroughput prints cuBLAS's TFLOP/s beside package kernels'
// GEMM kernels for the shapes of gemmShapes, after checking 256 rows of
// each one's result against float64 (a whole check of 65536 rows would
// take the CPU minutes).
func TestGPUGemmThroughput(t *testing.T) {
	e := requireCUBLAS(t)
	var mods kernels.GemmModules
	defer mods.Close()
	var table strings.Builder
	fmt.Fprintf(&table, "%-22s %-20s %10s %10s\n", "SHAPE", "GEMM", "TIME", "TFLOP/s")
	for _, sh := range gemmShapes {
		x, w, y, runs := gemmCase(t, e, &mods, sh.rows, sh.in, sh.out)
		var sample []int
		for r := 0; r < sh.rows; r += sh.rows / 256 {
			sample = append(sample, r)
		}
		sample = append(sample, sh.rows-1)
		shape := fmt.Sprintf("%d × %d→%d", sh.rows, sh.in, sh.out)
		flops := 2 * float64(sh.rows) * float64(sh.in) * float64(sh.out)
		for _, r := range runs {
			require.NoError(t, e.s.Memset(y, 0, y.Len(), 0))
			require.NoError(t, r.queue())
			require.NoError(t, e.s.Synchronize())
			checkLinear(t, download(t, y), x, w, sh.in, sh.out, sample, r.tol(sh.in), shape+" "+r.name)
			timeRuns(t, e, 3, r.queue) // warm up: clocks, cuBLAS's heuristics
			d := timeRuns(t, e, 20, r.queue)
			fmt.Fprintf(&table, "%-22s %-20s %10v %10.1f\n", shape, r.name, d.Round(time.Microsecond), flops/d.Seconds()/1e12)
		}
	}
	t.Logf("Y = X·Wᵀ on %s, the mean of 20 back-to-back GEMMs after 3 untimed ones:\n%s", e.ctx.Device(), table.String())
}

// BenchmarkGPUGemm measures each GEMM of TestGPUGemmThroughput as a
// benchmark, with TFLOP/s as a metric.
func BenchmarkGPUGemm(b *testing.B) {
	e := requireCUBLAS(b)
	var mods kernels.GemmModules
	defer mods.Close()
	for _, sh := range gemmShapes {
		_, _, _, runs := gemmCase(b, e, &mods, sh.rows, sh.in, sh.out)
		flops := 2 * float64(sh.rows) * float64(sh.in) * float64(sh.out)
		for _, r := range runs {
			b.Run(fmt.Sprintf("%dx%d-%d/%s", sh.rows, sh.in, sh.out, strings.ReplaceAll(r.name, " ", "-")), func(b *testing.B) {
				b.ReportAllocs()
				require.NoError(b, r.queue())
				require.NoError(b, e.s.Synchronize())
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := r.queue(); err != nil {
						b.Fatal(err)
					}
				}
				require.NoError(b, e.s.Synchronize())
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e12, "TFLOP/s")
			})
		}
	}
}

// TestGPULtLinear runs fused Linear layers through cuBLASLt, each
// epilogue in fp32 and fast TF32, and checks every element against
// float64: act(X·Wᵀ + b) within the GEMM's tolerance (times GELU's
// slope, at most 1.13), plus 1e-3 for GELU, since cuBLASLt's GELU is an
// approximation of its own and the reference is the exact erf form.
func TestGPULtLinear(t *testing.T) {
	e := requireCUBLAS(t)
	for _, sh := range []struct{ rows, in, out int }{{1000, 768, 256}, {333, 100, 37}} {
		x, w, b := randoms(sh.rows*sh.in, 8), randoms(sh.out*sh.in, 9), randoms(sh.out, 10)
		xb, wb, bb := e.upload(t, x), e.upload(t, w), e.upload(t, b)
		for _, ep := range []cublas.Epilogue{cublas.EpilogueNone, cublas.EpilogueBias, cublas.EpilogueReLUBias, cublas.EpilogueGELUBias, cublas.EpilogueReLU, cublas.EpilogueGELU} {
			for _, c := range []cublas.Compute{cublas.Compute32F, cublas.Compute32FFastTF32} {
				name := fmt.Sprintf("%dx%d→%d/%v/%v", sh.rows, sh.in, sh.out, ep, c)
				t.Run(name, func(t *testing.T) {
					yb := e.upload(t, make([]float32, sh.rows*sh.out))
					layer := cublas.LinearLayer{Y: cublas.RowMajor{Buf: yb, Rows: sh.rows, Cols: sh.out},
						X: cublas.RowMajor{Buf: xb, Rows: sh.rows, Cols: sh.in}, W: cublas.RowMajor{Buf: wb, Rows: sh.out, Cols: sh.in},
						Epilogue: ep, Compute: c}
					withBias := ep == cublas.EpilogueBias || ep == cublas.EpilogueReLUBias || ep == cublas.EpilogueGELUBias
					if withBias {
						layer.Bias = bb
					}
					require.NoError(t, e.lt.Linear(e.s, layer))
					require.NoError(t, e.s.Synchronize())
					y := download(t, yb)
					tol := tolerance(c, cublas.DefaultMath, sh.in)
					gelu := ep == cublas.EpilogueGELU || ep == cublas.EpilogueGELUBias
					relu := ep == cublas.EpilogueReLU || ep == cublas.EpilogueReLUBias
					bad, worst := 0, 0.0
					for r := 0; r < sh.rows; r++ {
						for o := 0; o < sh.out; o++ {
							var s, mag float64
							for p := 0; p < sh.in; p++ {
								v := float64(x[r*sh.in+p]) * float64(w[o*sh.in+p])
								s, mag = s+v, mag+math.Abs(v)
							}
							if withBias {
								s, mag = s+float64(b[o]), mag+math.Abs(float64(b[o]))
							}
							bound := tol * mag
							switch {
							case relu:
								s = max(s, 0)
							case gelu:
								s = 0.5 * s * (1 + math.Erf(s/math.Sqrt2))
								bound = 1.13*bound + 1e-3
							}
							d := math.Abs(float64(y[r*sh.out+o]) - s)
							worst = max(worst, d/max(bound, 1e-30))
							if !(d <= bound) {
								if bad < 5 {
									t.Errorf("Y[%d][%d] = %v, want %v (off by %.3g; bound %.3g)", r, o, y[r*sh.out+o], s, d, bound)
								}
								bad++
							}
						}
					}
					require.Zero(t, bad, "values outside the bound")
					t.Logf("worst error %.3g of the bound", worst)
				})
			}
		}
	}
}

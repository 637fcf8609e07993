package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sigmaByPower is σ(W) by power iteration on WᵀW: a lower bound that
// converges to σ from below.
func sigmaByPower(w []float32, rows, cols, iters int) float64 {
	v := make([]float64, cols)
	for i := range v {
		v[i] = 1 + float64(i%7)/10
	}
	u := make([]float64, rows)
	s := 0.0
	for range iters {
		for i := range u {
			u[i] = 0
			for j, x := range v {
				u[i] += float64(w[i*cols+j]) * x
			}
		}
		nv := 0.0
		for _, x := range v {
			nv += x * x
		}
		nu := 0.0
		for _, x := range u {
			nu += x * x
		}
		s = math.Sqrt(nu / nv)
		for j := range v {
			v[j] = 0
			for i, x := range u {
				v[j] += float64(w[i*cols+j]) * x
			}
		}
		n := 0.0
		for _, x := range v {
			n += x * x
		}
		n = math.Sqrt(n)
		for j := range v {
			v[j] /= n
		}
	}
	return s
}

// TestOpNormBound: the bound is exact where W has one singular value
// (rank one), n^(1/16)·σ where all n are equal (the identity), at least σ
// and within 1.3 of it for random weights of either shape, and 0 for
// zeros.
func TestOpNormBound(t *testing.T) {
	for _, c := range []struct {
		name       string
		rows, cols int
		w          []float32
		want       float64
	}{
		{"rank one", 2, 3, []float32{1, 2, 2, 2, 4, 4}, 3 * math.Sqrt(5)}, // (1,2)ᵀ(1,2,2): σ = √5·3
		{"diagonal", 2, 2, []float32{3, 0, 0, 1}, 3 * math.Pow(1+1/math.Pow(3, 16), 1.0/16)},
		{"identity 4", 4, 4, []float32{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}, math.Pow(2, 1.0/8)},
		{"zeros", 2, 2, make([]float32, 4), 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := opNormBound(c.w, c.rows, c.cols)
			assert.InDelta(t, c.want, got, 1e-5*c.want+1e-300)
			assert.GreaterOrEqual(t, got, c.want*(1-1e-12))
		})
	}
	for _, shape := range [][2]int{{256, 768}, {768, 64}, {100, 100}} {
		m, err := Random([]int{shape[1], shape[0]}, ReLU, 3)
		require.NoError(t, err)
		w := m.Layers[0].Weight
		sigma := sigmaByPower(w, shape[0], shape[1], 300)
		got := opNormBound(w, shape[0], shape[1])
		assert.GreaterOrEqual(t, got, sigma, "%v", shape)
		assert.Less(t, got, 1.3*sigma, "%v: the bound is near σ for random weights", shape)
	}
}

// verifyTols are Verify's tolerances of every output value of in.
func verifyTols(m *Model, in []float32, p Precision) []float64 {
	rb := m.newRefBlock()
	var out []float64
	for lo := 0; lo*m.In() < len(in); lo += refBlockRows {
		n := min(refBlockRows, len(in)/m.In()-lo)
		_, tol := rb.run(m.refLayers(), in[lo*m.In():(lo+n)*m.In()], n, m.Activation, &p)
		out = append(out, tol...)
	}
	return out
}

// TestCompareBoundsVerify: Compare's tolerance of each value is at least
// the sum of the two precisions' Verify tolerances, and not many times
// more, for models of one, two and three layers, both activations and
// precisions; outputs within it, the CPU's float32 and a TF32 stand-in,
// pass.
func TestCompareBoundsVerify(t *testing.T) {
	for _, c := range []struct {
		widths []int
		act    Activation
	}{
		{[]int{48, 20}, ReLU},
		{[]int{96, 200, 12}, GELU},
		{[]int{64, 80, 40, 10}, ReLU},
	} {
		m, err := Random(c.widths, c.act, 5)
		require.NoError(t, err)
		const rows = 300
		x := pattern(rows, m.In())
		y32, err := m.Forward32(x)
		require.NoError(t, err)
		ytf := tf32Forward(m, x)
		for _, pp := range [][2]Precision{{FP32, FP32}, {TF32, TF32}, {FP32, TF32}} {
			va, vb := verifyTols(m, x, pp[0]), verifyTols(m, x, pp[1])
			tol := make([]float64, m.Out())
			worst := 0.0
			for r := 0; r < rows; r++ {
				m.rowTolerance(tol, x[r*m.In():(r+1)*m.In()], pp)
				for o, tv := range tol {
					sum := va[r*m.Out()+o] + vb[r*m.Out()+o]
					require.GreaterOrEqual(t, tv, sum, "%v %v row %d column %d: Compare's tolerance is below the Verify sum", c.widths, pp, r, o)
					worst = max(worst, tv/sum)
				}
			}
			assert.Less(t, worst, 8.0, "%v %v: Compare's tolerance over the Verify sum", c.widths, pp)
			t.Logf("%v %s/%s: Compare's tolerance is up to %.2f times the Verify sum", c.widths, pp[0], pp[1], worst)
			same, err := m.Compare(x, y32, y32, CompareOptions{A: pp[0], B: pp[1]})
			require.NoError(t, err)
			assert.Equal(t, Comparison{Values: int64(len(y32))}, same)
		}
		got, err := m.Compare(x, y32, ytf, CompareOptions{A: FP32, B: TF32})
		require.NoError(t, err)
		assert.Zero(t, got.Outside, "%v: the float32 and the TF32 stand-ins are within their bounds of each other", c.widths)
		assert.Positive(t, got.MaxAbs)
		assert.Less(t, got.MaxRatio, 1.0)
	}
}

// TestCompareFindsDifferences: values outside are counted and the first
// five reported in row order with their tolerance; a NaN is outside with
// an infinite ratio; FirstRow numbers the rows.
func TestCompareFindsDifferences(t *testing.T) {
	m, err := Random([]int{16, 8, 3}, ReLU, 2)
	require.NoError(t, err)
	const rows = 1000
	x := pattern(rows, 16)
	a, err := m.Forward32(x)
	require.NoError(t, err)
	b := append([]float32(nil), a...)
	rng := rand.New(rand.NewPCG(1, 2))
	bad := map[int]bool{}
	for len(bad) < 7 {
		bad[rng.IntN(len(b))] = true
	}
	for i := range bad {
		b[i] += 1
	}
	got, err := m.Compare(x, a, b, CompareOptions{FirstRow: 500})
	require.NoError(t, err)
	assert.Equal(t, int64(rows*3), got.Values)
	assert.Equal(t, int64(7), got.Outside)
	require.Len(t, got.First, 5)
	for i, d := range got.First {
		idx := int(d.Row-500)*3 + d.Col
		assert.True(t, bad[idx], "difference %d is one of those made", i)
		assert.Equal(t, a[idx], d.A)
		assert.Equal(t, b[idx], d.B)
		assert.Positive(t, d.Tol)
		if i > 0 {
			p := got.First[i-1]
			assert.True(t, p.Row < d.Row || p.Row == d.Row && p.Col < d.Col, "in row order")
		}
	}
	assert.InDelta(t, 1, got.MaxAbs, 1e-6)
	assert.Greater(t, got.MaxRatio, 1.0)

	b[0] = float32(math.NaN())
	got, err = m.Compare(x, a, b, CompareOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(8), got.Outside)
	assert.Equal(t, int64(0), got.First[0].Row)
	assert.True(t, math.IsInf(got.MaxRatio, 1))
	assert.True(t, math.IsInf(got.MaxAbs, 1))
}

// TestCompareErrors: outputs or inputs of the wrong size and unknown
// precisions are errors, never a panic.
func TestCompareErrors(t *testing.T) {
	m, err := Random([]int{4, 2}, ReLU, 1)
	require.NoError(t, err)
	x := pattern(3, 4)
	y := make([]float32, 6)
	for _, c := range []struct {
		in, a, b []float32
		opts     CompareOptions
		want     string
	}{
		{x, y[:5], y, CompareOptions{}, "model: 3 rows of input give 6 output values (2 each), but output a has 5"},
		{x, y, y[:4], CompareOptions{}, "model: 3 rows of input give 6 output values (2 each), but output b has 4"},
		{x[:5], y, y, CompareOptions{}, "model: an input of 5 values is not a whole number of rows of 4"},
		{x, y, y, CompareOptions{B: 7}, "model: unknown precision Precision(7)"},
	} {
		_, err := m.Compare(c.in, c.a, c.b, c.opts)
		assert.EqualError(t, err, c.want)
	}
	_, err = (*Model)(nil).Compare(x, y, y, CompareOptions{})
	assert.EqualError(t, err, "model: no layers")
}

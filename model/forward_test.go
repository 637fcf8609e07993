package model

import (
	"errors"
	"math"
	"testing"

	"github.com/purecuda/overlap/ptx/kernels"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pattern returns rows×width values of overlap's standard input.
func pattern(rows, width int) []float32 {
	x := make([]float32, rows*width)
	kernels.FillPattern(x, 11)
	return x
}

// tf32Forward computes the model as a tensor core does in TF32: each
// factor's mantissa cut to 10 bits (truncated: the worst case), products
// accumulated in float32.
func tf32Forward(m *Model, rows []float32) []float32 {
	cut := func(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1<<13 - 1)) }
	n := len(rows) / m.In()
	x := rows
	for li, l := range m.Layers {
		y := make([]float32, n*l.Out)
		for r := 0; r < n; r++ {
			for o := 0; o < l.Out; o++ {
				var acc float32
				for j := 0; j < l.In; j++ {
					acc += cut(x[r*l.In+j]) * cut(l.Weight[o*l.In+j])
				}
				y[r*l.Out+o] = acc + l.Bias[o]
			}
		}
		if li < len(m.Layers)-1 {
			activate32(y, m.Activation)
		}
		x = y
	}
	return x
}

// worstRatio is the largest |got − reference| / tolerance over out.
func worstRatio(m *Model, in, out []float32, p Precision) float64 {
	rb := m.newRefBlock()
	worst := 0.0
	for lo := 0; lo*m.In() < len(in); lo += refBlockRows {
		n := min(refBlockRows, len(in)/m.In()-lo)
		want, tol := rb.run(m.refLayers(), in[lo*m.In():(lo+n)*m.In()], n, m.Activation, &p)
		for i := range want {
			worst = math.Max(worst, math.Abs(float64(out[lo*m.Out()+i])-want[i])/tol[i])
		}
	}
	return worst
}

// TestVerifyAcceptsTheGPUsArithmetic: the CPU's float32 stand-in passes
// in FP32 and TF32, far inside the bound, for models of one to four
// layers with either activation; a TF32 computation passes in TF32 and,
// for one or two layers, is refused in FP32.
func TestVerifyAcceptsTheGPUsArithmetic(t *testing.T) {
	for _, c := range []struct {
		widths []int
		act    Activation
	}{
		{[]int{64, 8}, ReLU},
		{[]int{8, 16, 4}, ReLU},
		{[]int{96, 64, 16}, GELU},
		{[]int{300, 129, 77, 5}, ReLU},
		{[]int{32, 48, 48, 48, 3}, GELU},
	} {
		m, err := Random(c.widths, c.act, 7)
		require.NoError(t, err)
		const rows = 261 // four full blocks and a partial one
		x := pattern(rows, m.In())
		y, err := m.Forward32(x)
		require.NoError(t, err)
		require.NoError(t, m.Verify(x, y, VerifyOptions{}), m.String())
		require.NoError(t, m.Verify(x, y, VerifyOptions{Precision: TF32}), m.String())
		r := worstRatio(m, x, y, FP32)
		assert.Less(t, r, 0.05, "%s: the float32 stand-in's worst error is %.3g of the FP32 bound", m, r)
		t.Logf("%s: float32 stand-in at %.2g of the FP32 bound", m, r)

		tf := tf32Forward(m, x)
		require.NoError(t, m.Verify(x, tf, VerifyOptions{Precision: TF32}), m.String())
		t.Logf("%s: truncated TF32 at %.2g of the TF32 bound", m, worstRatio(m, x, tf, TF32))
		if len(m.Layers) <= 2 {
			// Deeper, the FP32 bound carries in the worst case of every
			// layer before, and is no longer tighter than TF32's error.
			var ve *VerifyError
			require.ErrorAs(t, m.Verify(x, tf, VerifyOptions{}), &ve, "%s: TF32's error is outside the FP32 bound", m)
		}
	}
}

// TestVerifyRefusesWrongKernels: outputs of plausible wrong GEMMs fail
// in both precisions.
func TestVerifyRefusesWrongKernels(t *testing.T) {
	m, err := Random([]int{16, 16, 16, 4}, ReLU, 5)
	require.NoError(t, err)
	x := pattern(100, 16)
	variant := func(f func(w *Model)) []float32 {
		c := &Model{Activation: m.Activation}
		for _, l := range m.Layers {
			l.Weight = append([]float32(nil), l.Weight...)
			l.Bias = append([]float32(nil), l.Bias...)
			c.Layers = append(c.Layers, l)
		}
		f(c)
		y, err := c.Forward32(x)
		require.NoError(t, err)
		return y
	}
	good, err := m.Forward32(x)
	require.NoError(t, err)
	shifted := append(append([]float32(nil), good[4:]...), good[:4]...)
	afterLast, err := m.Forward32(x)
	require.NoError(t, err)
	activate32(afterLast, ReLU)
	for name, y := range map[string][]float32{
		"no bias":                 variant(func(c *Model) { clear(c.Layers[1].Bias) }),
		"GELU for ReLU":           variant(func(c *Model) { c.Activation = GELU }),
		"ReLU after the last":     afterLast,
		"rows shifted":            shifted,
		"no activation":           variant(func(c *Model) { c.Layers = []Layer{linearComposite(c)} }),
		"a weight transposed":     variant(func(c *Model) { transpose(c.Layers[1].Weight, 16) }),
		"the first layer twice":   variant(func(c *Model) { c.Layers[1].Weight = append([]float32(nil), c.Layers[0].Weight...) }),
		"float16 weights":         variant(func(c *Model) { roundAll(c, 10) }),
		"a bias from another row": variant(func(c *Model) { c.Layers[2].Bias[0], c.Layers[2].Bias[1] = c.Layers[2].Bias[1], c.Layers[2].Bias[0] }),
	} {
		for _, p := range []Precision{FP32, TF32} {
			if name == "float16 weights" && p == TF32 {
				continue // TF32 rounds as much itself
			}
			var ve *VerifyError
			assert.ErrorAs(t, m.Verify(x, y, VerifyOptions{Precision: p}), &ve, "%s in %s", name, p)
		}
	}
}

// linearComposite is a model's layers without activations, composed
// into one layer (the output of forgetting the activation).
func linearComposite(c *Model) Layer {
	cur := Layer{In: c.Layers[0].In, Out: c.Layers[0].In, Weight: make([]float32, c.Layers[0].In*c.Layers[0].In), Bias: make([]float32, c.Layers[0].In)}
	for i := 0; i < cur.In; i++ {
		cur.Weight[i*cur.In+i] = 1
	}
	for _, l := range c.Layers {
		next := Layer{In: cur.In, Out: l.Out, Weight: make([]float32, l.Out*cur.In), Bias: make([]float32, l.Out)}
		for o := 0; o < l.Out; o++ {
			b := float64(l.Bias[o])
			for j := 0; j < l.In; j++ {
				b += float64(l.Weight[o*l.In+j]) * float64(cur.Bias[j])
				for i := 0; i < cur.In; i++ {
					next.Weight[o*cur.In+i] += l.Weight[o*l.In+j] * cur.Weight[j*cur.In+i]
				}
			}
			next.Bias[o] = float32(b)
		}
		cur = next
	}
	return cur
}

func transpose(w []float32, n int) {
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			w[i*n+j], w[j*n+i] = w[j*n+i], w[i*n+j]
		}
	}
}

// roundAll rounds every weight to bits of mantissa.
func roundAll(c *Model, bits int) {
	for _, l := range c.Layers {
		for i, v := range l.Weight {
			f, e := math.Frexp(float64(v))
			s := float64(int(1) << bits)
			l.Weight[i] = float32(math.Ldexp(math.Round(f*s)/s, e))
		}
	}
}

// TestVerifyReports: one wrong value is reported by row and column, with
// FirstRow numbering the rows, and a NaN fails.
func TestVerifyReports(t *testing.T) {
	m, err := Load("testdata/tiny.safetensors", Options{})
	require.NoError(t, err)
	x := pattern(1000, 3)
	y, err := m.Forward32(x)
	require.NoError(t, err)
	y[2*777+1] += 0.001
	y[2*900] = float32(math.NaN())
	err = m.Verify(x, y, VerifyOptions{FirstRow: 5000})
	var ve *VerifyError
	require.True(t, errors.As(err, &ve))
	assert.Equal(t, int64(2), ve.Count)
	assert.Equal(t, int64(2000), ve.Total)
	require.Len(t, ve.First, 2)
	assert.Equal(t, int64(5777), ve.First[0].Row)
	assert.Equal(t, 1, ve.First[0].Col)
	assert.Equal(t, int64(5900), ve.First[1].Row)
	assert.Contains(t, err.Error(), "model: 2 of 2000 output values outside the fp32 tolerance; row 5777, column 1: got ")
	assert.Contains(t, err.Error(), "; row 5900, column 0: got NaN, want ")
}

// TestForwardMatchesForward32 on a model with a layer of odd width.
func TestForwardMatchesForward32(t *testing.T) {
	m, err := Random([]int{37, 9, 3}, GELU, 2)
	require.NoError(t, err)
	x := pattern(130, 37)
	want, err := m.Forward(x)
	require.NoError(t, err)
	got, err := m.Forward32(x)
	require.NoError(t, err)
	for i := range want {
		require.InDelta(t, want[i], float64(got[i]), 1e-5, "value %d", i)
	}
	// The float64 reference of one row is the plain formula.
	h := make([]float64, 9)
	for o := range h {
		s := float64(m.Layers[0].Bias[o])
		for j := 0; j < 37; j++ {
			s += float64(x[j]) * float64(m.Layers[0].Weight[o*37+j])
		}
		h[o] = gelu(s)
	}
	for o := 0; o < 3; o++ {
		s := float64(m.Layers[1].Bias[o])
		for j := range h {
			s += h[j] * float64(m.Layers[1].Weight[o*9+j])
		}
		assert.InDelta(t, s, want[o], 1e-12)
	}
}

func TestPrecisionNames(t *testing.T) {
	for s, want := range map[string]Precision{"fp32": FP32, "FP32": FP32, "tf32": TF32} {
		p, err := ParsePrecision(s)
		require.NoError(t, err)
		assert.Equal(t, want, p)
	}
	_, err := ParsePrecision("bf16")
	assert.EqualError(t, err, `model: unknown precision "bf16" (want fp32 or tf32)`)
	assert.Equal(t, "tf32", TF32.String())
	assert.Contains(t, TF32.Tolerance(), "2⁻⁹")
	assert.Equal(t, float64(769)*0x1p-23, FP32.perTerm(768))
}

// TestReLUCarriesTheErrorAcrossZero: a hidden value just below zero whose
// error bound reaches above it may come out of the GPU positive, and the
// next layer's tolerance must allow for it; one far below zero is zero on
// the GPU too, and carries no error.
func TestReLUCarriesTheErrorAcrossZero(t *testing.T) {
	one := func(w, b float32, name string) Layer {
		return Layer{WeightName: name + ".weight", BiasName: name + ".bias", In: 1, Out: 1, Weight: []float32{w}, Bias: []float32{b}}
	}
	below := math.Nextafter32(-1, -2) // z = 1 + below = −2⁻²³, within the bound of 0
	m := &Model{Activation: ReLU, Layers: []Layer{one(1, below, "0"), one(1, 0, "2")}}
	x := []float32{1}
	// The GPU may round 1 + below to +2⁻²³ and pass it on.
	require.NoError(t, m.Verify(x, []float32{0x1p-23}, VerifyOptions{}))
	require.NoError(t, m.Verify(x, []float32{0}, VerifyOptions{}))
	assert.Error(t, m.Verify(x, []float32{1e-5}, VerifyOptions{}))
	// Far below zero, the hidden value is exactly 0 on the GPU, and the
	// output exactly the last bias (within its own rounding, 2⁻²³·0.5):
	// 2⁻²² off it is refused.
	far := &Model{Activation: ReLU, Layers: []Layer{one(1, -2, "0"), one(1, 0.5, "2")}}
	require.NoError(t, far.Verify(x, []float32{0.5}, VerifyOptions{}))
	assert.Error(t, far.Verify(x, []float32{0.5 + 0x1p-22}, VerifyOptions{}))
}

package model

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/purecuda/overlap/internal/parallel"
)

// float is the element type of the dense loops: float32 as the GPU
// computes, float64 for the reference.
type float interface{ ~float32 | ~float64 }

// dense computes y[r·n+o] = Σ_j x[r·k+j]·w[o·k+j] + b[o] for m rows,
// accumulating in T in order of j, four rows and two outputs at a time so
// that each weight and input loaded serves several products.
func dense[T float](y, x, w, b []T, m, n, k int) {
	r := 0
	for ; r+4 <= m; r += 4 {
		x0, x1, x2, x3 := x[r*k:r*k+k], x[(r+1)*k:(r+1)*k+k], x[(r+2)*k:(r+2)*k+k], x[(r+3)*k:(r+3)*k+k]
		y0, y1, y2, y3 := y[r*n:r*n+n], y[(r+1)*n:(r+1)*n+n], y[(r+2)*n:(r+2)*n+n], y[(r+3)*n:(r+3)*n+n]
		o := 0
		for ; o+2 <= n; o += 2 {
			wa, wb := w[o*k:o*k+k], w[(o+1)*k:(o+1)*k+k]
			wb, x0, x1, x2, x3 := wb[:len(wa)], x0[:len(wa)], x1[:len(wa)], x2[:len(wa)], x3[:len(wa)]
			var a0, a1, a2, a3, b0, b1, b2, b3 T
			for j, u := range wa {
				v := wb[j]
				p0, p1, p2, p3 := x0[j], x1[j], x2[j], x3[j]
				a0 += p0 * u
				b0 += p0 * v
				a1 += p1 * u
				b1 += p1 * v
				a2 += p2 * u
				b2 += p2 * v
				a3 += p3 * u
				b3 += p3 * v
			}
			y0[o], y0[o+1] = a0+b[o], b0+b[o+1]
			y1[o], y1[o+1] = a1+b[o], b1+b[o+1]
			y2[o], y2[o+1] = a2+b[o], b2+b[o+1]
			y3[o], y3[o+1] = a3+b[o], b3+b[o+1]
		}
		for ; o < n; o++ {
			wa := w[o*k : o*k+k]
			x0, x1, x2, x3 := x0[:len(wa)], x1[:len(wa)], x2[:len(wa)], x3[:len(wa)]
			var a0, a1, a2, a3 T
			for j, u := range wa {
				a0 += x0[j] * u
				a1 += x1[j] * u
				a2 += x2[j] * u
				a3 += x3[j] * u
			}
			y0[o], y1[o], y2[o], y3[o] = a0+b[o], a1+b[o], a2+b[o], a3+b[o]
		}
	}
	for ; r < m; r++ {
		xr, yr := x[r*k:r*k+k], y[r*n:r*n+n]
		for o := range yr {
			wa := w[o*k : o*k+k]
			xr := xr[:len(wa)]
			var a T
			for j, u := range wa {
				a += xr[j] * u
			}
			yr[o] = a + b[o]
		}
	}
}

// gelu is the exact GELU, 0.5·x·(1 + erf(x/√2)).
func gelu(x float64) float64 { return 0.5 * x * (1 + math.Erf(x/math.Sqrt2)) }

// activate applies act to y in place, in float32 as the GPU's result.
func activate32(y []float32, act Activation) {
	switch act {
	case ReLU:
		for i, v := range y {
			if v < 0 {
				y[i] = 0
			}
		}
	case GELU:
		for i, v := range y {
			y[i] = float32(gelu(float64(v)))
		}
	}
}

// Forward32 computes one layer on the CPU in float32, as the GPU kernel
// does: y (m×Out) = act(x (m×In)·Wᵀ + b), accumulating in float32, with
// act applied when apply is set. It is the simulator's stand-in for a
// step, and uses every CPU. A nil Layer computes nothing.
func (l *Layer) Forward32(y, x []float32, m int, act Activation, apply bool) {
	if l == nil {
		return
	}
	parallelRows(m, 64, func(lo, hi int) {
		yy, xx := y[lo*l.Out:hi*l.Out], x[lo*l.In:hi*l.In]
		dense(yy, xx, l.Weight, l.Bias, hi-lo, l.Out, l.In)
		if apply {
			activate32(yy, act)
		}
	})
}

// Forward32 computes the model over rows (each In values) on the CPU in
// float32, layer by layer, as the simulator's stand-in does; it returns
// the rows' outputs (each Out values).
func (m *Model) Forward32(rows []float32) ([]float32, error) {
	if err := m.Check(); err != nil {
		return nil, err
	}
	n, err := m.CheckInput(int64(len(rows)), m.In())
	if err != nil {
		return nil, err
	}
	x := rows
	for i := range m.Layers {
		l := &m.Layers[i]
		y := make([]float32, int(n)*l.Out)
		l.Forward32(y, x, int(n), m.Activation, i < len(m.Layers)-1)
		x = y
	}
	return x, nil
}

// refLayer is a layer as the reference computes it: float64 weights and
// biases, and each output's weight norm ‖w_o‖₂ for the tolerance.
type refLayer struct {
	in, out int
	w, b    []float64
	absB    []float64
	wNorm   []float64
}

func (m *Model) refLayers() []refLayer {
	m.ref.Do(func() {
		for _, l := range m.Layers {
			r := refLayer{in: l.In, out: l.Out, w: make([]float64, len(l.Weight)), b: make([]float64, l.Out),
				absB: make([]float64, l.Out), wNorm: make([]float64, l.Out)}
			for i, v := range l.Weight {
				r.w[i] = float64(v)
			}
			for o := 0; o < l.Out; o++ {
				r.b[o] = float64(l.Bias[o])
				r.absB[o] = math.Abs(r.b[o])
				s := 0.0
				for _, v := range r.w[o*l.In : (o+1)*l.In] {
					s += v * v
				}
				r.wNorm[o] = math.Sqrt(s)
			}
			m.refData = append(m.refData, r)
		}
	})
	return m.refData
}

// Forward computes the model over rows (each In values) in float64 from
// the float32 inputs and weights: the reference that Verify compares
// with. It uses every CPU.
func (m *Model) Forward(rows []float32) ([]float64, error) {
	if err := m.Check(); err != nil {
		return nil, err
	}
	n, err := m.CheckInput(int64(len(rows)), m.In())
	if err != nil {
		return nil, err
	}
	out := make([]float64, int(n)*m.Out())
	layers := m.refLayers()
	parallelBlocks(int(n), func() func(lo, hi int) {
		rb := m.newRefBlock()
		return func(lo, hi int) {
			want, _ := rb.run(layers, rows[lo*m.In():hi*m.In()], hi-lo, m.Activation, nil)
			copy(out[lo*m.Out():hi*m.Out()], want)
		}
	})
	return out, nil
}

// Precision is how the GPU computes each layer's products.
type Precision int

// The precisions.
const (
	// FP32 multiplies and accumulates in float32 (gemm_f32).
	FP32 Precision = iota
	// TF32 rounds each factor to TF32 (a 10-bit mantissa) for the tensor
	// cores and accumulates in float32 (gemm_tf32).
	TF32
)

func (p Precision) String() string {
	switch p {
	case FP32:
		return "fp32"
	case TF32:
		return "tf32"
	}
	return fmt.Sprintf("Precision(%d)", int(p))
}

// ParsePrecision reads "fp32" or "tf32".
func ParsePrecision(s string) (Precision, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "fp32", "f32", "float32":
		return FP32, nil
	case "tf32":
		return TF32, nil
	}
	return 0, fmt.Errorf("model: unknown precision %q (want fp32 or tf32)", s)
}

// Tolerance says, in words, how Verify bounds each output's error at
// this precision.
func (p Precision) Tolerance() string {
	s := "per layer (K inputs): (K+1)·2⁻²³·(Σ|x·w| + |b|)"
	if p == TF32 {
		s = "per layer (K inputs): (2⁻⁹ + 2⁻²⁰ + (K+1)·2⁻²³)·(Σ|x·w| + |b|)"
	}
	return s + " + the error carried in, Σ|w·e|, each sum bounded by ‖w‖₂·‖v‖₂; ReLU passes errors on (none where z < −error), GELU ×1.13 + 2⁻²⁰·|z|"
}

// perTerm is the relative error a layer of k inputs may make on the sum
// of its terms' magnitudes: float32 accumulation of k products and the
// bias, in any order, with or without FMA, is within γ_{k+1} ≈ (k+1)·2⁻²⁴
// of Σ|x·w| + |b| (the bound of any summation order), doubled here; TF32
// truncates or rounds each factor to a 10-bit mantissa (relative error at
// most 2⁻¹⁰ each, so 2⁻⁹ + 2⁻²⁰ for a product).
func (p Precision) perTerm(k int) float64 {
	acc := float64(k+1) * 0x1p-23
	if p == TF32 {
		return 0x1p-9 + 0x1p-20 + acc
	}
	return acc
}

// geluLipschitz bounds |GELU'(x)| = |Φ(x) + x·φ(x)|: at most
// Φ(√2) + √2·φ(√2) ≈ 1.1289 (at x = √2).
const geluLipschitz = 1.13

// geluEval bounds the float32 evaluation error of GELU relative to |x|:
// erff within 2 ulp, and a few roundings around it.
const geluEval = 0x1p-20

// refBlock is one goroutine's buffers for the reference of a block of
// rows.
type refBlock struct {
	x, t, z, e []float64
}

// refBlockRows is the rows a reference block computes at once: the
// weights are read once per block, the block's activations stay in the
// CPU's cache.
const refBlockRows = 64

func (m *Model) newRefBlock() *refBlock {
	w := 0
	for _, v := range m.Widths() {
		w = max(w, v)
	}
	n := refBlockRows * w
	return &refBlock{x: make([]float64, n), t: make([]float64, n), z: make([]float64, n), e: make([]float64, n)}
}

// run computes the reference for rows (n rows of the model's input) and,
// when prec is not nil, each output's tolerance at *prec. The results
// are the block's buffers, valid until the next run.
func (rb *refBlock) run(layers []refLayer, rows []float32, n int, act Activation, prec *Precision) (want, tol []float64) {
	k0 := layers[0].in
	x, t := rb.x[:n*k0], rb.t[:n*k0]
	for i, v := range rows[:n*k0] {
		x[i] = float64(v)
	}
	clear(t)
	for li := range layers {
		l := &layers[li]
		last := li == len(layers)-1
		z, e := rb.z[:n*l.out], rb.e[:n*l.out]
		dense(z, x, l.w, l.b, n, l.out, l.in)
		if prec != nil {
			p := prec.perTerm(l.in)
			floor := float64(l.in+2) * 0x1p-126 // terms flushed to zero
			for r := 0; r < n; r++ {
				xr, tr := x[r*l.in:(r+1)*l.in], t[r*l.in:(r+1)*l.in]
				var aa, tt float64
				for j, v := range xr {
					a := math.Abs(v) + tr[j]
					aa += a * a
					tt += tr[j] * tr[j]
				}
				aa, tt = math.Sqrt(aa), math.Sqrt(tt)
				er := e[r*l.out : (r+1)*l.out]
				for o := range er {
					er[o] = p*(l.wNorm[o]*aa+l.absB[o]) + l.wNorm[o]*tt + floor
				}
			}
		}
		if !last {
			switch act {
			case ReLU:
				for i, v := range z {
					// Where z + error ≤ 0 the GPU's value is ≤ 0 too, and
					// both become exactly 0.
					if prec != nil && v+e[i] <= 0 {
						e[i] = 0
					}
					if v < 0 {
						z[i] = 0
					}
				}
			case GELU:
				for i, v := range z {
					if prec != nil {
						e[i] = geluLipschitz*e[i] + geluEval*(math.Abs(v)+e[i])
					}
					z[i] = gelu(v)
				}
			}
		}
		// The layer's output is the next layer's input.
		rb.x, rb.z = rb.z, rb.x
		rb.t, rb.e = rb.e, rb.t
		x, t = z, e
	}
	return x, t
}

// VerifyOptions say how Verify compares.
type VerifyOptions struct {
	Precision Precision
	// FirstRow numbers the rows in errors: the index of in's first row
	// in a larger input (a block of a file, say).
	FirstRow int64
}

// Mismatch is one output value outside its tolerance.
type Mismatch struct {
	Row       int64
	Col       int
	Got       float32
	Want, Tol float64
}

// VerifyError reports output values outside their tolerance.
type VerifyError struct {
	Precision Precision
	// Count of Total values failed.
	Count, Total int64
	// First are the first few, by row and column.
	First []Mismatch
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "model: %d of %d output values outside the %s tolerance", e.Count, e.Total, e.Precision)
	for _, m := range e.First {
		fmt.Fprintf(&b, "; row %d, column %d: got %g, want %g ± %.3g", m.Row, m.Col, m.Got, m.Want, m.Tol)
	}
	return b.String()
}

// Verify checks every value of out, the outputs of in's rows, against the
// float64 reference (Forward), each within its own tolerance for the
// precision (Precision.Tolerance says how it is bounded), in parallel.
// It returns a *VerifyError listing the first values that differ; a NaN
// fails.
func (m *Model) Verify(in, out []float32, opts VerifyOptions) error {
	if err := m.Check(); err != nil {
		return err
	}
	n, err := m.CheckInput(int64(len(in)), m.In())
	if err != nil {
		return err
	}
	if int64(len(out)) != n*int64(m.Out()) {
		return fmt.Errorf("model: %d rows of input give %d output values (%d each), but there are %d", n, n*int64(m.Out()), m.Out(), len(out))
	}
	layers := m.refLayers()
	prec := opts.Precision
	var mu sync.Mutex
	verr := &VerifyError{Precision: prec, Total: int64(len(out))}
	w := m.Out()
	parallelBlocks(int(n), func() func(lo, hi int) {
		rb := m.newRefBlock()
		return func(lo, hi int) {
			want, tol := rb.run(layers, in[lo*m.In():hi*m.In()], hi-lo, m.Activation, &prec)
			got := out[lo*w : hi*w]
			var bad int64
			var first []Mismatch
			for i, g := range got {
				if !(math.Abs(float64(g)-want[i]) <= tol[i]) {
					bad++
					if len(first) < 5 {
						first = append(first, Mismatch{Row: opts.FirstRow + int64(lo+i/w), Col: i % w, Got: g, Want: want[i], Tol: tol[i]})
					}
				}
			}
			if bad > 0 {
				mu.Lock()
				verr.Count += bad
				verr.First = append(verr.First, first...)
				mu.Unlock()
			}
		}
	})
	if verr.Count == 0 {
		return nil
	}
	sort.Slice(verr.First, func(i, j int) bool {
		a, b := verr.First[i], verr.First[j]
		return a.Row < b.Row || a.Row == b.Row && a.Col < b.Col
	})
	verr.First = verr.First[:min(5, len(verr.First))]
	return verr
}

// parallelBlocks runs blocks of refBlockRows rows of [0, n) on every CPU;
// newWorker is called once per goroutine.
func parallelBlocks(n int, newWorker func() func(lo, hi int)) {
	parallel.Blocks(n, refBlockRows, newWorker)
}

// parallelRows splits [0, n) into pieces of at least minRows rows, one
// goroutine per CPU.
func parallelRows(n, minRows int, fn func(lo, hi int)) { parallel.For(n, minRows, fn) }

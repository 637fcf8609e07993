package model

import (
	"fmt"
	"math"
	"sort"
	"sync"
)

// CompareOptions say how Compare bounds the difference of two outputs.
// The zero value compares two FP32 outputs.
type CompareOptions struct {
	// A and B are the precisions that the two outputs were computed at.
	A, B Precision
	// FirstRow numbers the rows in the result: the index of in's first row
	// in a larger input (a block of a file, say).
	FirstRow int64
}

// Difference is one value of two outputs that differ beyond their
// tolerance.
type Difference struct {
	Row  int64
	Col  int
	A, B float32
	Tol  float64
}

// Comparison is what Compare found over some rows; Add merges another
// block's.
type Comparison struct {
	// Values were compared, Outside of them differed by more than their
	// tolerance (a NaN in either output counts as outside).
	Values, Outside int64
	// MaxAbs is the largest |a − b|, MaxRatio the largest |a − b| over its
	// value's tolerance (1 at the tolerance); both +Inf where a value is
	// NaN or the two differ infinitely.
	MaxAbs, MaxRatio float64
	// First are the first values outside, by row and column (at most 5).
	First []Difference
}

// Add merges c2, the comparison of other rows, into c.
func (c *Comparison) Add(c2 Comparison) {
	c.Values += c2.Values
	c.Outside += c2.Outside
	c.MaxAbs = max(c.MaxAbs, c2.MaxAbs)
	c.MaxRatio = max(c.MaxRatio, c2.MaxRatio)
	c.First = append(c.First, c2.First...)
	sort.Slice(c.First, func(i, j int) bool {
		a, b := c.First[i], c.First[j]
		return a.Row < b.Row || a.Row == b.Row && a.Col < b.Col
	})
	c.First = c.First[:min(5, len(c.First))]
}

// CompareTolerance says, in words, how Compare bounds the difference of
// outputs computed at precisions a and b.
func CompareTolerance(a, b Precision) string {
	return fmt.Sprintf("|a − b| ≤ the %s bound + the %s bound, each Verify's (%s) with a row's sums bounded by norms: ‖x‖₂ of the input, "+
		"σ(W)·‖x‖₂ + ‖b‖₂ for a hidden layer's output (σ(W) bounded above by Schatten norms of WWᵀ), ‖W‖_F·‖e‖₂ for the errors carried in", a, b, a.Tolerance())
}

// normLayer is a layer's norms for Compare.
type normLayer struct {
	frob  float64 // ‖W‖_F
	sigma float64 // an upper bound of σ(W)
	bNorm float64 // ‖b‖₂
}

func (m *Model) normLayers() []normLayer {
	m.norms.Do(func() {
		for _, l := range m.Layers {
			nl := normLayer{sigma: opNormBound(l.Weight, l.Out, l.In)}
			for _, v := range l.Weight {
				nl.frob += float64(v) * float64(v)
			}
			for _, v := range l.Bias {
				nl.bNorm += float64(v) * float64(v)
			}
			nl.frob, nl.bNorm = math.Sqrt(nl.frob)*(1+normMargin), math.Sqrt(nl.bNorm)*(1+normMargin)
			m.normData = append(m.normData, nl)
		}
	})
	return m.normData
}

// normMargin covers the float64 rounding of the norms: relative errors
// of n·2⁻⁵³ for sums of n terms, far below it for any layer a file holds.
const normMargin = 1e-6

// The sizes up to which opNormBound works on the Gram matrix G of W (n
// the smaller of W's dimensions): up to gramSquareMax it squares G twice
// (n³ operations each), up to gramMax it uses G alone (n² times the larger
// dimension), and beyond that the Frobenius norm.
const (
	gramSquareMax = 2048
	gramMax       = 4096
)

// opNormBound returns an upper bound of σ(W), the largest singular value
// of w (rows×cols, row-major). With f = ‖W‖_F and G the Gram matrix of
// W/f (n×n, n the smaller dimension), the eigenvalues λᵢ of G are σᵢ²/f²,
// so σ(W)² = f²·λ_max ≤ f²·(Σλᵢ⁸)^(1/8) = f²·tr(G⁸)^(1/8), and tr(G⁸) is
// ‖G⁴‖_F² (G symmetric). The bound is at most n^(1/16) times σ, and near
// 1.1–1.3 times σ for random weights, whose spectrum is spread out.
func opNormBound(w []float32, rows, cols int) float64 {
	f := 0.0
	for _, v := range w {
		f += float64(v) * float64(v)
	}
	f = math.Sqrt(f)
	if f == 0 {
		return 0
	}
	n, m := min(rows, cols), max(rows, cols)
	if n > gramMax {
		return f * (1 + normMargin)
	}
	// a holds n vectors of m values, W's rows or its columns, scaled by
	// 1/f so that G's entries stay below 1.
	a := make([]float64, n*m)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			v := float64(w[i*cols+j]) / f
			if rows <= cols {
				a[i*m+j] = v
			} else {
				a[j*m+i] = v
			}
		}
	}
	g := gram(a, n, m)
	var root float64
	if n <= gramSquareMax {
		g4 := gram(gram(g, n, n), n, n) // G² is G·Gᵀ for a symmetric G, and G⁴ is G²·(G²)ᵀ
		root = math.Pow(sumSquares(g4), 1.0/16)
	} else {
		root = math.Pow(sumSquares(g), 1.0/4) // λ_max ≤ ‖G‖_F
	}
	return min(f, f*root) * (1 + normMargin)
}

// gram returns the n×n matrix of the dot products of a's n rows of m
// values, on every CPU.
func gram(a []float64, n, m int) []float64 {
	g := make([]float64, n*n)
	zeros := make([]float64, n)
	parallelRows(n, 16, func(lo, hi int) {
		dense(g[lo*n:hi*n], a[lo*m:hi*m], a, zeros, hi-lo, n, m)
	})
	return g
}

func sumSquares(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x * x
	}
	return s
}

// Compare compares a and b, two outputs of in's rows, value by value,
// each within the sum of their precisions' bounds (the package doc's
// "Comparing two outputs" says how it is bounded, CompareTolerance says it
// in words), in parallel. It returns what it found; an error only for outputs or an
// input of the wrong size.
func (m *Model) Compare(in, a, b []float32, opts CompareOptions) (Comparison, error) {
	if err := m.Check(); err != nil {
		return Comparison{}, err
	}
	n, err := m.CheckInput(int64(len(in)), m.In())
	if err != nil {
		return Comparison{}, err
	}
	w := m.Out()
	for _, o := range []struct {
		name string
		v    []float32
	}{{"a", a}, {"b", b}} {
		if int64(len(o.v)) != n*int64(w) {
			return Comparison{}, fmt.Errorf("model: %d rows of input give %d output values (%d each), but output %s has %d", n, n*int64(w), w, o.name, len(o.v))
		}
	}
	for _, p := range []Precision{opts.A, opts.B} {
		if p != FP32 && p != TF32 {
			return Comparison{}, fmt.Errorf("model: unknown precision %v", p)
		}
	}
	precs := [2]Precision{opts.A, opts.B}
	var mu sync.Mutex
	total := Comparison{}
	parallelRows(int(n), 256, func(lo, hi int) {
		var c Comparison
		tol := make([]float64, w)
		for r := lo; r < hi; r++ {
			m.rowTolerance(tol, in[r*m.In():(r+1)*m.In()], precs)
			ra, rb := a[r*w:(r+1)*w], b[r*w:(r+1)*w]
			for o := range ra {
				d := math.Abs(float64(ra[o]) - float64(rb[o]))
				ratio := d / tol[o]
				if math.IsNaN(d) {
					d, ratio = math.Inf(1), math.Inf(1)
				}
				c.MaxAbs, c.MaxRatio = max(c.MaxAbs, d), max(c.MaxRatio, ratio)
				if !(d <= tol[o]) {
					c.Outside++
					if len(c.First) < 5 {
						c.First = append(c.First, Difference{Row: opts.FirstRow + int64(r), Col: o, A: ra[o], B: rb[o], Tol: tol[o]})
					}
				}
			}
		}
		c.Values = int64(hi-lo) * int64(w)
		mu.Lock()
		total.Add(c)
		mu.Unlock()
	})
	return total, nil
}

// rowTolerance sets tol to the tolerance of each output of the row x: the
// sum over precs of each precision's bound, by norms.
func (m *Model) rowTolerance(tol []float64, x []float32, precs [2]Precision) {
	layers, norms := m.refLayers(), m.normLayers()
	xn := 0.0
	for _, v := range x {
		xn += float64(v) * float64(v)
	}
	xn = math.Sqrt(xn) * (1 + normMargin)
	var e [2]float64 // each precision's bound of ‖error‖₂ carried in
	for li := 0; li+1 < len(layers); li++ {
		l, nl := &layers[li], &norms[li]
		floor := float64(l.in+2) * 0x1p-126 * math.Sqrt(float64(l.out))
		z := nl.sigma*xn + nl.bNorm
		for k, p := range precs {
			ek := p.perTerm(l.in)*(nl.frob*(xn+e[k])+nl.bNorm) + nl.frob*e[k] + floor
			if m.Activation == GELU {
				ek = geluLipschitz*ek + geluEval*(z+ek)
			}
			e[k] = ek
		}
		xn = z
	}
	last := &layers[len(layers)-1]
	floor := float64(last.in+2) * 0x1p-126
	for o := range tol {
		wn, ab := last.wNorm[o], last.absB[o]
		t := 0.0
		for k, p := range precs {
			t += p.perTerm(last.in)*(wn*(xn+e[k])+ab) + wn*e[k] + floor
		}
		tol[o] = t
	}
}

package kernels

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"

	parallelfor "github.com/purecuda/overlap/internal/parallel"
)

// eps32 is float32's machine epsilon, 2^-23.
const eps32 = 1.0 / (1 << 23)

// PatternValue is the i-th element of overlap's standard input: one of
// 65536 values in [-1, 1), scattered by a multiplicative hash. The CUDA C++
// reference (bench/reference/common.h) generates the same sequence.
func PatternValue(i int) float32 {
	key := uint32(uint64(i)*2654435761) >> 16
	return float32(int32(key)-32768) / 32768
}

// FillPattern sets dst[j] = PatternValue(offset+j), in parallel.
func FillPattern(dst []float32, offset int) {
	parallel(len(dst), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			dst[j] = PatternValue(offset + j)
		}
	})
}

// SeedReference computes the seed kernel for one input in float64.
func SeedReference(x float32, iters int) float64 {
	v := float64(x)*0.5 + float64(x)*float64(x)*0.1
	for k := 0; k < iters; k++ {
		v += math.Sin(v * 0.01)
	}
	return v
}

// SeedTolerance is the largest difference allowed between the GPU's
// float32 result and SeedReference: 4·(iters+2) units of float32 rounding
// relative to max(1, |ref|). Each of the iters+2 float32 steps rounds once
// (or twice without FMA), sinf is accurate to 2 ulp, and the map
// v → v + sin(v/100) grows errors by at most 1% a step.
func SeedTolerance(ref float64, iters int) float64 {
	return 4 * float64(iters+2) * eps32 * math.Max(1, math.Abs(ref))
}

// SaxpyReference computes a*x + y in float64.
func SaxpyReference(a, x, y float32) float64 { return float64(a)*float64(x) + float64(y) }

// SaxpyTolerance allows two float32 roundings of each term: the GPU may or
// may not fuse the multiply and add.
func SaxpyTolerance(a, x, y float32) float64 {
	return 2*eps32*(math.Abs(float64(a)*float64(x))+math.Abs(float64(y))) + math.SmallestNonzeroFloat32
}

// LerpReference computes (a + t*(b-a)) * scale in float64.
func LerpReference(a, b, t, scale float32) float64 {
	return (float64(a) + float64(t)*(float64(b)-float64(a))) * float64(scale)
}

// LerpTolerance allows one float32 rounding per operation (four), each
// relative to the largest magnitude it involves.
func LerpTolerance(a, b, t, scale float32) float64 {
	m := math.Abs(float64(a)) + math.Abs(float64(t))*(math.Abs(float64(a))+math.Abs(float64(b)))
	return 4*eps32*m*math.Abs(float64(scale)) + math.SmallestNonzeroFloat32
}

// Mismatch is one element that differs from its reference.
type Mismatch struct {
	Index     int
	Got       float32
	Want, Tol float64
}

// VerifyError reports elements outside their tolerance.
type VerifyError struct {
	Kernel string
	Count  int        // how many elements failed
	Total  int        // how many were checked
	First  []Mismatch // the first few, by index
}

func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ptx: %s: %d of %d elements outside tolerance", e.Kernel, e.Count, e.Total)
	for _, m := range e.First {
		fmt.Fprintf(&b, "; [%d] got %g, want %g ± %.3g", m.Index, m.Got, m.Want, m.Tol)
	}
	return b.String()
}

// verify checks every element in parallel. newCheck is called once per
// goroutine; the function it returns gives element i's reference and
// tolerance and may keep state of its own.
func verify(kernel string, got []float32, newCheck func() func(i int) (want, tol float64)) error {
	var mu sync.Mutex
	verr := &VerifyError{Kernel: kernel, Total: len(got)}
	parallel(len(got), func(lo, hi int) {
		check := newCheck()
		bad := 0
		var first []Mismatch
		for i := lo; i < hi; i++ {
			want, tol := check(i)
			g := float64(got[i])
			if !(math.Abs(g-want) <= tol) { // NaN fails too
				bad++
				if len(first) < 5 {
					first = append(first, Mismatch{Index: i, Got: got[i], Want: want, Tol: tol})
				}
			}
		}
		if bad > 0 {
			mu.Lock()
			verr.Count += bad
			verr.First = append(verr.First, first...)
			mu.Unlock()
		}
	})
	if verr.Count == 0 {
		return nil
	}
	sortMismatches(verr.First)
	if len(verr.First) > 5 {
		verr.First = verr.First[:5]
	}
	return verr
}

func sortMismatches(m []Mismatch) {
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && m[j].Index < m[j-1].Index; j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
}

// seedMemo caches SeedReference for overlap's standard input, whose 65536
// values are exactly (k-32768)/32768: verifying 128M such elements costs
// 65536 reference evaluations, not 128M. Other inputs are computed as they
// come.
type seedMemo struct {
	vals  [1 << 16]float64
	valid [1 << 16]bool
}

func (m *seedMemo) get(x float32, iters int) float64 {
	if i, ok := standardIndex(x); ok {
		if !m.valid[i] {
			m.vals[i], m.valid[i] = SeedReference(x, iters), true
		}
		return m.vals[i]
	}
	return SeedReference(x, iters)
}

// standardIndex is k when x is the standard input's value (k-32768)/32768
// (PatternValue), bit for bit, so that a memo of a function of x keyed by
// k gives what the function gives.
func standardIndex(x float32) (int32, bool) {
	k := x*32768 + 32768
	if k < 0 || k >= 1<<16 || k != float32(int32(k)) {
		return 0, false
	}
	i := int32(k)
	return i, math.Float32bits(float32(i-32768)/32768) == math.Float32bits(x)
}

// parallel splits [0, n) into contiguous ranges of at least 16K
// elements, one per CPU: below that a goroutine costs more than it saves.
func parallel(n int, fn func(lo, hi int)) { parallelfor.For(n, 1<<14, fn) }

// SeedCPU computes the seed kernel on the CPU in float32, in parallel: the
// stand-in for the PTX in the pipeline's simulator. The result for each of
// overlap's 65536 standard input values is computed once per iteration
// count and kept (seedCPUMemos), as seedMemo keeps the reference's: a
// simulated run of the README's 4M elements at 100 iterations evaluated
// 400M sines on the CPU, in every run.
//
// It computes min(len(out), len(in)) elements, as copy copies: a short
// in used to panic on a goroutine of its own, which no caller could
// recover.
func SeedCPU(out, in []float32, iters int) {
	n := min(len(out), len(in))
	out, in = out[:n], in[:n]
	memo := seedCPUMemoFor(iters)
	parallel(n, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			if memo != nil {
				out[i] = memo.get(in[i], iters)
				continue
			}
			out[i] = seedCPU(in[i], iters)
		}
	})
}

// seedCPU is the seed kernel for one input, in float32.
func seedCPU(x float32, iters int) float32 {
	v := x*0.5 + x*x*0.1
	for k := 0; k < iters; k++ {
		v += float32(math.Sin(float64(v * 0.01)))
	}
	return v
}

// seedCPUMemo keeps seedCPU's result for each standard input value
// (PatternValue's (k-32768)/32768), filled as the values come: entry k is
// 1<<32 | the result's bits once computed, 0 before. Concurrent callers
// may compute an entry twice; both store the same bits.
type seedCPUMemo [1 << 16]atomic.Uint64

func (m *seedCPUMemo) get(x float32, iters int) float32 {
	i, ok := standardIndex(x)
	if !ok {
		return seedCPU(x, iters)
	}
	if e := m[i].Load(); e>>32 == 1 {
		return math.Float32frombits(uint32(e))
	}
	v := seedCPU(x, iters)
	m[i].Store(1<<32 | uint64(math.Float32bits(v)))
	return v
}

// seedCPUMemos holds a seedCPUMemo (512 KiB) for each of the first
// maxSeedCPUMemos iteration counts SeedCPU is called with; others are
// computed as they come.
var seedCPUMemos struct {
	sync.Mutex
	by map[int]*seedCPUMemo
}

const maxSeedCPUMemos = 8

func seedCPUMemoFor(iters int) *seedCPUMemo {
	seedCPUMemos.Lock()
	defer seedCPUMemos.Unlock()
	if m, ok := seedCPUMemos.by[iters]; ok {
		return m
	}
	if len(seedCPUMemos.by) >= maxSeedCPUMemos {
		return nil
	}
	if seedCPUMemos.by == nil {
		seedCPUMemos.by = map[int]*seedCPUMemo{}
	}
	m := new(seedCPUMemo)
	seedCPUMemos.by[iters] = m
	return m
}

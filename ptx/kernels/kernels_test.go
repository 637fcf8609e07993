package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/pipeline"
	"github.com/purecuda/overlap/ptx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTableMatchesPTX checks each row against its PTX: the entry exists,
// the headers are lowered for old drivers, the pointers are the row's
// arrays, and the arguments the row's builder appends have exactly the
// layout of the entry's parameters. A row whose builder forgets a scalar,
// adds one, or counts its arrays wrong fails here, without a GPU (two
// scalars of one size swapped need the GPU test).
func TestTableMatchesPTX(t *testing.T) {
	for _, k := range All() {
		t.Run(k.Name, func(t *testing.T) {
			f, err := ptx.Parse(k.PTX())
			require.NoError(t, err)
			assert.Equal(t, []string{k.Name}, f.EntryNames())
			assert.Equal(t, ptx.Version{Major: 7, Minor: 0}, f.Version, "PTX ISA must stay at 7.0 (CUDA 11.0 drivers)")
			assert.Equal(t, []string{"sm_75"}, f.Targets)
			assert.Equal(t, 64, f.AddressSize)
			e, _ := f.Entry(k.Name)
			arrays := k.Inputs + k.Outputs
			if arrays == 0 {
				assert.Empty(t, e.Params)
				return
			}
			require.Len(t, e.Params, arrays+len(k.Scalars)+1, "arrays, scalars and the count")
			for _, p := range e.Params[:arrays] {
				assert.Equal(t, ".u64", p.Type, "%s: the first %d parameters are the arrays", p.Name, arrays)
			}
			pk, err := k.Pipeline(nil)
			require.NoError(t, err)
			a := driver.NewArgs()
			c := pipeline.Chunk{N: 7, Inputs: make([]driver.DevicePtr, k.Inputs), Outputs: make([]driver.DevicePtr, k.Outputs)}
			pk.Args(a, c)
			require.NoError(t, a.Err())
			assert.Equal(t, ptx.Layout(e.Params), a.Layout())
		})
	}
}

// TestPTXMatchesSource fails when a .cu changed and its PTX was not
// regenerated with make ptx.
func TestPTXMatchesSource(t *testing.T) {
	re := regexp.MustCompile(`(?m)^// source-sha256: ([0-9a-f]{64})$`)
	for _, k := range All() {
		src, err := os.ReadFile(k.Name + ".cu")
		require.NoError(t, err)
		assert.Equal(t, src, k.Source())
		sum := sha256.Sum256(src)
		m := re.FindSubmatch(k.PTX())
		require.NotNil(t, m, "%s.ptx has no source-sha256 header", k.Name)
		assert.Equal(t, hex.EncodeToString(sum[:]), string(m[1]), "%s.ptx is stale: run make ptx on a machine with nvcc", k.Name)
	}
}

// TestEveryFileHasARow: a .cu without a row (or a row without files) is a
// kernel half added. The modules beyond the table (moduleStems: gemm.cu,
// whose entries package model launches) are not rows, and are checked by
// gemm_test.go instead.
func TestEveryFileHasARow(t *testing.T) {
	cus, err := os.ReadDir(".")
	require.NoError(t, err)
	var files []string
	for _, e := range cus {
		if name, ok := strings.CutSuffix(e.Name(), ".cu"); ok {
			files = append(files, name)
		}
	}
	var rows []string
	for _, k := range All() {
		rows = append(rows, k.Name)
	}
	for _, stem := range moduleStems {
		if slices.Contains(files, stem) {
			rows = append(rows, stem)
		}
	}
	assert.ElementsMatch(t, files, rows)
}

func TestByName(t *testing.T) {
	k, err := ByName("saxpy")
	require.NoError(t, err)
	assert.Same(t, Saxpy, k)
	_, err = ByName("nope")
	assert.EqualError(t, err, `ptx: unknown kernel "nope" (have axpb, empty, lerp, saxpy, seed)`)
	assert.Equal(t, []string{"axpb", "lerp", "saxpy", "seed"}, Pipelinable())
}

func TestPatternValue(t *testing.T) {
	assert.Equal(t, float32(-1), PatternValue(0))
	assert.Equal(t, float32(40503-32768)/32768, PatternValue(1))
	buf := make([]float32, 100000)
	FillPattern(buf, 5)
	for i, v := range buf {
		require.Equal(t, PatternValue(i+5), v)
		require.True(t, v >= -1 && v < 1)
	}
}

// variants returns the scalars each row is tested with: its defaults and
// two others, so that a row added to the table is tested without touching
// the tests.
func variants(k *Kernel) [][]float64 {
	out := [][]float64{k.Defaults()}
	for _, f := range []func(sc Scalar, d float64) float64{
		func(sc Scalar, d float64) float64 { // smaller, negative for floats
			if sc.Int {
				return math.Floor(d / 10)
			}
			return -0.5*d - 0.25
		},
		func(sc Scalar, d float64) float64 { // zero: no iterations, no factor
			return 0
		},
	} {
		var s []float64
		for i, sc := range k.Scalars {
			s = append(s, f(sc, k.Defaults()[i]))
		}
		out = append(out, s)
	}
	return out
}

// TestCPUStandInsMatchReferences runs each row's stand-in (what the
// simulator computes) through the engine's CPU entry point and checks
// every element against the row's float64 reference, for several scalars.
// Issue 10: a saxpy stand-in computing a·x−y passed every CPU test.
func TestCPUStandInsMatchReferences(t *testing.T) {
	const n = 1<<16 + 3
	for _, k := range All() {
		if k.Inputs+k.Outputs == 0 {
			continue
		}
		for _, s := range variants(k) {
			ins := make([][]float32, k.Inputs)
			for i := range ins {
				ins[i] = make([]float32, n)
				FillPattern(ins[i], i*7919)
			}
			out := make([]float32, n)
			pk, err := k.Pipeline(nil, s...)
			require.NoError(t, err)
			hc := pipeline.HostChunk{N: n, Outputs: [][]byte{driver.Bytes(out)}}
			for _, in := range ins {
				hc.Inputs = append(hc.Inputs, driver.Bytes(in))
			}
			pk.CPU(hc)
			require.NoError(t, k.Verify(ins, out, s...), "%s %v", k.Name, s)
			// The same check must see one wrong element.
			out[n/3] += 0.01
			var ve *VerifyError
			require.ErrorAs(t, k.Verify(ins, out, s...), &ve, "%s %v", k.Name, s)
			assert.Equal(t, 1, ve.Count)
			assert.Equal(t, n/3, ve.First[0].Index)
		}
	}
}

// TestVerifyCatchesWrongFormulas feeds each verifier the output of a
// plausible wrong kernel; each must be refused.
func TestVerifyCatchesWrongFormulas(t *testing.T) {
	const n = 5000
	x, y := make([]float32, n), make([]float32, n)
	FillPattern(x, 0)
	FillPattern(y, 77)
	out := make([]float32, n)
	wrong := []struct {
		name string
		k    *Kernel
		ins  [][]float32
		f    func(i int) float32
	}{
		{"saxpy as a·x−y", Saxpy, [][]float32{x, y}, func(i int) float32 { return 2.5*x[i] - y[i] }},
		{"saxpy as x+y", Saxpy, [][]float32{x, y}, func(i int) float32 { return x[i] + y[i] }},
		{"lerp with t and 1−t swapped", Lerp, [][]float32{x, y}, func(i int) float32 { return (y[i] + 0.25*(x[i]-y[i])) * 1.5 }},
		{"seed without the sine", Seed, [][]float32{x}, func(i int) float32 { return x[i]*0.5 + x[i]*x[i]*0.1 }},
	}
	for _, w := range wrong {
		for i := range out {
			out[i] = w.f(i)
		}
		assert.Error(t, w.k.Verify(w.ins, out), w.name)
	}
}

func TestVerifyErrors(t *testing.T) {
	in := make([]float32, 1<<16+3)
	FillPattern(in, 0)
	out := make([]float32, len(in))
	require.NoError(t, Seed.CPU([][]float32{out}, [][]float32{in}, 100))
	require.NoError(t, Seed.Verify([][]float32{in}, out, 100))
	out[777] = float32(math.NaN())
	assert.Error(t, Seed.Verify([][]float32{in}, out, 100), "NaN must fail")
	out[777] = 0
	err := Seed.Verify([][]float32{in}, out, 100)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "ptx: seed: 1 of 65539 elements outside tolerance; [777] got 0, want "), err.Error())
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"short output", Seed.Verify([][]float32{in}, out[:10]), "ptx: kernel seed: arrays of 65539 and 10 elements"},
		{"inputs missing", Saxpy.Verify([][]float32{in}, out), "ptx: kernel saxpy takes 2 input(s) and 1 output(s), got 1 and 1"},
		{"too many scalars", Seed.Verify([][]float32{in}, out, 1, 2), "ptx: kernel seed takes 1 scalar(s) (iters), got 2"},
		{"fractional iters", Seed.Verify([][]float32{in}, out, 1.5), "ptx: kernel seed: iters = 1.5 is not a 32-bit integer"},
		{"huge iters", Seed.Verify([][]float32{in}, out, 1e10), "ptx: kernel seed: iters = 1e+10 is not a 32-bit integer"},
		{"NaN scalar", Saxpy.Verify([][]float32{in, in}, out, math.NaN()), "ptx: kernel saxpy: a = NaN is not a finite number"},
		{"float overflow", Lerp.Verify([][]float32{in, in}, out, 1e39, 1), "ptx: kernel lerp: t = 1e+39 does not fit a float32"},
		{"no reference", Empty.Verify(nil, out), "ptx: kernel empty has no CPU reference"},
		{"CPU shape", Lerp.CPU([][]float32{out}, [][]float32{in}), "ptx: kernel lerp takes 2 input(s) and 1 output(s), got 1 and 1"},
	}
	for _, c := range cases {
		assert.EqualError(t, c.err, c.want, c.name)
	}
	_, err = Empty.Pipeline(nil)
	assert.EqualError(t, err, "ptx: kernel empty has no arrays to pipeline")
	_, err = Saxpy.Pipeline(nil, 1, 2)
	assert.EqualError(t, err, "ptx: kernel saxpy takes 1 scalar(s) (a), got 2")
}

func TestDefaultsAreUsedWhenNoScalarsAreGiven(t *testing.T) {
	assert.Equal(t, []float64{100}, Seed.Defaults())
	assert.Equal(t, []float64{0.25, 1.5}, Lerp.Defaults())
	x, y := make([]float32, 1000), make([]float32, 1000)
	FillPattern(x, 1)
	FillPattern(y, 2)
	out := make([]float32, 1000)
	require.NoError(t, Lerp.CPU([][]float32{out}, [][]float32{x, y}))
	require.NoError(t, Lerp.Verify([][]float32{x, y}, out, 0.25, 1.5))
	assert.Error(t, Lerp.Verify([][]float32{x, y}, out, 0.5, 1.5))
}

func TestSeedMemoIsExact(t *testing.T) {
	var m seedMemo
	for _, x := range []float32{-1, -0.5, 0, 0.999969482421875, 0.3, 1.5, -7, float32(math.Inf(1))} {
		want := SeedReference(x, 10)
		got := m.get(x, 10)
		if math.IsNaN(want) {
			assert.True(t, math.IsNaN(got))
			continue
		}
		assert.Equal(t, want, got, "x=%v", x)
		assert.Equal(t, want, m.get(x, 10), "cached x=%v", x)
	}
}

// TestSeedCPUMemoIsExact: SeedCPU gives the bits the float32 loop gives,
// from the memo (standard values, twice: computed then kept) and past it
// (other values, -0, NaN, infinities, and more iteration counts than it
// keeps memos for), over a slice large enough to run on several
// goroutines at once.
func TestSeedCPUMemoIsExact(t *testing.T) {
	in := make([]float32, 1<<17)
	FillPattern(in, 3)
	odd := []float32{0.3, 1.5, -7, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0.999969482421875, -1, 0}
	copy(in, odd)
	out := make([]float32, len(in))
	for _, iters := range []int{0, 1, 10, 3, 4, 5, 6, 7, 8, 9, 11} { // more than maxSeedCPUMemos
		for pass := 0; pass < 2; pass++ {
			SeedCPU(out, in, iters)
			for i, x := range in {
				if want := seedCPU(x, iters); math.Float32bits(out[i]) != math.Float32bits(want) {
					t.Fatalf("iters %d, pass %d: element %d (x=%v) is %v, want %v", iters, pass, i, x, out[i], want)
				}
			}
		}
	}
	seedCPUMemos.Lock()
	assert.Len(t, seedCPUMemos.by, maxSeedCPUMemos, "memos for the first iteration counts only")
	seedCPUMemos.Unlock()
}

// TestSeedCPUShortSlices: SeedCPU computes min(len(out), len(in))
// elements and leaves the rest of a longer out alone, on slices long
// enough to split over goroutines; a short in panicked on one of them.
func TestSeedCPUShortSlices(t *testing.T) {
	const n = 1 << 16
	in := make([]float32, n)
	FillPattern(in, 4)
	out := make([]float32, 2*n)
	sentinel := float32(-12345)
	for i := range out {
		out[i] = sentinel
	}
	SeedCPU(out, in, 5)
	for i := range out {
		want := sentinel
		if i < n {
			want = seedCPU(in[i], 5)
		}
		require.Equal(t, math.Float32bits(want), math.Float32bits(out[i]), "element %d", i)
	}
	short := make([]float32, 10)
	SeedCPU(short, in, 5)
	assert.Equal(t, seedCPU(in[9], 5), short[9])
	SeedCPU(nil, in, 5)
}

func TestModulesWithoutAGPU(t *testing.T) {
	var m Modules
	_, err := m.Function(nil, Seed)
	assert.EqualError(t, err, "ptx: kernel seed: nil context")
	require.NoError(t, m.Close())
	require.NoError(t, m.Close(), "a second Close returns nil")
	_, err = m.Function(new(driver.Context), Seed)
	assert.ErrorIs(t, err, driver.ErrClosed)
}

package ptx

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEmbeddedKernelsParse(t *testing.T) {
	want := map[string][]driver.ParamInfo{
		"seed":  {pi(0, 8), pi(8, 8), pi(16, 4), pi(20, 4)},
		"saxpy": {pi(0, 8), pi(8, 8), pi(16, 8), pi(24, 4), pi(28, 4)},
		"lerp":  {pi(0, 8), pi(8, 8), pi(16, 8), pi(24, 4), pi(28, 4), pi(32, 4)},
		"empty": {},
	}
	for _, k := range Kernels() {
		t.Run(k.Name, func(t *testing.T) {
			f, err := Parse(k.PTX())
			require.NoError(t, err)
			assert.Equal(t, []string{k.Name}, f.EntryNames())
			e, _ := f.Entry(k.Name)
			assert.Equal(t, want[k.Name], Layout(e.Params))
			assert.Equal(t, k.Inputs+k.Outputs, countPointers(e.Params))
			assert.Equal(t, 64, f.AddressSize)
		})
	}
}

// pi builds a ParamInfo.
func pi(off, size int) driver.ParamInfo { return driver.ParamInfo{Offset: off, Size: size} }

func countPointers(ps []Param) int {
	n := 0
	for _, p := range ps {
		if p.Type == ".u64" {
			n++
		}
	}
	return n
}

// TestPTXHeaders guards the lowered headers: drivers older than CUDA 13
// cannot JIT nvcc 13's ".version 9.0".
func TestPTXHeaders(t *testing.T) {
	for _, k := range Kernels() {
		f, err := Parse(k.PTX())
		require.NoError(t, err)
		assert.Equal(t, Version{7, 0}, f.Version, "%s: PTX ISA must stay at 7.0 (CUDA 11.0 drivers)", k.Name)
		assert.Equal(t, []string{"sm_75"}, f.Targets, k.Name)
	}
}

// TestPTXMatchesSource fails when a .cu changed and its PTX was not
// regenerated with make ptx.
func TestPTXMatchesSource(t *testing.T) {
	re := regexp.MustCompile(`(?m)^// source-sha256: ([0-9a-f]{64})$`)
	for _, k := range Kernels() {
		src, err := os.ReadFile(filepath.Join("kernels", k.Name+".cu"))
		require.NoError(t, err)
		sum := sha256.Sum256(src)
		m := re.FindSubmatch(k.PTX())
		require.NotNil(t, m, "%s.ptx has no source-sha256 header", k.Name)
		assert.Equal(t, hex.EncodeToString(sum[:]), string(m[1]), "%s.ptx is stale: run make ptx on a machine with nvcc", k.Name)
	}
}

func TestParseHandwritten(t *testing.T) {
	src, err := os.ReadFile("testdata/handwritten.ptx")
	require.NoError(t, err)
	f, err := Parse(src)
	require.NoError(t, err)
	assert.Equal(t, Version{7, 8}, f.Version)
	assert.Equal(t, []string{"sm_80", "debug"}, f.Targets)
	assert.Equal(t, "sm_80", f.Target())
	assert.Equal(t, []string{"helper_decl", "twice"}, f.Funcs)
	require.Equal(t, []string{"mixed", "no_params"}, f.EntryNames())
	mixed := f.Entries[0]
	assert.Equal(t, []Param{
		{Name: "out", Type: ".u64", Size: 8, Align: 4},
		{Name: "config", Type: ".b8", Size: 24, Align: 8},
		{Name: "alpha", Type: ".f64", Size: 8, Align: 8},
		{Name: "small", Type: ".u16", Size: 2, Align: 2},
	}, mixed.Params)
	assert.Equal(t, []driver.ParamInfo{pi(0, 8), pi(8, 24), pi(32, 8), pi(40, 2)}, Layout(mixed.Params))
	assert.Equal(t, 22, mixed.Line)
	assert.Empty(t, f.Entries[1].Params)
}

func TestParseBadInput(t *testing.T) {
	good := string(Seed.PTX())
	cases := []struct {
		name, src, want string
	}{
		{"empty", "", "ptx: line 1: empty PTX"},
		{"whitespace", " \n\t\n", "ptx: line 1: empty PTX"},
		{"binary garbage", "\x7fELF\x02\x01\x01\x00\x00\x00junk", "ptx: line 1: NUL byte at offset 7: binary data, not PTX text"},
		{"invalid utf8", "\xff\xfe.version 7.0", "ptx: line 1: not UTF-8 text: binary data, not PTX"},
		{"no version", ".target sm_75\n", `ptx: line 1: PTX must begin with a .version directive, found ".target"`},
		{"bad version", ".version seven\n", `ptx: line 1: expected a version number such as 7.0, found "seven"`},
		{"malformed version", ".version 7\n", `ptx: line 1: malformed version "7"`},
		{"no target", ".version 7.0\n.address_size 64\n", "ptx: line 3: missing .target directive"},
		{"bad address size", ".version 7.0\n.target sm_75\n.address_size 48\n", `ptx: line 3: address size must be 32 or 64, found "48"`},
		{"truncated", good[:len(good)/2], "body opened here is never closed (truncated PTX?)"},
		{"unclosed comment", ".version 7.0\n/* oops\n", "ptx: line 2: comment opened on line 2 is never closed"},
		{"param without type", ".version 7.0\n.target sm_75\n.entry k(.param x)\n{ret;}\n", "ptx: line 3: parameter has no type"},
		{"duplicate entry", ".version 7.0\n.target sm_75\n.entry k()\n{ret;}\n.entry k()\n{ret;}\n", "ptx: line 5: entry k defined twice"},
		{"stray", ".version 7.0\n.target sm_75\nadd.s32 %r1, %r2, %r3;\n", `ptx: line 3: unexpected "add" at top level`},
		{"unbalanced", ".version 7.0\n.target sm_75\n.global .u32 x = };\n", "ptx: line 3: unbalanced '}'"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse([]byte(tc.src))
			require.Error(t, err)
			assert.Nil(t, f)
			assert.Contains(t, err.Error(), tc.want)
			var se *SyntaxError
			assert.True(t, errors.As(err, &se))
		})
	}
}

func TestParseNoEntryIsNotASyntaxError(t *testing.T) {
	f, err := Parse([]byte(".version 7.0\n.target sm_75\n.func f()\n{\nret;\n}\n"))
	require.NoError(t, err)
	assert.Empty(t, f.Entries)
	err = noEntryError("x.ptx", "main", f)
	assert.ErrorIs(t, err, ErrNoEntry)
	assert.EqualError(t, err, `ptx: no such entry: x.ptx defines no .entry (kernel) at all, so "main" cannot be launched`)
	f, _ = Parse(Seed.PTX())
	assert.EqualError(t, noEntryError("seed.ptx", "sead", f), `ptx: no such entry: seed.ptx has no entry "sead"; its entries are: seed`)
}

func TestParseHugeJunk(t *testing.T) {
	junk := bytes.Repeat([]byte("junk "), 100<<20/5) // 100 MB
	_, err := Parse(junk)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PTX must begin with a .version directive")
	_, err = Parse(make([]byte, maxParseSize+1))
	assert.Error(t, err)
}

func TestMaxISA(t *testing.T) {
	for cuda, want := range map[int]Version{11000: {7, 0}, 12000: {8, 0}, 12040: {8, 4}, 12060: {8, 5}, 12080: {8, 7}, 13000: {9, 0}} {
		got, ok := MaxISA(cuda)
		assert.True(t, ok)
		assert.Equal(t, want, got, "CUDA %d", cuda)
	}
	_, ok := MaxISA(14000)
	assert.False(t, ok, "a newer driver than the table is not second-guessed")
	n, ok := smNumber("sm_90a")
	assert.True(t, ok)
	assert.Equal(t, 90, n)
	_, ok = smNumber("compute_90")
	assert.False(t, ok)
}

func TestKernelByName(t *testing.T) {
	k, err := KernelByName("saxpy")
	require.NoError(t, err)
	assert.Equal(t, Saxpy, k)
	_, err = KernelByName("nope")
	assert.EqualError(t, err, `ptx: unknown kernel "nope" (have empty, lerp, saxpy, seed)`)
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

func TestSeedCPUMatchesReference(t *testing.T) {
	in := make([]float32, 1<<16+3)
	FillPattern(in, 0)
	out := make([]float32, len(in))
	for _, iters := range []int{0, 1, 100} {
		SeedCPU(out, in, iters)
		require.NoError(t, VerifySeed(in, out, iters), "iters %d", iters)
	}
	// The verifier must be able to fail.
	out[777] += 0.01
	err := VerifySeed(in, out, 100)
	var ve *VerifyError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, 1, ve.Count)
	assert.Equal(t, 777, ve.First[0].Index)
	out[777] = float32(math.NaN())
	assert.Error(t, VerifySeed(in, out, 100), "NaN must fail")
	assert.Error(t, VerifySeed(in, out[:10], 100))
}

func TestSaxpyAndLerpVerifiers(t *testing.T) {
	n := 50000
	x, y, out := make([]float32, n), make([]float32, n), make([]float32, n)
	FillPattern(x, 0)
	FillPattern(y, 77)
	for i := range out {
		out[i] = 2.5*x[i] + y[i]
	}
	require.NoError(t, VerifySaxpy(x, y, out, 2.5))
	out[n-1] = -out[n-1] + 1
	assert.Error(t, VerifySaxpy(x, y, out, 2.5))
	for i := range out {
		out[i] = (x[i] + 0.25*(y[i]-x[i])) * 3
	}
	require.NoError(t, VerifyLerp(x, y, out, 0.25, 3))
	out[0] += 1e-3
	err := VerifyLerp(x, y, out, 0.25, 3)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "ptx: lerp: 1 of 50000 elements outside tolerance; [0] got "), err.Error())
}

func FuzzParse(f *testing.F) {
	for _, k := range Kernels() {
		f.Add(k.PTX())
	}
	if hw, err := os.ReadFile("testdata/handwritten.ptx"); err == nil {
		f.Add(hw)
	}
	f.Add([]byte(".version 7.0\n.target sm_75\n.entry k(.param .align 8 .b8 s[16])\n{\nret;\n}\n"))
	f.Add([]byte(""))
	f.Add([]byte("\x00\x01"))
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := Parse(src)
		if err == nil {
			for _, e := range file.Entries {
				for _, p := range e.Params {
					if p.Size <= 0 || p.Align <= 0 {
						t.Fatalf("entry %s: param %+v has no size or alignment", e.Name, p)
					}
				}
				Layout(e.Params)
			}
		}
	})
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

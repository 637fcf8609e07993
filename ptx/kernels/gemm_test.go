package kernels

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGemmLaunch: each entry's grid covers N by TileN columns and M by
// TileM rows, at least one block each way, with the entry's own block and
// dynamic shared memory (gemm_tf32 once got gemm_f32's 256 threads).
func TestGemmLaunch(t *testing.T) {
	for _, c := range []struct {
		g                     GemmContract
		m, n, gx, gy, block   int
		shared, maxRows, tile int
	}{
		{Gemm.F32, 1, 1, 1, 1, 256, 0, 65535 * 128, 128},
		{Gemm.F32, 129, 128, 1, 2, 256, 0, 65535 * 128, 128},
		{Gemm.F32, 1 << 20, 256, 2, 8192, 256, 0, 65535 * 128, 128},
		{Gemm.TF32, 1, 1, 1, 1, 128, 0, 65535 * 128, 128},
		{Gemm.TF32, 1000, 16, 1, 8, 128, 0, 65535 * 128, 128},
		{Gemm.TF32, 7, 300, 3, 1, 128, 0, 65535 * 128, 128},
		{Gemm.BF16, 129, 3072, 24, 2, 128, 0, 65535 * 128, 128},
		{Gemm.TF32Big, 257, 129, 2, 2, 256, 73728, 65535 * 256, 256},
		{Gemm.TF32Big, 256, 128, 1, 1, 256, 73728, 65535 * 256, 256},
	} {
		cfg := c.g.Launch(c.m, c.n)
		assert.Equal(t, driver.LaunchConfig{Grid: driver.Dim3{X: c.gx, Y: c.gy}, Block: driver.Dim3{X: c.block}, SharedMem: c.shared}, cfg,
			"%s M=%d N=%d", c.g.Entry, c.m, c.n)
		assert.Equal(t, c.maxRows, c.g.MaxRows(), c.g.Entry)
		assert.Equal(t, c.tile, c.g.TileM, c.g.Entry)
	}
	assert.Equal(t, driver.LaunchConfig{Grid: driver.Dim3{X: 5, Y: 5}}, GemmContract{}.Launch(5, 5), "the zero contract does not divide by zero")
	for _, g := range []GemmContract{Gemm.F32, Gemm.TF32, Gemm.BF16} {
		assert.Zero(t, Gemm.TileM%g.TileM, "Gemm.TileM is a multiple of %s's", g.Entry)
	}
}

func TestGemmContract(t *testing.T) {
	for _, name := range []string{GemmF32, GemmTF32, GemmBF16, GemmTF32Big} {
		c, err := Gemm.Contract(name)
		require.NoError(t, err)
		assert.Equal(t, name, c.Entry)
	}
	_, err := Gemm.Contract("gemm_f16")
	assert.EqualError(t, err, `ptx: gemm: no entry "gemm_f16" (have gemm_f32, gemm_tf32, gemm_bf16, gemm_tf32_big)`)
	assert.EqualError(t, GemmContract{Entry: "x"}.Check(1, 1, 1), `ptx: gemm: the zero GemmContract of entry "x": use one of kernels.Gemm`)
}

func TestGemmCheck(t *testing.T) {
	g := Gemm.TF32
	assert.NoError(t, g.Check(1<<20, 256, 768))
	assert.NoError(t, g.Check(g.MaxRows(), 16, 16))
	assert.NoError(t, Gemm.TF32Big.Check(Gemm.TF32Big.MaxRows(), 16, 16))
	for _, c := range []struct {
		m, n, k int
		want    string
	}{
		{0, 4, 4, "ptx: gemm: M=0, N=4, K=4: each must be positive"},
		{4, -1, 4, "ptx: gemm: M=4, N=-1, K=4: each must be positive"},
		{g.MaxRows() + 1, 4, 4, "ptx: gemm: 8388481 rows need 65536 blocks along y, more than the 65535 a grid may have: at most 8388480 rows a launch"},
		{4 << 20, 16, 768, "ptx: gemm: X of 4194304 × 768 elements is more than the 2147483647 the kernels index with int"},
		{16, 1 << 16, 1 << 16, "ptx: gemm: W of 65536 × 65536 elements is more than the 2147483647 the kernels index with int"},
		{4 << 20, 1024, 8, "ptx: gemm: Y of 4194304 × 1024 elements is more than the 2147483647 the kernels index with int"},
	} {
		assert.EqualError(t, g.Check(c.m, c.n, c.k), c.want)
	}
}

// TestGemmArgs: the arguments are four pointers and four 32-bit integers,
// in the signature's order.
func TestGemmArgs(t *testing.T) {
	a := driver.NewArgs()
	Gemm.TF32.Args(a, 0x1000, 0x2000, 0x3000, 0x4000, 5, 6, 7, GemmGELU)
	require.NoError(t, a.Err())
	assert.Equal(t, gemmLayout, a.Layout())
	src := gemmTestPTX(GemmF32, GemmTF32)
	f, err := ptx.Parse(src)
	require.NoError(t, err)
	e, _ := f.Entry(GemmF32)
	assert.Equal(t, ptx.Layout(e.Params), a.Layout(), "the layout of nvcc's parameter list for the signature")
}

// gemmSourceContracts reads GEMM_CONTRACTS from gemm.cu: name → {block,
// rows, columns, static shared, dynamic shared}.
func gemmSourceContracts(t *testing.T, cu []byte) map[string][5]int {
	t.Helper()
	i := bytes.Index(cu, []byte("#define GEMM_CONTRACTS(X)"))
	require.GreaterOrEqual(t, i, 0, "gemm.cu has no GEMM_CONTRACTS")
	block := cu[i:]
	// The macro runs while its lines end in a backslash.
	end := 0
	for end < len(block) {
		nl := bytes.IndexByte(block[end:], '\n')
		if nl < 0 {
			end = len(block)
			break
		}
		line := bytes.TrimRight(block[end:end+nl], " \t")
		end += nl + 1
		if !bytes.HasSuffix(line, []byte("\\")) {
			break
		}
	}
	out := map[string][5]int{}
	re := regexp.MustCompile(`X\((\w+),\s*\w+,\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)`)
	for _, m := range re.FindAllSubmatch(block[:end], -1) {
		var v [5]int
		for j := range v {
			n, err := strconv.Atoi(string(m[j+2]))
			require.NoError(t, err)
			v[j] = n
		}
		out[string(m[1])] = v
	}
	return out
}

// TestGemmContractsMatchSource: the contracts here are gemm.cu's
// GEMM_CONTRACTS (which its compilers check against the kernels'
// configurations with static_assert), entry for entry, and every
// extern "C" kernel of gemm.cu has one.
func TestGemmContractsMatchSource(t *testing.T) {
	cu := GemmSource()
	require.NotNil(t, cu, "gemm.cu is embedded")
	src := gemmSourceContracts(t, cu)
	var names []string
	for _, c := range Gemm.All() {
		names = append(names, c.Entry)
		got, ok := src[c.Entry]
		if assert.True(t, ok, "gemm.cu's GEMM_CONTRACTS has no %s", c.Entry) {
			assert.Equal(t, got, c.contractNumbers(), "%s: {block, rows, columns, static shared, dynamic shared} in gemm.cu, and in kernels.Gemm", c.Entry)
		}
	}
	assert.Len(t, src, len(names), "GEMM_CONTRACTS has entries kernels.Gemm lacks: %v", src)
	kernelsRE := regexp.MustCompile(`extern "C" __global__ void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)\(`)
	var kernels []string
	for _, m := range kernelsRE.FindAllSubmatch(cu, -1) {
		kernels = append(kernels, string(m[1]))
	}
	assert.ElementsMatch(t, names, kernels, "gemm.cu's kernels and kernels.Gemm's entries")
}

// TestGemmContractsMatchPTX: the embedded gemm.ptx records each entry's
// contract (NAME_contract, from GEMM_CONTRACTS, and .maxntid, from
// __launch_bounds__) as kernels.Gemm launches it.
func TestGemmContractsMatchPTX(t *testing.T) {
	src := GemmPTX()
	if src == nil {
		t.Skip("gemm.ptx is not embedded yet (make ptx generates it from gemm.cu)")
	}
	if !gemmPTXFresh(src) {
		t.Skip("gemm.ptx is stale (TestGemmEmbedded fails): its records are not gemm.cu's")
	}
	require.NoError(t, checkGemmPTXContracts(src, Gemm.All(), true))
}

// TestGemmPTXContracts: the records are read in both forms a compiler
// writes an int[5] in (bytes or words), and a disagreement in any number,
// in the thread count, or a missing record, is an error that says which.
func TestGemmPTXContracts(t *testing.T) {
	tf := GemmContract{Entry: GemmTF32, Block: 128, TileM: 128, TileN: 128, StaticSharedMem: 49152}
	big := GemmContract{Entry: GemmTF32Big, Block: 256, TileM: 256, TileN: 128, SharedMem: 73728}
	bytesForm := ".visible .global .align 4 .b8 gemm_tf32_contract[20] = {128, 0, 0, 0, 128, 0, 0, 0, 128, 0, 0, 0, 0, 192, 0, 0, 0, 0, 0, 0};\n" +
		".visible .const .align 4 .b8 gemm_tf32_big_contract[20] = {0, 1, 0, 0, 0, 1, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0, 0, 32, 1, 0};\n"
	// nvcc 13 leaves out an initializer's trailing zeros (as in gemm.ptx).
	shortBytesForm := ".global .align 4 .b8 gemm_tf32_contract[20] = {128, 0, 0, 0, 128, 0, 0, 0, 128, 0, 0, 0, 0, 192};\n" +
		".global .align 4 .b8 gemm_tf32_big_contract[20] = {0, 1, 0, 0, 0, 1, 0, 0, 128, 0, 0, 0, 0, 0, 0, 0, 0, 32, 1};\n"
	wordsForm := ".visible .global .align 4 .u32 gemm_tf32_contract[5] = {128, 128, 128, 49152, 0};\n" +
		".global .align 4 .s32 gemm_tf32_big_contract[5] = {256, 256, 128, 0, 73728};\n"
	entries := ".visible .entry gemm_tf32(\n\t.param .u64 p\n)\n\t.maxntid 128, 1, 1\n\t.minnctapersm 2\n{\n\tret;\n}\n" +
		".visible .entry gemm_tf32_big(\n\t.param .u64 p\n)\n.maxntid 256, 1, 1\n{\n\tret;\n}\n"
	for _, form := range []string{bytesForm, shortBytesForm, wordsForm} {
		src := []byte(".version 7.0\n.target sm_80\n.address_size 64\n" + form + entries)
		got, err := gemmPTXContracts(src)
		require.NoError(t, err)
		assert.Equal(t, map[string]gemmPTXContract{
			GemmTF32:    {numbers: [5]int{128, 128, 128, 49152, 0}, hasNumbers: true, ntid: 128},
			GemmTF32Big: {numbers: [5]int{256, 256, 128, 0, 73728}, hasNumbers: true, ntid: 256},
		}, got)
		assert.NoError(t, checkGemmPTXContracts(src, []GemmContract{tf, big}, true))

		old := tf
		old.Block = 256 // the contract gemm_tf32 once had
		assert.EqualError(t, checkGemmPTXContracts(src, []GemmContract{old}, false),
			"entry gemm_tf32 records the launch contract {block, rows, columns, static shared, dynamic shared} = [128 128 128 49152 0], but package kernels launches it as [256 128 128 49152 0]: regenerate gemm.ptx, or update kernels.Gemm to match gemm.cu's GEMM_CONTRACTS")
		wide := big
		wide.TileN = 256
		assert.ErrorContains(t, checkGemmPTXContracts(src, []GemmContract{tf, wide}, false), "entry gemm_tf32_big records the launch contract")
		missing := GemmContract{Entry: GemmBF16, Block: 128, TileM: 128, TileN: 128, StaticSharedMem: 49152}
		assert.NoError(t, checkGemmPTXContracts(src, []GemmContract{tf, missing}, false), "loading tolerates an entry without records")
		assert.EqualError(t, checkGemmPTXContracts(src, []GemmContract{tf, missing}, true), "no entry gemm_bf16")
	}
	// .maxntid alone (a PTX without the records) is checked too.
	noRecords := []byte(".version 7.0\n.target sm_80\n.address_size 64\n" + entries)
	old := tf
	old.Block = 256
	assert.EqualError(t, checkGemmPTXContracts(noRecords, []GemmContract{old}, false),
		"entry gemm_tf32 is compiled for at most 128 threads a block (.maxntid), but package kernels launches it with 256")
	assert.EqualError(t, checkGemmPTXContracts(noRecords, []GemmContract{tf}, true), "entry gemm_tf32 has no gemm_tf32_contract record")
	_, err := gemmPTXContracts([]byte(".global .align 4 .u32 gemm_x_contract[5] = {1, 2, 3};\n"))
	assert.EqualError(t, err, "gemm_x_contract: 3 values of .u32, want five 32-bit integers")
	_, err = gemmPTXContracts([]byte(".global .align 4 .u32 gemm_x_contract[5] = {1, 2, a, 4, 5};\n"))
	assert.EqualError(t, err, `gemm_x_contract: "a" is not a number`)
}

// gemmPTXFresh reports whether the PTX's source-sha256 is the embedded
// gemm.cu's.
func gemmPTXFresh(src []byte) bool {
	m := regexp.MustCompile(`(?m)^// source-sha256: ([0-9a-f]{64})$`).FindSubmatch(src)
	sum := sha256.Sum256(GemmSource())
	return m != nil && hex.EncodeToString(sum[:]) == string(m[1])
}

// TestGemmEmbedded checks gemm.ptx against the contract once it is
// embedded: the entries package model launches, the signature's parameters, the argument
// builder's layout, and a PTX generated from the gemm.cu beside it.
func TestGemmEmbedded(t *testing.T) {
	src := GemmPTX()
	if src == nil {
		t.Skip("gemm.ptx is not embedded yet (make ptx generates it from gemm.cu)")
	}
	cu := GemmSource()
	require.NotNil(t, cu, "gemm.ptx without gemm.cu")
	m := regexp.MustCompile(`(?m)^// source-sha256: ([0-9a-f]{64})$`).FindSubmatch(src)
	require.NotNil(t, m, "gemm.ptx has no source-sha256 header")
	sum := sha256.Sum256(cu)
	require.Equal(t, hex.EncodeToString(sum[:]), string(m[1]), "gemm.ptx is stale: run make ptx on a machine with nvcc")
	f, err := ptx.Parse(src)
	require.NoError(t, err)
	assert.Subset(t, f.EntryNames(), []string{GemmF32, GemmTF32, GemmBF16, GemmTF32Big})
	a := Gemm.F32.Args(driver.NewArgs(), 0, 0, 0, 0, 1, 1, 1, GemmNone)
	for _, c := range Gemm.All() {
		e, _ := f.Entry(c.Entry)
		require.NoError(t, checkGemmParams(e))
		assert.Equal(t, ptx.Layout(e.Params), a.Layout(), c.Entry)
	}
}

func TestGemmModulesWithoutAGPU(t *testing.T) {
	var g GemmModules
	_, err := g.Functions(nil)
	assert.EqualError(t, err, "ptx: gemm: nil context")
	if GemmPTX() == nil {
		_, err = g.Functions(new(driver.Context))
		assert.ErrorIs(t, err, ErrNoGemm)
		assert.EqualError(t, err, "ptx: gemm.ptx is not embedded in this build: generate it from ptx/kernels/gemm.cu with make ptx (needs nvcc) and rebuild")
	}
	_, err = g.Function(new(driver.Context), "gemm_f16")
	assert.EqualError(t, err, `ptx: gemm: no entry "gemm_f16" to launch (have gemm_f32, gemm_tf32, gemm_bf16)`)
	_, err = g.Function(new(driver.Context), GemmTF32Big)
	assert.EqualError(t, err, `ptx: gemm: no entry "gemm_tf32_big" to launch (have gemm_f32, gemm_tf32, gemm_bf16)`)
	var nilG *GemmModules
	_, err = nilG.Functions(new(driver.Context))
	assert.EqualError(t, err, "ptx: gemm: nil *GemmModules")
	assert.NoError(t, nilG.Close())
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "a second Close returns nil")
	_, err = g.Functions(new(driver.Context))
	assert.ErrorIs(t, err, driver.ErrClosed)
}

// gemmTestPTX is a module with the given entries, each with the
// parameter list nvcc writes for the GEMM signature, the contract records
// of kernels.Gemm and an empty body.
func gemmTestPTX(entries ...string) []byte {
	s := ".version 7.0\n.target sm_80\n.address_size 64\n\n"
	for _, e := range entries {
		if c, err := Gemm.Contract(e); err == nil {
			n := c.contractNumbers()
			s += fmt.Sprintf(".visible .global .align 4 .u32 %s_contract[5] = {%d, %d, %d, %d, %d};\n", e, n[0], n[1], n[2], n[3], n[4])
		}
	}
	for _, e := range entries {
		ntid := ""
		if c, err := Gemm.Contract(e); err == nil {
			ntid = fmt.Sprintf(".maxntid %d, 1, 1\n", c.Block)
		}
		s += ".visible .entry " + e + "(\n"
		for i := 0; i < 8; i++ {
			typ := ".u64"
			if i >= 4 {
				typ = ".u32"
			}
			sep := ",\n"
			if i == 7 {
				sep = "\n"
			}
			s += "\t.param " + typ + " " + e + "_param_" + string(rune('0'+i)) + sep
		}
		s += ")\n" + ntid + "{\n\tret;\n}\n\n"
	}
	return []byte(s)
}

// gemmLayout is the parameter layout of the GEMM signature.
var gemmLayout = []driver.ParamInfo{
	{Offset: 0, Size: 8}, {Offset: 8, Size: 8}, {Offset: 16, Size: 8}, {Offset: 24, Size: 8},
	{Offset: 32, Size: 4}, {Offset: 36, Size: 4}, {Offset: 40, Size: 4}, {Offset: 44, Size: 4},
}

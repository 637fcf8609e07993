package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGemmLaunch: the grid covers N by TileN columns and M by TileM rows,
// at least one block each way, with the contract's block and no dynamic
// shared memory.
func TestGemmLaunch(t *testing.T) {
	for _, c := range []struct{ m, n, gx, gy int }{
		{1, 1, 1, 1}, {128, 128, 1, 1}, {129, 128, 1, 2}, {1000, 16, 1, 8}, {1 << 20, 256, 2, 8192}, {7, 300, 3, 1},
	} {
		cfg := Gemm.Launch(c.m, c.n)
		assert.Equal(t, driver.LaunchConfig{Grid: driver.Dim3{X: c.gx, Y: c.gy}, Block: driver.Dim3{X: 256}}, cfg, "M=%d N=%d", c.m, c.n)
	}
	assert.Equal(t, 65535*128, Gemm.MaxRows())
}

func TestGemmCheck(t *testing.T) {
	assert.NoError(t, Gemm.Check(1<<20, 256, 768))
	assert.NoError(t, Gemm.Check(Gemm.MaxRows(), 16, 16))
	for _, c := range []struct {
		m, n, k int
		want    string
	}{
		{0, 4, 4, "ptx: gemm: M=0, N=4, K=4: each must be positive"},
		{4, -1, 4, "ptx: gemm: M=4, N=-1, K=4: each must be positive"},
		{Gemm.MaxRows() + 1, 4, 4, "ptx: gemm: 8388481 rows need 65536 blocks along y, more than the 65535 a grid may have: at most 8388480 rows a launch"},
		{4 << 20, 16, 768, "ptx: gemm: X of 4194304 × 768 elements is more than the 2147483647 the kernels index with int"},
		{16, 1 << 16, 1 << 16, "ptx: gemm: W of 65536 × 65536 elements is more than the 2147483647 the kernels index with int"},
		{4 << 20, 1024, 8, "ptx: gemm: Y of 4194304 × 1024 elements is more than the 2147483647 the kernels index with int"},
	} {
		assert.EqualError(t, Gemm.Check(c.m, c.n, c.k), c.want)
	}
}

// TestGemmArgs: the arguments are four pointers and four 32-bit integers,
// in the signature's order.
func TestGemmArgs(t *testing.T) {
	a := driver.NewArgs()
	Gemm.Args(a, 0x1000, 0x2000, 0x3000, 0x4000, 5, 6, 7, GemmGELU)
	require.NoError(t, a.Err())
	assert.Equal(t, gemmLayout, a.Layout())
	src := gemmTestPTX(GemmF32, GemmTF32)
	f, err := ptx.Parse(src)
	require.NoError(t, err)
	e, _ := f.Entry(GemmF32)
	assert.Equal(t, ptx.Layout(e.Params), a.Layout(), "the layout of nvcc's parameter list for the signature")
}

// TestGemmEmbedded checks gemm.ptx against the contract once it is
// embedded: both entries, the signature's parameters, the argument
// builder's layout, and a PTX generated from the gemm.cu beside it.
func TestGemmEmbedded(t *testing.T) {
	src := GemmPTX()
	if src == nil {
		t.Skip("gemm.ptx is not embedded yet (make ptx generates it from gemm.cu)")
	}
	f, err := ptx.Parse(src)
	require.NoError(t, err)
	assert.Subset(t, f.EntryNames(), []string{GemmF32, GemmTF32})
	a := Gemm.Args(driver.NewArgs(), 0, 0, 0, 0, 1, 1, 1, GemmNone)
	for _, name := range []string{GemmF32, GemmTF32} {
		e, _ := f.Entry(name)
		require.NoError(t, checkGemmParams(e))
		assert.Equal(t, ptx.Layout(e.Params), a.Layout(), name)
	}
	cu := GemmSource()
	require.NotNil(t, cu, "gemm.ptx without gemm.cu")
	m := regexp.MustCompile(`(?m)^// source-sha256: ([0-9a-f]{64})$`).FindSubmatch(src)
	require.NotNil(t, m, "gemm.ptx has no source-sha256 header")
	sum := sha256.Sum256(cu)
	assert.Equal(t, hex.EncodeToString(sum[:]), string(m[1]), "gemm.ptx is stale: run make ptx on a machine with nvcc")
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
	assert.EqualError(t, err, `ptx: gemm: no entry "gemm_f16" (have gemm_f32, gemm_tf32)`)
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
// parameter list nvcc writes for the GEMM signature and an empty body.
func gemmTestPTX(entries ...string) []byte {
	s := ".version 7.0\n.target sm_75\n.address_size 64\n\n"
	for _, e := range entries {
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
		s += ")\n{\n\tret;\n}\n\n"
	}
	return []byte(s)
}

// gemmLayout is the parameter layout of the GEMM signature.
var gemmLayout = []driver.ParamInfo{
	{Offset: 0, Size: 8}, {Offset: 8, Size: 8}, {Offset: 16, Size: 8}, {Offset: 24, Size: 8},
	{Offset: 32, Size: 4}, {Offset: 36, Size: 4}, {Offset: 40, Size: 4}, {Offset: 44, Size: 4},
}

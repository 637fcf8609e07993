//go:build linux

package kernels

import (
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/gputest"
	"github.com/purecuda/overlap/ptx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGemmModulesOnFakeDriver: the GEMM module is loaded once per context,
// the entries come from that one module with the PTX's parameter layout,
// and a module without the TF32 or BF16 entry, with another signature or
// with contract records that disagree with kernels.Gemm is refused with
// an error that says which.
func TestGemmModulesOnFakeDriver(t *testing.T) {
	f := gputest.Fake(t)
	if f == nil {
		return
	}
	ctxs := gputest.FakeContexts(t)
	loads := f.Calls("cuModuleLoadDataEx")
	g := &GemmModules{src: gemmTestPTX(GemmF32, GemmTF32, GemmBF16, GemmTF32Big)}
	var first [2]GemmFunctions
	for round := range 3 {
		for i, ctx := range ctxs {
			fns, err := g.Functions(ctx)
			require.NoError(t, err)
			if round == 0 {
				first[i] = fns
				continue
			}
			assert.Equal(t, first[i], fns, "round %d, context %d", round, i)
		}
	}
	assert.Equal(t, loads+2, f.Calls("cuModuleLoadDataEx"), "one module per context, holding every entry")
	assert.NotSame(t, first[0].F32, first[1].F32)
	for _, fn := range []*driver.Function{first[0].F32, first[0].TF32, first[0].BF16} {
		params, ok := fn.Params()
		require.True(t, ok, fn.Name())
		assert.Equal(t, gemmLayout, params, fn.Name())
	}
	assert.Equal(t, GemmF32, first[0].F32.Name())
	assert.Equal(t, GemmTF32, first[0].TF32.Name())
	assert.Equal(t, GemmBF16, first[0].BF16.Name())
	tf, err := g.Function(ctxs[1], GemmTF32)
	require.NoError(t, err)
	assert.Same(t, first[1].TF32, tf)
	bf, err := g.Function(ctxs[1], GemmBF16)
	require.NoError(t, err)
	assert.Same(t, first[1].BF16, bf)
	require.NoError(t, g.Close())
	_, err = g.Functions(ctxs[0])
	assert.ErrorIs(t, err, driver.ErrClosed)

	noTF32 := &GemmModules{src: gemmTestPTX(GemmF32)}
	_, err = noTF32.Functions(ctxs[0])
	assert.ErrorIs(t, err, ptx.ErrNoEntry)
	assert.EqualError(t, err, `ptx: no such entry: gemm.ptx has no entry "gemm_tf32"; its entries are: [gemm_f32]`)
	require.NoError(t, noTF32.Close())
	noBF16 := &GemmModules{src: gemmTestPTX(GemmF32, GemmTF32)}
	_, err = noBF16.Functions(ctxs[0])
	assert.EqualError(t, err, `ptx: no such entry: gemm.ptx has no entry "gemm_bf16"; its entries are: [gemm_f32 gemm_tf32]`)
	require.NoError(t, noBF16.Close())

	wrong := &GemmModules{src: []byte(strings.Replace(string(gemmTestPTX(GemmF32, GemmTF32, GemmBF16)), ".param .u32 gemm_tf32_param_7", ".param .u64 gemm_tf32_param_7", 1))}
	_, err = wrong.Functions(ctxs[0])
	assert.EqualError(t, err, "ptx: gemm.ptx: entry gemm_tf32: parameter 7 (gemm_tf32_param_7) is 8 bytes, want 4: the signature is (Y, X, W, bias, M, N, K, act)")
	require.NoError(t, wrong.Close())

	// A module whose kernels were built for other launch shapes is refused
	// before it is loaded.
	before := f.Calls("cuModuleLoadDataEx")
	for _, c := range []struct{ from, to, want string }{
		{"gemm_tf32_contract[5] = {128,", "gemm_tf32_contract[5] = {256,", "ptx: gemm.ptx: entry gemm_tf32 records the launch contract {block, rows, columns, static shared, dynamic shared} = [256 128 128 49152 0], but package kernels launches it as [128 128 128 49152 0]: regenerate gemm.ptx, or update kernels.Gemm to match gemm.cu's GEMM_CONTRACTS"},
		{")\n.maxntid 128, 1, 1\n{", ")\n.maxntid 256, 1, 1\n{", "ptx: gemm.ptx: entry gemm_tf32 is compiled for at most 256 threads a block (.maxntid), but package kernels launches it with 128"},
	} {
		m := &GemmModules{src: []byte(strings.Replace(string(gemmTestPTX(GemmF32, GemmTF32, GemmBF16)), c.from, c.to, 1))}
		_, err = m.Functions(ctxs[0])
		assert.EqualError(t, err, c.want)
		require.NoError(t, m.Close())
	}
	assert.Equal(t, before, f.Calls("cuModuleLoadDataEx"), "refused before cuModuleLoadDataEx")
}

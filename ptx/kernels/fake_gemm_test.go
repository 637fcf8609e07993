//go:build linux

package kernels

import (
	"strings"
	"testing"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/internal/fakecuda"
	"github.com/purecuda/overlap/ptx"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGemmModulesOnFakeDriver: the GEMM module is loaded once per context,
// both entries come from that one module with the PTX's parameter layout,
// and a module without the TF32 entry or with another signature is
// refused with an error that says which.
func TestGemmModulesOnFakeDriver(t *testing.T) {
	f := fakecuda.Run(t)
	if f == nil {
		return
	}
	var ctxs [2]*driver.Context
	for i := range ctxs {
		dev, err := driver.DeviceAt(i)
		require.NoError(t, err)
		ctxs[i], err = driver.NewContext(dev)
		require.NoError(t, err)
		defer ctxs[i].Close()
	}
	loads := f.Calls("cuModuleLoadDataEx")
	g := &GemmModules{src: gemmTestPTX(GemmF32, GemmTF32)}
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
	assert.Equal(t, loads+2, f.Calls("cuModuleLoadDataEx"), "one module per context, holding both entries")
	assert.NotSame(t, first[0].F32, first[1].F32)
	for _, fn := range []*driver.Function{first[0].F32, first[0].TF32} {
		params, ok := fn.Params()
		require.True(t, ok, fn.Name())
		assert.Equal(t, gemmLayout, params, fn.Name())
	}
	assert.Equal(t, GemmF32, first[0].F32.Name())
	assert.Equal(t, GemmTF32, first[0].TF32.Name())
	tf, err := g.Function(ctxs[1], GemmTF32)
	require.NoError(t, err)
	assert.Same(t, first[1].TF32, tf)
	require.NoError(t, g.Close())
	_, err = g.Functions(ctxs[0])
	assert.ErrorIs(t, err, driver.ErrClosed)

	noTF32 := &GemmModules{src: gemmTestPTX(GemmF32)}
	_, err = noTF32.Functions(ctxs[0])
	assert.ErrorIs(t, err, ptx.ErrNoEntry)
	assert.EqualError(t, err, `ptx: no such entry: gemm.ptx has no entry "gemm_tf32"; its entries are: [gemm_f32]`)
	require.NoError(t, noTF32.Close())

	wrong := &GemmModules{src: []byte(strings.Replace(string(gemmTestPTX(GemmF32, GemmTF32)), ".param .u32 gemm_tf32_param_7", ".param .u64 gemm_tf32_param_7", 1))}
	_, err = wrong.Functions(ctxs[0])
	assert.EqualError(t, err, "ptx: gemm.ptx: entry gemm_tf32: parameter 7 (gemm_tf32_param_7) is 8 bytes, want 4: the signature is (Y, X, W, bias, M, N, K, act)")
	require.NoError(t, wrong.Close())
}

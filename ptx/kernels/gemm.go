package kernels

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx"
)

// The GEMM module is not a row of the table: gemm.cu holds two entries of
// one signature, a dense layer in float32 and in TF32,
//
//	extern "C" __global__ void gemm_f32(float* Y, const float* X, const float* W,
//	                                    const float* bias, int M, int N, int K, int act)
//	extern "C" __global__ void gemm_tf32(... the same ...)
//
// computing Y[M×N] = act(X[M×K]·Wᵀ + bias) with X and Y row-major, W a
// PyTorch Linear weight ([N×K], row-major: out × in) and bias[N]. Package
// model builds a model's layers from it. Its PTX is embedded as gemm.ptx
// when it has been generated (make ptx); until then [GemmModules] says so.

// The GEMM entries' names.
const (
	GemmF32  = "gemm_f32"
	GemmTF32 = "gemm_tf32"
)

// gemmStem is the stem of gemm.cu and gemm.ptx.
const gemmStem = "gemm"

// Modules beyond the table: embedded .cu/.ptx pairs that are not rows of
// it, because they hold several entries that package model launches
// itself. TestEveryFileHasARow accepts their files.
var moduleStems = []string{gemmStem}

// GemmAct is the activation a GEMM entry applies (its act parameter).
type GemmAct int32

// The activations of the GEMM entries.
const (
	GemmNone GemmAct = 0
	GemmReLU GemmAct = 1
	GemmGELU GemmAct = 2 // exact: 0.5·x·(1 + erf(x/√2))
)

// GemmContract is how the GEMM entries are launched: every launch of
// either entry goes through [Gemm], so that a change of the kernels'
// tiling is one edit here.
type GemmContract struct {
	// Block is the threads per block.
	Block int
	// TileN and TileM are the columns (N) and rows (M) of Y that one block
	// computes: the grid is ceil(N/TileN) × ceil(M/TileM).
	TileN, TileM int
	// SharedMem is the dynamic shared memory per block, in bytes.
	SharedMem int
	// MaxGridY is the most blocks the grid may have along y (the rows):
	// the driver's limit for gridDim.y.
	MaxGridY int
	// MaxMatrixElems bounds the elements of each of X, W and Y: the
	// kernels index them with int.
	MaxMatrixElems int64
}

// Gemm is the GEMM entries' launch contract.
var Gemm = GemmContract{Block: 256, TileN: 128, TileM: 128, SharedMem: 0, MaxGridY: 65535, MaxMatrixElems: math.MaxInt32}

// Check reports whether a GEMM of m rows, n outputs and k inputs fits the
// contract: the grid's rows and the int indexes.
func (g GemmContract) Check(m, n, k int) error {
	switch {
	case m <= 0 || n <= 0 || k <= 0:
		return fmt.Errorf("ptx: gemm: M=%d, N=%d, K=%d: each must be positive", m, n, k)
	case (m+g.TileM-1)/g.TileM > g.MaxGridY:
		return fmt.Errorf("ptx: gemm: %d rows need %d blocks along y, more than the %d a grid may have: at most %d rows a launch",
			m, (m+g.TileM-1)/g.TileM, g.MaxGridY, g.MaxRows())
	}
	for _, e := range []struct {
		name string
		a, b int
	}{{"X", m, k}, {"W", n, k}, {"Y", m, n}} {
		if int64(e.a)*int64(e.b) > g.MaxMatrixElems {
			return fmt.Errorf("ptx: gemm: %s of %d × %d elements is more than the %d the kernels index with int", e.name, e.a, e.b, g.MaxMatrixElems)
		}
	}
	return nil
}

// MaxRows is the most rows (M) one launch may have.
func (g GemmContract) MaxRows() int { return g.MaxGridY * g.TileM }

// Launch returns the launch shape for m rows and n outputs.
func (g GemmContract) Launch(m, n int) driver.LaunchConfig {
	return driver.LaunchConfig{
		Grid:      driver.Dim3{X: max(1, (n+g.TileN-1)/g.TileN), Y: max(1, (m+g.TileM-1)/g.TileM)},
		Block:     driver.Dim3{X: g.Block},
		SharedMem: g.SharedMem,
	}
}

// Args appends a GEMM launch's arguments to a, in the entries' order:
// (Y, X, W, bias, M, N, K, act).
func (g GemmContract) Args(a *driver.Args, y, x, w, bias driver.DevicePtr, m, n, k int, act GemmAct) *driver.Args {
	return a.Pointer(y).Pointer(x).Pointer(w).Pointer(bias).Int32(int32(m)).Int32(int32(n)).Int32(int32(k)).Int32(int32(act))
}

// ErrNoGemm reports a build without gemm.ptx: the GEMM kernels have not
// been generated (make ptx, on a machine with nvcc) and embedded.
var ErrNoGemm = errors.New("ptx: gemm.ptx is not embedded in this build: generate it from ptx/kernels/gemm.cu with make ptx (needs nvcc) and rebuild")

// GemmPTX returns the embedded gemm.ptx, or nil when this build has none.
func GemmPTX() []byte { return embedded(gemmStem + ".ptx") }

// GemmSource returns the embedded gemm.cu, or nil when this build has none.
func GemmSource() []byte { return embedded(gemmStem + ".cu") }

func embedded(name string) []byte {
	b, err := files.ReadFile(name)
	if err != nil {
		return nil
	}
	return b
}

// GemmFunctions are the GEMM entries loaded on one context.
type GemmFunctions struct {
	F32, TF32 *driver.Function
}

// GemmModules loads the GEMM module onto contexts as they are first
// needed, once per context, as [Modules] does for the table's kernels.
// The zero value is ready to use; Close unloads everything it loaded. It
// is safe for concurrent use.
type GemmModules struct {
	mu     sync.Mutex
	byCtx  map[*driver.Context]*gemmLoaded
	closed bool
	// src replaces the embedded PTX (tests).
	src []byte
}

type gemmLoaded struct {
	p   *ptx.Program // holds the module and gemm_f32
	fns GemmFunctions
}

// Functions returns both entries on ctx, loading (JIT-compiling) the
// module on the first call for that context. Without an embedded
// gemm.ptx its error wraps [ErrNoGemm].
func (g *GemmModules) Functions(ctx *driver.Context) (GemmFunctions, error) {
	if g == nil {
		return GemmFunctions{}, errors.New("ptx: gemm: nil *GemmModules")
	}
	if ctx == nil {
		return GemmFunctions{}, errors.New("ptx: gemm: nil context")
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return GemmFunctions{}, fmt.Errorf("ptx: gemm: %w", driver.ErrClosed)
	}
	if l, ok := g.byCtx[ctx]; ok {
		return l.fns, nil
	}
	src := g.src
	if src == nil {
		src = GemmPTX()
	}
	if src == nil {
		return GemmFunctions{}, ErrNoGemm
	}
	l, err := loadGemm(ctx, src)
	if err != nil {
		return GemmFunctions{}, err
	}
	if g.byCtx == nil {
		g.byCtx = map[*driver.Context]*gemmLoaded{}
	}
	g.byCtx[ctx] = l
	return l.fns, nil
}

// Function returns the entry called name (GemmF32 or GemmTF32) on ctx.
func (g *GemmModules) Function(ctx *driver.Context, name string) (*driver.Function, error) {
	if name != GemmF32 && name != GemmTF32 {
		return nil, fmt.Errorf("ptx: gemm: no entry %q (have %s, %s)", name, GemmF32, GemmTF32)
	}
	fns, err := g.Functions(ctx)
	if err != nil {
		return nil, err
	}
	if name == GemmTF32 {
		return fns.TF32, nil
	}
	return fns.F32, nil
}

// loadGemm loads the module once and looks both entries up in it, each
// with the parameter layout its PTX declares.
func loadGemm(ctx *driver.Context, src []byte) (*gemmLoaded, error) {
	const name = gemmStem + ".ptx"
	p, err := ptx.Load(ctx, name, src, GemmF32, driver.ModuleOptions{})
	if err != nil {
		return nil, err
	}
	e, ok := p.File.Entry(GemmTF32)
	if !ok {
		p.Close()
		return nil, fmt.Errorf("%w: %s has no entry %q; its entries are: %v", ptx.ErrNoEntry, name, GemmTF32, p.File.EntryNames())
	}
	for _, entry := range []ptx.Entry{p.Entry, e} {
		if err := checkGemmParams(entry); err != nil {
			p.Close()
			return nil, fmt.Errorf("ptx: %s: %w", name, err)
		}
	}
	tf32, err := p.Module.Function(GemmTF32)
	if err == nil {
		err = tf32.SetParams(ptx.Layout(e.Params))
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("ptx: %s: entry %s: %w", name, GemmTF32, err)
	}
	return &gemmLoaded{p: p, fns: GemmFunctions{F32: p.Function, TF32: tf32}}, nil
}

// checkGemmParams checks an entry against the signature: four 64-bit
// pointers and four 32-bit integers.
func checkGemmParams(e ptx.Entry) error {
	if len(e.Params) != 8 {
		return fmt.Errorf("entry %s has %d parameters; the GEMM signature (Y, X, W, bias, M, N, K, act) has 8", e.Name, len(e.Params))
	}
	for i, p := range e.Params {
		want := 8
		if i >= 4 {
			want = 4
		}
		if p.Size != want {
			return fmt.Errorf("entry %s: parameter %d (%s) is %d bytes, want %d: the signature is (Y, X, W, bias, M, N, K, act)", e.Name, i, p.Name, p.Size, want)
		}
	}
	return nil
}

// Close unloads every module g loaded. Later calls fail with
// driver.ErrClosed; a second Close returns nil.
func (g *GemmModules) Close() error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	var errs []error
	for ctx, l := range g.byCtx {
		errs = append(errs, l.p.Close())
		delete(g.byCtx, ctx)
	}
	return errors.Join(errs...)
}

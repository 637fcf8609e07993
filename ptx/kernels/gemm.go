package kernels

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/ptx"
)

// The GEMM module is not a row of the table: gemm.cu holds entries of one
// signature, a dense layer in float32, TF32 and BF16,
//
//	extern "C" __global__ void gemm_f32(float* Y, const float* X, const float* W,
//	                                    const float* bias, int M, int N, int K, int act)
//	extern "C" __global__ void gemm_tf32(... the same ...)
//	extern "C" __global__ void gemm_bf16(... the same ...)
//	extern "C" __global__ void gemm_tf32_big(... the same ...)
//
// computing Y[M×N] = act(X[M×K]·Wᵀ + bias) with X and Y row-major, W a
// PyTorch Linear weight ([N×K], row-major: out × in) and bias[N]. Package
// model builds a model's layers from it. Its PTX is embedded as gemm.ptx
// when it has been generated (make ptx); until then [GemmModules] says so.

// The GEMM entries' names.
const (
	GemmF32  = "gemm_f32"
	GemmTF32 = "gemm_tf32"
	GemmBF16 = "gemm_bf16"
	// GemmTF32Big is gemm_tf32 with 256×128 tiles in 72 KiB of dynamic
	// shared memory. Launching it needs the function's dynamic shared
	// memory limit raised (cuFuncSetAttribute), which package driver does
	// not offer, so [GemmModules] does not load it.
	GemmTF32Big = "gemm_tf32_big"
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
	GemmGELU GemmAct = 2 // 0.5·x·(1 + erf(x/√2)), within the tolerance gemm.cu documents
)

// GemmContract is how one GEMM entry is launched. The numbers are those
// of GEMM_CONTRACTS in gemm.cu, which its compiler checks against the
// kernels' configurations and which the module carries as NAME_contract;
// the tests compare them with these.
type GemmContract struct {
	// Entry is the kernel's name.
	Entry string
	// Block is the threads per block.
	Block int
	// TileN and TileM are the columns (N) and rows (M) of Y that one block
	// computes: the grid is ceil(N/TileN) × ceil(M/TileM).
	TileN, TileM int
	// StaticSharedMem is the shared memory the kernel declares, in bytes
	// (the launch passes none of it).
	StaticSharedMem int
	// SharedMem is the dynamic shared memory per block, in bytes: what a
	// launch passes. Above 48 KiB the function's limit must be raised
	// first (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES).
	SharedMem int
	// MaxGridY is the most blocks the grid may have along y (the rows):
	// the driver's limit for gridDim.y.
	MaxGridY int
	// MaxMatrixElems bounds the elements of each of X, W and Y.
	MaxMatrixElems int64
}

// GemmEntries are the launch contracts of all the GEMM entries.
type GemmEntries struct {
	F32, TF32, BF16, TF32Big GemmContract
	// TileM is a multiple of the TileM of every entry that package model
	// launches (F32, TF32, BF16): a chunk of a multiple of it rows fills
	// whole tiles whichever runs it.
	TileM int
}

// Gemm holds the GEMM entries' launch contracts: every launch of an entry
// goes through its contract, so that a change of a kernel's tiling is one
// edit there (and in gemm.cu, which the tests compare).
var Gemm = GemmEntries{
	F32:     GemmContract{Entry: GemmF32, Block: 256, TileN: 128, TileM: 128, StaticSharedMem: 16896, MaxGridY: 65535, MaxMatrixElems: math.MaxInt32},
	TF32:    GemmContract{Entry: GemmTF32, Block: 128, TileN: 128, TileM: 128, StaticSharedMem: 49152, MaxGridY: 65535, MaxMatrixElems: math.MaxInt32},
	BF16:    GemmContract{Entry: GemmBF16, Block: 128, TileN: 128, TileM: 128, StaticSharedMem: 49152, MaxGridY: 65535, MaxMatrixElems: math.MaxInt32},
	TF32Big: GemmContract{Entry: GemmTF32Big, Block: 256, TileN: 128, TileM: 256, SharedMem: 73728, MaxGridY: 65535, MaxMatrixElems: math.MaxInt32},
	TileM:   128,
}

// All lists the contracts in gemm.cu's order.
func (g GemmEntries) All() []GemmContract { return []GemmContract{g.F32, g.TF32, g.BF16, g.TF32Big} }

// Contract returns the contract of the entry called name.
func (g GemmEntries) Contract(name string) (GemmContract, error) {
	for _, c := range g.All() {
		if c.Entry == name {
			return c, nil
		}
	}
	return GemmContract{}, fmt.Errorf("ptx: gemm: no entry %q (have %s, %s, %s, %s)", name, GemmF32, GemmTF32, GemmBF16, GemmTF32Big)
}

// Check reports whether a GEMM of m rows, n outputs and k inputs fits the
// contract: the grid's rows and the matrices' sizes.
func (g GemmContract) Check(m, n, k int) error {
	switch {
	case g.TileM <= 0 || g.TileN <= 0 || g.Block <= 0:
		return fmt.Errorf("ptx: gemm: the zero GemmContract of entry %q: use one of kernels.Gemm", g.Entry)
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
	tn, tm := max(1, g.TileN), max(1, g.TileM)
	return driver.LaunchConfig{
		Grid:      driver.Dim3{X: max(1, (n+tn-1)/tn), Y: max(1, (m+tm-1)/tm)},
		Block:     driver.Dim3{X: g.Block},
		SharedMem: g.SharedMem,
	}
}

// Args appends a GEMM launch's arguments to a, in the entries' order:
// (Y, X, W, bias, M, N, K, act).
func (g GemmContract) Args(a *driver.Args, y, x, w, bias driver.DevicePtr, m, n, k int, act GemmAct) *driver.Args {
	return a.Pointer(y).Pointer(x).Pointer(w).Pointer(bias).Int32(int32(m)).Int32(int32(n)).Int32(int32(k)).Int32(int32(act))
}

// contractNumbers is the contract as gemm.cu writes it: {Block, TileM,
// TileN, StaticSharedMem, SharedMem}.
func (g GemmContract) contractNumbers() [5]int {
	return [5]int{g.Block, g.TileM, g.TileN, g.StaticSharedMem, g.SharedMem}
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
	F32, TF32, BF16 *driver.Function
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

// Functions returns the entries on ctx, loading (JIT-compiling) the
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

// Function returns the entry called name (GemmF32, GemmTF32 or GemmBF16)
// on ctx.
func (g *GemmModules) Function(ctx *driver.Context, name string) (*driver.Function, error) {
	if name != GemmF32 && name != GemmTF32 && name != GemmBF16 {
		return nil, fmt.Errorf("ptx: gemm: no entry %q to launch (have %s, %s, %s)", name, GemmF32, GemmTF32, GemmBF16)
	}
	fns, err := g.Functions(ctx)
	if err != nil {
		return nil, err
	}
	switch name {
	case GemmTF32:
		return fns.TF32, nil
	case GemmBF16:
		return fns.BF16, nil
	}
	return fns.F32, nil
}

// loadGemm loads the module once and looks the entries up in it, each
// with the parameter layout its PTX declares, after checking the PTX's
// records of the launch contracts (gemmPTXContracts) against [Gemm].
func loadGemm(ctx *driver.Context, src []byte) (*gemmLoaded, error) {
	const name = gemmStem + ".ptx"
	if err := checkGemmPTXContracts(src, Gemm.All(), false); err != nil {
		return nil, fmt.Errorf("ptx: %s: %w", name, err)
	}
	p, err := ptx.Load(ctx, name, src, GemmF32, driver.ModuleOptions{})
	if err != nil {
		return nil, err
	}
	fns := GemmFunctions{F32: p.Function}
	if err := checkGemmParams(p.Entry); err != nil {
		p.Close()
		return nil, fmt.Errorf("ptx: %s: %w", name, err)
	}
	for _, x := range []struct {
		entry string
		fn    **driver.Function
	}{{GemmTF32, &fns.TF32}, {GemmBF16, &fns.BF16}} {
		e, ok := p.File.Entry(x.entry)
		if !ok {
			p.Close()
			return nil, fmt.Errorf("%w: %s has no entry %q; its entries are: %v", ptx.ErrNoEntry, name, x.entry, p.File.EntryNames())
		}
		if err := checkGemmParams(e); err != nil {
			p.Close()
			return nil, fmt.Errorf("ptx: %s: %w", name, err)
		}
		fn, err := p.Module.Function(x.entry)
		if err == nil {
			err = fn.SetParams(ptx.Layout(e.Params))
		}
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("ptx: %s: entry %s: %w", name, x.entry, err)
		}
		*x.fn = fn
	}
	return &gemmLoaded{p: p, fns: fns}, nil
}

// gemmPTXContract is what a GEMM module records of one entry's launch
// contract: gemm.cu's NAME_contract array, {Block, TileM, TileN,
// StaticSharedMem, SharedMem}, and the entry's .maxntid or .reqntid.
type gemmPTXContract struct {
	numbers    [5]int
	hasNumbers bool
	ntid       int // 0: no .maxntid or .reqntid
}

var (
	gemmContractRE = regexp.MustCompile(`(?m)^[ \t]*(?:\.visible[ \t]+)?\.(?:global|const)[ \t]+(?:\.align[ \t]+\d+[ \t]+)?\.([bus]8|[bus]32)[ \t]+(\w+)_contract\[(\d+)\][ \t]*=[ \t]*\{([^}]*)\}`)
	gemmEntryRE    = regexp.MustCompile(`\.entry[ \t]+(\w+)[ \t]*\(`)
	gemmNtidRE     = regexp.MustCompile(`\.(?:maxntid|reqntid)[ \t]+(\d+)`)
)

// gemmPTXContracts reads the contract records of every entry that has
// them from GEMM PTX text.
func gemmPTXContracts(src []byte) (map[string]gemmPTXContract, error) {
	out := map[string]gemmPTXContract{}
	for _, m := range gemmContractRE.FindAllSubmatch(src, -1) {
		name, typ := string(m[2]), string(m[1])
		var vals []int
		for _, f := range strings.Split(string(m[4]), ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return nil, fmt.Errorf("%s_contract: %q is not a number", name, strings.TrimSpace(f))
			}
			vals = append(vals, v)
		}
		var c gemmPTXContract
		// nvcc writes a byte array's initializer without its trailing
		// zeros (PTX fills the rest of the declared length with zeros).
		if declared, _ := strconv.Atoi(string(m[3])); typ[1:] == "8" && declared == 20 && len(vals) <= 20 {
			vals = append(vals, make([]int, 20-len(vals))...)
		}
		switch {
		case typ[1:] == "8" && len(vals) == 20:
			for i := range c.numbers {
				c.numbers[i] = int(int32(uint32(vals[4*i]&0xff) | uint32(vals[4*i+1]&0xff)<<8 | uint32(vals[4*i+2]&0xff)<<16 | uint32(vals[4*i+3]&0xff)<<24))
			}
		case typ[1:] == "32" && len(vals) == 5:
			copy(c.numbers[:], vals)
		default:
			return nil, fmt.Errorf("%s_contract: %d values of .%s, want five 32-bit integers", name, len(vals), typ)
		}
		c.hasNumbers = true
		out[name] = c
	}
	idx := gemmEntryRE.FindAllSubmatchIndex(src, -1)
	for _, m := range idx {
		name := string(src[m[2]:m[3]])
		head := src[m[1]:]
		if i := bytes.IndexByte(head, '{'); i >= 0 {
			head = head[:i]
		}
		c := out[name]
		if n := gemmNtidRE.FindSubmatch(head); n != nil {
			c.ntid, _ = strconv.Atoi(string(n[1]))
		}
		out[name] = c
	}
	return out, nil
}

// checkGemmPTXContracts compares the PTX's contract records with want
// (Gemm.All()): every record there is must agree; with all, every entry
// of want must be there with its NAME_contract and its .maxntid (the
// tests ask for all; loading the module, for agreement).
func checkGemmPTXContracts(src []byte, want []GemmContract, all bool) error {
	got, err := gemmPTXContracts(src)
	if err != nil {
		return err
	}
	for _, c := range want {
		r, ok := got[c.Entry]
		if !ok {
			if all {
				return fmt.Errorf("no entry %s", c.Entry)
			}
			continue
		}
		if r.hasNumbers && r.numbers != c.contractNumbers() {
			return fmt.Errorf("entry %s records the launch contract {block, rows, columns, static shared, dynamic shared} = %v, but package kernels launches it as %v: regenerate gemm.ptx, or update kernels.Gemm to match gemm.cu's GEMM_CONTRACTS", c.Entry, r.numbers, c.contractNumbers())
		}
		if all && !r.hasNumbers {
			return fmt.Errorf("entry %s has no %s_contract record", c.Entry, c.Entry)
		}
		if r.ntid != 0 && r.ntid != c.Block {
			return fmt.Errorf("entry %s is compiled for at most %d threads a block (.maxntid), but package kernels launches it with %d", c.Entry, r.ntid, c.Block)
		}
		if all && r.ntid == 0 {
			return fmt.Errorf("entry %s has no .maxntid or .reqntid", c.Entry)
		}
	}
	return nil
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

package cublas

import (
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
)

// cuBLASLt's entry points, in the order of ltLib's fn.
var ltSymbolNames = [...]string{
	"cublasLtCreate", "cublasLtDestroy",
	"cublasLtMatmulDescCreate", "cublasLtMatmulDescDestroy", "cublasLtMatmulDescSetAttribute",
	"cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy", "cublasLtMatmul",
}

const (
	ltCreate = iota
	ltDestroy
	ltDescCreate
	ltDescDestroy
	ltDescSet
	ltLayoutCreate
	ltLayoutDestroy
	ltMatmul
	ltNumSymbols
)

// cublasLtMatmulDescAttributes_t (cublasLt.h) values used here.
const (
	ltDescTransA   = 3 // CUBLASLT_MATMUL_DESC_TRANSA, int32 (cublasOperation_t)
	ltDescTransB   = 4 // CUBLASLT_MATMUL_DESC_TRANSB, int32
	ltDescEpilogue = 7 // CUBLASLT_MATMUL_DESC_EPILOGUE, uint32 (cublasLtEpilogue_t)
	ltDescBias     = 8 // CUBLASLT_MATMUL_DESC_BIAS_POINTER, const void *
)

// Epilogue is what cuBLASLt applies to a product before it stores it
// (cublasLtEpilogue_t, cublasLt.h).
type Epilogue uint32

// The epilogues of a Linear layer. The bias has one value per output
// (per column of the row-major Y).
const (
	EpilogueNone     Epilogue = 1  // CUBLASLT_EPILOGUE_DEFAULT
	EpilogueReLU     Epilogue = 2  // CUBLASLT_EPILOGUE_RELU
	EpilogueBias     Epilogue = 4  // CUBLASLT_EPILOGUE_BIAS
	EpilogueReLUBias Epilogue = 6  // CUBLASLT_EPILOGUE_RELU_BIAS
	EpilogueGELU     Epilogue = 32 // CUBLASLT_EPILOGUE_GELU, cuBLASLt's own GELU approximation
	EpilogueGELUBias Epilogue = 36 // CUBLASLT_EPILOGUE_GELU_BIAS
)

// String names the epilogue.
func (e Epilogue) String() string {
	switch e {
	case EpilogueNone:
		return "none"
	case EpilogueReLU:
		return "relu"
	case EpilogueBias:
		return "bias"
	case EpilogueReLUBias:
		return "bias+relu"
	case EpilogueGELU:
		return "gelu"
	case EpilogueGELUBias:
		return "bias+gelu"
	}
	return fmt.Sprintf("Epilogue(%d)", uint32(e))
}

// hasBias reports whether e reads a bias vector.
func (e Epilogue) hasBias() bool {
	return e == EpilogueBias || e == EpilogueReLUBias || e == EpilogueGELUBias
}

var defaultLt = sync.OnceValues(func() (*lib, error) { return open(loader.CUBLASLt, ltSymbolNames[:]) })

// LtLibraryPath returns the path of the cuBLASLt library opened, or ""
// when none could be.
func LtLibraryPath() string {
	if l, err := defaultLt(); err == nil {
		return l.path
	}
	return ""
}

// DefaultLtWorkspace is the workspace that [NewLt] gives cuBLASLt: 32
// MiB, what cuBLAS's documentation recommends for Hopper.
const DefaultLtWorkspace = 32 << 20

// Lt is a cuBLASLt handle (cublasLtHandle_t) bound to one driver.Context,
// with a device workspace of its own: it runs a Linear layer's product,
// bias and activation in one matmul (cublasLtMatmul with an epilogue).
// The caller owns it and must Close it before the Context.
type Lt struct {
	lib *lib
	ctx *driver.Context

	mu      sync.RWMutex // read-held by calls, write-held by Close
	h       uintptr      // cublasLtHandle_t; 0 once closed
	ws      *driver.DeviceBuffer
	cleanup runtime.Cleanup
}

// NewLt creates a cuBLASLt handle on ctx (cublasLtCreate) and allocates
// its workspace of DefaultLtWorkspace bytes.
func NewLt(ctx *driver.Context) (*Lt, error) {
	l, err := defaultLt()
	if err != nil {
		return nil, err
	}
	return newLt(l, ctx)
}

func newLt(l *lib, ctx *driver.Context) (*Lt, error) {
	if ctx == nil || ctx.Handle() == 0 {
		return nil, fmt.Errorf("%w: NewLt: nil or closed context", ErrInvalidArgument)
	}
	ws, err := ctx.Alloc(DefaultLtWorkspace)
	if err != nil {
		return nil, fmt.Errorf("cublas: NewLt: the workspace: %w", err)
	}
	bound, err := ctx.Bind()
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("cublas: NewLt: %w", err)
	}
	defer bound.Release()
	h := new(uintptr)
	if err := l.call(ltCreate, uintptr(unsafe.Pointer(h))); err != nil {
		ws.Close()
		return nil, err
	}
	lt := &Lt{lib: l, ctx: ctx, h: *h, ws: ws}
	lt.cleanup = runtime.AddCleanup(lt, destroyLostLt, lostLt{l, ctx, *h})
	return lt, nil
}

type lostLt struct {
	lib *lib
	ctx *driver.Context
	h   uintptr
}

// destroyLostLt destroys a dropped handle; its workspace, a DeviceBuffer,
// has a cleanup of its own.
func destroyLostLt(x lostLt) {
	if b, err := x.ctx.Bind(); err == nil {
		_ = x.lib.call(ltDestroy, x.h)
		b.Release()
	}
}

// Close destroys the handle (cublasLtDestroy) and frees its workspace,
// which first waits for the context's work. A second Close returns nil.
func (l *Lt) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.h == 0 {
		return nil
	}
	l.cleanup.Stop()
	raw := l.h
	l.h = 0
	var err error
	if bound, berr := l.ctx.Bind(); berr != nil {
		err = fmt.Errorf("cublas: Lt.Close: %w", berr)
	} else {
		err = l.lib.call(ltDestroy, raw)
		bound.Release()
	}
	if cerr := l.ws.Close(); err == nil {
		err = cerr
	}
	return err
}

// LinearLayer is one fused Linear layer for [Lt.Linear]:
// Y = epilogue(X·Wᵀ + Bias), X rows × in, W out × in (a PyTorch
// nn.Linear weight), Y rows × out, all row-major, and Bias out values
// when the epilogue has one (else nil).
type LinearLayer struct {
	Y, X, W  RowMajor
	Bias     *driver.DeviceBuffer
	Epilogue Epilogue // 0 means EpilogueNone
	Compute  Compute  // 0 means Compute32F
}

// ltDesc is what Linear creates for one matmul; destroy releases all of
// it, whatever was created.
type ltDesc struct {
	lib     *lib
	desc    uintptr
	layouts []uintptr
}

func (d *ltDesc) destroy() error {
	var first error
	for _, l := range d.layouts {
		if err := d.lib.call(ltLayoutDestroy, l); err != nil && first == nil {
			first = err
		}
	}
	if d.desc != 0 {
		if err := d.lib.call(ltDescDestroy, d.desc); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// layout creates a column-major float32 layout for m.
func (d *ltDesc) layout(m Matrix) (uintptr, error) {
	p := new(uintptr)
	if err := d.lib.call(ltLayoutCreate, uintptr(unsafe.Pointer(p)), cudaR32F, uintptr(m.Rows), uintptr(m.Cols), uintptr(m.LD)); err != nil {
		return 0, err
	}
	d.layouts = append(d.layouts, *p)
	return *p, nil
}

// set sets one attribute of the matmul descriptor from Go memory.
func (d *ltDesc) set(attr int, v unsafe.Pointer, size uintptr) error {
	return d.lib.call(ltDescSet, d.desc, uintptr(attr), uintptr(v), size)
}

// Linear queues layer on s, a stream of the handle's context
// (cublasLtMatmul, algorithm by cuBLASLt's heuristics): cuBLASLt computes
// Yᵀ = W·Xᵀ column-major, the bias running along Yᵀ's rows. The buffers
// must stay open until s has run it. The descriptors it creates are
// destroyed before it returns, on every path.
func (l *Lt) Linear(s *driver.Stream, layer LinearLayer) error {
	const op = "Lt.Linear"
	ep, c := layer.Epilogue, layer.Compute
	if ep == 0 {
		ep = EpilogueNone
	}
	if c == 0 {
		c = Compute32F
	}
	switch ep {
	case EpilogueNone, EpilogueReLU, EpilogueBias, EpilogueReLUBias, EpilogueGELU, EpilogueGELUBias:
	default:
		return fmt.Errorf("%w: %s: %v is not an epilogue of a Linear layer", ErrInvalidArgument, op, ep)
	}
	switch c {
	case Compute32F, Compute32FPedantic, Compute32FFastTF32:
	default:
		return fmt.Errorf("%w: %s: %v: want Compute32F, Compute32FPedantic or Compute32FFastTF32", ErrInvalidArgument, op, c)
	}
	if s == nil || s.Handle() == 0 {
		return fmt.Errorf("%w: %s: nil or closed stream", ErrInvalidArgument, op)
	}
	g := GEMM{TransA: Trans, TransB: NoTrans, A: layer.W.colMajor(), B: layer.X.colMajor(), C: layer.Y.colMajor(), Alpha: 1}
	m, _, _, err := g.shape(op)
	if err != nil {
		return err
	}
	pa, err := g.A.check(op, "W")
	if err != nil {
		return err
	}
	pb, err := g.B.check(op, "X")
	if err != nil {
		return err
	}
	pc, err := g.C.check(op, "Y")
	if err != nil {
		return err
	}
	var bias uintptr
	switch {
	case ep.hasBias() && (layer.Bias == nil || layer.Bias.Ptr() == 0):
		return fmt.Errorf("%w: %s: epilogue %v needs a Bias buffer", ErrInvalidArgument, op, ep)
	case !ep.hasBias() && layer.Bias != nil:
		return fmt.Errorf("%w: %s: a Bias buffer, but epilogue %v adds none", ErrInvalidArgument, op, ep)
	case ep.hasBias() && layer.Bias.Len() < 4*m:
		return fmt.Errorf("%w: %s: Bias has %d bytes, fewer than the %d of %d outputs", ErrInvalidArgument, op, layer.Bias.Len(), 4*m, m)
	case ep.hasBias():
		bias = uintptr(layer.Bias.Ptr())
	}
	if l == nil {
		return fmt.Errorf("%w: %s: nil *Lt", ErrInvalidArgument, op)
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.h == 0 {
		return fmt.Errorf("cublas: %s: %w", op, driver.ErrClosed)
	}
	bound, err := l.ctx.Bind()
	if err != nil {
		return fmt.Errorf("cublas: %s: %w", op, err)
	}
	defer bound.Release()

	d := &ltDesc{lib: l.lib}
	err = func() error {
		p := new(uintptr)
		if err := l.lib.call(ltDescCreate, uintptr(unsafe.Pointer(p)), uintptr(c), cudaR32F); err != nil {
			return err
		}
		d.desc = *p
		ta, tb, epv := new(int32), new(int32), new(uint32)
		*ta, *tb, *epv = int32(Trans), int32(NoTrans), uint32(ep)
		if err := d.set(ltDescTransA, unsafe.Pointer(ta), 4); err != nil {
			return err
		}
		if err := d.set(ltDescTransB, unsafe.Pointer(tb), 4); err != nil {
			return err
		}
		if err := d.set(ltDescEpilogue, unsafe.Pointer(epv), 4); err != nil {
			return err
		}
		if bias != 0 {
			bp := new(uintptr)
			*bp = bias
			if err := d.set(ltDescBias, unsafe.Pointer(bp), unsafe.Sizeof(*bp)); err != nil {
				return err
			}
		}
		la, err := d.layout(g.A)
		if err != nil {
			return err
		}
		lb, err := d.layout(g.B)
		if err != nil {
			return err
		}
		lc, err := d.layout(g.C)
		if err != nil {
			return err
		}
		alpha, beta := new(float32), new(float32)
		*alpha = 1
		// (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D,
		// Ddesc, algo, workspace, workspaceSize, stream); C is D, beta 0.
		err = l.lib.call(ltMatmul, l.h, d.desc, uintptr(unsafe.Pointer(alpha)), pa, la, pb, lb,
			uintptr(unsafe.Pointer(beta)), pc, lc, pc, lc, 0, uintptr(l.ws.Ptr()), uintptr(l.ws.Len()), s.Handle())
		runtime.KeepAlive(s)
		return err
	}()
	if derr := d.destroy(); err == nil {
		err = derr
	}
	return err
}

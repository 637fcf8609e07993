package cublas

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/purecuda/overlap/driver"
	"github.com/purecuda/overlap/loader"
)

// cublasStatus_t codes (cublas_api.h), for error names.
var statusNames = map[int]string{
	0:  "CUBLAS_STATUS_SUCCESS",
	1:  "CUBLAS_STATUS_NOT_INITIALIZED",
	3:  "CUBLAS_STATUS_ALLOC_FAILED",
	7:  "CUBLAS_STATUS_INVALID_VALUE",
	8:  "CUBLAS_STATUS_ARCH_MISMATCH",
	11: "CUBLAS_STATUS_MAPPING_ERROR",
	13: "CUBLAS_STATUS_EXECUTION_FAILED",
	14: "CUBLAS_STATUS_INTERNAL_ERROR",
	15: "CUBLAS_STATUS_NOT_SUPPORTED",
	16: "CUBLAS_STATUS_LICENSE_ERROR",
}

// statusNotSupported is CUBLAS_STATUS_NOT_SUPPORTED (cublas_api.h).
const statusNotSupported = 15

var (
	// ErrInvalidArgument reports an argument refused before cuBLAS sees
	// it: a nil object, a size that is not positive or does not fit an
	// int, a leading dimension too small, a buffer too short.
	ErrInvalidArgument = errors.New("cublas: invalid argument")
	// ErrNotSupported matches an *Error of CUBLAS_STATUS_NOT_SUPPORTED.
	ErrNotSupported = errors.New("cublas: not supported")
)

// Error is a failed cuBLAS call: the entry point and its cublasStatus_t.
type Error struct {
	Op     string // the entry point, such as "cublasSgemm_v2"
	Status int    // the cublasStatus_t
}

// Name returns the status's name in cublas_api.h, such as
// "CUBLAS_STATUS_INVALID_VALUE".
func (e *Error) Name() string {
	if n, ok := statusNames[e.Status]; ok {
		return n
	}
	return "unknown cublasStatus_t"
}

// Error reads "cublas: cublasSgemm_v2: CUBLAS_STATUS_INVALID_VALUE (7)".
func (e *Error) Error() string {
	return fmt.Sprintf("cublas: %s: %s (%d)", e.Op, e.Name(), e.Status)
}

// Is reports whether target is ErrNotSupported and e that status.
func (e *Error) Is(target error) bool {
	return target == ErrNotSupported && e.Status == statusNotSupported
}

// The entry points bound, in the order of lib's fields.
var symbolNames = [...]string{
	"cublasCreate_v2", "cublasDestroy_v2", "cublasGetVersion_v2", "cublasSetStream_v2",
	"cublasSetMathMode", "cublasGetMathMode", "cublasSgemm_v2", "cublasGemmEx",
}

const (
	symCreate = iota
	symDestroy
	symVersion
	symSetStream
	symSetMath
	symGetMath
	symSgemm
	symGemmEx
	numSymbols
)

// lib is one opened library's entry points (cuBLAS's or cuBLASLt's),
// named by names and indexed by the sym constants of that library.
type lib struct {
	path  string
	names []string
	fn    []uintptr
}

var defaultLib = sync.OnceValues(func() (*lib, error) { return open(loader.CUBLAS, symbolNames[:]) })

// open opens library o and resolves every entry point in names.
func open(o loader.Optional, names []string) (*lib, error) {
	l, err := loader.OpenOptional(o)
	if err != nil {
		return nil, err
	}
	return bind(l, names)
}

// bind resolves every entry point in names in l.
func bind(l *loader.OptionalLibrary, names []string) (*lib, error) {
	b := &lib{path: l.Path(), names: names, fn: make([]uintptr, len(names))}
	for i, name := range names {
		p, err := l.Symbol(name)
		if err != nil {
			return nil, fmt.Errorf("cublas: %w", err)
		}
		b.fn[i] = p
	}
	return b, nil
}

// call calls entry point sym with args and returns its status as an
// error naming the call. Go memory passed in args is converted in the
// call's own argument list, which purego's SyscallN (go:uintptrescapes)
// keeps alive and in place for the call; this directive extends that to
// call's own arguments, so that callers convert their pointers in the
// call to call.
//
//go:uintptrescapes
func (b *lib) call(sym int, args ...uintptr) error {
	if len(args) > maxCallArgs {
		return fmt.Errorf("cublas: %s: %d arguments, more than purego passes on %s", b.names[sym], len(args), runtime.GOARCH)
	}
	r, _, _ := purego.SyscallN(b.fn[sym], args...)
	if st := int(int32(r)); st != 0 {
		return &Error{Op: b.names[sym], Status: st}
	}
	return nil
}

// Load opens cuBLAS: the library in OVERLAP_CUBLAS_LIBRARY when set, else
// the first found in the places loader.CUBLAS lists, cuBLASLt beside it
// first. [New] calls it, so calling it yourself is optional; it is the
// way to learn early whether cuBLAS is present. When it is not, the error
// names the library files looked for and every path tried, and
// errors.Is(err, loader.ErrNoLibrary) holds.
func Load() error {
	_, err := defaultLib()
	return err
}

// LibraryPath returns the path of the cuBLAS library opened, or "" when
// none could be.
func LibraryPath() string {
	if l, err := defaultLib(); err == nil {
		return l.path
	}
	return ""
}

// Math is a handle's math mode (cublasMath_t, cublas_api.h).
type Math int32

// The math modes.
const (
	// DefaultMath computes single precision in fp32 (CUBLAS_DEFAULT_MATH, 0).
	DefaultMath Math = 0
	// PedanticMath forbids any reduced precision (CUBLAS_PEDANTIC_MATH, 2).
	PedanticMath Math = 2
	// TF32Math lets single-precision routines (Sgemm, GemmEx with
	// Compute32F) use the tensor cores in TF32: inputs rounded to a 10-bit
	// mantissa (CUBLAS_TF32_TENSOR_OP_MATH, 3).
	TF32Math Math = 3
)

// String names the mode.
func (m Math) String() string {
	switch m {
	case DefaultMath:
		return "default"
	case PedanticMath:
		return "pedantic"
	case TF32Math:
		return "tf32"
	}
	return fmt.Sprintf("Math(%d)", int32(m))
}

// Op is a matrix's operation in a GEMM (cublasOperation_t).
type Op int32

// The operations (cublas_api.h: CUBLAS_OP_N 0, CUBLAS_OP_T 1).
const (
	NoTrans Op = 0
	Trans   Op = 1
)

// Compute is a GEMM's compute type (cublasComputeType_t, cublas_api.h).
type Compute int32

// The compute types for float32 matrices.
const (
	// Compute32F accumulates in fp32 (CUBLAS_COMPUTE_32F, 68); with the
	// handle in TF32Math, cuBLAS may still use TF32.
	Compute32F Compute = 68
	// Compute32FPedantic is fp32 with no reduced precision anywhere
	// (CUBLAS_COMPUTE_32F_PEDANTIC, 69).
	Compute32FPedantic Compute = 69
	// Compute32FFastTF32 accumulates in fp32 from inputs rounded to TF32,
	// on the tensor cores (CUBLAS_COMPUTE_32F_FAST_TF32, 77).
	Compute32FFastTF32 Compute = 77
)

// String names the compute type.
func (c Compute) String() string {
	switch c {
	case Compute32F:
		return "fp32"
	case Compute32FPedantic:
		return "fp32-pedantic"
	case Compute32FFastTF32:
		return "tf32-fast"
	}
	return fmt.Sprintf("Compute(%d)", int32(c))
}

// Library constants of cublasGemmEx.
const (
	cudaR32F    = 0  // CUDA_R_32F (library_types.h, cudaDataType_t)
	gemmDefault = -1 // CUBLAS_GEMM_DEFAULT (cublas_api.h, cublasGemmAlgo_t)
)

// Handle is a cuBLAS handle (cublasHandle_t) bound to one driver.Context:
// every call makes that context current on a locked OS thread before it
// enters cuBLAS. The caller owns it and must Close it before the
// Context.
type Handle struct {
	lib *lib
	ctx *driver.Context

	// mu is read-held by every call that uses the handle, write-held by
	// Close, so that no call runs on a destroyed handle.
	mu      sync.RWMutex
	h       uintptr // cublasHandle_t; 0 once closed
	stream  *driver.Stream
	cleanup runtime.Cleanup
}

// New creates a cuBLAS handle on ctx (cublasCreate_v2). Its work goes to
// the context's default stream until [Handle.SetStream]; math is
// [DefaultMath].
func New(ctx *driver.Context) (*Handle, error) {
	l, err := defaultLib()
	if err != nil {
		return nil, err
	}
	return newHandle(l, ctx)
}

func newHandle(l *lib, ctx *driver.Context) (*Handle, error) {
	if ctx == nil || ctx.Handle() == 0 {
		return nil, fmt.Errorf("%w: New: nil or closed context", ErrInvalidArgument)
	}
	bound, err := ctx.Bind()
	if err != nil {
		return nil, fmt.Errorf("cublas: New: %w", err)
	}
	defer bound.Release()
	h := new(uintptr)
	if err := l.call(symCreate, uintptr(unsafe.Pointer(h))); err != nil {
		return nil, err
	}
	hd := &Handle{lib: l, ctx: ctx, h: *h}
	hd.cleanup = runtime.AddCleanup(hd, destroyLost, lost{l, ctx, *h})
	return hd, nil
}

// lost is what the cleanup of a Handle dropped without Close needs.
type lost struct {
	lib *lib
	ctx *driver.Context
	h   uintptr
}

// destroyLost destroys a dropped handle with its context current: the
// safety net, not the contract.
func destroyLost(x lost) {
	if b, err := x.ctx.Bind(); err == nil {
		_ = x.lib.call(symDestroy, x.h)
		b.Release()
	}
}

// Close destroys the handle (cublasDestroy_v2), which waits for its work
// on the GPU. A second Close returns nil; other calls after Close return
// an error wrapping driver.ErrClosed.
func (h *Handle) Close() error {
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h == 0 {
		return nil
	}
	h.cleanup.Stop()
	raw := h.h
	h.h, h.stream = 0, nil
	bound, err := h.ctx.Bind()
	if err != nil {
		return fmt.Errorf("cublas: Close: %w", err)
	}
	defer bound.Release()
	return h.lib.call(symDestroy, raw)
}

// enter read-locks h and binds its context; the caller calls the returned
// release when its cuBLAS call is done.
func (h *Handle) enter(op string) (uintptr, func(), error) {
	if h == nil {
		return 0, nil, fmt.Errorf("%w: %s: nil *Handle", ErrInvalidArgument, op)
	}
	h.mu.RLock()
	if h.h == 0 {
		h.mu.RUnlock()
		return 0, nil, fmt.Errorf("cublas: %s: %w", op, driver.ErrClosed)
	}
	bound, err := h.ctx.Bind()
	if err != nil {
		h.mu.RUnlock()
		return 0, nil, fmt.Errorf("cublas: %s: %w", op, err)
	}
	return h.h, func() { bound.Release(); h.mu.RUnlock() }, nil
}

// Version returns cuBLAS's version (cublasGetVersion_v2), such as 130000
// for 13.0.0: major·10000 + minor·100 + patch.
func (h *Handle) Version() (int, error) {
	raw, done, err := h.enter("Version")
	if err != nil {
		return 0, err
	}
	defer done()
	v := new(int32)
	if err := h.lib.call(symVersion, raw, uintptr(unsafe.Pointer(v))); err != nil {
		return 0, err
	}
	return int(*v), nil
}

// SetStream makes cuBLAS queue the handle's work on s, a stream of the
// handle's context (cublasSetStream_v2). The stream is borrowed: keep it
// open while the handle may use it, and set another before closing it.
func (h *Handle) SetStream(s *driver.Stream) error {
	if s == nil || s.Handle() == 0 {
		return fmt.Errorf("%w: SetStream: nil or closed stream", ErrInvalidArgument)
	}
	raw, done, err := h.enter("SetStream")
	if err != nil {
		return err
	}
	defer done()
	if err := h.lib.call(symSetStream, raw, s.Handle()); err != nil {
		return err
	}
	h.stream = s
	runtime.KeepAlive(s)
	return nil
}

// SetMath sets the handle's math mode (cublasSetMathMode): [TF32Math]
// lets Sgemm use the tensor cores in TF32.
func (h *Handle) SetMath(m Math) error {
	switch m {
	case DefaultMath, PedanticMath, TF32Math:
	default:
		return fmt.Errorf("%w: SetMath: %v is not a math mode", ErrInvalidArgument, m)
	}
	raw, done, err := h.enter("SetMath")
	if err != nil {
		return err
	}
	defer done()
	return h.lib.call(symSetMath, raw, uintptr(m))
}

// Math returns the handle's math mode (cublasGetMathMode).
func (h *Handle) Math() (Math, error) {
	raw, done, err := h.enter("Math")
	if err != nil {
		return 0, err
	}
	defer done()
	m := new(int32)
	if err := h.lib.call(symGetMath, raw, uintptr(unsafe.Pointer(m))); err != nil {
		return 0, err
	}
	return Math(*m), nil
}

// Matrix is a column-major float32 matrix in device memory, as cuBLAS
// takes it: Rows × Cols elements with a leading dimension LD (the
// distance between columns, at least Rows) from byte Off of Buf.
type Matrix struct {
	Buf        *driver.DeviceBuffer
	Off        int
	Rows, Cols int
	LD         int
}

// check validates m as the operand called role and returns its address.
func (m Matrix) check(op, role string) (uintptr, error) {
	switch {
	case m.Buf == nil || m.Buf.Ptr() == 0:
		return 0, fmt.Errorf("%w: %s: %s: nil or closed buffer", ErrInvalidArgument, op, role)
	case m.Rows <= 0 || m.Cols <= 0 || m.Rows > math.MaxInt32 || m.Cols > math.MaxInt32:
		return 0, fmt.Errorf("%w: %s: %s is %d × %d: each must be positive and fit an int", ErrInvalidArgument, op, role, m.Rows, m.Cols)
	case m.LD < m.Rows || m.LD > math.MaxInt32:
		return 0, fmt.Errorf("%w: %s: %s: leading dimension %d is less than its %d rows", ErrInvalidArgument, op, role, m.LD, m.Rows)
	case m.Off < 0 || m.Off%4 != 0:
		return 0, fmt.Errorf("%w: %s: %s: offset %d is not a non-negative multiple of 4", ErrInvalidArgument, op, role, m.Off)
	}
	need := 4 * (int64(m.LD)*int64(m.Cols-1) + int64(m.Rows))
	if int64(m.Off)+need > int64(m.Buf.Len()) {
		return 0, fmt.Errorf("%w: %s: %s of %d × %d (leading dimension %d) from byte %d needs %d bytes, but the buffer has %d",
			ErrInvalidArgument, op, role, m.Rows, m.Cols, m.LD, m.Off, int64(m.Off)+need, m.Buf.Len())
	}
	return uintptr(m.Buf.Ptr()) + uintptr(m.Off), nil
}

// GEMM is one column-major C = alpha·op(A)·op(B) + beta·C, as BLAS
// defines it: op(A) is M × K, op(B) K × N, C M × N.
type GEMM struct {
	TransA, TransB Op
	A, B, C        Matrix
	Alpha, Beta    float32
}

// shape checks g's operands against each other and returns m, n, k.
func (g GEMM) shape(op string) (m, n, k int, err error) {
	for _, t := range []Op{g.TransA, g.TransB} {
		if t != NoTrans && t != Trans {
			return 0, 0, 0, fmt.Errorf("%w: %s: operation %d: want NoTrans or Trans", ErrInvalidArgument, op, t)
		}
	}
	am, ak := g.A.Rows, g.A.Cols
	if g.TransA == Trans {
		am, ak = ak, am
	}
	bk, bn := g.B.Rows, g.B.Cols
	if g.TransB == Trans {
		bk, bn = bn, bk
	}
	if ak != bk || g.C.Rows != am || g.C.Cols != bn {
		return 0, 0, 0, fmt.Errorf("%w: %s: op(A) is %d × %d, op(B) %d × %d and C %d × %d: want M × K, K × N and M × N",
			ErrInvalidArgument, op, am, ak, bk, bn, g.C.Rows, g.C.Cols)
	}
	return am, bn, ak, nil
}

// args checks g and returns cuBLAS's arguments from transa to ldc, with
// alpha and beta in Go memory that the caller keeps alive over the call.
func (g GEMM) args(op string, alpha, beta *float32) (pre, a, b, post []uintptr, err error) {
	m, n, k, err := g.shape(op)
	if err != nil {
		return
	}
	var pa, pb, pc uintptr
	if pa, err = g.A.check(op, "A"); err != nil {
		return
	}
	if pb, err = g.B.check(op, "B"); err != nil {
		return
	}
	if pc, err = g.C.check(op, "C"); err != nil {
		return
	}
	*alpha, *beta = g.Alpha, g.Beta
	pre = []uintptr{uintptr(g.TransA), uintptr(g.TransB), uintptr(m), uintptr(n), uintptr(k), uintptr(unsafe.Pointer(alpha))}
	return pre, []uintptr{pa, uintptr(g.A.LD)}, []uintptr{pb, uintptr(g.B.LD)},
		[]uintptr{uintptr(unsafe.Pointer(beta)), pc, uintptr(g.C.LD)}, nil
}

// Sgemm queues g on the handle's stream (cublasSgemm_v2): fp32, or TF32
// where the handle's math mode is [TF32Math]. alpha and beta are read
// before it returns; the matrices must stay open until the stream has
// run it.
func (h *Handle) Sgemm(g GEMM) error {
	alpha, beta := new(float32), new(float32)
	pre, a, b, post, err := g.args("Sgemm", alpha, beta)
	if err != nil {
		return err
	}
	raw, done, err := h.enter("Sgemm")
	if err != nil {
		return err
	}
	defer done()
	args := append([]uintptr{raw}, pre...)
	args = append(append(append(args, a...), b...), post...)
	err = h.lib.call(symSgemm, args...)
	runtime.KeepAlive(alpha)
	runtime.KeepAlive(beta)
	return err
}

// GemmEx queues g with float32 matrices and the compute type c on the
// handle's stream (cublasGemmEx, CUDA_R_32F, CUBLAS_GEMM_DEFAULT):
// [Compute32F], [Compute32FPedantic] or [Compute32FFastTF32].
func (h *Handle) GemmEx(g GEMM, c Compute) error {
	switch c {
	case Compute32F, Compute32FPedantic, Compute32FFastTF32:
	default:
		return fmt.Errorf("%w: GemmEx: %v: want Compute32F, Compute32FPedantic or Compute32FFastTF32", ErrInvalidArgument, c)
	}
	alpha, beta := new(float32), new(float32)
	pre, a, b, post, err := g.args("GemmEx", alpha, beta)
	if err != nil {
		return err
	}
	raw, done, err := h.enter("GemmEx")
	if err != nil {
		return err
	}
	defer done()
	// (handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype,
	// ldb, beta, C, Ctype, ldc, computeType, algo)
	args := append([]uintptr{raw}, pre...)
	args = append(args, a[0], cudaR32F, a[1], b[0], cudaR32F, b[1], post[0], post[1], cudaR32F, post[2], uintptr(c))
	algo := int32(gemmDefault) // an int: the callee reads its low 32 bits
	args = append(args, uintptr(uint32(algo)))
	err = h.lib.call(symGemmEx, args...)
	runtime.KeepAlive(alpha)
	runtime.KeepAlive(beta)
	return err
}

// RowMajor is a row-major float32 matrix in device memory, as Go and
// PyTorch lay matrices out: Rows × Cols elements, row r starting LD
// elements after row r-1 (LD 0 means Cols), from byte Off of Buf.
//
// cuBLAS is column-major. The bytes of a row-major R × C matrix are, to
// cuBLAS, the column-major C × R matrix that is its transpose, with the
// same leading dimension; [Handle.MatMul] and [Handle.Linear] pass each
// operand that way, so that no data moves: C = A·B becomes Cᵀ = Bᵀ·Aᵀ.
type RowMajor struct {
	Buf        *driver.DeviceBuffer
	Off        int
	Rows, Cols int
	LD         int
}

// colMajor is r as cuBLAS sees its bytes: its transpose.
func (r RowMajor) colMajor() Matrix {
	ld := r.LD
	if ld == 0 {
		ld = r.Cols
	}
	return Matrix{Buf: r.Buf, Off: r.Off, Rows: r.Cols, Cols: r.Rows, LD: ld}
}

// MatMul queues C = A·B for row-major A (M × K), B (K × N) and C (M × N)
// with the compute type c: cuBLAS computes Cᵀ = Bᵀ·Aᵀ on the same bytes.
func (h *Handle) MatMul(c, a, b RowMajor, compute Compute) error {
	return h.GemmEx(GEMM{
		TransA: NoTrans, TransB: NoTrans,
		A: b.colMajor(), B: a.colMajor(), C: c.colMajor(),
		Alpha: 1,
	}, compute)
}

// Linear queues Y = X·Wᵀ for row-major X (rows × in), W (out × in, the
// layout of a PyTorch nn.Linear weight) and Y (rows × out), with the
// compute type c: the product that package model's GEMM step computes
// before its bias and activation. cuBLAS computes Yᵀ = W·Xᵀ, W being the
// transpose of its column-major view.
func (h *Handle) Linear(y, x, w RowMajor, compute Compute) error {
	return h.GemmEx(GEMM{
		TransA: Trans, TransB: NoTrans,
		A: w.colMajor(), B: x.colMajor(), C: y.colMajor(),
		Alpha: 1,
	}, compute)
}

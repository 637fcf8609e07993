// Package cublas is a small binding to NVIDIA's cuBLAS, opened at run
// time through purego without cgo: a [Handle] bound to a driver.Context,
// its stream and math mode, and float32 GEMMs on device buffers of
// package driver ([Handle.Sgemm], [Handle.GemmEx] with a compute type
// such as [Compute32FFastTF32], and the row-major helpers
// [Handle.MatMul] and [Handle.Linear]); and [Lt], a cuBLASLt handle that
// runs a whole Linear layer, the product, its bias and its ReLU or GELU,
// in one matmul ([Lt.Linear]), as package kernels' GEMM entries do.
//
// cuBLAS is optional: overlap's core never needs it, and nothing here is
// loaded until a function of this package is called. The library is
// found as package loader finds it ([loader.CUBLAS]): the path in
// OVERLAP_CUBLAS_LIBRARY when set, else libcublas.so.13 or .12 through
// the dynamic loader, $CUDA_PATH and $CUDA_HOME, /usr/local/cuda and
// /usr/local/cuda-* (the newest first) and the pip wheels
// (site-packages/nvidia/cublas/lib, as PyTorch installs them), with
// libcublasLt opened from the same folder first; on Windows
// cublas64_13.dll or cublas64_12.dll under %CUDA_PATH%. When none is
// found, [New] returns the loader's error, which names the files looked
// for and every path tried (errors.Is(err, loader.ErrNoLibrary)).
// cuBLASLt is found the same way ([loader.CUBLASLt],
// OVERLAP_CUBLASLT_LIBRARY, libcublasLt.so.13 or .12) by [NewLt].
//
// # Layout
//
// cuBLAS is column-major: [Matrix] and [GEMM] are BLAS's own terms
// (Rows × Cols, leading dimension LD ≥ Rows). Go and PyTorch are
// row-major. A row-major R × C matrix is, byte for byte, the
// column-major C × R matrix that is its transpose, so the row-major
// helpers move no data: [Handle.MatMul] computes C = A·B as Cᵀ = Bᵀ·Aᵀ,
// and [Handle.Linear] computes Y = X·Wᵀ (a PyTorch Linear layer's product,
// W being out × in) as Yᵀ = W·Xᵀ.
//
// # Precision
//
// [Compute32F] and [DefaultMath] compute in fp32: a result's error
// against a float64 reference grows as about sqrt(K) units of float32
// rounding; the GPU tests accept 1e-4·sqrt(K) relative to the sum of
// |a|·|b|. [Compute32FFastTF32], or [TF32Math] on the handle, rounds
// the inputs to TF32 (10 mantissa bits) on the tensor cores: about 1e-3
// relative per product, the tests accept 1e-2.
//
// # Concurrency
//
// A Handle's methods may be called from any goroutine: each one locks
// its OS thread, makes the handle's context current there, calls cuBLAS
// and unlocks. Calls on one handle are serialised against its Close,
// not against each other; cuBLAS allows one handle to be used from
// several threads, but its work then interleaves on the one stream, so
// give each goroutine its own Handle or its own ordering.
//
// # Memory
//
// GEMMs are queued on the handle's stream ([Handle.SetStream]; the
// context's default stream before that) and return before the GPU has
// run them: keep the buffers open, and do not read the result, until the
// stream has been synchronised. Every operand is checked against its
// buffer's length first, so a wrong size is an error, never a read or
// write past a buffer. alpha and beta are read from Go memory during the
// call (cuBLAS's host pointer mode).
//
// # Lifetimes
//
// [New] creates the handle (cublasCreate_v2); the caller owns it and must
// Close it (cublasDestroy_v2) before closing its Context or the stream it
// was given. [NewLt] creates a cuBLASLt handle and its 32 MiB device
// workspace, both released by its Close; each [Lt.Linear] creates its
// matmul descriptor and matrix layouts and destroys them before it
// returns, on every path. Close is idempotent; use after Close returns an error
// wrapping driver.ErrClosed. A runtime cleanup destroys a Handle dropped
// without Close, as a safety net, not the contract. The library stays
// loaded for the life of the process.
package cublas

// gemm_bench measures the Linear-layer kernels of ptx/kernels/gemm.cu
// (Y = act(X·Wᵀ + b)) against cuBLAS on the MLP layers' shapes, M = 65536
// rows and (K, N) in (768, 256), (256, 16), (768, 3072), (3072, 768), and
// checks every kernel it runs:
//
//   - on odd shapes (M=1000 K=5 N=3, M=77 K=768 N=16, misaligned
//     pointers, no bias, ...), every element against a float64 CPU
//     reference, and the memory around Y for stray writes;
//   - on the large shapes, 4096 sampled elements against a float64 CPU
//     reference, and every element against cuBLAS fp32 (SGEMM, then a
//     bias+act kernel), each within the tolerance that gemm.cu documents,
//     scaled by S = Σ|x·w| + |b| (computed by cuBLAS on |X| and |W|).
//
// Timing: median of --reps runs (20) after 3 warm-ups, cudaEvents around
// each run. Our kernels include bias and activation (fused); the cuBLAS
// figures are the GEMM alone (its bias+act kernel is timed on its own
// line). TF32 cuBLAS is cublasGemmEx with CUBLAS_COMPUTE_32F_FAST_TF32.
//
// Besides the three exported kernels (compiled into this program), it
// runs tile variants (template instantiations) to compare, and with --ptx
// FILE it loads the generated gemm.ptx through the driver API
// (cuModuleLoadData, JIT to this GPU), launches its kernels exactly as the
// launch contract in gemm.cu says, and checks and times them too.
//
// Build (gemm_run.sh compiles the four parts at once; one part is the
// same program without -DGEMM_BENCH_PART):
//
//   nvcc -O3 -std=c++17 -arch=sm_90 -o gemm_bench bench/reference/gemm_bench.cu -lcublas -lcuda
//
// Usage: gemm_bench [--ptx FILE] [--table FILE] [--reps N]
// Exits 1 when any check fails (after printing everything).
#ifndef GEMM_BENCH_PART
#define GEMM_BENCH_ALL 1
#define GEMM_BENCH_PART 0
#else
#define GEMM_BENCH_ALL 0
#endif
#if !GEMM_BENCH_ALL && GEMM_BENCH_PART != 0
#define GEMM_NO_EXPORTS 1
#endif

#include "common.h"
#include "../../ptx/kernels/gemm.cu"

#include <cublas_v2.h>
#include <cuda.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

struct Args {
    float* Y;
    const float* X;
    const float* W;
    const float* b;
    int M, N, K, act;
};

// A kernel to run: launch returns 0 or the launch's error code.
struct Variant {
    std::string name;
    bool tf32 = false;
    int cvt = 0;
    bool exported = false;   // an extern "C" kernel of gemm.cu, compiled in
    bool ptx = false;        // loaded from gemm.ptx through the driver API
    int threads = 0, smem = 0, regs = -1, local = -1, per_sm = -1;
    std::function<int(const Args&)> launch;
};

template <class Kern>
static void fill_info(Variant& v, Kern k) {
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, (const void*)k) == cudaSuccess) {
        v.regs = a.numRegs;
        v.local = (int)a.localSizeBytes;
    }
    int n = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, (const void*)k, v.threads, (size_t)v.smem) == cudaSuccess)
        v.per_sm = n;
    cudaGetLastError();
}

template <int BK, int MINB>
__global__ void __launch_bounds__(256, MINB)
    bench_f32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
              const float* __restrict__ b, int M, int N, int K, int act) {
    __shared__ __align__(16) float smem[GemmF32Cfg<BK>::SMEM_FLOATS];
    gemm_f32_tile<BK>(smem, Y, X, W, b, M, N, K, act);
}

template <class C, int MINB>
__global__ void __launch_bounds__(C::THREADS, MINB)
    bench_tf32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
               const float* __restrict__ b, int M, int N, int K, int act) {
    gemm_tf32_tile<C>(gemm_dynamic_smem, Y, X, W, b, M, N, K, act);
}

template <int BK, int MINB>
static void add_f32(std::vector<Variant>& vs, const char* name) {
    typedef GemmF32Cfg<BK> C;
    Variant v;
    v.name = name;
    v.threads = C::THREADS;
    v.smem = 0;
    fill_info(v, bench_f32<BK, MINB>);
    v.launch = [](const Args& a) {
        dim3 grid((a.N + C::BN - 1) / C::BN, (a.M + C::BM - 1) / C::BM);
        bench_f32<BK, MINB><<<grid, C::THREADS>>>(a.Y, a.X, a.W, a.b, a.M, a.N, a.K, a.act);
        return (int)cudaGetLastError();
    };
    vs.push_back(v);
}

template <class C, int MINB>
static void add_tf32(std::vector<Variant>& vs, const char* name) {
    Variant v;
    v.name = name;
    v.tf32 = true;
    v.cvt = C::CVT;
    v.threads = C::THREADS;
    v.smem = C::SMEM_BYTES;
    CK(cudaFuncSetAttribute((const void*)bench_tf32<C, MINB>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            C::SMEM_BYTES));
    fill_info(v, bench_tf32<C, MINB>);
    v.launch = [](const Args& a) {
        dim3 grid((a.N + C::BN - 1) / C::BN, (a.M + C::BM - 1) / C::BM);
        bench_tf32<C, MINB><<<grid, C::THREADS, C::SMEM_BYTES>>>(a.Y, a.X, a.W, a.b, a.M, a.N, a.K, a.act);
        return (int)cudaGetLastError();
    };
    vs.push_back(v);
}

// The variants, split over translation units so that nvcc can compile
// them at once.
void gemm_bench_part1(std::vector<Variant>& vs);
void gemm_bench_part2(std::vector<Variant>& vs);
void gemm_bench_part3(std::vector<Variant>& vs);

#if GEMM_BENCH_ALL || GEMM_BENCH_PART == 1
void gemm_bench_part1(std::vector<Variant>& vs) {
    add_tf32<GemmTf32Cfg<128, 128, 16, 64, 32, 3, 0>, 2>(vs, "tf32 128x128x16 w64x32 s3 t256");
    add_tf32<GemmTf32Cfg<128, 128, 16, 64, 64, 3, 3>, 2>(vs, "tf32 128x128x16 w64x64 s3 cvt=add");
    add_tf32<GemmTf32Cfg<128, 128, 16, 64, 64, 3, 2>, 2>(vs, "tf32 128x128x16 w64x64 s3 cvt=none");
    add_tf32<GemmTf32Cfg<128, 128, 16, 64, 64, 4, 0>, 2>(vs, "tf32 128x128x16 w64x64 s4 [64K]");
}
#endif
#if GEMM_BENCH_ALL || GEMM_BENCH_PART == 2
void gemm_bench_part2(std::vector<Variant>& vs) {
    add_tf32<GemmTf32Cfg<256, 128, 16, 64, 64, 2, 0>, 1>(vs, "tf32 256x128x16 w64x64 s2");
    add_tf32<GemmTf32Cfg<128, 256, 8, 64, 64, 4, 0>, 1>(vs, "tf32 128x256x8 w64x64 s4");
    add_tf32<GemmTf32Cfg<256, 128, 8, 64, 64, 4, 0>, 1>(vs, "tf32 256x128x8 w64x64 s4");
    add_tf32<GemmTf32Cfg<256, 128, 16, 64, 64, 3, 3>, 1>(vs, "tf32 256x128x16 w64x64 s3 cvt=add [72K]");
    add_tf32<GemmTf32Cfg<128, 256, 16, 64, 64, 2, 0>, 1>(vs, "tf32 128x256x16 w64x64 s2");
}
#endif
#if GEMM_BENCH_ALL || GEMM_BENCH_PART == 3
void gemm_bench_part3(std::vector<Variant>& vs) {
    add_tf32<GemmTf32Cfg<256, 128, 16, 64, 64, 4, 0>, 1>(vs, "tf32 256x128x16 w64x64 s4 [96K]");
    add_tf32<GemmTf32Cfg<128, 256, 16, 64, 64, 3, 0>, 1>(vs, "tf32 128x256x16 w64x64 s3 [72K]");
    add_tf32<GemmTf32Cfg<128, 128, 32, 64, 64, 3, 0>, 2>(vs, "tf32 128x128x32 w64x64 s3 [96K]");
    add_tf32<GemmTf32Cfg<256, 128, 32, 64, 64, 3, 0>, 1>(vs, "tf32 256x128x32 w64x64 s3 [144K]");
}
#endif

#if GEMM_BENCH_ALL || GEMM_BENCH_PART == 0

#define CU(x)                                                                           \
    do {                                                                                \
        CUresult r_ = (x);                                                              \
        if (r_ != CUDA_SUCCESS) {                                                       \
            const char* s_ = "?";                                                       \
            cuGetErrorName(r_, &s_);                                                    \
            fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__, __LINE__, #x, s_, (int)r_); \
            exit(1);                                                                    \
        }                                                                               \
    } while (0)
#define CB(x)                                                                      \
    do {                                                                           \
        cublasStatus_t s_ = (x);                                                   \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                         \
            fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, (int)s_); \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

// The launch contract that gemm.cu documents.
static_assert(GemmF32Default::THREADS == 256 && GemmF32Default::BM == 128 && GemmF32Default::BN == 128 &&
                  GemmF32Default::SMEM_BYTES == 16896,
              "gemm_f32 contract");
static_assert(GemmTf32Default::THREADS == 128 && GemmTf32Default::BM == 128 && GemmTf32Default::BN == 128 &&
                  GemmTf32Default::SMEM_BYTES == 49152,
              "gemm_tf32 contract");
static_assert(GemmTf32Big::THREADS == 256 && GemmTf32Big::BM == 256 && GemmTf32Big::BN == 128 &&
                  GemmTf32Big::SMEM_BYTES == 73728,
              "gemm_tf32_big contract");

static void add_exports(std::vector<Variant>& vs) {
    {
        Variant v;
        v.name = "f32 128x128x8 (gemm_f32)";
        v.exported = true;
        v.threads = 256;
        fill_info(v, gemm_f32);
        v.launch = [](const Args& a) {
            gemm_f32<<<dim3((a.N + 127) / 128, (a.M + 127) / 128, 1), dim3(256, 1, 1)>>>(a.Y, a.X, a.W, a.b, a.M, a.N,
                                                                                     a.K, a.act);
            return (int)cudaGetLastError();
        };
        vs.push_back(v);
    }
    {
        Variant v;
        v.name = "tf32 128x128x16 w64x64 s3 (gemm_tf32)";
        v.exported = true;
        v.tf32 = true;
        v.threads = 128;
        fill_info(v, gemm_tf32);
        v.launch = [](const Args& a) {
            gemm_tf32<<<dim3((a.N + 127) / 128, (a.M + 127) / 128, 1), dim3(128, 1, 1)>>>(a.Y, a.X, a.W, a.b, a.M,
                                                                                      a.N, a.K, a.act);
            return (int)cudaGetLastError();
        };
        vs.push_back(v);
    }
    {
        Variant v;
        v.name = "tf32 256x128x16 w64x64 s3 (gemm_tf32_big)";
        v.exported = true;
        v.tf32 = true;
        v.threads = 256;
        v.smem = 73728;
        CK(cudaFuncSetAttribute((const void*)gemm_tf32_big, cudaFuncAttributeMaxDynamicSharedMemorySize, 73728));
        fill_info(v, gemm_tf32_big);
        v.launch = [](const Args& a) {
            gemm_tf32_big<<<dim3((a.N + 127) / 128, (a.M + 255) / 256, 1), dim3(256, 1, 1), 73728>>>(
                a.Y, a.X, a.W, a.b, a.M, a.N, a.K, a.act);
            return (int)cudaGetLastError();
        };
        vs.push_back(v);
    }
}

// add_ptx loads gemm.ptx as the Go side will (cuModuleLoadData in the
// primary context) and launches its kernels by the documented contract.
static bool add_ptx(std::vector<Variant>& vs, const char* path) {
    FILE* f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return false;
    }
    std::string text;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    fclose(f);
    CUmodule mod;
    CUresult r = cuModuleLoadData(&mod, text.c_str());
    if (r != CUDA_SUCCESS) {
        const char* s = "?";
        cuGetErrorName(r, &s);
        fprintf(stderr, "cuModuleLoadData(%s): %s\n", path, s);
        return false;
    }
    struct K {
        const char* name;
        int threads, bm, bn, smem;
        bool tf32;
    } ks[] = {{"gemm_f32", 256, 128, 128, 0, false},
              {"gemm_tf32", 128, 128, 128, 0, true},
              {"gemm_tf32_big", 256, 256, 128, 73728, true}};
    bool ok = true;
    for (const K& k : ks) {
        CUfunction fn;
        if (cuModuleGetFunction(&fn, mod, k.name) != CUDA_SUCCESS) {
            fprintf(stderr, "%s: no kernel %s\n", path, k.name);
            ok = false;
            continue;
        }
        if (k.smem > 0) CU(cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.smem));
        Variant v;
        v.name = std::string("ptx ") + k.name;
        v.ptx = true;
        v.tf32 = k.tf32;
        v.threads = k.threads;
        v.smem = k.smem;
        cuFuncGetAttribute(&v.regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
        cuFuncGetAttribute(&v.local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn);
        cuOccupancyMaxActiveBlocksPerMultiprocessor(&v.per_sm, fn, k.threads, (size_t)k.smem);
        const K kk = k;
        v.launch = [fn, kk](const Args& a) {
            float* Y = a.Y;
            const float* X = a.X;
            const float* W = a.W;
            const float* b = a.b;
            int M = a.M, N = a.N, Kd = a.K, act = a.act;
            void* p[] = {&Y, &X, &W, &b, &M, &N, &Kd, &act};
            return (int)cuLaunchKernel(fn, (unsigned)((N + kk.bn - 1) / kk.bn), (unsigned)((M + kk.bm - 1) / kk.bm),
                                       1, (unsigned)kk.threads, 1, 1, (unsigned)kk.smem, 0, p, nullptr);
        };
        vs.push_back(v);
    }
    return ok;
}

// ---------------------------------------------------------------------------
// Data: values from a hash of (seed, index), the same on host and device:
// odd multiples of 2⁻²³ in (-1, 1), never zero, times a scale.
__host__ __device__ inline float gb_rand(unsigned long long seed, unsigned long long i) {
    unsigned long long z = i + seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const unsigned v = (unsigned)(z >> 41);   // 23 bits
    return ((float)(2u * v + 1u) - 8388608.0f) * (1.0f / 8388608.0f);
}

__global__ void fill_kernel(float* p, size_t n, unsigned long long seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = gb_rand(seed, i) * scale;
}
__global__ void abs_kernel(float* d, const float* s, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        d[i] = fabsf(s[i]);
}
__global__ void set_kernel(float* p, size_t n, float v) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = v;
}
// Y = act(Y + b) for cuBLAS's output.
__global__ void bias_act_kernel(float* Y, const float* b, int M, int N, int act) {
    const size_t n = (size_t)M * N;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        Y[i] = gemm_act(Y[i] + (b ? b[i % N] : 0.0f), act);
}
__global__ void gather_kernel(float* out, const float* y, const long long* idx, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = y[idx[i]];
}
// Element-wise check of y against ref within tolc·S + 2⁻²⁰·|ref|: sums
// of squares, the largest |y−ref|/S, and the number outside.
__global__ void check_kernel(const float* y, const float* ref, const float* S, size_t n, double tolc, double* acc,
                             unsigned long long* maxr, unsigned long long* bad) {
    __shared__ double se[256], sr[256], sm[256];
    __shared__ unsigned long long sb[256];
    double e2 = 0, r2 = 0, mr = 0;
    unsigned long long nb = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const double yv = y[i], rv = ref[i], s = S[i];
        const double e = fabs(yv - rv);
        const double tol = tolc * s + 9.5367431640625e-07 * fabs(rv) + 1e-30;
        if (!(e <= tol)) ++nb;
        e2 += (e == e && e < 1e150) ? e * e : 1e300;
        r2 += rv * rv;
        if (s > 0 && e == e) mr = fmax(mr, e / s);
    }
    const int t = threadIdx.x;
    se[t] = e2;
    sr[t] = r2;
    sm[t] = mr;
    sb[t] = nb;
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if (t < h) {
            se[t] += se[t + h];
            sr[t] += sr[t + h];
            sm[t] = fmax(sm[t], sm[t + h]);
            sb[t] += sb[t + h];
        }
        __syncthreads();
    }
    if (t == 0) {
        atomicAdd(&acc[0], se[0]);
        atomicAdd(&acc[1], sr[0]);
        atomicMax(maxr, (unsigned long long)__double_as_longlong(sm[0]));
        atomicAdd(bad, sb[0]);
    }
}

static const int kBlocks = 1024;

static double tol_f32(int K) { return (K + 2) * std::ldexp(1.0, -23); }
static double tol_ours(const Variant& v, int K) {
    if (!v.tf32) return tol_f32(K);
    return (v.cvt == 2 ? std::ldexp(1.0, -9) : std::ldexp(1.0, -10)) + tol_f32(K);
}
static double act_ref(double v, int act) {
    if (act == 1) return v < 0 ? 0 : v;
    if (act == 2) return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    return v;
}
static const char* act_name(int act) { return act == 1 ? "relu" : act == 2 ? "gelu" : "none"; }

static float median_ms(const std::function<void()>& f, int reps) {
    for (int i = 0; i < 3; ++i) f();
    CK(cudaDeviceSynchronize());
    std::vector<cudaEvent_t> ev(2 * reps);
    for (auto& e : ev) CK(cudaEventCreate(&e));
    for (int r = 0; r < reps; ++r) {
        CK(cudaEventRecord(ev[2 * r]));
        f();
        CK(cudaEventRecord(ev[2 * r + 1]));
    }
    CK(cudaEventSynchronize(ev.back()));
    std::vector<float> t(reps);
    for (int r = 0; r < reps; ++r) CK(cudaEventElapsedTime(&t[r], ev[2 * r], ev[2 * r + 1]));
    for (auto& e : ev) CK(cudaEventDestroy(e));
    std::sort(t.begin(), t.end());
    return t[reps / 2];
}

static void cublas_gemm(cublasHandle_t h, bool tf32, const Args& a) {
    const float one = 1.0f, zero = 0.0f;
    // Row-major Y[M×N] = X[M×K]·Wᵀ is column-major Yᵀ[N×M] = (Wᵀ)ᵀ·Xᵀ,
    // with Wᵀ and Xᵀ the column-major views (ld K) of W and X.
    if (!tf32)
        CB(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, a.N, a.M, a.K, &one, a.W, a.K, a.X, a.K, &zero, a.Y, a.N));
    else
        CB(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, a.N, a.M, a.K, &one, a.W, CUDA_R_32F, a.K, a.X, CUDA_R_32F, a.K,
                        &zero, a.Y, CUDA_R_32F, a.N, CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT));
}

static const int kGuard = 64;   // sentinel floats on each side of Y
static const float kSentinel = 12345.5f;

static bool guards_intact(const float* ybase, size_t n, int off) {
    std::vector<float> g(kGuard + off);
    CK(cudaMemcpy(g.data(), ybase, g.size() * 4, cudaMemcpyDeviceToHost));
    bool ok = true;
    for (float v : g) ok = ok && v == kSentinel;
    CK(cudaMemcpy(g.data(), ybase + kGuard + off + n, kGuard * 4, cudaMemcpyDeviceToHost));
    for (int i = 0; i < kGuard; ++i) ok = ok && g[i] == kSentinel;
    return ok;
}

struct Row {
    std::string shape, variant, prec, status;
    double ms = 0, tflops = 0, cublas = 0, sample_err = 0, full_err = 0, relnorm = 0;
};
static std::vector<Row> g_rows;
static int g_fails = 0;

// ---------------------------------------------------------------------------
// Odd shapes: every element against float64, and the guards around Y.
struct Odd {
    int M, N, K, act;
    int xoff, yoff;   // float offsets of X and W, and of Y, from 256-byte alignment
    bool bias;
};

static void run_odd(std::vector<Variant>& vs, const Odd& o) {
    const size_t nx = (size_t)o.M * o.K, nw = (size_t)o.N * o.K, ny = (size_t)o.M * o.N;
    const float ws = 1.0f / std::sqrt((float)o.K);
    float *xb, *wb, *bb, *yb;
    CK(cudaMalloc(&xb, (nx + 4) * 4));
    CK(cudaMalloc(&wb, (nw + 4) * 4));
    CK(cudaMalloc(&bb, (o.N + 4) * 4));
    CK(cudaMalloc(&yb, (ny + 2 * kGuard + 4) * 4));
    float* X = xb + o.xoff;
    float* W = wb + o.xoff;
    float* Y = yb + kGuard + o.yoff;
    fill_kernel<<<256, 256>>>(X, nx, 11, 1.0f);
    fill_kernel<<<256, 256>>>(W, nw, 12, ws);
    fill_kernel<<<256, 256>>>(bb, o.N, 13, ws);
    CK(cudaGetLastError());
    std::vector<double> x(nx), w(nw), ref(ny), S(ny);
    for (size_t i = 0; i < nx; ++i) x[i] = gb_rand(11, i);
    for (size_t i = 0; i < nw; ++i) w[i] = gb_rand(12, i) * ws;
    for (int m = 0; m < o.M; ++m)
        for (int n = 0; n < o.N; ++n) {
            double s = 0, sa = 0;
            for (int k = 0; k < o.K; ++k) {
                const double p = x[(size_t)m * o.K + k] * w[(size_t)n * o.K + k];
                s += p;
                sa += std::fabs(p);
            }
            if (o.bias) {
                const double bv = gb_rand(13, n) * ws;
                s += bv;
                sa += std::fabs(bv);
            }
            ref[(size_t)m * o.N + n] = act_ref(s, o.act);
            S[(size_t)m * o.N + n] = sa;
        }
    char shape[96];
    snprintf(shape, sizeof shape, "M=%d K=%d N=%d %s%s%s%s", o.M, o.K, o.N, act_name(o.act), o.xoff ? " X,W+4B" : "",
             o.yoff ? " Y+4B" : "", o.bias ? "" : " nobias");
    std::vector<float> y(ny);
    for (Variant& v : vs) {
        set_kernel<<<64, 256>>>(yb, ny + 2 * kGuard + 4, kSentinel);
        CK(cudaDeviceSynchronize());
        const int e = v.launch(Args{Y, X, W, o.bias ? bb : nullptr, o.M, o.N, o.K, o.act});
        const cudaError_t se = cudaDeviceSynchronize();
        Row r;
        r.shape = shape;
        r.variant = v.name;
        r.prec = v.tf32 ? "tf32" : "fp32";
        if (e != 0 || se != cudaSuccess) {
            printf("odd  %-34s %-44s LAUNCH FAILED (%d, %s)\n", shape, v.name.c_str(), e, cudaGetErrorString(se));
            if (se != cudaSuccess) exit(1);   // the context is gone
            ++g_fails;
            continue;
        }
        CK(cudaMemcpy(y.data(), Y, ny * 4, cudaMemcpyDeviceToHost));
        const double tc = 1.13 * tol_ours(v, o.K);
        long long bad = 0;
        double worst = 0;
        for (size_t i = 0; i < ny; ++i) {
            const double err = std::fabs(y[i] - ref[i]);
            const double tol = tc * S[i] + 9.5367431640625e-07 * std::fabs(ref[i]) + 1e-30;
            if (!(err <= tol)) {
                if (bad < 3)
                    printf("     %s %s: Y[%zu][%zu] = %.9g, want %.9g (tol %.3g)\n", shape, v.name.c_str(), i / o.N,
                           i % o.N, y[i], ref[i], tol);
                ++bad;
            }
            if (S[i] > 0 && err == err) worst = std::max(worst, err / S[i]);
        }
        const bool guards = guards_intact(yb, ny, o.yoff);
        const bool ok = bad == 0 && guards;
        printf("odd  %-34s %-44s %s  max|err|/S %.2e%s\n", shape, v.name.c_str(), ok ? "ok  " : "FAIL", worst,
               guards ? "" : "  (wrote outside Y)");
        if (!ok) ++g_fails;
    }
    CK(cudaFree(xb));
    CK(cudaFree(wb));
    CK(cudaFree(bb));
    CK(cudaFree(yb));
}

// ---------------------------------------------------------------------------
// The large shapes.
struct Shape {
    int M, K, N, act;
};

static void run_shape(cublasHandle_t h, std::vector<Variant>& vs, const Shape& sh, int reps) {
    const int M = sh.M, K = sh.K, N = sh.N;
    const size_t nx = (size_t)M * K, nw = (size_t)N * K, ny = (size_t)M * N;
    const float ws = 1.0f / std::sqrt((float)K);
    const unsigned long long sx = 21, sw = 22, sbias = 23;
    float *X, *W, *b, *Xa, *Wa, *ba, *Yref, *S, *ybase, *Y;
    CK(cudaMalloc(&X, nx * 4));
    CK(cudaMalloc(&W, nw * 4));
    CK(cudaMalloc(&b, N * 4));
    CK(cudaMalloc(&Xa, nx * 4));
    CK(cudaMalloc(&Wa, nw * 4));
    CK(cudaMalloc(&ba, N * 4));
    CK(cudaMalloc(&Yref, ny * 4));
    CK(cudaMalloc(&S, ny * 4));
    CK(cudaMalloc(&ybase, (ny + 2 * kGuard) * 4));
    Y = ybase + kGuard;
    fill_kernel<<<kBlocks, 256>>>(X, nx, sx, 1.0f);
    fill_kernel<<<kBlocks, 256>>>(W, nw, sw, ws);
    fill_kernel<<<kBlocks, 256>>>(b, N, sbias, ws);
    abs_kernel<<<kBlocks, 256>>>(Xa, X, nx);
    abs_kernel<<<kBlocks, 256>>>(Wa, W, nw);
    abs_kernel<<<kBlocks, 256>>>(ba, b, N);
    CK(cudaGetLastError());
    // The fp32 reference (cuBLAS SGEMM, then bias+act) and S = |X|·|W|ᵀ + |b|.
    cublas_gemm(h, false, Args{Yref, X, W, b, M, N, K, sh.act});
    bias_act_kernel<<<kBlocks, 256>>>(Yref, b, M, N, sh.act);
    cublas_gemm(h, false, Args{S, Xa, Wa, ba, M, N, K, 0});
    bias_act_kernel<<<kBlocks, 256>>>(S, ba, M, N, 0);
    CK(cudaDeviceSynchronize());
    CK(cudaFree(Xa));
    CK(cudaFree(Wa));

    // Samples, with their float64 reference.
    const int ns = 4096;
    std::vector<long long> idx(ns);
    std::mt19937_64 rng(M * 1000003ull + K * 1009ull + N);
    for (int i = 0; i < ns; ++i) {
        long long r = (long long)(rng() % M), c = (long long)(rng() % N);
        if (i == 0) r = 0, c = 0;
        if (i == 1) r = M - 1, c = N - 1;
        if (i == 2) r = M - 1, c = 0;
        idx[i] = r * N + c;
    }
    std::vector<double> ref(ns), Sref(ns);
    for (int i = 0; i < ns; ++i) {
        const long long r = idx[i] / N, c = idx[i] % N;
        double s = 0, sa = 0;
        for (int k = 0; k < K; ++k) {
            const double p = (double)gb_rand(sx, (unsigned long long)r * K + k) *
                             (double)(gb_rand(sw, (unsigned long long)c * K + k) * ws);
            s += p;
            sa += std::fabs(p);
        }
        const double bv = gb_rand(sbias, c) * ws;
        ref[i] = act_ref(s + bv, sh.act);
        Sref[i] = sa + std::fabs(bv);
    }
    long long* didx;
    float* dgat;
    CK(cudaMalloc(&didx, ns * sizeof(long long)));
    CK(cudaMalloc(&dgat, ns * 4));
    CK(cudaMemcpy(didx, idx.data(), ns * sizeof(long long), cudaMemcpyHostToDevice));
    double* dacc;
    unsigned long long* dcnt;
    CK(cudaMalloc(&dacc, 2 * sizeof(double)));
    CK(cudaMalloc(&dcnt, 2 * sizeof(unsigned long long)));

    char shape[64];
    snprintf(shape, sizeof shape, "%d->%d %s", K, N, act_name(sh.act));
    const double flop = 2.0 * M * N * K;

    // Checks Y against the float64 samples and the cuBLAS reference.
    auto check = [&](Row& r, double tolc) {
        gather_kernel<<<(ns + 255) / 256, 256>>>(dgat, Y, didx, ns);
        std::vector<float> g(ns);
        CK(cudaMemcpy(g.data(), dgat, ns * 4, cudaMemcpyDeviceToHost));
        long long bad = 0;
        for (int i = 0; i < ns; ++i) {
            const double err = std::fabs(g[i] - ref[i]);
            const double tol = tolc * Sref[i] + 9.5367431640625e-07 * std::fabs(ref[i]) + 1e-30;
            if (!(err <= tol)) {
                if (bad < 3)
                    printf("     %s %s: Y[%lld][%lld] = %.9g, want %.9g (tol %.3g)\n", shape, r.variant.c_str(),
                           idx[i] / N, idx[i] % N, g[i], ref[i], tol);
                ++bad;
            }
            if (err == err) r.sample_err = std::max(r.sample_err, err / Sref[i]);
        }
        CK(cudaMemset(dacc, 0, 2 * sizeof(double)));
        CK(cudaMemset(dcnt, 0, 2 * sizeof(unsigned long long)));
        check_kernel<<<kBlocks, 256>>>(Y, Yref, S, ny, tolc + 1.13 * tol_f32(K), dacc, dcnt, dcnt + 1);
        double acc[2];
        unsigned long long cnt[2];
        CK(cudaMemcpy(acc, dacc, sizeof acc, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(cnt, dcnt, sizeof cnt, cudaMemcpyDeviceToHost));
        double mr;
        memcpy(&mr, &cnt[0], 8);
        r.full_err = mr;
        r.relnorm = std::sqrt(acc[0] / acc[1]);
        if (cnt[1] > 0) printf("     %s %s: %llu of %zu elements outside the tolerance vs cuBLAS fp32\n", shape,
                               r.variant.c_str(), cnt[1], ny);
        return bad == 0 && cnt[1] == 0;
    };

    // cuBLAS.
    double cub[2];
    for (int t = 0; t < 2; ++t) {
        const Args a{Y, X, W, b, M, N, K, sh.act};
        const float ms = median_ms([&] { cublas_gemm(h, t == 1, a); }, reps);
        cub[t] = flop / (ms * 1e-3) / 1e12;
        bias_act_kernel<<<kBlocks, 256>>>(Y, b, M, N, sh.act);
        Row r;
        r.shape = shape;
        r.variant = t ? "cuBLAS tf32 (GEMM only)" : "cuBLAS fp32 (GEMM only)";
        r.prec = t ? "tf32" : "fp32";
        r.ms = ms;
        r.tflops = cub[t];
        r.cublas = cub[t];
        const bool ok = check(r, 1.13 * (t ? std::ldexp(1.0, -9) + tol_f32(K) : tol_f32(K)));
        r.status = ok ? "ok" : "info:off";   // cuBLAS is not ours to fail
        g_rows.push_back(r);
    }
    {
        const float ms = median_ms([&] { bias_act_kernel<<<kBlocks, 256>>>(Y, b, M, N, sh.act); }, reps);
        Row r;
        r.shape = shape;
        r.variant = "(bias+act kernel alone, after cuBLAS)";
        r.prec = "-";
        r.ms = ms;
        r.status = "-";
        g_rows.push_back(r);
    }

    for (Variant& v : vs) {
        Row r;
        r.shape = shape;
        r.variant = v.name;
        r.prec = v.tf32 ? "tf32" : "fp32";
        r.cublas = cub[v.tf32 ? 1 : 0];
        set_kernel<<<kBlocks, 256>>>(ybase, ny + 2 * kGuard, kSentinel);
        const Args a{Y, X, W, b, M, N, K, sh.act};
        int e = v.launch(a);
        cudaError_t se = cudaDeviceSynchronize();
        if (e == 0 && se == cudaSuccess) {
            const bool guards = guards_intact(ybase, ny, 0);
            const bool ok = check(r, 1.13 * tol_ours(v, K)) && guards;
            if (!guards) printf("     %s %s: wrote outside Y\n", shape, v.name.c_str());
            r.ms = median_ms([&] { e = e ? e : v.launch(a); }, reps);
            se = cudaDeviceSynchronize();
            r.tflops = flop / (r.ms * 1e-3) / 1e12;
            r.status = ok ? "ok" : "FAIL";
            if (!ok) ++g_fails;
        }
        if (e != 0 || se != cudaSuccess) {
            r.status = "LAUNCH FAILED";
            printf("     %s %s: launch error %d, %s\n", shape, v.name.c_str(), e, cudaGetErrorString(se));
            ++g_fails;
            if (se != cudaSuccess) exit(1);
        }
        printf("%-16s %-44s %-4s %8.3f ms %7.1f TFLOP/s  x%.2f of cuBLAS  %s\n", shape, v.name.c_str(),
               r.prec.c_str(), r.ms, r.tflops, r.cublas > 0 ? r.tflops / r.cublas : 0, r.status.c_str());
        fflush(stdout);
        g_rows.push_back(r);
    }
    CK(cudaFree(X));
    CK(cudaFree(W));
    CK(cudaFree(b));
    CK(cudaFree(ba));
    CK(cudaFree(Yref));
    CK(cudaFree(S));
    CK(cudaFree(ybase));
    CK(cudaFree(didx));
    CK(cudaFree(dgat));
    CK(cudaFree(dacc));
    CK(cudaFree(dcnt));
}

int main(int argc, char** argv) {
    const char* ptx = nullptr;
    const char* table = nullptr;
    int reps = 20;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--ptx") && i + 1 < argc) ptx = argv[++i];
        else if (!strcmp(argv[i], "--table") && i + 1 < argc) table = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::max(1, atoi(argv[++i]));
        else {
            fprintf(stderr, "usage: gemm_bench [--ptx FILE] [--table FILE] [--reps N]\n");
            return 2;
        }
    }
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    cublasHandle_t h;
    CB(cublasCreate(&h));
    int cbv = 0;
    CB(cublasGetVersion(h, &cbv));
    const char* tfo = getenv("NVIDIA_TF32_OVERRIDE");
    printf("device: %s, %d SMs, compute capability %d.%d; driver %d, runtime %d, cuBLAS %d; NVIDIA_TF32_OVERRIDE=%s\n",
           p.name, p.multiProcessorCount, p.major, p.minor, drv, rt, cbv, tfo ? tfo : "(unset)");

    std::vector<Variant> vs;
    add_exports(vs);
    add_f32<16, 2>(vs, "f32 128x128x16");
    add_f32<8, 1>(vs, "f32 128x128x8 (no 128-register cap)");
    gemm_bench_part1(vs);
    gemm_bench_part2(vs);
    gemm_bench_part3(vs);
    if (ptx && !add_ptx(vs, ptx)) {
        printf("FAIL: %s did not load (see above)\n", ptx);
        ++g_fails;
    }
    printf("\n%-44s %7s %7s %5s %6s %7s\n", "kernel", "threads", "dsmem", "regs", "local", "blk/SM");
    for (const Variant& v : vs)
        printf("%-44s %7d %7d %5d %6d %7d\n", v.name.c_str(), v.threads, v.smem, v.regs, v.local, v.per_sm);

    printf("\n== correctness on odd shapes (every element vs float64)\n");
    const Odd odd[] = {
        {1000, 3, 5, 1, 0, 0, true},  {77, 16, 768, 2, 0, 0, true},   {1, 1, 1, 0, 0, 0, true},
        {257, 129, 37, 2, 0, 0, true}, {300, 260, 100, 1, 0, 0, true}, {130, 136, 64, 0, 1, 0, true},
        {64, 384, 48, 2, 0, 1, true}, {513, 200, 768, 1, 0, 0, false}, {129, 17, 3072, 0, 0, 0, true},
    };
    for (const Odd& o : odd) run_odd(vs, o);

    printf("\n== M=65536: timing and checks\n");
    const Shape shapes[] = {{65536, 768, 256, 1}, {65536, 256, 16, 0}, {65536, 768, 3072, 2}, {65536, 3072, 768, 0}};
    for (const Shape& s : shapes) run_shape(h, vs, s, reps);
    CB(cublasDestroy(h));

    // The summary.
    std::string out;
    char line[512];
    snprintf(line, sizeof line,
             "\n== GEMM summary, M=65536, %s: TFLOP/s = 2·M·N·K / median of %d runs; ours fuse bias+act, cuBLAS is the "
             "GEMM alone; max|err|/S against float64 on 4096 samples and against cuBLAS fp32 on all elements "
             "(S = Σ|x·w| + |b|)\n",
             p.name, reps);
    out += line;
    snprintf(line, sizeof line, "%-16s %-44s %-4s %9s %8s %8s %6s %10s %10s %9s  %s\n", "shape", "kernel", "prec", "ms",
             "TFLOP/s", "cuBLAS", "ratio", "err/S f64", "err/S cub", "relnorm", "status");
    out += line;
    for (const Row& r : g_rows) {
        snprintf(line, sizeof line, "%-16s %-44s %-4s %9.3f %8.1f %8.1f %6.2f %10.2e %10.2e %9.2e  %s\n",
                 r.shape.c_str(), r.variant.c_str(), r.prec.c_str(), r.ms, r.tflops, r.cublas,
                 r.cublas > 0 ? r.tflops / r.cublas : 0.0, r.sample_err, r.full_err, r.relnorm, r.status.c_str());
        out += line;
    }
    // Best per precision: per shape, and by geometric mean over the two
    // large shapes.
    for (int t = 0; t < 2; ++t) {
        const char* prec = t ? "tf32" : "fp32";
        for (const Shape& s : shapes) {
            char sn[64];
            snprintf(sn, sizeof sn, "%d->%d %s", s.K, s.N, act_name(s.act));
            const Row* best = nullptr;
            for (const Row& r : g_rows)
                if (r.shape == sn && r.prec == prec && r.status == "ok" && r.variant.rfind("cuBLAS", 0) != 0 &&
                    (!best || r.tflops > best->tflops))
                    best = &r;
            if (best) {
                snprintf(line, sizeof line, "best %s on %-16s %-44s %7.1f TFLOP/s, x%.2f of cuBLAS\n", prec, sn,
                         best->variant.c_str(), best->tflops, best->tflops / best->cublas);
                out += line;
            }
        }
        std::string bestv;
        double bestg = 0;
        for (const Variant& v : vs) {
            if (v.tf32 != (t == 1)) continue;
            double lg = 0;
            int n = 0;
            for (const Row& r : g_rows)
                if (r.variant == v.name && r.status == "ok" &&
                    (r.shape.rfind("768->3072", 0) == 0 || r.shape.rfind("3072->768", 0) == 0)) {
                    lg += std::log(r.tflops);
                    ++n;
                }
            if (n == 2 && std::exp(lg / 2) > bestg) {
                bestg = std::exp(lg / 2);
                bestv = v.name;
            }
        }
        if (!bestv.empty()) {
            snprintf(line, sizeof line, "best %s on the two large shapes (geometric mean): %s, %.1f TFLOP/s\n", prec,
                     bestv.c_str(), bestg);
            out += line;
        }
    }
    snprintf(line, sizeof line, "gemm_bench: %s (%d failure(s))\n", g_fails ? "FAILED" : "all checks passed", g_fails);
    out += line;
    fputs(out.c_str(), stdout);
    if (table) {
        FILE* f = fopen(table, "w");
        if (f) {
            fputs(out.c_str(), f);
            fclose(f);
        }
    }
    return g_fails ? 1 : 0;
}
#endif  // part 0

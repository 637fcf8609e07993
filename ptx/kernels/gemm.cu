// gemm: one fused Linear layer of a batched MLP,
//
//	Y[M×N] = act(X[M×K] · Wᵀ + b)
//
// X is row-major [M×K] (M rows of the batch), W is a PyTorch Linear weight,
// row-major [N×K] ([out, in]), b is [N] (NULL means no bias) and Y is
// row-major [M×N]. act: 0 none, 1 ReLU, 2 GELU in its exact erf form
// (PyTorch's nn.GELU default): 0.5·x·(1 + erf(x/√2)). Any other act value
// is taken as 0.
//
// Kernels (all extern "C", all with the parameter list
// (float* Y, const float* X, const float* W, const float* bias,
//  int M, int N, int K, int act)):
//
//	gemm_f32       fp32 FMA on the SIMT cores. Tile 128×128×8, each
//	               thread an 8×8 register tile, shared memory double
//	               buffered, float4 loads and stores where aligned.
//	gemm_tf32      tensor cores, TF32 inputs with fp32 accumulation:
//	               mma.sync m16n8k8, ldmatrix, a 3-stage cp.async
//	               pipeline whose next tile's first fragments load before
//	               the current tile's last mma (gemm_mma_tile, PIPE 1).
//	               Tile 128×128×16, 4 warps of 64×64. The operands are
//	               truncated to TF32 (the tensor cores read the top 19
//	               bits of each fp32 value), not rounded: no instruction
//	               per fragment element, twice the error bound of rounding.
//	gemm_bf16      the same staging with BF16 operands: each fragment is
//	               read as fp32 (ld.shared.v4) and rounded to BF16
//	               (cvt.rn.bf16x2.f32) for mma.sync m16n8k16, fp32
//	               accumulation. Tile 128×128×16, 4 warps of 64×64.
//	gemm_tf32_big  gemm_tf32's operands (truncated) in the older form
//	               (gemm_tf32_tile) with a 256×128×16 tile, 8 warps of
//	               64×64, and 3 stages in 72 KiB of dynamic shared memory.
//
// gemm_tf32 and gemm_bf16 evaluate GELU with gemm_gelu_fast (below),
// gemm_f32 with erff. bench/reference/gemm_bench.cu times these against
// the other configurations of bench/reference/gemm_variants.h.
//
// # Launch contract
//
// GEMM_CONTRACTS, next to the kernels below, is the machine-readable
// form; in short:
//
//	kernel         blockDim     gridDim                          shared memory
//	gemm_f32       (256, 1, 1)  (ceil(N/128), ceil(M/128), 1)    static 16896 B, dynamic 0
//	gemm_tf32      (128, 1, 1)  (ceil(N/128), ceil(M/128), 1)    static 49152 B, dynamic 0
//	gemm_bf16      (128, 1, 1)  (ceil(N/128), ceil(M/128), 1)    static 49152 B, dynamic 0
//	gemm_tf32_big  (256, 1, 1)  (ceil(N/128), ceil(M/256), 1)    dynamic 73728 B: set
//	               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to 73728 once per
//	               function with cuFuncSetAttribute, and pass sharedMemBytes 73728
//
// gridDim.y is at most 65535, so M ≤ 65535·128 (gemm_f32, gemm_tf32,
// gemm_bf16) or 65535·256 (gemm_tf32_big); larger batches are launched in
// chunks of rows. M, N, K ≥ 1 (K = 0 gives act(b)). Any M, N, K is
// correct: partial tiles are bounds-checked. Pointers need only float
// (4-byte) alignment. The fast paths are chosen inside the kernel, per
// launch: the loads of X and W are 16-byte vectors when K % 4 == 0 and X
// and W are 16-byte aligned (else scalar loads, several times slower); Y's
// stores are float4 (gemm_f32) when N % 4 == 0 and Y is 16-byte aligned,
// and float2 (tensor cores) when N is even and Y is 8-byte aligned, else
// scalar. Y must not overlap X, W or b. Row offsets are 64-bit: M·K and
// M·N may exceed 2³¹.
//
// # Tolerance
//
// Let S = Σₖ|x·w| + |b| for one output element, before the activation,
// and ref its float64 value. Each kernel sums over K in fp32 (one FMA
// chain per element in gemm_f32; the tensor cores' fp32 accumulation
// otherwise), so |out − ref| ≤ (p + (K+2)·2⁻²³)·S, where p bounds the
// relative error of one product from the rounding of its two operands:
//
//	gemm_f32:       p = 0: about K·2⁻²³ relative of S; in norm,
//	                ‖out−ref‖/‖ref‖ is typically near √K·2⁻²⁴.
//	TF32 rounded:   p = 2⁻¹⁰ (each operand to 10 mantissa bits, 2⁻¹¹).
//	                The rounded form (MODE 0, cvt.rna) is a variant only.
//	TF32 truncated: p = 2⁻⁹ (each operand loses less than 2⁻¹⁰ of
//	                itself): gemm_tf32 and gemm_tf32_big. Truncation is
//	                biased (each operand shrinks, by about 2⁻¹¹ of itself
//	                on average), so in norm the error is about 3 times that
//	                of rounding (8e-4 against 3e-4 on an H200, random data),
//	                still within package model's TF32 tolerance (2⁻⁹ +
//	                2⁻²⁰ + (K+1)·2⁻²³ of S per layer).
//	BF16:           p = 2⁻⁷ + 2⁻¹⁶ (each operand rounded to 8 significant
//	                bits, 2⁻⁸): gemm_bf16, 16 times TF32's.
//
// ReLU does not enlarge an error; GELU (|gelu'| < 1.13) multiplies it by
// at most 1.13 and adds its own evaluation's: a few ulp of the output
// with erff (2 ulp), at most 2⁻²¹·|z| with gemm_gelu_fast (about 2⁻²² in
// a simulation of its fp32 arithmetic; gemm_bench's gelu line measures
// it on the GPU), both within package model's 2⁻²⁰·|z|.
//
// # Compilers
//
// The real compiler is nvcc, for the virtual architecture on the ptx-arch
// line below (ptx/kernels/gen.sh reads it: nvcc -ptx -arch=compute_80):
// mma.sync with .tf32 and .bf16, cp.async, cvt.rna.tf32 and
// cvt.rn.bf16x2 need sm_80 and PTX ISA 7.0, so the module loads on sm_80
// and newer GPUs only (all the kernels: it is one module). The file
// also compiles with clang -x cuda --cuda-device-only -nocudainc
// -nocudalib (a check only: erff then is an external libdevice call), and
// with a C++ compiler when GEMM_EMULATE is defined, where the includer
// (bench/reference/gemm_emu.cc) supplies thread indices, barriers and the
// warp-level instructions as a CPU emulation. GEMM_NO_EXPORTS leaves out
// the extern "C" kernels (for a program that includes this file in
// several translation units).
//
// ptx-arch: compute_80

typedef unsigned long long gemm_u64;

#if !defined(GEMM_EMULATE)
#if !defined(__global__)
// clang without the CUDA headers: the few names used below.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __forceinline__ __inline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __align__(n) __attribute__((aligned(n)))
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(8))) float2 {
    float x, y;
};
extern "C" __device__ float __nv_erff(float);
#define GEMM_TID ((int)__nvvm_read_ptx_sreg_tid_x())
#define GEMM_BX ((int)__nvvm_read_ptx_sreg_ctaid_x())
#define GEMM_BY ((int)__nvvm_read_ptx_sreg_ctaid_y())
#define GEMM_ERFF(x) __nv_erff(x)
#define GEMM_FMAF(a, b, c) __builtin_fmaf(a, b, c)
#else
#define GEMM_TID ((int)threadIdx.x)
#define GEMM_BX ((int)blockIdx.x)
#define GEMM_BY ((int)blockIdx.y)
#define GEMM_ERFF(x) erff(x)
#define GEMM_FMAF(a, b, c) fmaf(a, b, c)
#endif
#define GEMM_SYNC() __syncthreads()
#define GEMM_UNROLL _Pragma("unroll")

// The shared-state-space address of a pointer into shared memory.
__device__ __forceinline__ unsigned gemm_smem_addr(const void* p) {
    unsigned a;
    asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// 16 bytes global -> shared, asynchronously; bytes < 16 reads only that
// many and zero-fills the rest (0: reads nothing, but src must be valid).
__device__ __forceinline__ void gemm_cp16(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

// 4 bytes global -> shared, asynchronously, with the same zero-fill.
__device__ __forceinline__ void gemm_cp4(unsigned dst, const void* src, int bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void gemm_cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most N of this thread's committed groups are pending.
template <int N>
__device__ __forceinline__ void gemm_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ldmatrix .x4: lane l gives the address of row l%8 of matrix l/8; each
// lane receives, of matrix j, row lane/4 and 32-bit word lane%4 in r[j].
__device__ __forceinline__ void gemm_ldsm4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// fp32 bits -> TF32 bits, rounded to nearest, ties away from zero.
__device__ __forceinline__ unsigned gemm_cvt_tf32(unsigned x) {
    unsigned r;
    asm("{ .reg .f32 f; mov.b32 f, %1; cvt.rna.tf32.f32 %0, f; }" : "=r"(r) : "r"(x));
    return r;
}

// d += A(16×8, row) · B(8×8, col), TF32 inputs, fp32 accumulators.
__device__ __forceinline__ void gemm_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += A(16×16, row) · B(16×8, col), BF16 inputs (two to a register, the
// lower k in the low half), fp32 accumulators.
__device__ __forceinline__ void gemm_mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two fp32 values -> one register of two BF16, rounded to nearest even:
// lo in the low half, hi in the high half.
__device__ __forceinline__ unsigned gemm_cvt_bf16x2(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

// 16 bytes from shared memory (a 16-byte aligned shared-state-space
// address) into four registers.
__device__ __forceinline__ void gemm_lds128(float (&r)[4], unsigned addr) {
    asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                 : "=f"(r[0]), "=f"(r[1]), "=f"(r[2]), "=f"(r[3])
                 : "r"(addr));
}

// 2^x, approximately (ex2.approx: a relative error of about 2⁻²²).
__device__ __forceinline__ float gemm_ex2(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}
#endif  // !GEMM_EMULATE

__device__ __forceinline__ float gemm_act(float v, int act) {
    if (act == 1) return v < 0.0f ? 0.0f : v;
    if (act == 2) return 0.5f * v * (1.0f + GEMM_ERFF(v * 0.70710678118654752f));
    return v;
}

// GELU without erff: gelu(z) = z·(1 − h) for z ≥ 0 and z·h below, with
// h = erfc(|z|/√2)/2 = 2^(x·P(u))/2, x = min(|z|/√2, 4), u = x/2 − 1, and
// P a degree-7 polynomial fitted (weighted by the error it causes in h)
// to log2(erfc(x))/x on [0, 4]; past x = 4, erfc(x)/2 < 2⁻²⁷. In fp32,
// with ex2.approx, |gemm_gelu_fast(z) − gelu(z)| stays below about
// 2⁻²²·|z| (the fit's own error is under 2⁻²⁶·|z|), in about 15
// instructions without a branch, one of them ex2.
__device__ __forceinline__ float gemm_gelu_fast(float z) {
    float x = z < 0.0f ? -z : z;
    x = x * 0.70710678118654752f;
    x = x < 4.0f ? x : 4.0f;
    const float u = GEMM_FMAF(x, 0.5f, -1.0f);
    float p = -5.807591602e-03f;
    p = GEMM_FMAF(p, u, -1.213449147e-02f);
    p = GEMM_FMAF(p, u, 1.481573447e-03f);
    p = GEMM_FMAF(p, u, -2.622831799e-02f);
    p = GEMM_FMAF(p, u, 6.687399000e-02f);
    p = GEMM_FMAF(p, u, -1.610604525e-01f);
    p = GEMM_FMAF(p, u, -2.504050732e+00f);
    p = GEMM_FMAF(p, u, -3.869987965e+00f);
    const float h = 0.5f * gemm_ex2(x * p);
    return z * (z >= 0.0f ? 1.0f - h : h);
}

// ---------------------------------------------------------------------------
// fp32 SIMT: a 128×128 tile per block of 256 threads, BK deep. Thread
// (tx, ty) = (tid%16, tid/16) owns rows {ty*4+i, 64+ty*4+i} and columns
// {tx*4+j, 64+tx*4+j}, i, j < 4. Both X and W are K-contiguous, so each
// tile is loaded as float4 along K and stored transposed, k-major, in
// shared memory ([BK][128+4]; the pad of 4 keeps the transposed stores of
// BK=8 free of bank conflicts and rows 16-byte aligned). The next tile is
// loaded into registers while the current one is computed, then stored
// into the other buffer: one barrier per tile.

template <int BK>
struct GemmF32Cfg {
    static constexpr int BM = 128, BN = 128, THREADS = 256;
    static constexpr int LDA = BM + 4, LDB = BN + 4;
    static constexpr int KC = BK / 4;                 // float4s per tile row
    static constexpr int LD = BM * KC / THREADS;      // float4s per thread per operand and tile
    static constexpr int RSTEP = THREADS / KC;        // rows between one thread's float4s
    static constexpr int SMEM_FLOATS = 2 * BK * (LDA + LDB);
    static constexpr int SMEM_BYTES = SMEM_FLOATS * 4;
};

// Loads this thread's part of the tiles at k0 into registers (zero
// outside the matrices).
template <int BK>
__device__ __forceinline__ void gemm_f32_gload(float (&ra)[GemmF32Cfg<BK>::LD][4], float (&rb)[GemmF32Cfg<BK>::LD][4],
                                               const float* const (&xr)[GemmF32Cfg<BK>::LD],
                                               const float* const (&wr)[GemmF32Cfg<BK>::LD],
                                               const bool (&xok)[GemmF32Cfg<BK>::LD],
                                               const bool (&wok)[GemmF32Cfg<BK>::LD], int k0, int kc, int K,
                                               bool vec) {
    GEMM_UNROLL
    for (int j = 0; j < GemmF32Cfg<BK>::LD; ++j) {
        const int k = k0 + kc;
        if (vec) {
            float4 va, vb;
            va.x = va.y = va.z = va.w = 0.0f;
            vb = va;
            if (xok[j] && k < K) va = *reinterpret_cast<const float4*>(xr[j] + k);
            if (wok[j] && k < K) vb = *reinterpret_cast<const float4*>(wr[j] + k);
            ra[j][0] = va.x; ra[j][1] = va.y; ra[j][2] = va.z; ra[j][3] = va.w;
            rb[j][0] = vb.x; rb[j][1] = vb.y; rb[j][2] = vb.z; rb[j][3] = vb.w;
        } else {
            GEMM_UNROLL
            for (int e = 0; e < 4; ++e) {
                ra[j][e] = (xok[j] && k + e < K) ? xr[j][k + e] : 0.0f;
                rb[j][e] = (wok[j] && k + e < K) ? wr[j][k + e] : 0.0f;
            }
        }
    }
}

// Stores the registers into buffer buf, transposed to [k][row].
template <int BK>
__device__ __forceinline__ void gemm_f32_sstore(float* As, float* Bs, int buf,
                                                const float (&ra)[GemmF32Cfg<BK>::LD][4],
                                                const float (&rb)[GemmF32Cfg<BK>::LD][4], int lrow, int kc) {
    typedef GemmF32Cfg<BK> C;
    float* as = As + buf * BK * C::LDA;
    float* bs = Bs + buf * BK * C::LDB;
    GEMM_UNROLL
    for (int j = 0; j < C::LD; ++j) {
        const int r = lrow + j * C::RSTEP;
        GEMM_UNROLL
        for (int e = 0; e < 4; ++e) {
            as[(kc + e) * C::LDA + r] = ra[j][e];
            bs[(kc + e) * C::LDB + r] = rb[j][e];
        }
    }
}

template <int BK>
__device__ __forceinline__ void gemm_f32_tile(float* smem, float* __restrict__ Y, const float* __restrict__ X,
                                              const float* __restrict__ W, const float* __restrict__ bias, int M,
                                              int N, int K, int act) {
    typedef GemmF32Cfg<BK> C;
    constexpr int BM = C::BM, BN = C::BN, NT = C::THREADS, LDA = C::LDA, LDB = C::LDB;
    constexpr int KC = C::KC, LD = C::LD, RSTEP = C::RSTEP;
    static_assert(BK % 4 == 0 && (BM * KC) % NT == 0 && BM == BN && BM == 128, "tile shape");

    float* As = smem;                     // [2][BK][LDA]
    float* Bs = smem + 2 * BK * LDA;      // [2][BK][LDB]
    const int tid = GEMM_TID;
    const int tx = tid % 16, ty = tid / 16;
    const int m0 = GEMM_BY * BM, n0 = GEMM_BX * BN;
    const bool vec = ((K & 3) == 0) && ((((gemm_u64)X) | ((gemm_u64)W)) & 15) == 0;

    const int kc = (tid % KC) * 4;        // this thread's k offset inside a tile
    const int lrow = tid / KC;            // its first tile row
    const float* xr[LD];
    const float* wr[LD];
    bool xok[LD], wok[LD];
    GEMM_UNROLL
    for (int j = 0; j < LD; ++j) {
        const int r = lrow + j * RSTEP;
        xok[j] = m0 + r < M;
        wok[j] = n0 + r < N;
        xr[j] = X + (gemm_u64)(xok[j] ? m0 + r : 0) * (gemm_u64)K;
        wr[j] = W + (gemm_u64)(wok[j] ? n0 + r : 0) * (gemm_u64)K;
    }
    float ra[LD][4], rb[LD][4];

    float acc[8][8];
    GEMM_UNROLL
    for (int i = 0; i < 8; ++i) {
        GEMM_UNROLL
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    }

    const int KT = (K + BK - 1) / BK;
    if (KT > 0) {
        gemm_f32_gload<BK>(ra, rb, xr, wr, xok, wok, 0, kc, K, vec);
        gemm_f32_sstore<BK>(As, Bs, 0, ra, rb, lrow, kc);
    }
    GEMM_SYNC();
    int cur = 0;
    for (int kt = 0; kt < KT; ++kt) {
        if (kt + 1 < KT) gemm_f32_gload<BK>(ra, rb, xr, wr, xok, wok, (kt + 1) * BK, kc, K, vec);
        const float* as = As + cur * BK * LDA;
        const float* bs = Bs + cur * BK * LDB;
        GEMM_UNROLL
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(as + k * LDA + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4*>(as + k * LDA + BM / 2 + ty * 4);
            const float4 b0 = *reinterpret_cast<const float4*>(bs + k * LDB + tx * 4);
            const float4 b1 = *reinterpret_cast<const float4*>(bs + k * LDB + BN / 2 + tx * 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
            GEMM_UNROLL
            for (int i = 0; i < 8; ++i) {
                GEMM_UNROLL
                for (int j = 0; j < 8; ++j) acc[i][j] = GEMM_FMAF(a[i], b[j], acc[i][j]);
            }
        }
        if (kt + 1 < KT) gemm_f32_sstore<BK>(As, Bs, cur ^ 1, ra, rb, lrow, kc);
        GEMM_SYNC();
        cur ^= 1;
    }

    // Epilogue: bias, activation, store.
    const bool v4 = ((N & 3) == 0) && (((gemm_u64)Y & 15) == 0);
    float bv[8];
    GEMM_UNROLL
    for (int j = 0; j < 8; ++j) {
        const int c = n0 + (j / 4) * (BN / 2) + tx * 4 + (j % 4);
        bv[j] = (bias != 0 && c < N) ? bias[c] : 0.0f;
    }
    GEMM_UNROLL
    for (int i = 0; i < 8; ++i) {
        const int row = m0 + (i / 4) * (BM / 2) + ty * 4 + (i % 4);
        if (row >= M) continue;
        float* yr = Y + (gemm_u64)row * (gemm_u64)N;
        GEMM_UNROLL
        for (int h = 0; h < 2; ++h) {
            const int c = n0 + h * (BN / 2) + tx * 4;
            float v[4];
            GEMM_UNROLL
            for (int e = 0; e < 4; ++e) v[e] = gemm_act(acc[i][h * 4 + e] + bv[h * 4 + e], act);
            if (v4 && c < N) {
                float4 t;
                t.x = v[0]; t.y = v[1]; t.z = v[2]; t.w = v[3];
                *reinterpret_cast<float4*>(yr + c) = t;
            } else {
                GEMM_UNROLL
                for (int e = 0; e < 4; ++e)
                    if (c + e < N) yr[c + e] = v[e];
            }
        }
    }
}

// ---------------------------------------------------------------------------
// TF32 tensor cores. A BM×BN tile per block; warps of WM×WN, each a grid
// of (WM/16)×(WN/8) mma.sync.m16n8k8 tiles. Shared memory holds STAGES
// stages of A [BM][BK] and B [BN][BK] (k contiguous, as in global memory),
// filled by cp.async in 16-byte chunks. Chunk c of row r is stored at
// chunk c ^ ((r >> SH) & (CH-1)) of that row (CH = BK/4 chunks a row), so
// that the 8 rows an ldmatrix phase reads fall in 8 distinct 16-byte bank
// groups. Fragments (see the PTX ISA, mma.m16n8k8 .tf32):
//   A: a0 (g, t), a1 (g+8, t), a2 (g, t+4), a3 (g+8, t+4)   [row, k]
//   B: b0 (k=t, n=g), b1 (k=t+4, n=g)
//   C: c0 (g, 2t), c1 (g, 2t+1), c2 (g+8, 2t), c3 (g+8, 2t+1)
// with g = lane/4, t = lane%4. Read as 32-bit words, an ldmatrix 8×8 b16
// matrix is an 8-row × 4-word block, word (lane/4, lane%4): exactly the
// pattern of each of a0..a3 over A[m][k], and of b0, b1 over B[n][k].
//
// CVT 0 rounds the operands with cvt.rna.tf32.f32. The others are there
// to compare their cost: CVT 1 is the integer form of the same rounding,
// (bits + 0x1000) & ~0x1fff, equal to it for every finite input; CVT 3
// only adds 0x1000 and leaves the truncation to the tensor cores, which
// read the top 19 bits of a .tf32 operand (the same values again); CVT 2
// (for measurements only) passes the fp32 bits unrounded: truncation,
// twice the error bound of rounding, and biased.

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int CVT_>
struct GemmTf32Cfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_, CVT = CVT_;
    static constexpr int WARPS = (BM / WM) * (BN / WN);
    static constexpr int THREADS = WARPS * 32;
    static constexpr int SMEM_BYTES = STAGES * (BM + BN) * BK * 4;
    static constexpr int CH = BK / 4;                           // 16-byte chunks per tile row
    static constexpr int SH = CH == 8 ? 0 : CH == 4 ? 1 : 2;    // swizzle: rows per bank-group step = 8/CH
    static constexpr int A_IT = BM * CH / THREADS, B_IT = BN * CH / THREADS;   // chunks per thread
    static constexpr int RSTEP = THREADS / CH;                  // rows between one thread's chunks
};

// One thread's share of the copies of a tile: chunk tid % CH of rows
// tid / CH + i*RSTEP of A and of B, their global rows (row 0 where out of
// bounds, never read) and their byte offsets within a stage.
template <class C>
struct GemmTf32Rows {
    const float* ar[C::A_IT];
    const float* br[C::B_IT];
    bool aok[C::A_IT], bok[C::B_IT];
    unsigned adst[C::A_IT], bdst[C::B_IT];
};

// Issues the copies of the tile at k0 into the stage at shared addresses
// sa (A) and sb (B); outside the matrices they zero-fill.
template <class C>
__device__ __forceinline__ void gemm_tf32_load(const GemmTf32Rows<C>& r, unsigned sa, unsigned sb, int k0, int lc,
                                               int K, bool vec, const float* X, const float* W) {
    const int k = k0 + lc * 4;
    if (vec) {
        const bool kin = k < K;   // K % 4 == 0: the whole chunk is in or out
        GEMM_UNROLL
        for (int i = 0; i < C::A_IT; ++i) {
            const bool ok = r.aok[i] && kin;
            gemm_cp16(sa + r.adst[i], ok ? r.ar[i] + k : X, ok ? 16 : 0);
        }
        GEMM_UNROLL
        for (int i = 0; i < C::B_IT; ++i) {
            const bool ok = r.bok[i] && kin;
            gemm_cp16(sb + r.bdst[i], ok ? r.br[i] + k : W, ok ? 16 : 0);
        }
    } else {
        GEMM_UNROLL
        for (int i = 0; i < C::A_IT; ++i) {
            GEMM_UNROLL
            for (int e = 0; e < 4; ++e) {
                const bool ok = r.aok[i] && k + e < K;
                gemm_cp4(sa + r.adst[i] + 4u * e, ok ? r.ar[i] + k + e : X, ok ? 4 : 0);
            }
        }
        GEMM_UNROLL
        for (int i = 0; i < C::B_IT; ++i) {
            GEMM_UNROLL
            for (int e = 0; e < 4; ++e) {
                const bool ok = r.bok[i] && k + e < K;
                gemm_cp4(sb + r.bdst[i] + 4u * e, ok ? r.br[i] + k + e : W, ok ? 4 : 0);
            }
        }
    }
}

template <int CVT>
__device__ __forceinline__ unsigned gemm_round_tf32(unsigned x) {
    if (CVT == 1) return (x + 0x1000u) & 0xffffe000u;
    if (CVT == 2) return x;
    if (CVT == 3) return x + 0x1000u;
    return gemm_cvt_tf32(x);
}

template <class C>
__device__ __forceinline__ void gemm_tf32_tile(float* smem, float* __restrict__ Y, const float* __restrict__ X,
                                               const float* __restrict__ W, const float* __restrict__ bias, int M,
                                               int N, int K, int act) {
    constexpr int BM = C::BM, BN = C::BN, BK = C::BK, WM = C::WM, WN = C::WN, S = C::STAGES;
    constexpr int NT = C::THREADS, WARPS_N = BN / WN;
    constexpr int CH = C::CH, SH = C::SH, A_IT = C::A_IT, B_IT = C::B_IT, RSTEP = C::RSTEP;
    constexpr int MT = WM / 16, NT8 = WN / 8;            // mma tiles per warp
    constexpr unsigned A_STAGE = BM * BK * 4, B_STAGE = BN * BK * 4;   // bytes
    static_assert(BK == 8 || BK == 16 || BK == 32, "BK");
    static_assert(WM % 16 == 0 && WN % 16 == 0 && BM % WM == 0 && BN % WN == 0, "warp tile");
    static_assert(NT % CH == 0 && (BM * CH) % NT == 0 && (BN * CH) % NT == 0, "load split");
    static_assert(S >= 2, "stages");

    const int tid = GEMM_TID;
    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int m0 = GEMM_BY * BM, n0 = GEMM_BX * BN;
    const unsigned sA = gemm_smem_addr(smem);
    const unsigned sB = sA + S * A_STAGE;
    const bool vec = ((K & 3) == 0) && ((((gemm_u64)X) | ((gemm_u64)W)) & 15) == 0;

    const int lc = tid % CH, lr = tid / CH;
    GemmTf32Rows<C> rows;
    GEMM_UNROLL
    for (int i = 0; i < A_IT; ++i) {
        const int r = lr + i * RSTEP;
        rows.aok[i] = m0 + r < M;
        rows.ar[i] = X + (gemm_u64)(rows.aok[i] ? m0 + r : 0) * (gemm_u64)K;
        rows.adst[i] = (unsigned)(r * BK + ((lc ^ ((r >> SH) & (CH - 1))) * 4)) * 4u;
    }
    GEMM_UNROLL
    for (int i = 0; i < B_IT; ++i) {
        const int r = lr + i * RSTEP;
        rows.bok[i] = n0 + r < N;
        rows.br[i] = W + (gemm_u64)(rows.bok[i] ? n0 + r : 0) * (gemm_u64)K;
        rows.bdst[i] = (unsigned)(r * BK + ((lc ^ ((r >> SH) & (CH - 1))) * 4)) * 4u;
    }

    // ldmatrix addressing. A, m-tile i: lanes 0-7 rows 0-7 (a0), 8-15 rows
    // 8-15 (a1), 16-23 rows 0-7 at k+4 (a2), 24-31 rows 8-15 at k+4 (a3).
    // B, n-tiles 2p and 2p+1: lanes 0-7 rows 0-7 (b0 of 2p), 8-15 rows 0-7
    // at k+4 (b1 of 2p), 16-23 rows 8-15 (b0 of 2p+1), 24-31 rows 8-15 at
    // k+4 (b1 of 2p+1). Rows are a multiple of 16 plus (lane&7) plus 0 or
    // 8, so each lane's swizzle is ((lane&7) >> SH) & (CH-1).
    const int swz = ((lane & 7) >> SH) & (CH - 1);
    const unsigned a_off = (unsigned)(wm * WM + (lane & 7) + ((lane >> 3) & 1) * 8) * (BK * 4u);
    const unsigned b_off = (unsigned)(wn * WN + (lane & 7) + ((lane >> 4) & 1) * 8) * (BK * 4u);
    const int a_hi = lane >> 4, b_hi = (lane >> 3) & 1;

    float acc[MT][NT8][4];
    GEMM_UNROLL
    for (int i = 0; i < MT; ++i) {
        GEMM_UNROLL
        for (int j = 0; j < NT8; ++j) {
            GEMM_UNROLL
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
        }
    }

    // Pipeline: tile t lives in stage t % S. Group t (one commit per
    // tile, empty past the end) holds tile t's copies, so before tile kt
    // is read, wait until at most S-2 groups are pending; the barrier then
    // makes every thread's copies visible and shows that all are done
    // reading stage (kt-1) % S, which tile kt+S-1 refills.
    const int KT = (K + BK - 1) / BK;
    GEMM_UNROLL
    for (int s = 0; s < S - 1; ++s) {
        if (s < KT) gemm_tf32_load<C>(rows, sA + s * A_STAGE, sB + s * B_STAGE, s * BK, lc, K, vec, X, W);
        gemm_cp_commit();
    }
    int rs = 0, ws = S - 1;
    for (int kt = 0; kt < KT; ++kt) {
        gemm_cp_wait<S - 2>();
        GEMM_SYNC();
        if (kt + S - 1 < KT)
            gemm_tf32_load<C>(rows, sA + (unsigned)ws * A_STAGE, sB + (unsigned)ws * B_STAGE, (kt + S - 1) * BK, lc, K,
                              vec, X, W);
        gemm_cp_commit();
        // Compute tile kt from stage rs.
        const unsigned sa = sA + (unsigned)rs * A_STAGE + a_off;
        const unsigned sb = sB + (unsigned)rs * B_STAGE + b_off;
        GEMM_UNROLL
        for (int kk = 0; kk < BK / 8; ++kk) {
            const unsigned ca = (unsigned)(((2 * kk + a_hi) ^ swz) * 16);
            const unsigned cb = (unsigned)(((2 * kk + b_hi) ^ swz) * 16);
            unsigned af[MT][4], bf[NT8][2];
            GEMM_UNROLL
            for (int i = 0; i < MT; ++i) {
                gemm_ldsm4(af[i], sa + (unsigned)i * (16 * BK * 4) + ca);
                GEMM_UNROLL
                for (int c = 0; c < 4; ++c) af[i][c] = gemm_round_tf32<C::CVT>(af[i][c]);
            }
            GEMM_UNROLL
            for (int p = 0; p < NT8 / 2; ++p) {
                unsigned t[4];
                gemm_ldsm4(t, sb + (unsigned)p * (16 * BK * 4) + cb);
                bf[2 * p][0] = gemm_round_tf32<C::CVT>(t[0]);
                bf[2 * p][1] = gemm_round_tf32<C::CVT>(t[1]);
                bf[2 * p + 1][0] = gemm_round_tf32<C::CVT>(t[2]);
                bf[2 * p + 1][1] = gemm_round_tf32<C::CVT>(t[3]);
            }
            GEMM_UNROLL
            for (int i = 0; i < MT; ++i) {
                GEMM_UNROLL
                for (int j = 0; j < NT8; ++j) gemm_mma(acc[i][j], af[i], bf[j][0], bf[j][1]);
            }
        }
        rs = rs + 1 == S ? 0 : rs + 1;
        ws = ws + 1 == S ? 0 : ws + 1;
    }
    gemm_cp_wait<0>();

    // Epilogue: bias, activation, float2 stores where allowed.
    const bool v2 = ((N & 1) == 0) && (((gemm_u64)Y & 7) == 0);
    GEMM_UNROLL
    for (int j = 0; j < NT8; ++j) {
        const int col = n0 + wn * WN + j * 8 + 2 * (lane & 3);
        float b0 = 0.0f, b1 = 0.0f;
        if (bias != 0) {
            if (col < N) b0 = bias[col];
            if (col + 1 < N) b1 = bias[col + 1];
        }
        GEMM_UNROLL
        for (int i = 0; i < MT; ++i) {
            GEMM_UNROLL
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm * WM + i * 16 + (lane >> 2) + 8 * h;
                if (row >= M) continue;
                const float v0 = gemm_act(acc[i][j][2 * h] + b0, act);
                const float v1 = gemm_act(acc[i][j][2 * h + 1] + b1, act);
                float* y = Y + (gemm_u64)row * (gemm_u64)N + col;
                if (v2 && col < N) {   // N even, col even: col+1 < N too
                    float2 t;
                    t.x = v0;
                    t.y = v1;
                    *reinterpret_cast<float2*>(y) = t;
                } else {
                    if (col < N) y[0] = v0;
                    if (col + 1 < N) y[1] = v1;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Tensor cores, second form: gemm_tf32 and gemm_bf16. The operands are
// staged in fp32 as above (cp.async, STAGES deep), and each k-step's
// fragments are loaded from shared memory while the previous k-step's
// mma instructions run: two fragment buffers per warp. With PIPE 1 (BK of
// two or more k-steps) the barrier of the next tile comes before the last
// k-step of the current one, so that the first fragments of the next tile
// load under the last mma instructions of this one, as in the k-steps
// inside a tile; with PIPE 0 the barrier opens each tile.
//
// MODE picks the operands: 0 TF32 rounded with cvt.rna.tf32.f32 on every
// fragment element; 2 TF32 truncated (the fp32 bits are passed unchanged
// and the tensor cores read the top 19 bits: no instruction at all); 4
// BF16: fragments are read with ld.shared.v4 and converted with
// cvt.rn.bf16x2.f32, for mma m16n8k16 (twice the work of an m16n8k8 TF32
// mma at the same issue cost).
//
// BF16 fragments (PTX ISA, mma.m16n8k16 .bf16), g = lane/4, t = lane%4,
// two values to a register, the lower k in the low half:
//   A: a0a1 (g, 2t..2t+1), a2a3 (g+8, 2t..), a4a5 (g, 2t+8..), a6a7 (g+8, 2t+8..)
//   B: b0b1 (k=2t..2t+1, n=g), b2b3 (k=2t+8.., n=g)
// k is the index of the sum, so any order of k that A and B share gives
// the same products: lane t reads the 16 bytes at k = 4t..4t+3 of a
// 16-wide k-step (one ld.shared.v4 per row) and takes them as logical k
// 2t, 2t+1, 2t+8, 2t+9, for A and B alike. The eight lanes of one phase of
// an ld.shared.v4 read rows 2q and 2q+1 of a tile, all four 16-byte chunks
// of one k-step; with BK = 16 (64-byte rows) that is 128 contiguous bytes,
// and with BK = 32 (128-byte rows) chunk c of an odd row is stored at
// chunk c ^ 4, so that both rows cover the 32 banks.
//
// GELU 1 evaluates act 2 with gemm_gelu_fast instead of erff.

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int MODE_, int PIPE_, int GELU_>
struct GemmMmaCfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, STAGES = STAGES_;
    static constexpr int MODE = MODE_, PIPE = PIPE_, GELU = GELU_;
    static constexpr bool BF16 = MODE == 4;
    static constexpr int CVT = BF16 ? 0 : MODE;                 // gemm_round_tf32's mode
    static constexpr int WARPS = (BM / WM) * (BN / WN);
    static constexpr int THREADS = WARPS * 32;
    static constexpr int SMEM_BYTES = STAGES * (BM + BN) * BK * 4;
    static constexpr int CH = BK / 4;                           // 16-byte chunks per tile row
    static constexpr int A_IT = BM * CH / THREADS, B_IT = BN * CH / THREADS;   // chunks per thread
    static constexpr int RSTEP = THREADS / CH;                  // rows between one thread's chunks
    static constexpr int KSTEP = BF16 ? 16 : 8;                 // the k of one mma
    static constexpr int KS = BK / KSTEP;                       // k-steps per tile
    static constexpr int MT = WM / 16, NT8 = WN / 8;            // mma tiles per warp
};

// The XOR that puts logical chunk c of tile row r at chunk c ^ swz(r):
// for ldmatrix (TF32) the 8 rows that one 8×8 matrix reads fall in 8
// distinct bank groups; for ld.shared.v4 (BF16) see above. It repeats
// every 8 rows, and RSTEP is a multiple of 8.
template <class C>
__device__ __forceinline__ int gemm_mma_swz(int r) {
    if (C::BF16) return C::CH == 8 ? (r & 1) << 2 : 0;
    return C::CH == 8 ? (r & 7) : C::CH == 4 ? ((r >> 1) & 3) : 0;
}

// One thread's share of the copies of a tile: chunk lc = tid % CH of rows
// lr + i*RSTEP (lr = tid / CH), i < A_IT (of A) and i < B_IT (of B).
template <class C>
struct GemmMmaLoader {
    const float* x;   // row m0 + lr of X (X itself when that row is past M)
    const float* w;   // row n0 + lr of W (W itself when past N)
    gemm_u64 xstep;   // RSTEP rows of X or W, in floats: RSTEP·K
    int alim, blim;   // row i of A (B) is in the matrix when i·RSTEP < alim (blim)
    int kc;           // lc·4: the chunk's k within a tile
    unsigned dst;     // byte offset of row lr's chunk within a stage
};

// Issues the copies of the tile at k0 into the stage at shared addresses
// sa (A) and sb (B); outside the matrices they zero-fill.
template <class C>
__device__ __forceinline__ void gemm_mma_load(const GemmMmaLoader<C>& l, unsigned sa, unsigned sb, int k0, int K,
                                              bool vec, const float* X, const float* W) {
    constexpr unsigned RB = (unsigned)(C::RSTEP * C::BK * 4);   // bytes between one thread's rows
    const int k = k0 + l.kc;
    if (vec) {
        const bool kin = k < K;   // K % 4 == 0: the whole chunk is in or out
        GEMM_UNROLL
        for (int i = 0; i < C::A_IT; ++i) {
            const bool ok = kin && i * C::RSTEP < l.alim;
            gemm_cp16(sa + l.dst + (unsigned)i * RB, ok ? l.x + (gemm_u64)i * l.xstep + k : X, ok ? 16 : 0);
        }
        GEMM_UNROLL
        for (int i = 0; i < C::B_IT; ++i) {
            const bool ok = kin && i * C::RSTEP < l.blim;
            gemm_cp16(sb + l.dst + (unsigned)i * RB, ok ? l.w + (gemm_u64)i * l.xstep + k : W, ok ? 16 : 0);
        }
    } else {
        GEMM_UNROLL
        for (int i = 0; i < C::A_IT; ++i) {
            GEMM_UNROLL
            for (int e = 0; e < 4; ++e) {
                const bool ok = k + e < K && i * C::RSTEP < l.alim;
                gemm_cp4(sa + l.dst + (unsigned)i * RB + 4u * e, ok ? l.x + (gemm_u64)i * l.xstep + k + e : X,
                         ok ? 4 : 0);
            }
        }
        GEMM_UNROLL
        for (int i = 0; i < C::B_IT; ++i) {
            GEMM_UNROLL
            for (int e = 0; e < 4; ++e) {
                const bool ok = k + e < K && i * C::RSTEP < l.blim;
                gemm_cp4(sb + l.dst + (unsigned)i * RB + 4u * e, ok ? l.w + (gemm_u64)i * l.xstep + k + e : W,
                         ok ? 4 : 0);
            }
        }
    }
}

// One k-step's fragments of a warp.
template <class C>
struct GemmMmaFrag {
    unsigned a[C::MT][4];
    unsigned b[C::NT8][2];
};

// Where a lane reads its fragments, in bytes from a stage's A or B.
struct GemmMmaLane {
    unsigned a, b;   // TF32: the ldmatrix row address offsets; BF16: row g of the warp's first m- and n-tile
    int sa, sb;      // TF32: the ldmatrix chunk swizzle and chunk halves; BF16: lane%4 and the swizzle
    int ha, hb;
};

// Loads k-step ks of the stage at shared addresses sa (A) and sb (B).
template <class C>
__device__ __forceinline__ void gemm_mma_frag(GemmMmaFrag<C>& f, const GemmMmaLane& ln, unsigned sa, unsigned sb,
                                              int ks) {
    constexpr unsigned ROW = C::BK * 4;   // bytes per tile row
    if (C::BF16) {
        const unsigned c = (unsigned)(((4 * ks + ln.sa) ^ ln.sb) * 16);
        GEMM_UNROLL
        for (int i = 0; i < C::MT; ++i) {
            float lo[4], hi[4];
            gemm_lds128(lo, sa + ln.a + (unsigned)i * (16 * ROW) + c);
            gemm_lds128(hi, sa + ln.a + (unsigned)i * (16 * ROW) + 8 * ROW + c);
            f.a[i][0] = gemm_cvt_bf16x2(lo[0], lo[1]);
            f.a[i][1] = gemm_cvt_bf16x2(hi[0], hi[1]);
            f.a[i][2] = gemm_cvt_bf16x2(lo[2], lo[3]);
            f.a[i][3] = gemm_cvt_bf16x2(hi[2], hi[3]);
        }
        GEMM_UNROLL
        for (int j = 0; j < C::NT8; ++j) {
            float v[4];
            gemm_lds128(v, sb + ln.b + (unsigned)j * (8 * ROW) + c);
            f.b[j][0] = gemm_cvt_bf16x2(v[0], v[1]);
            f.b[j][1] = gemm_cvt_bf16x2(v[2], v[3]);
        }
    } else {
        const unsigned ca = (unsigned)(((2 * ks + ln.ha) ^ ln.sa) * 16);
        const unsigned cb = (unsigned)(((2 * ks + ln.hb) ^ ln.sa) * 16);
        GEMM_UNROLL
        for (int i = 0; i < C::MT; ++i) {
            gemm_ldsm4(f.a[i], sa + ln.a + (unsigned)i * (16 * ROW) + ca);
            GEMM_UNROLL
            for (int c = 0; c < 4; ++c) f.a[i][c] = gemm_round_tf32<C::CVT>(f.a[i][c]);
        }
        GEMM_UNROLL
        for (int p = 0; p < C::NT8 / 2; ++p) {
            unsigned t[4];
            gemm_ldsm4(t, sb + ln.b + (unsigned)p * (16 * ROW) + cb);
            f.b[2 * p][0] = gemm_round_tf32<C::CVT>(t[0]);
            f.b[2 * p][1] = gemm_round_tf32<C::CVT>(t[1]);
            f.b[2 * p + 1][0] = gemm_round_tf32<C::CVT>(t[2]);
            f.b[2 * p + 1][1] = gemm_round_tf32<C::CVT>(t[3]);
        }
    }
}

template <class C>
__device__ __forceinline__ void gemm_mma_step(float (&acc)[C::MT][C::NT8][4], const GemmMmaFrag<C>& f) {
    GEMM_UNROLL
    for (int i = 0; i < C::MT; ++i) {
        GEMM_UNROLL
        for (int j = 0; j < C::NT8; ++j) {
            if (C::BF16)
                gemm_mma_bf16(acc[i][j], f.a[i], f.b[j][0], f.b[j][1]);
            else
                gemm_mma(acc[i][j], f.a[i], f.b[j][0], f.b[j][1]);
        }
    }
}

template <class C>
__device__ __forceinline__ void gemm_mma_tile(float* smem, float* __restrict__ Y, const float* __restrict__ X,
                                              const float* __restrict__ W, const float* __restrict__ bias, int M,
                                              int N, int K, int act) {
    constexpr int BM = C::BM, BN = C::BN, BK = C::BK, WM = C::WM, WN = C::WN, S = C::STAGES, KS = C::KS;
    constexpr int NT = C::THREADS, WARPS_N = BN / WN, CH = C::CH, MT = C::MT, NT8 = C::NT8;
    constexpr unsigned A_STAGE = BM * BK * 4, B_STAGE = BN * BK * 4;   // bytes
    static_assert(BK == 16 || BK == 32, "BK");
    static_assert(BK % C::KSTEP == 0, "BK: whole k-steps");
    static_assert(WM % 16 == 0 && WN % 16 == 0 && BM % WM == 0 && BN % WN == 0, "warp tile");
    static_assert(NT % CH == 0 && (BM * CH) % NT == 0 && (BN * CH) % NT == 0 && C::RSTEP % 8 == 0, "load split");
    static_assert(S >= 2 && (C::PIPE == 0 || (KS % 2 == 0 && S >= 2)), "stages, PIPE 1 needs an even KS");

    const int tid = GEMM_TID;
    const int lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
    const int m0 = GEMM_BY * BM, n0 = GEMM_BX * BN;
    const unsigned sA = gemm_smem_addr(smem);
    const unsigned sB = sA + S * A_STAGE;
    const bool vec = ((K & 3) == 0) && ((((gemm_u64)X) | ((gemm_u64)W)) & 15) == 0;

    GemmMmaLoader<C> ld;
    {
        const int lc = tid % CH, lr = tid / CH;
        ld.alim = M - m0 - lr;
        ld.blim = N - n0 - lr;
        ld.x = ld.alim > 0 ? X + (gemm_u64)(m0 + lr) * (gemm_u64)K : X;
        ld.w = ld.blim > 0 ? W + (gemm_u64)(n0 + lr) * (gemm_u64)K : W;
        ld.xstep = (gemm_u64)C::RSTEP * (gemm_u64)K;
        ld.kc = lc * 4;
        ld.dst = (unsigned)(lr * BK + ((lc ^ gemm_mma_swz<C>(lr)) * 4)) * 4u;
    }

    GemmMmaLane ln;
    if (C::BF16) {
        const int g = lane >> 2;
        ln.a = (unsigned)(wm * WM + g) * (BK * 4u);
        ln.b = (unsigned)(wn * WN + g) * (BK * 4u);
        ln.sa = lane & 3;
        ln.sb = gemm_mma_swz<C>(g);
        ln.ha = ln.hb = 0;
    } else {
        // As in gemm_tf32_tile: A, m-tile i: lanes 0-7 rows 0-7 (a0), 8-15
        // rows 8-15 (a1), 16-23 rows 0-7 at k+4 (a2), 24-31 rows 8-15 at
        // k+4 (a3). B, n-tiles 2p and 2p+1: lanes 0-7 rows 0-7 (b0 of 2p),
        // 8-15 rows 0-7 at k+4 (b1 of 2p), 16-23 rows 8-15 (b0 of 2p+1),
        // 24-31 rows 8-15 at k+4 (b1 of 2p+1).
        ln.a = (unsigned)(wm * WM + (lane & 7) + ((lane >> 3) & 1) * 8) * (BK * 4u);
        ln.b = (unsigned)(wn * WN + (lane & 7) + ((lane >> 4) & 1) * 8) * (BK * 4u);
        ln.sa = gemm_mma_swz<C>(lane & 7);
        ln.sb = 0;
        ln.ha = lane >> 4;
        ln.hb = (lane >> 3) & 1;
    }

    float acc[MT][NT8][4];
    GEMM_UNROLL
    for (int i = 0; i < MT; ++i) {
        GEMM_UNROLL
        for (int j = 0; j < NT8; ++j) {
            GEMM_UNROLL
            for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;
        }
    }

    // Tile t lives in stage t % S and its copies are commit group t (one
    // commit per tile, empty past the end). A stage is refilled only after
    // a barrier that every warp passes after its last fragment load from
    // that stage.
    const int KT = (K + BK - 1) / BK;
    GEMM_UNROLL
    for (int s = 0; s < S - 1; ++s) {
        if (s < KT) gemm_mma_load<C>(ld, sA + s * A_STAGE, sB + s * B_STAGE, s * BK, K, vec, X, W);
        gemm_cp_commit();
    }
    GemmMmaFrag<C> fr[2];
    unsigned rs = 0, ws = S - 1;   // the stages of tile kt and of tile kt + S - 1
    if (C::PIPE) {
        // Groups 0..S-2 are committed; tile 0 is group 0.
        gemm_cp_wait<S - 2>();
        GEMM_SYNC();
        if (KT > 0) gemm_mma_frag<C>(fr[0], ln, sA, sB, 0);
        for (int kt = 0; kt < KT; ++kt) {
            const unsigned sa = sA + rs * A_STAGE, sb = sB + rs * B_STAGE;
            GEMM_UNROLL
            for (int ks = 0; ks < KS; ++ks) {
                if (ks == 0) {
                    // Every warp has passed the barrier after its last read of
                    // stage ws (tile kt-1).
                    if (kt + S - 1 < KT)
                        gemm_mma_load<C>(ld, sA + ws * A_STAGE, sB + ws * B_STAGE, (kt + S - 1) * BK, K, vec, X, W);
                    gemm_cp_commit();
                    ws = ws + 1 == S ? 0 : ws + 1;
                }
                if (ks + 1 < KS) {
                    gemm_mma_frag<C>(fr[(ks + 1) & 1], ln, sa, sb, ks + 1);
                } else if (kt + 1 < KT) {
                    // Groups 0..kt+S-1 are committed; tile kt+1 is group kt+1.
                    gemm_cp_wait<S - 2>();
                    GEMM_SYNC();
                    rs = rs + 1 == S ? 0 : rs + 1;
                    gemm_mma_frag<C>(fr[0], ln, sA + rs * A_STAGE, sB + rs * B_STAGE, 0);
                }
                gemm_mma_step<C>(acc, fr[ks & 1]);
            }
        }
    } else {
        for (int kt = 0; kt < KT; ++kt) {
            // Groups 0..kt+S-2 are committed; tile kt is group kt. The
            // barrier also shows that every warp is done with tile kt-1,
            // whose stage tile kt+S-1 refills.
            gemm_cp_wait<S - 2>();
            GEMM_SYNC();
            if (kt + S - 1 < KT)
                gemm_mma_load<C>(ld, sA + ws * A_STAGE, sB + ws * B_STAGE, (kt + S - 1) * BK, K, vec, X, W);
            gemm_cp_commit();
            ws = ws + 1 == S ? 0 : ws + 1;
            const unsigned sa = sA + rs * A_STAGE, sb = sB + rs * B_STAGE;
            gemm_mma_frag<C>(fr[0], ln, sa, sb, 0);
            GEMM_UNROLL
            for (int ks = 0; ks < KS; ++ks) {
                if (ks + 1 < KS) gemm_mma_frag<C>(fr[(ks + 1) & 1], ln, sa, sb, ks + 1);
                gemm_mma_step<C>(acc, fr[ks & 1]);
            }
            rs = rs + 1 == S ? 0 : rs + 1;
        }
    }
    gemm_cp_wait<0>();

    // Epilogue: bias, activation, float2 stores where allowed.
    const bool v2 = ((N & 1) == 0) && (((gemm_u64)Y & 7) == 0);
    GEMM_UNROLL
    for (int j = 0; j < NT8; ++j) {
        const int col = n0 + wn * WN + j * 8 + 2 * (lane & 3);
        float b0 = 0.0f, b1 = 0.0f;
        if (bias != 0) {
            if (col < N) b0 = bias[col];
            if (col + 1 < N) b1 = bias[col + 1];
        }
        GEMM_UNROLL
        for (int i = 0; i < MT; ++i) {
            GEMM_UNROLL
            for (int h = 0; h < 2; ++h) {
                const int row = m0 + wm * WM + i * 16 + (lane >> 2) + 8 * h;
                if (row >= M) continue;
                float v0 = acc[i][j][2 * h] + b0, v1 = acc[i][j][2 * h + 1] + b1;
                if (C::GELU && act == 2) {
                    v0 = gemm_gelu_fast(v0);
                    v1 = gemm_gelu_fast(v1);
                } else {
                    v0 = gemm_act(v0, act);
                    v1 = gemm_act(v1, act);
                }
                float* y = Y + (gemm_u64)row * (gemm_u64)N + col;
                if (v2 && col < N) {   // N even, col even: col+1 < N too
                    float2 t;
                    t.x = v0;
                    t.y = v1;
                    *reinterpret_cast<float2*>(y) = t;
                } else {
                    if (col < N) y[0] = v0;
                    if (col + 1 < N) y[1] = v1;
                }
            }
        }
    }
}

// The configurations behind the exported kernels. gemm_tf32 and gemm_bf16
// must fit 48 KiB of static shared memory (package driver cannot raise a
// function's dynamic limit), hence 128×128×16 tiles in 3 stages.
typedef GemmF32Cfg<8> GemmF32Default;
typedef GemmMmaCfg<128, 128, 16, 64, 64, 3, 2, 1, 1> GemmTf32Default;   // TF32 truncated, PIPE 1, fast GELU
typedef GemmMmaCfg<128, 128, 16, 64, 64, 3, 4, 0, 1> GemmBf16Default;   // BF16, PIPE 0 (one k-step a tile), fast GELU
typedef GemmTf32Cfg<256, 128, 16, 64, 64, 3, 2> GemmTf32Big;             // TF32 truncated, 72 KiB dynamic

// The launch contract of each entry: X(name, configuration, blockDim.x,
// rows of Y per block (gridDim.y = ceil(M/rows)), columns of Y per block
// (gridDim.x = ceil(N/columns)), static shared bytes, dynamic shared
// bytes). Package kernels (gemm.go) holds the same numbers and its tests
// read them here; the static_asserts below tie them to the configurations,
// and each entry carries them in the module as NAME_contract, an int[5].
#define GEMM_CONTRACTS(X)                                    \
    X(gemm_f32, GemmF32Default, 256, 128, 128, 16896, 0)     \
    X(gemm_tf32, GemmTf32Default, 128, 128, 128, 49152, 0)   \
    X(gemm_bf16, GemmBf16Default, 128, 128, 128, 49152, 0)   \
    X(gemm_tf32_big, GemmTf32Big, 256, 256, 128, 0, 73728)

#define GEMM_CONTRACT_CHECK(name, C, block, rows, cols, static_bytes, dynamic_bytes)                     \
    static_assert(C::THREADS == block && C::BM == rows && C::BN == cols &&                               \
                      static_bytes + dynamic_bytes == C::SMEM_BYTES && (static_bytes == 0 || dynamic_bytes == 0) && \
                      static_bytes <= 49152,                                                             \
                  #name ": GEMM_CONTRACTS disagrees with its configuration");
GEMM_CONTRACTS(GEMM_CONTRACT_CHECK)
#undef GEMM_CONTRACT_CHECK

#if !defined(GEMM_EMULATE)
extern __shared__ __align__(16) float gemm_dynamic_smem[];

#if !defined(GEMM_NO_EXPORTS)
#define GEMM_CONTRACT_DATA(name, C, block, rows, cols, static_bytes, dynamic_bytes) \
    extern "C" __device__ const int name##_contract[5] = {block, rows, cols, static_bytes, dynamic_bytes};
GEMM_CONTRACTS(GEMM_CONTRACT_DATA)
#undef GEMM_CONTRACT_DATA

extern "C" __global__ void __launch_bounds__(GemmF32Default::THREADS, 2)
    gemm_f32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
             const float* __restrict__ bias, int M, int N, int K, int act) {
    __shared__ __align__(16) float smem[GemmF32Default::SMEM_FLOATS];
    gemm_f32_tile<8>(smem, Y, X, W, bias, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(GemmTf32Default::THREADS, 2)
    gemm_tf32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
              const float* __restrict__ bias, int M, int N, int K, int act) {
    __shared__ __align__(16) float smem[GemmTf32Default::SMEM_BYTES / 4];
    gemm_mma_tile<GemmTf32Default>(smem, Y, X, W, bias, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(GemmBf16Default::THREADS, 2)
    gemm_bf16(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
              const float* __restrict__ bias, int M, int N, int K, int act) {
    __shared__ __align__(16) float smem[GemmBf16Default::SMEM_BYTES / 4];
    gemm_mma_tile<GemmBf16Default>(smem, Y, X, W, bias, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(GemmTf32Big::THREADS, 1)
    gemm_tf32_big(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
                  const float* __restrict__ bias, int M, int N, int K, int act) {
    gemm_tf32_tile<GemmTf32Big>(gemm_dynamic_smem, Y, X, W, bias, M, N, K, act);
}
#endif  // !GEMM_NO_EXPORTS
#endif  // !GEMM_EMULATE

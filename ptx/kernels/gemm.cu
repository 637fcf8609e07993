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
//	gemm_tf32      tensor cores, TF32 inputs (cvt.rna.tf32.f32) with fp32
//	               accumulation: mma.sync m16n8k8, ldmatrix, a 3-stage
//	               cp.async pipeline. Tile 128×128×16, 4 warps of 64×64.
//	gemm_tf32_big  the same with a 256×128×16 tile, 8 warps of 64×64, and
//	               3 stages in 72 KiB of dynamic shared memory (optional:
//	               for when the bench shows it faster).
//
// # Launch contract
//
//	kernel         blockDim     gridDim                          shared memory
//	gemm_f32       (256, 1, 1)  (ceil(N/128), ceil(M/128), 1)    static 16896 B, dynamic 0
//	gemm_tf32      (128, 1, 1)  (ceil(N/128), ceil(M/128), 1)    static 49152 B, dynamic 0
//	gemm_tf32_big  (256, 1, 1)  (ceil(N/128), ceil(M/256), 1)    dynamic 73728 B: set
//	               CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES to 73728 once per
//	               function with cuFuncSetAttribute, and pass sharedMemBytes 73728
//
// gridDim.y is at most 65535, so M ≤ 65535·128 (gemm_f32, gemm_tf32) or
// 65535·256 (gemm_tf32_big); larger batches are launched in chunks of rows.
// M, N, K ≥ 1 (K = 0 gives act(b)). Any M, N, K is correct: partial tiles
// are bounds-checked. Pointers need only float (4-byte) alignment. The
// fast paths are chosen inside the kernel, per launch: the loads of X and
// W are 16-byte vectors when K % 4 == 0 and X and W are 16-byte aligned
// (else scalar loads, several times slower); Y's stores are float4
// (gemm_f32) when N % 4 == 0 and Y is 16-byte aligned, and float2 (TF32)
// when N is even and Y is 8-byte aligned, else scalar. Y must not overlap
// X, W or b. Row offsets are 64-bit: M·K and M·N may exceed 2³¹.
//
// # Tolerance
//
// Let S = Σₖ|x·w| + |b| for one output element, before the activation,
// and ref its float64 value. Each kernel sums over K sequentially in fp32
// (one FMA chain per element in gemm_f32; the tensor cores' fp32
// accumulation for TF32), so:
//
//	gemm_f32:  |out − ref| ≤ (K+2)·2⁻²³·S, about K·2⁻²³ relative of S; in
//	           norm, ‖out−ref‖/‖ref‖ is typically near √K·2⁻²⁴.
//	TF32:      each product carries the rounding of x and w to 10 mantissa
//	           bits (2⁻¹¹ each), so |out − ref| ≤ (2⁻¹⁰ + (K+2)·2⁻²³)·S,
//	           about 1e-3 relative of S per element (1e-4 and below in norm
//	           for random data).
//
// ReLU does not enlarge an error; GELU (|gelu'| < 1.13, erff within 2 ulp)
// multiplies it by at most 1.13 and adds a few ulp of the output.
//
// # Compilers
//
// The real compiler is nvcc, for the virtual architecture on the ptx-arch
// line below (nvcc -ptx -arch=compute_80): mma.sync with .tf32, cp.async
// and cvt.rna.tf32 need sm_80 and PTX ISA 7.0, so the module loads on
// sm_80 and newer GPUs only (all three kernels: it is one module). The file
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
#endif  // !GEMM_EMULATE

__device__ __forceinline__ float gemm_act(float v, int act) {
    if (act == 1) return v < 0.0f ? 0.0f : v;
    if (act == 2) return 0.5f * v * (1.0f + GEMM_ERFF(v * 0.70710678118654752f));
    return v;
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

// The configurations behind the exported kernels.
typedef GemmF32Cfg<8> GemmF32Default;
typedef GemmTf32Cfg<128, 128, 16, 64, 64, 3, 0> GemmTf32Default;
typedef GemmTf32Cfg<256, 128, 16, 64, 64, 3, 0> GemmTf32Big;

#if !defined(GEMM_EMULATE)
extern __shared__ __align__(16) float gemm_dynamic_smem[];

#if !defined(GEMM_NO_EXPORTS)
extern "C" __global__ void __launch_bounds__(256, 2)
    gemm_f32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
             const float* __restrict__ bias, int M, int N, int K, int act) {
    __shared__ __align__(16) float smem[GemmF32Default::SMEM_FLOATS];
    gemm_f32_tile<8>(smem, Y, X, W, bias, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(128, 2)
    gemm_tf32(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
              const float* __restrict__ bias, int M, int N, int K, int act) {
    __shared__ __align__(16) float smem[GemmTf32Default::SMEM_BYTES / 4];
    gemm_tf32_tile<GemmTf32Default>(smem, Y, X, W, bias, M, N, K, act);
}

extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_tf32_big(float* __restrict__ Y, const float* __restrict__ X, const float* __restrict__ W,
                  const float* __restrict__ bias, int M, int N, int K, int act) {
    gemm_tf32_tile<GemmTf32Big>(gemm_dynamic_smem, Y, X, W, bias, M, N, K, act);
}
#endif  // !GEMM_NO_EXPORTS
#endif  // !GEMM_EMULATE

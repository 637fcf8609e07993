// gemm_emu.cc runs the kernels of ptx/kernels/gemm.cu on the CPU, to check
// their index math where there is no GPU. Every GPU thread of a block is
// a fiber (ucontext); the scheduler resumes them in a random order at each
// barrier, so a missing __syncthreads or cp.async wait shows up as wrong
// results. The warp-level instructions are emulated from their PTX ISA
// definitions: ldmatrix .x4 (each lane supplies one row address), mma.sync
// m16n8k8 .tf32 (fragments as the ISA lays them out, operands truncated to
// TF32 as the hardware does), and cp.async, whose copies land only when
// the issuing thread waits for their group (with wait_group's semantics),
// so that reading a stage too early reads stale data. Shared memory starts
// as NaN in every block. The matrices sit against PROT_NONE guard pages,
// so an out-of-bounds access of a plain load or store faults, and
// cp.async sources are checked against the buffers.
//
// Build and run (any Linux with g++):
//
//   g++ -std=c++17 -O2 -fno-strict-aliasing -o /tmp/gemm_emu bench/reference/gemm_emu.cc && /tmp/gemm_emu
//
//   /tmp/gemm_emu [NAME]   only the configurations whose name contains NAME
//
// EMU_SEED sets the seed of the scheduling order (12345). It prints one
// line per configuration and shape and exits non-zero on any failure.
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

// ---------------------------------------------------------------------------
// The CUDA names gemm.cu uses.
#define GEMM_EMULATE 1
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
#define GEMM_UNROLL
#define GEMM_ERFF(x) erff(x)
#define GEMM_FMAF(a, b, c) fmaf(a, b, c)

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};

namespace emu {

[[noreturn]] void fail(const char* what) {
    fprintf(stderr, "emu: %s\n", what);
    exit(2);
}

struct Copy {
    unsigned dst;
    const void* src;
    int size, bytes;
};

struct Fiber {
    ucontext_t ctx;
    std::vector<char> stack;
    int tid = 0;
    bool done = false;
    const unsigned* wait_gen = nullptr;   // blocked until *wait_gen != wait_val
    unsigned wait_val = 0;
    unsigned wops = 0;                    // warp-level operations executed
    std::vector<Copy> open;
    std::deque<std::vector<Copy>> groups;
};

struct Barrier {
    int count = 0, needed = 0;
    unsigned gen = 0;
};

enum Op { OP_LDSM = 1, OP_MMA = 2 };
struct Slot {
    int op[32];
    unsigned addr[32];
    unsigned a[32][4], b[32][2];
    float c[32][4];
};
struct Warp {
    Barrier bar;
    Slot slot[2];
};

struct Region {
    const char* base;
    size_t bytes;
};

// The current block.
ucontext_t sched_ctx;
std::vector<Fiber> fibers;
Fiber* cur = nullptr;
Barrier block_bar;
std::vector<Warp> warps;
unsigned char* smem = nullptr;
size_t smem_bytes = 0;
int bx = 0, by = 0;
std::vector<Region> regions;   // global memory that cp.async may read
std::mt19937 rng(12345);
std::function<void()> body;
long long switches = 0;

void yield() {
    ++switches;
    swapcontext(&cur->ctx, &sched_ctx);
}

void arrive(Barrier& b) {
    if (++b.count == b.needed) {
        b.count = 0;
        ++b.gen;
        return;
    }
    cur->wait_gen = &b.gen;
    cur->wait_val = b.gen;
    yield();
}

void complete(std::vector<Copy>& g) {
    for (const Copy& c : g) {
        if ((size_t)c.dst + c.size > smem_bytes) fail("cp.async: destination past shared memory");
        unsigned char* d = smem + c.dst;
        memset(d, 0, c.size);
        if (c.bytes > 0) memcpy(d, c.src, c.bytes);
    }
    g.clear();
}

void cp_async(unsigned dst, const void* src, int size, int bytes) {
    if (dst % size != 0) fail("cp.async: misaligned shared address");
    if ((uintptr_t)src % size != 0) fail("cp.async: misaligned global address");
    if (bytes < 0 || bytes > size) fail("cp.async: bad src-size");
    const char* s = (const char*)src;
    bool ok = false;
    for (const Region& r : regions)
        if (s >= r.base && s + std::max(bytes, 1) <= r.base + r.bytes) ok = true;
    if (!ok) fail("cp.async: source outside the matrices");
    cur->open.push_back(Copy{dst, src, size, bytes});
}

void trampoline() {
    body();
    // Copies still pending at exit would land anyway.
    for (auto& g : cur->groups) complete(g);
    complete(cur->open);
    cur->done = true;
    swapcontext(&cur->ctx, &sched_ctx);
}

// run_block runs body on threads fibers for block (x, y).
void run_block(int threads, int x, int y, const std::function<void()>& fn) {
    if (threads % 32 != 0) fail("block size not a multiple of 32");
    bx = x;
    by = y;
    body = fn;
    memset(smem, 0xff, smem_bytes);   // NaN
    fibers.clear();
    fibers.resize(threads);
    block_bar = Barrier{0, threads, 0};
    warps.assign(threads / 32, Warp{});
    for (auto& w : warps) w.bar.needed = 32;
    for (int t = 0; t < threads; ++t) {
        Fiber& f = fibers[t];
        f.tid = t;
        f.stack.resize(256 << 10);
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack.data();
        f.ctx.uc_stack.ss_size = f.stack.size();
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, trampoline, 0);
    }
    std::vector<int> order(threads);
    for (;;) {
        order.clear();
        bool all = true;
        for (auto& f : fibers) {
            if (f.done) continue;
            all = false;
            if (f.wait_gen && *f.wait_gen == f.wait_val) continue;
            order.push_back(f.tid);
        }
        if (all) break;
        if (order.empty()) fail("deadlock: every live thread waits at a barrier");
        std::shuffle(order.begin(), order.end(), rng);
        for (int t : order) {
            Fiber& f = fibers[t];
            if (f.done || (f.wait_gen && *f.wait_gen == f.wait_val)) continue;
            f.wait_gen = nullptr;
            cur = &f;
            swapcontext(&sched_ctx, &f.ctx);
        }
    }
    cur = nullptr;
}

Slot& post(int op) {
    Warp& w = warps[cur->tid / 32];
    Slot& s = w.slot[cur->wops & 1];
    s.op[cur->tid % 32] = op;
    return s;
}

Slot& exchange() {
    Warp& w = warps[cur->tid / 32];
    Slot& s = w.slot[cur->wops & 1];
    const int op = s.op[cur->tid % 32];
    arrive(w.bar);
    for (int l = 0; l < 32; ++l)
        if (s.op[l] != op) fail("warp divergence: lanes at different warp-level instructions");
    ++cur->wops;
    return s;
}

inline float tf32_trunc(unsigned u) {
    u &= 0xffffe000u;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

}  // namespace emu

#define GEMM_TID (emu::cur->tid)
#define GEMM_BX (emu::bx)
#define GEMM_BY (emu::by)
#define GEMM_SYNC() emu::arrive(emu::block_bar)

inline unsigned gemm_smem_addr(const void* p) {
    const unsigned char* q = (const unsigned char*)p;
    if (q < emu::smem || q >= emu::smem + emu::smem_bytes) emu::fail("gemm_smem_addr: not shared memory");
    return (unsigned)(q - emu::smem);
}
inline void gemm_cp16(unsigned dst, const void* src, int bytes) { emu::cp_async(dst, src, 16, bytes); }
inline void gemm_cp4(unsigned dst, const void* src, int bytes) { emu::cp_async(dst, src, 4, bytes); }
inline void gemm_cp_commit() {
    emu::cur->groups.push_back(std::move(emu::cur->open));
    emu::cur->open.clear();
}
template <int N>
inline void gemm_cp_wait() {
    while (emu::cur->groups.size() > (size_t)N) {
        emu::complete(emu::cur->groups.front());
        emu::cur->groups.pop_front();
    }
}
inline void gemm_ldsm4(unsigned (&r)[4], unsigned addr) {
    emu::Slot& s = emu::post(emu::OP_LDSM);
    const int l = emu::cur->tid % 32;
    s.addr[l] = addr;
    emu::exchange();
    for (int j = 0; j < 4; ++j) {
        const unsigned a = s.addr[j * 8 + l / 4];
        if (a % 16 != 0 || (size_t)a + 16 > emu::smem_bytes) emu::fail("ldmatrix: bad row address");
        memcpy(&r[j], emu::smem + a + 4 * (l % 4), 4);
    }
}
inline unsigned gemm_cvt_tf32(unsigned x) {
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu)) return 0x7fffffffu;   // NaN
    return (x + 0x1000u) & 0xffffe000u;
}
inline void gemm_mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    emu::Slot& s = emu::post(emu::OP_MMA);
    const int l = emu::cur->tid % 32;
    memcpy(s.a[l], a, sizeof s.a[l]);
    s.b[l][0] = b0;
    s.b[l][1] = b1;
    memcpy(s.c[l], d, sizeof s.c[l]);
    emu::exchange();
    auto A = [&](int row, int k) {
        const int reg = (row >= 8 ? 1 : 0) + (k >= 4 ? 2 : 0);
        return emu::tf32_trunc(s.a[(row % 8) * 4 + (k % 4)][reg]);
    };
    auto B = [&](int k, int n) { return emu::tf32_trunc(s.b[n * 4 + (k % 4)][k >= 4 ? 1 : 0]); };
    const int g = l / 4, t = l % 4;
    for (int r = 0; r < 4; ++r) {
        const int row = g + (r >= 2 ? 8 : 0), col = 2 * t + (r & 1);
        double v = s.c[l][r];
        for (int k = 0; k < 8; ++k) v += (double)A(row, k) * (double)B(k, col);
        d[r] = (float)v;
    }
}

#include "../../ptx/kernels/gemm.cu"

// ---------------------------------------------------------------------------
// Buffers against guard pages.
struct GBuf {
    void* map = nullptr;
    size_t maplen = 0;
    float* p = nullptr;
    size_t n = 0;
    // at_end: the data ends at a guard page; else it starts off floats
    // after one.
    GBuf(size_t count, bool at_end, int off) : n(count) {
        const size_t pg = sysconf(_SC_PAGESIZE);
        const size_t bytes = (count + off) * 4;
        const size_t data = (bytes + pg - 1) / pg * pg;
        maplen = data + 2 * pg;
        map = mmap(nullptr, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) emu::fail("mmap");
        char* base = (char*)map;
        mprotect(base, pg, PROT_NONE);
        mprotect(base + pg + data, pg, PROT_NONE);
        p = at_end ? (float*)(base + pg + data - count * 4) : (float*)(base + pg) + off;
    }
    ~GBuf() { munmap(map, maplen); }
};

struct Case {
    int M, N, K, act;
    bool at_end;
    int off;      // float offset of X and W from a page (when !at_end)
    bool bias;
};

static float value(std::mt19937& g, float scale) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    float v;
    do v = u(g) * scale;
    while (v == 0.0f);
    return v;
}

typedef std::function<void(float* smem, float* Y, const float* X, const float* W, const float* b, int M, int N, int K,
                           int act)>
    TileFn;

struct Config {
    std::string name;
    bool tf32;
    int cvt;
    int BM, BN, threads, smem_bytes;
    TileFn fn;
};

template <class C>
Config tf32_config(const char* name) {
    return Config{name,         true, C::CVT, C::BM, C::BN, C::THREADS, C::SMEM_BYTES,
                  [](float* s, float* Y, const float* X, const float* W, const float* b, int M, int N, int K,
                     int act) { gemm_tf32_tile<C>(s, Y, X, W, b, M, N, K, act); }};
}
template <int BK>
Config f32_config(const char* name) {
    typedef GemmF32Cfg<BK> C;
    return Config{name,         false, 0, C::BM, C::BN, C::THREADS, C::SMEM_BYTES,
                  [](float* s, float* Y, const float* X, const float* W, const float* b, int M, int N, int K,
                     int act) { gemm_f32_tile<BK>(s, Y, X, W, b, M, N, K, act); }};
}

static double act_ref(double v, int act) {
    if (act == 1) return v < 0 ? 0 : v;
    if (act == 2) return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
    return v;
}

static bool run_case(const Config& cfg, const Case& c) {
    std::mt19937 g(c.M * 131 + c.N * 7 + c.K);
    GBuf X((size_t)c.M * c.K, c.at_end, c.off), W((size_t)c.N * c.K, c.at_end, c.off), B(c.N, c.at_end, 0),
        Y((size_t)c.M * c.N, c.at_end, 0);
    const float ws = 1.0f / std::sqrt((float)c.K);
    for (size_t i = 0; i < X.n; ++i) X.p[i] = value(g, 1.0f);
    for (size_t i = 0; i < W.n; ++i) W.p[i] = value(g, ws);
    for (size_t i = 0; i < B.n; ++i) B.p[i] = value(g, ws);
    for (size_t i = 0; i < Y.n; ++i) Y.p[i] = NAN;
    emu::regions = {{(const char*)X.p, X.n * 4}, {(const char*)W.p, W.n * 4}};
    std::vector<float> sm(cfg.smem_bytes / 4 + 4);
    emu::smem = (unsigned char*)sm.data();
    emu::smem_bytes = cfg.smem_bytes;
    const float* bias = c.bias ? B.p : nullptr;
    const int gx = (c.N + cfg.BN - 1) / cfg.BN, gy = (c.M + cfg.BM - 1) / cfg.BM;
    for (int y = 0; y < gy; ++y)
        for (int x = 0; x < gx; ++x)
            emu::run_block(cfg.threads, x, y,
                           [&] { cfg.fn((float*)emu::smem, Y.p, X.p, W.p, bias, c.M, c.N, c.K, c.act); });
    long long bad = 0;
    double worst = 0;
    for (int m = 0; m < c.M; ++m)
        for (int n = 0; n < c.N; ++n) {
            double s = 0, sa = 0;
            for (int k = 0; k < c.K; ++k) {
                const double p = (double)X.p[(size_t)m * c.K + k] * W.p[(size_t)n * c.K + k];
                s += p;
                sa += std::fabs(p);
            }
            if (bias) {
                s += bias[n];
                sa += std::fabs(bias[n]);
            }
            const double ref = act_ref(s, c.act);
            const double tol = 1.13 * (cfg.tf32 ? std::ldexp(1.0, cfg.cvt == 2 ? -9 : -10) + (c.K + 2) * std::ldexp(1.0, -23)
                                                : (c.K + 2) * std::ldexp(1.0, -23)) *
                                   sa +
                               1e-6 * std::fabs(ref) + 1e-30;
            const double got = Y.p[(size_t)m * c.N + n];
            const double err = std::fabs(got - ref);
            if (!(err <= tol)) {
                if (bad < 5)
                    fprintf(stderr, "  %s M=%d N=%d K=%d: Y[%d][%d] = %g, want %g (tol %g)\n", cfg.name.c_str(),
                            c.M, c.N, c.K, m, n, got, ref, tol);
                ++bad;
            }
            if (sa > 0) worst = std::max(worst, err / sa);
        }
    printf("%-28s M=%-5d N=%-4d K=%-4d act=%d %s X+%d bias=%d: %s (max |err|/S %.2e)\n", cfg.name.c_str(), c.M, c.N,
           c.K, c.act, c.at_end ? "end" : "start", c.off, (int)c.bias, bad ? "FAIL" : "ok", worst);
    return bad == 0;
}

int main(int argc, char** argv) {
    // The exported kernels' configurations and every variant gemm_bench runs.
    std::vector<Config> cfgs = {
        f32_config<8>("f32 128x128x8 (gemm_f32)"),
        f32_config<16>("f32 128x128x16"),
        tf32_config<GemmTf32Default>("tf32 128x128x16 w64x64 s3 (gemm_tf32)"),
        tf32_config<GemmTf32Big>("tf32 256x128x16 w64x64 s3 (gemm_tf32_big)"),
        tf32_config<GemmTf32Cfg<128, 128, 16, 64, 32, 3, 0>>("tf32 128x128x16 w64x32 s3"),
        tf32_config<GemmTf32Cfg<128, 128, 16, 64, 64, 3, 1>>("tf32 128x128x16 w64x64 s3 cvt=int"),
        tf32_config<GemmTf32Cfg<128, 128, 16, 64, 64, 3, 3>>("tf32 128x128x16 w64x64 s3 cvt=add"),
        tf32_config<GemmTf32Cfg<128, 128, 16, 64, 64, 3, 2>>("tf32 128x128x16 w64x64 s3 cvt=none"),
        tf32_config<GemmTf32Cfg<128, 128, 16, 64, 64, 4, 0>>("tf32 128x128x16 w64x64 s4"),
        tf32_config<GemmTf32Cfg<256, 128, 16, 64, 64, 2, 0>>("tf32 256x128x16 w64x64 s2"),
        tf32_config<GemmTf32Cfg<128, 256, 8, 64, 64, 4, 0>>("tf32 128x256x8 w64x64 s4"),
        tf32_config<GemmTf32Cfg<128, 256, 16, 64, 64, 2, 0>>("tf32 128x256x16 w64x64 s2"),
        tf32_config<GemmTf32Cfg<256, 128, 8, 64, 64, 4, 0>>("tf32 256x128x8 w64x64 s4"),
        tf32_config<GemmTf32Cfg<256, 128, 16, 64, 64, 3, 3>>("tf32 256x128x16 w64x64 s3 cvt=add"),
        tf32_config<GemmTf32Cfg<256, 128, 16, 64, 64, 4, 0>>("tf32 256x128x16 w64x64 s4"),
        tf32_config<GemmTf32Cfg<128, 256, 16, 64, 64, 3, 0>>("tf32 128x256x16 w64x64 s3"),
        tf32_config<GemmTf32Cfg<128, 128, 32, 64, 64, 3, 0>>("tf32 128x128x32 w64x64 s3"),
        tf32_config<GemmTf32Cfg<256, 128, 32, 64, 64, 3, 0>>("tf32 256x128x32 w64x64 s3"),
        tf32_config<GemmTf32Cfg<128, 128, 16, 64, 32, 2, 0>>("tf32 128x128x16 w64x32 s2"),
    };
    std::vector<Case> cases = {
        {1, 1, 1, 0, true, 0, true},          // scalar loads, one element
        {1000, 3, 5, 1, true, 0, true},       // K odd, N odd
        {77, 16, 768, 2, true, 0, true},      // a 256->16-like layer, vector path, 48+ k-tiles
        {300, 260, 100, 2, true, 0, true},    // partial tiles everywhere, vector path
        {257, 129, 37, 1, false, 0, true},    // scalar loads, N odd
        {130, 136, 64, 0, false, 1, true},    // X and W 4 bytes off 16: scalar path with K%4 == 0
        {256, 256, 64, 0, false, 0, false},   // whole tiles, no bias
        {40, 384, 48, 1, true, 0, true},      // M < one tile
        {200, 70, 24, 2, true, 0, true},      // K < BK for BK 32
    };
    std::string only = argc > 1 ? argv[1] : "";
    if (const char* seed = getenv("EMU_SEED")) emu::rng.seed(strtoul(seed, nullptr, 0));
    int fails = 0;
    for (const Config& cfg : cfgs) {
        if (!only.empty() && cfg.name.find(only) == std::string::npos) continue;
        for (const Case& c : cases) fails += !run_case(cfg, c);
    }
    printf("%lld context switches\n", emu::switches);
    if (fails) {
        printf("FAILED: %d case(s)\n", fails);
        return 1;
    }
    printf("all ok\n");
    return 0;
}

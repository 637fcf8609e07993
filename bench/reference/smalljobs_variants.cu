// Variants of the small-jobs twin (smalljobs.cu), one knob at a time, to
// find what makes a single worker's small job take 4-5 us less in one C++
// program than in ours. Each run measures one (size, workers) cell the way
// smalljobs.cu does: workers start together behind a barrier and share one
// deadline; every element of each worker's last job is checked against a
// double-precision reference.
//
// The knobs, each a name=value argument (defaults first):
//   api=runtime|driver     the runtime's cudaMemcpyAsync and <<<>>>, or the
//                          driver API's cuMemcpyHtoDAsync_v2 and
//                          cuLaunchKernel on the runtime's primary context
//   code=sass|ptx          api=driver only: sass loads an sm_90 cubin built
//                          ahead of time (cubin=FILE, default seed.cubin);
//                          ptx loads ptx=FILE (default ptx/kernels/seed.ptx)
//                          and lets the driver JIT-compile it, as overlap does
//   kernel=arg|const       the trip count as a kernel argument (seed.cu), or
//                          a compile-time constant (iters must then be 100)
//   stream=nonblocking|blocking|null
//                          cudaStreamNonBlocking, a plain stream, or the
//                          legacy default stream
//   sync=stream|event|query
//                          cudaStreamSynchronize; cudaEventRecord +
//                          cudaEventSynchronize (a blocking-sync-free event);
//                          or polling cudaStreamQuery
//   wait=default|spin|yield|block|auto
//                          the context's scheduling flags, as smalljobs.cu
//   warm=0                 seconds of back-to-back jobs on every worker
//                          before the timed window (clocks up), besides the
//                          3 warm-up jobs each
//   elems=4096 workers=1 iters=100 seconds=0.5
//
// Build: nvcc -O3 -arch=sm_90 -o smalljobs_variants \
//          bench/reference/smalljobs_variants.cu -lcuda
//        nvcc -cubin -arch=sm_90 -o seed.cubin ptx/kernels/seed.cu
// Prints one "variant" line per run.
#include "common.h"
#include "../../ptx/kernels/seed.cu"
#include "seed_check.h"

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;

#define CKD(x)                                                             \
    do {                                                                   \
        CUresult r_ = (x);                                                 \
        if (r_ != CUDA_SUCCESS) {                                          \
            const char* s_ = "?";                                          \
            cuGetErrorName(r_, &s_);                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_); \
            exit(1);                                                       \
        }                                                                  \
    } while (0)

// seed_const is seed.cu's kernel with the trip count fixed at 100.
extern "C" __global__ void seed_const(float* __restrict__ out, const float* __restrict__ in,
                                      unsigned int n, int iters_unused) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = in[i];
        float v = x * 0.5f + x * x * 0.1f;
#pragma unroll 4
        for (int k = 0; k < 100; ++k) v += sinf(v * 0.01f);
        out[i] = v;
    }
}

struct Opts {
    std::map<std::string, std::string> kv;
    std::string get(const std::string& k, const std::string& d) const {
        auto it = kv.find(k);
        return it == kv.end() ? d : it->second;
    }
};

struct Worker {
    cudaStream_t stream = nullptr;
    cudaEvent_t done = nullptr;
    float *hin, *hout, *din, *dout;
    std::vector<double> lat_us;
};

static std::string api, sync_mode, kernel_kind;
static CUfunction dfn;
static int g_iters;

static void job(Worker& w, size_t n) {
    unsigned blocks = (unsigned)((n + 255) / 256);
    if (api == "driver") {
        CUstream s = (CUstream)w.stream;
        CKD(cuMemcpyHtoDAsync((CUdeviceptr)w.din, w.hin, n * 4, s));
        unsigned nn = (unsigned)n;
        int it = g_iters;
        void* params[] = {&w.dout, &w.din, &nn, &it};
        CKD(cuLaunchKernel(dfn, blocks, 1, 1, 256, 1, 1, 0, s, params, nullptr));
        CKD(cuMemcpyDtoHAsync(w.hout, (CUdeviceptr)w.dout, n * 4, s));
    } else {
        CK(cudaMemcpyAsync(w.din, w.hin, n * 4, cudaMemcpyHostToDevice, w.stream));
        if (kernel_kind == "const")
            seed_const<<<blocks, 256, 0, w.stream>>>(w.dout, w.din, (unsigned)n, g_iters);
        else
            seed<<<blocks, 256, 0, w.stream>>>(w.dout, w.din, (unsigned)n, g_iters);
        CK(cudaGetLastError());
        CK(cudaMemcpyAsync(w.hout, w.dout, n * 4, cudaMemcpyDeviceToHost, w.stream));
    }
    if (sync_mode == "event") {
        CK(cudaEventRecord(w.done, w.stream));
        CK(cudaEventSynchronize(w.done));
    } else if (sync_mode == "query") {
        cudaError_t e;
        while ((e = cudaStreamQuery(w.stream)) == cudaErrorNotReady) {
        }
        CK(e);
    } else {
        CK(cudaStreamSynchronize(w.stream));
    }
}

static std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        fprintf(stderr, "smalljobs_variants: cannot read %s\n", path.c_str());
        exit(1);
    }
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

int main(int argc, char** argv) {
    Opts o;
    for (int i = 1; i < argc; ++i) {
        const char* eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "smalljobs_variants: argument %s: want name=value\n", argv[i]);
            return 1;
        }
        o.kv[std::string(argv[i], eq - argv[i])] = eq + 1;
    }
    api = o.get("api", "runtime");
    sync_mode = o.get("sync", "stream");
    kernel_kind = o.get("kernel", "arg");
    std::string code = o.get("code", "sass"), stream = o.get("stream", "nonblocking"), wait = o.get("wait", "default");
    size_t n = std::stoul(o.get("elems", "4096"));
    int nw = std::stoi(o.get("workers", "1"));
    g_iters = std::stoi(o.get("iters", "100"));
    double seconds = std::stod(o.get("seconds", "0.5")), warm = std::stod(o.get("warm", "0"));
    if (kernel_kind == "const" && g_iters != 100) {
        fprintf(stderr, "smalljobs_variants: kernel=const needs iters=100\n");
        return 1;
    }
    if (api == "driver" && kernel_kind == "const") {
        fprintf(stderr, "smalljobs_variants: kernel=const is for api=runtime\n");
        return 1;
    }

    unsigned flags = 0;
    if (wait == "spin") flags = cudaDeviceScheduleSpin;
    else if (wait == "yield") flags = cudaDeviceScheduleYield;
    else if (wait == "block") flags = cudaDeviceScheduleBlockingSync;
    else if (wait == "auto") flags = cudaDeviceScheduleAuto;
    else if (wait != "default") {
        fprintf(stderr, "smalljobs_variants: wait=%s: want spin, yield, block, auto or default\n", wait.c_str());
        return 1;
    }
    if (wait != "default") CK(cudaSetDeviceFlags(flags));
    CK(cudaSetDevice(0));
    CK(cudaFree(0));

    CUmodule mod = nullptr;
    if (api == "driver") {
        std::string img = code == "ptx" ? slurp(o.get("ptx", "ptx/kernels/seed.ptx")) : slurp(o.get("cubin", "seed.cubin"));
        CKD(cuModuleLoadData(&mod, img.data()));
        CKD(cuModuleGetFunction(&dfn, mod, "seed"));
    }

    std::vector<Worker> ws(nw);
    for (auto& w : ws) {
        if (stream == "nonblocking") CK(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
        else if (stream == "blocking") CK(cudaStreamCreate(&w.stream));
        else if (stream == "null") w.stream = nullptr;
        else {
            fprintf(stderr, "smalljobs_variants: stream=%s: want nonblocking, blocking or null\n", stream.c_str());
            return 1;
        }
        CK(cudaEventCreateWithFlags(&w.done, cudaEventDisableTiming));
        CK(cudaHostAlloc(&w.hin, n * 4, cudaHostAllocPortable));
        CK(cudaHostAlloc(&w.hout, n * 4, cudaHostAllocPortable));
        CK(cudaMalloc(&w.din, n * 4));
        CK(cudaMalloc(&w.dout, n * 4));
        for (size_t i = 0; i < n; ++i) w.hin[i] = seed_value(seed_key(i));
        memset(w.hout, 0, n * 4);
        for (int k = 0; k < 3; ++k) job(w, n);
    }
    std::vector<double> table(65536);
    for (unsigned k = 0; k < 65536; ++k) table[k] = reference(seed_value(k), g_iters);
    double tol_rel = 4.0 * (g_iters + 2) * 1.1920929e-7;

    size_t cap = (size_t)(seconds * 1e6) + 16;
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    Clock::time_point start, deadline;
    std::vector<std::thread> th;
    for (int i = 0; i < nw; ++i) {
        th.emplace_back([&, i] {
            Worker& w = ws[i];
            CK(cudaSetDevice(0));
            auto warm_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(warm));
            while (Clock::now() < warm_end) job(w, n);
            w.lat_us.reserve(cap);
            ready++;
            while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
            while (w.lat_us.size() < cap) {
                auto t0 = Clock::now();
                if (t0 >= deadline) break;
                job(w, n);
                auto t1 = Clock::now();
                w.lat_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
            }
        });
    }
    while (ready.load() < nw) std::this_thread::yield();
    start = Clock::now();
    deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    go.store(true, std::memory_order_release);
    for (auto& t : th) t.join();
    double wall = std::chrono::duration<double>(Clock::now() - start).count();

    std::vector<double> all;
    size_t bad = 0;
    for (auto& w : ws) {
        all.insert(all.end(), w.lat_us.begin(), w.lat_us.end());
        for (size_t e = 0; e < n; ++e) {
            double r = table[seed_key(e)];
            if (!(fabs(w.hout[e] - r) <= tol_rel * std::max(1.0, fabs(r)))) bad++;
        }
    }
    std::sort(all.begin(), all.end());
    auto pct = [&](double p) {
        if (all.empty()) return 0.0;
        size_t k = (size_t)std::ceil(p * all.size()) - 1;
        return all[std::min(k, all.size() - 1)];
    };
    printf("variant api=%s code=%s kernel=%s stream=%s sync=%s wait=%s warm=%g elems=%zu workers=%d jobs=%zu jobs_per_s=%.1f p50_us=%.2f p99_us=%.2f mismatches=%zu\n",
           api.c_str(), api == "driver" ? code.c_str() : "-", kernel_kind.c_str(), stream.c_str(), sync_mode.c_str(), wait.c_str(), warm, n, nw,
           all.size(), all.size() / wall, pct(0.5), pct(0.99), bad);
    return bad ? 2 : 0;
}

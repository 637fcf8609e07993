// Hand-written CUDA C++ reference for overlap's pipeline: pinned memory,
// three streams (copy-in, compute, copy-out), a ring of buffer slots, and
// events for every read-after-write and write-after-read dependency. No
// host synchronisation inside the loop. Every element is verified against a
// double-precision CPU reference.
//
// Build: nvcc -O3 -arch=sm_90 -o pipeline pipeline.cu
// Usage: pipeline [elems] [iters] [slots] [reps] chunk...
//   prints one "stage" line and one "pipeline" line per chunk size.
#include "common.h"
#include "../../ptx/kernels/seed.cu"
#include "seed_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

static double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Pipe {
    int slots;
    size_t chunk;
    cudaStream_t h2d, comp, d2h;
    std::vector<float*> din, dout;
    std::vector<cudaEvent_t> h2dDone, compDone, d2hDone;
};

static void run_pipeline(Pipe& p, float* hout, const float* hin, size_t n, int iters) {
    size_t chunks = (n + p.chunk - 1) / p.chunk;
    for (size_t c = 0; c < chunks; ++c) {
        int s = (int)(c % p.slots);
        size_t off = c * p.chunk;
        size_t len = std::min(p.chunk, n - off);
        if (c >= (size_t)p.slots) CK(cudaStreamWaitEvent(p.h2d, p.compDone[s], 0));  // WAR: din[s]
        CK(cudaMemcpyAsync(p.din[s], hin + off, len * 4, cudaMemcpyHostToDevice, p.h2d));
        CK(cudaEventRecord(p.h2dDone[s], p.h2d));
        CK(cudaStreamWaitEvent(p.comp, p.h2dDone[s], 0));                             // RAW
        if (c >= (size_t)p.slots) CK(cudaStreamWaitEvent(p.comp, p.d2hDone[s], 0));  // WAR: dout[s]
        seed<<<(unsigned)((len + 255) / 256), 256, 0, p.comp>>>(p.dout[s], p.din[s], (unsigned)len, iters);
        CK(cudaGetLastError());
        CK(cudaEventRecord(p.compDone[s], p.comp));
        CK(cudaStreamWaitEvent(p.d2h, p.compDone[s], 0));                             // RAW
        CK(cudaMemcpyAsync(hout + off, p.dout[s], len * 4, cudaMemcpyDeviceToHost, p.d2h));
        CK(cudaEventRecord(p.d2hDone[s], p.d2h));
    }
    CK(cudaStreamSynchronize(p.d2h));
}

int main(int argc, char** argv) {
    size_t n = argc > 1 ? strtoull(argv[1], 0, 0) : (128ull << 20);
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    int slots = argc > 3 ? atoi(argv[3]) : 2;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    std::vector<size_t> chunkSizes;
    for (int i = 5; i < argc; ++i) chunkSizes.push_back(strtoull(argv[i], 0, 0));
    if (chunkSizes.empty()) chunkSizes = {1 << 20, 4 << 20, 16 << 20, 32 << 20};
    size_t maxChunk = *std::max_element(chunkSizes.begin(), chunkSizes.end());

    float *hin, *hout;
    CK(cudaMallocHost(&hin, n * 4));
    CK(cudaMallocHost(&hout, n * 4));
    for (size_t i = 0; i < n; ++i) hin[i] = seed_value(seed_key(i));

    Pipe p;
    p.slots = slots;
    CK(cudaStreamCreateWithFlags(&p.h2d, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.comp, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&p.d2h, cudaStreamNonBlocking));
    p.din.resize(slots); p.dout.resize(slots);
    p.h2dDone.resize(slots); p.compDone.resize(slots); p.d2hDone.resize(slots);
    for (int s = 0; s < slots; ++s) {
        CK(cudaMalloc(&p.din[s], maxChunk * 4));
        CK(cudaMalloc(&p.dout[s], maxChunk * 4));
        CK(cudaEventCreateWithFlags(&p.h2dDone[s], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&p.compDone[s], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&p.d2hDone[s], cudaEventDisableTiming));
    }

    // Each stage alone over the whole array, in the smallest chunk size, on one stream.
    {
        size_t chunk = chunkSizes[0];
        float* dall;
        CK(cudaMalloc(&dall, n * 4));
        float* dall2;
        CK(cudaMalloc(&dall2, n * 4));
        double best[3] = {1e30, 1e30, 1e30};
        for (int r = 0; r < reps; ++r) {
            for (int stage = 0; stage < 3; ++stage) {
                CK(cudaDeviceSynchronize());
                double t0 = now_ms();
                for (size_t off = 0; off < n; off += chunk) {
                    size_t len = std::min(chunk, n - off);
                    if (stage == 0) CK(cudaMemcpyAsync(dall + off, hin + off, len * 4, cudaMemcpyHostToDevice, p.h2d));
                    if (stage == 1) seed<<<(unsigned)((len + 255) / 256), 256, 0, p.h2d>>>(dall2 + off, dall + off, (unsigned)len, iters);
                    if (stage == 2) CK(cudaMemcpyAsync(hout + off, dall2 + off, len * 4, cudaMemcpyDeviceToHost, p.h2d));
                }
                CK(cudaStreamSynchronize(p.h2d));
                best[stage] = std::min(best[stage], now_ms() - t0);
            }
        }
        printf("stage chunk=%zu h2d_ms=%.3f compute_ms=%.3f d2h_ms=%.3f bound_ms=%.3f\n", chunk, best[0], best[1],
               best[2], std::max(best[0], std::max(best[1], best[2])));
        CK(cudaFree(dall));
        CK(cudaFree(dall2));
    }

    for (size_t chunk : chunkSizes) {
        p.chunk = chunk;
        run_pipeline(p, hout, hin, n, iters);  // warm-up
        double best = 1e30, sum = 0;
        for (int r = 0; r < reps; ++r) {
            memset(hout, 0, n * 4);
            CK(cudaDeviceSynchronize());
            double t0 = now_ms();
            run_pipeline(p, hout, hin, n, iters);
            double t = now_ms() - t0;
            best = std::min(best, t);
            sum += t;
        }
        size_t bad = verify(hout, n, iters);
        printf("pipeline chunk=%zu slots=%d elems=%zu iters=%d best_ms=%.3f mean_ms=%.3f mismatches=%zu\n", chunk,
               slots, n, iters, best, sum / reps, bad);
        if (bad) return 2;
    }
    return 0;
}

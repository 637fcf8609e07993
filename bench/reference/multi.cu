// Hand-written CUDA C++ reference for one job over several GPUs: the input
// is split statically into one contiguous share per GPU, and each GPU is
// driven by its own persistent host thread running the same pipeline as
// pipeline.cu (copy-in stream, compute streams round robin, copy-out
// stream, a ring of slots, events for every dependency, no host sync in the
// loop). Host memory is pinned and portable, so every GPU copies from it
// directly. Every element is verified against a double-precision CPU
// reference.
//
// Build: nvcc -O3 -arch=sm_90 -o multi multi.cu
// Usage: multi [elems] [iters] [slots] [reps] [chunk] [compute_streams] [devices]
//   devices 0 (the default) means every GPU. Prints one "multi" line and
//   one "multidev" line per GPU with its share and its own best time.
#include "common.h"
#include "../../ptx/kernels/seed.cu"
#include "seed_check.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

static double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Gate {
    std::mutex mu;
    std::condition_variable cv;
    long round = 0;   // the round the workers may run
    int done = 0;     // workers that finished the current round
};

struct Pipe {
    int dev, slots, ncomp;
    size_t chunk;
    cudaStream_t h2d, d2h;
    std::vector<cudaStream_t> comp;
    std::vector<float*> din, dout;
    std::vector<cudaEvent_t> h2dDone, compDone, d2hDone;
    double best = 1e30;
};

static void run_share(Pipe& p, float* hout, const float* hin, size_t n, int iters) {
    size_t chunks = (n + p.chunk - 1) / p.chunk;
    for (size_t c = 0; c < chunks; ++c) {
        int s = (int)(c % p.slots);
        cudaStream_t cs = p.comp[c % p.ncomp];
        size_t off = c * p.chunk;
        size_t len = std::min(p.chunk, n - off);
        if (c >= (size_t)p.slots) CK(cudaStreamWaitEvent(p.h2d, p.compDone[s], 0));
        CK(cudaMemcpyAsync(p.din[s], hin + off, len * 4, cudaMemcpyHostToDevice, p.h2d));
        CK(cudaEventRecord(p.h2dDone[s], p.h2d));
        CK(cudaStreamWaitEvent(cs, p.h2dDone[s], 0));
        if (c >= (size_t)p.slots) CK(cudaStreamWaitEvent(cs, p.d2hDone[s], 0));
        seed<<<(unsigned)((len + 255) / 256), 256, 0, cs>>>(p.dout[s], p.din[s], (unsigned)len, iters);
        CK(cudaGetLastError());
        CK(cudaEventRecord(p.compDone[s], cs));
        CK(cudaStreamWaitEvent(p.d2h, p.compDone[s], 0));
        CK(cudaMemcpyAsync(hout + off, p.dout[s], len * 4, cudaMemcpyDeviceToHost, p.d2h));
        CK(cudaEventRecord(p.d2hDone[s], p.d2h));
    }
    CK(cudaStreamSynchronize(p.d2h));
}

int main(int argc, char** argv) {
    size_t n = argc > 1 ? strtoull(argv[1], 0, 0) : (128ull << 20);
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    int slots = argc > 3 ? atoi(argv[3]) : 6;
    int reps = argc > 4 ? atoi(argv[4]) : 5;
    size_t chunk = argc > 5 ? strtoull(argv[5], 0, 0) : (1u << 20);
    int ncomp = argc > 6 ? atoi(argv[6]) : 4;
    int ndev = argc > 7 ? atoi(argv[7]) : 0;
    int have = 0;
    CK(cudaGetDeviceCount(&have));
    if (ndev <= 0 || ndev > have) ndev = have;
    if (slots < ncomp) slots = ncomp;

    float *hin, *hout;
    CK(cudaHostAlloc(&hin, n * 4, cudaHostAllocPortable));
    CK(cudaHostAlloc(&hout, n * 4, cudaHostAllocPortable));
    for (size_t i = 0; i < n; ++i) hin[i] = seed_value(seed_key(i));

    std::vector<Pipe> pipes(ndev);
    std::vector<size_t> lo(ndev), len(ndev);
    // Static split in whole chunks, as even as chunks allow.
    size_t chunks = (n + chunk - 1) / chunk;
    for (int d = 0; d < ndev; ++d) {
        size_t c0 = chunks * d / ndev, c1 = chunks * (d + 1) / ndev;
        lo[d] = std::min(n, c0 * chunk);
        len[d] = std::min(n, c1 * chunk) - lo[d];
    }

    Gate gate;
    std::vector<std::thread> workers;
    for (int d = 0; d < ndev; ++d) {
        workers.emplace_back([&, d] {
            Pipe& p = pipes[d];
            p.dev = d, p.slots = slots, p.ncomp = ncomp, p.chunk = chunk;
            CK(cudaSetDevice(d));
            CK(cudaStreamCreateWithFlags(&p.h2d, cudaStreamNonBlocking));
            CK(cudaStreamCreateWithFlags(&p.d2h, cudaStreamNonBlocking));
            p.comp.resize(ncomp);
            for (auto& s : p.comp) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            p.din.resize(slots), p.dout.resize(slots);
            p.h2dDone.resize(slots), p.compDone.resize(slots), p.d2hDone.resize(slots);
            for (int s = 0; s < slots; ++s) {
                CK(cudaMalloc(&p.din[s], chunk * 4));
                CK(cudaMalloc(&p.dout[s], chunk * 4));
                CK(cudaEventCreateWithFlags(&p.h2dDone[s], cudaEventDisableTiming));
                CK(cudaEventCreateWithFlags(&p.compDone[s], cudaEventDisableTiming));
                CK(cudaEventCreateWithFlags(&p.d2hDone[s], cudaEventDisableTiming));
            }
            for (long round = 1; round <= reps + 1; ++round) {
                {
                    std::unique_lock<std::mutex> l(gate.mu);
                    gate.cv.wait(l, [&] { return gate.round >= round; });
                }
                double t0 = now_ms();
                if (len[d]) run_share(p, hout + lo[d], hin + lo[d], len[d], iters);
                double t = now_ms() - t0;
                if (round > 1) p.best = std::min(p.best, t);
                std::lock_guard<std::mutex> l(gate.mu);
                gate.done++;
                gate.cv.notify_all();
            }
        });
    }

    double best = 1e30, sum = 0;
    for (long round = 1; round <= reps + 1; ++round) {
        memset(hout, 0, n * 4);
        double t0;
        {
            std::lock_guard<std::mutex> l(gate.mu);
            gate.done = 0;
            t0 = now_ms();
            gate.round = round;
            gate.cv.notify_all();
        }
        {
            std::unique_lock<std::mutex> l(gate.mu);
            gate.cv.wait(l, [&] { return gate.done == ndev; });
        }
        double t = now_ms() - t0;
        if (round > 1) {  // the first round warms up
            best = std::min(best, t);
            sum += t;
        }
    }
    for (auto& w : workers) w.join();
    size_t bad = verify(hout, n, iters);
    printf("multi devices=%d chunk=%zu slots=%d compute_streams=%d elems=%zu iters=%d best_ms=%.3f mean_ms=%.3f mismatches=%zu\n",
           ndev, chunk, slots, ncomp, n, iters, best, sum / reps, bad);
    for (int d = 0; d < ndev; ++d)
        printf("multidev device=%d elems=%zu best_ms=%.3f\n", d, len[d], pipes[d].best);
    return bad ? 2 : 0;
}

// Hand-written CUDA C++ twin for a small whole job (the job is a few chunks,
// so fill and drain weigh as much as the stages): pinned memory, a ring of
// slots, and one of three schedules:
//   events    a copy-in stream, compute streams round robin and a copy-out
//             stream, ordered by events, as overlap's ScheduleEvents;
//   instream  chunk i's copy in, kernel and copy out in order on compute
//             stream i mod K, as overlap's ScheduleInStream;
//   serialin  the copies in queued in chunk order on one stream, each
//             chunk's kernel and copy out on compute stream i mod K after
//             its copy-in event: the copies in do not share the link, so
//             the first kernel starts after one chunk's copy, not K.
// Each run starts after the device is idle and ends with every stream
// synchronised; the best and the median of reps runs are printed, after
// one untimed run. Every element of the last run is verified against a
// double-precision CPU reference. The stages alone are timed as overlap
// times them (each stage over the whole job in chunks, one stream).
//
// Build: nvcc -O3 -arch=sm_90 -o wholejob wholejob.cu
// Usage: wholejob elems chunk streams slots reps schedule...
#include "common.h"
#include "../../ptx/kernels/seed.cu"
#include "seed_check.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

static double now_ms() {
    using namespace std::chrono;
    return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

struct Job {
    size_t n, chunk;
    int streams, slots, iters;
    float *hin, *hout;
    std::vector<float*> din, dout;
    cudaStream_t h2d, d2h;
    std::vector<cudaStream_t> comp;
    std::vector<cudaEvent_t> h2dDone, compDone, d2hDone;
};

static void launch(Job& j, int s, size_t len, cudaStream_t st) {
    seed<<<(unsigned)((len + 255) / 256), 256, 0, st>>>(j.dout[s], j.din[s], (unsigned)len, j.iters);
    CK(cudaGetLastError());
}

static void run_events(Job& j) {
    size_t chunks = (j.n + j.chunk - 1) / j.chunk;
    for (size_t c = 0; c < chunks; ++c) {
        int s = (int)(c % j.slots);
        cudaStream_t cs = j.comp[c % j.streams];
        size_t off = c * j.chunk, len = std::min(j.chunk, j.n - off);
        if (c >= (size_t)j.slots) CK(cudaStreamWaitEvent(j.h2d, j.compDone[s], 0));
        CK(cudaMemcpyAsync(j.din[s], j.hin + off, len * 4, cudaMemcpyHostToDevice, j.h2d));
        CK(cudaEventRecord(j.h2dDone[s], j.h2d));
        CK(cudaStreamWaitEvent(cs, j.h2dDone[s], 0));
        if (c >= (size_t)j.slots) CK(cudaStreamWaitEvent(cs, j.d2hDone[s], 0));
        launch(j, s, len, cs);
        CK(cudaEventRecord(j.compDone[s], cs));
        CK(cudaStreamWaitEvent(j.d2h, j.compDone[s], 0));
        CK(cudaMemcpyAsync(j.hout + off, j.dout[s], len * 4, cudaMemcpyDeviceToHost, j.d2h));
        CK(cudaEventRecord(j.d2hDone[s], j.d2h));
    }
}

// instream: slot s is used only by stream s mod streams (slots is a
// multiple of streams), so stream order alone keeps a slot's uses apart.
static void run_instream(Job& j) {
    size_t chunks = (j.n + j.chunk - 1) / j.chunk;
    for (size_t c = 0; c < chunks; ++c) {
        int s = (int)(c % j.slots);
        cudaStream_t cs = j.comp[c % j.streams];
        size_t off = c * j.chunk, len = std::min(j.chunk, j.n - off);
        CK(cudaMemcpyAsync(j.din[s], j.hin + off, len * 4, cudaMemcpyHostToDevice, cs));
        launch(j, s, len, cs);
        CK(cudaMemcpyAsync(j.hout + off, j.dout[s], len * 4, cudaMemcpyDeviceToHost, cs));
    }
}

// serialin: the same slots as instream; a copy in also waits for the
// kernel that last read its slot (on another stream's queue only when
// slots wrap, which stream order already covers for its own stream).
static void run_serialin(Job& j) {
    size_t chunks = (j.n + j.chunk - 1) / j.chunk;
    for (size_t c = 0; c < chunks; ++c) {
        int s = (int)(c % j.slots);
        cudaStream_t cs = j.comp[c % j.streams];
        size_t off = c * j.chunk, len = std::min(j.chunk, j.n - off);
        if (c >= (size_t)j.slots) CK(cudaStreamWaitEvent(j.h2d, j.compDone[s], 0));
        CK(cudaMemcpyAsync(j.din[s], j.hin + off, len * 4, cudaMemcpyHostToDevice, j.h2d));
        CK(cudaEventRecord(j.h2dDone[s], j.h2d));
        CK(cudaStreamWaitEvent(cs, j.h2dDone[s], 0));
        launch(j, s, len, cs);
        CK(cudaEventRecord(j.compDone[s], cs));
        CK(cudaMemcpyAsync(j.hout + off, j.dout[s], len * 4, cudaMemcpyDeviceToHost, cs));
    }
}

static void sync_all(Job& j) {
    CK(cudaStreamSynchronize(j.h2d));
    for (auto s : j.comp) CK(cudaStreamSynchronize(s));
    CK(cudaStreamSynchronize(j.d2h));
}

int main(int argc, char** argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: wholejob elems chunk streams slots reps schedule...\n");
        return 2;
    }
    Job j;
    j.n = strtoull(argv[1], 0, 0);
    j.chunk = strtoull(argv[2], 0, 0);
    j.streams = atoi(argv[3]);
    j.slots = atoi(argv[4]);
    int reps = atoi(argv[5]);
    j.iters = 100;
    if (j.n == 0 || j.chunk == 0 || j.streams < 1 || j.slots < j.streams || j.slots % j.streams || reps < 1) {
        fprintf(stderr, "wholejob: want elems, chunk > 0, 1 <= streams, slots a multiple of streams, reps >= 1\n");
        return 2;
    }
    CK(cudaMallocHost(&j.hin, j.n * 4));
    CK(cudaMallocHost(&j.hout, j.n * 4));
    for (size_t i = 0; i < j.n; ++i) j.hin[i] = seed_value(seed_key(i));
    CK(cudaStreamCreateWithFlags(&j.h2d, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&j.d2h, cudaStreamNonBlocking));
    j.comp.resize(j.streams);
    for (auto& s : j.comp) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    j.din.resize(j.slots), j.dout.resize(j.slots);
    j.h2dDone.resize(j.slots), j.compDone.resize(j.slots), j.d2hDone.resize(j.slots);
    for (int s = 0; s < j.slots; ++s) {
        CK(cudaMalloc(&j.din[s], j.chunk * 4));
        CK(cudaMalloc(&j.dout[s], j.chunk * 4));
        CK(cudaEventCreateWithFlags(&j.h2dDone[s], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&j.compDone[s], cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&j.d2hDone[s], cudaEventDisableTiming));
    }

    // Each stage alone over the whole job in chunks on one stream, best of reps.
    {
        float *dall, *dall2;
        CK(cudaMalloc(&dall, j.n * 4));
        CK(cudaMalloc(&dall2, j.n * 4));
        double best[3] = {1e30, 1e30, 1e30};
        for (int r = 0; r < reps; ++r) {
            for (int stage = 0; stage < 3; ++stage) {
                CK(cudaDeviceSynchronize());
                double t0 = now_ms();
                for (size_t off = 0; off < j.n; off += j.chunk) {
                    size_t len = std::min(j.chunk, j.n - off);
                    if (stage == 0) CK(cudaMemcpyAsync(dall + off, j.hin + off, len * 4, cudaMemcpyHostToDevice, j.h2d));
                    if (stage == 1) seed<<<(unsigned)((len + 255) / 256), 256, 0, j.h2d>>>(dall2 + off, dall + off, (unsigned)len, j.iters);
                    if (stage == 2) CK(cudaMemcpyAsync(j.hout + off, dall2 + off, len * 4, cudaMemcpyDeviceToHost, j.h2d));
                }
                CK(cudaStreamSynchronize(j.h2d));
                best[stage] = std::min(best[stage], now_ms() - t0);
            }
        }
        printf("wholejob stage elems=%zu chunk=%zu h2d_ms=%.4f compute_ms=%.4f d2h_ms=%.4f bound_ms=%.4f\n", j.n, j.chunk,
               best[0], best[1], best[2], std::max(best[0], std::max(best[1], best[2])));
        CK(cudaFree(dall));
        CK(cudaFree(dall2));
    }

    for (int a = 6; a < argc; ++a) {
        std::string sched = argv[a];
        void (*run)(Job&) = sched == "events" ? run_events : sched == "instream" ? run_instream
                          : sched == "serialin" ? run_serialin : nullptr;
        if (!run) {
            fprintf(stderr, "wholejob: unknown schedule %s (want events, instream, serialin)\n", sched.c_str());
            return 2;
        }
        run(j);
        sync_all(j);
        std::vector<double> t(reps);
        for (int r = 0; r < reps; ++r) {
            memset(j.hout, 0, j.n * 4);
            CK(cudaDeviceSynchronize());
            double t0 = now_ms();
            run(j);
            sync_all(j);
            t[r] = now_ms() - t0;
        }
        size_t bad = verify(j.hout, j.n, j.iters);
        std::sort(t.begin(), t.end());
        printf("wholejob run schedule=%s elems=%zu chunk=%zu streams=%d slots=%d reps=%d best_ms=%.4f median_ms=%.4f mismatches=%zu\n",
               sched.c_str(), j.n, j.chunk, j.streams, j.slots, reps, t[0], t[reps / 2], bad);
        if (bad) return 3;
    }
    return 0;
}

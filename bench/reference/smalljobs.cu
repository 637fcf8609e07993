// Hand-written CUDA C++ reference for many small jobs: each worker is a
// host thread with its own stream, pinned input and output buffers and
// device buffers, and runs whole jobs back to back: H2D copy, the seed
// kernel, D2H copy, cudaStreamSynchronize. Workers start together after a
// warm-up and stop at a deadline (or after a job count). It reports, for
// each (size, workers) cell, jobs per second, the p50 and p99 latency of a
// job, and the process CPU time (getrusage) per job, and verifies every
// element of each worker's last job against a double-precision reference.
//
// The wait mode (how the host waits in cudaStreamSynchronize) is set for
// the whole process before the context exists: spin, yield, block, auto,
// or default (the runtime's choice, cudaSetDeviceFlags not called).
//
// Build: nvcc -O3 -arch=sm_90 -o smalljobs smalljobs.cu
// Usage: smalljobs [iters] [seconds] [wait] [max_jobs] [sizes] [workers]
//   sizes and workers are comma-separated lists (default 4096,65536,1048576
//   and 1,4,16); max_jobs bounds each worker's jobs per cell (0: none).
//   Prints one "smalljobs" line per cell.
#include "common.h"
#include "../../ptx/kernels/seed.cu"
#include "seed_check.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using Clock = std::chrono::steady_clock;

static double cpu_seconds() {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static std::vector<long> parse_list(const char* s) {
    std::vector<long> out;
    std::string str(s);
    size_t pos = 0;
    while (pos <= str.size()) {
        size_t end = str.find(',', pos);
        if (end == std::string::npos) end = str.size();
        out.push_back(strtol(str.substr(pos, end - pos).c_str(), 0, 0));
        pos = end + 1;
    }
    return out;
}

struct Worker {
    cudaStream_t stream;
    float *hin, *hout, *din, *dout;
    std::vector<double> lat_us;
    long jobs = 0;
};

static void job(Worker& w, size_t n, int iters) {
    CK(cudaMemcpyAsync(w.din, w.hin, n * 4, cudaMemcpyHostToDevice, w.stream));
    seed<<<(unsigned)((n + 255) / 256), 256, 0, w.stream>>>(w.dout, w.din, (unsigned)n, iters);
    CK(cudaGetLastError());
    CK(cudaMemcpyAsync(w.hout, w.dout, n * 4, cudaMemcpyDeviceToHost, w.stream));
    CK(cudaStreamSynchronize(w.stream));
}

int main(int argc, char** argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 100;
    double seconds = argc > 2 ? atof(argv[2]) : 0.5;
    const char* wait = argc > 3 ? argv[3] : "default";
    long max_jobs = argc > 4 ? atol(argv[4]) : 0;
    std::vector<long> sizes = parse_list(argc > 5 ? argv[5] : "4096,65536,1048576");
    std::vector<long> counts = parse_list(argc > 6 ? argv[6] : "1,4,16");

    unsigned flags = 0;
    if (!strcmp(wait, "spin")) flags = cudaDeviceScheduleSpin;
    else if (!strcmp(wait, "yield")) flags = cudaDeviceScheduleYield;
    else if (!strcmp(wait, "block")) flags = cudaDeviceScheduleBlockingSync;
    else if (!strcmp(wait, "auto")) flags = cudaDeviceScheduleAuto;
    else if (strcmp(wait, "default")) {
        fprintf(stderr, "smalljobs: wait mode %s: want spin, yield, block, auto or default\n", wait);
        return 1;
    }
    if (strcmp(wait, "default")) CK(cudaSetDeviceFlags(flags));
    CK(cudaSetDevice(0));
    CK(cudaFree(0));  // create the context now, outside every timing

    size_t max_n = *std::max_element(sizes.begin(), sizes.end());
    long max_workers = *std::max_element(counts.begin(), counts.end());
    std::vector<Worker> ws(max_workers);
    for (auto& w : ws) {
        CK(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
        CK(cudaHostAlloc(&w.hin, max_n * 4, cudaHostAllocPortable));
        CK(cudaHostAlloc(&w.hout, max_n * 4, cudaHostAllocPortable));
        CK(cudaMalloc(&w.din, max_n * 4));
        CK(cudaMalloc(&w.dout, max_n * 4));
        for (size_t i = 0; i < max_n; ++i) w.hin[i] = seed_value(seed_key(i));
    }
    std::vector<double> table(65536);
    for (unsigned k = 0; k < 65536; ++k) table[k] = reference(seed_value(k), iters);
    double tol_rel = 4.0 * (iters + 2) * 1.1920929e-7;

    int status = 0;
    for (long n : sizes) {
        for (long nw : counts) {
            // Room for every latency: no job runs faster than 1 us.
            size_t cap = (size_t)(seconds * 1e6) + 16;
            if (max_jobs > 0) cap = std::min(cap, (size_t)max_jobs);
            for (long i = 0; i < nw; ++i) {
                ws[i].lat_us.clear();
                ws[i].lat_us.reserve(cap);
                ws[i].jobs = 0;
                memset(ws[i].hout, 0, n * 4);
                for (int k = 0; k < 3; ++k) job(ws[i], n, iters);  // warm-up
            }
            std::atomic<int> ready{0};
            std::atomic<bool> go{false};
            Clock::time_point start, deadline;
            std::vector<std::thread> th;
            for (long i = 0; i < nw; ++i) {
                th.emplace_back([&, i] {
                    Worker& w = ws[i];
                    CK(cudaSetDevice(0));
                    ready++;
                    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
                    while (w.lat_us.size() < cap) {
                        auto t0 = Clock::now();
                        if (t0 >= deadline) break;
                        job(w, n, iters);
                        auto t1 = Clock::now();
                        w.lat_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
                    }
                    w.jobs = (long)w.lat_us.size();
                });
            }
            while (ready.load() < nw) std::this_thread::yield();
            double cpu0 = cpu_seconds();
            start = Clock::now();
            deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
            go.store(true, std::memory_order_release);
            for (auto& t : th) t.join();
            double wall = std::chrono::duration<double>(Clock::now() - start).count();
            double cpu = cpu_seconds() - cpu0;
            std::vector<double> all;
            long jobs = 0;
            size_t bad = 0;
            for (long i = 0; i < nw; ++i) {
                all.insert(all.end(), ws[i].lat_us.begin(), ws[i].lat_us.end());
                jobs += ws[i].jobs;
                for (long e = 0; e < n; ++e) {
                    double r = table[seed_key(e)];
                    if (!(fabs(ws[i].hout[e] - r) <= tol_rel * std::max(1.0, fabs(r)))) bad++;
                }
            }
            std::sort(all.begin(), all.end());
            auto pct = [&](double p) {
                if (all.empty()) return 0.0;
                size_t k = (size_t)std::ceil(p * all.size()) - 1;
                return all[std::min(k, all.size() - 1)];
            };
            printf("smalljobs wait=%s elems=%ld workers=%ld iters=%d jobs=%ld seconds=%.4f jobs_per_s=%.1f p50_us=%.2f p99_us=%.2f cpu_us_per_job=%.3f mismatches=%zu\n",
                   wait, n, nw, iters, jobs, wall, jobs / wall, pct(0.50), pct(0.99), jobs ? 1e6 * cpu / jobs : 0.0, bad);
            fflush(stdout);
            if (bad) status = 2;
        }
    }
    return status;
}

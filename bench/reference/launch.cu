// CUDA C reference figures for package driver's benchmarks, measured the
// same way: host submit cost of an empty-kernel launch through the driver
// API (cuLaunchKernel), and pinned H2D/D2H bandwidth for 64 MiB copies.
//
// Build, and run from the repository root (where the PTX that package
// driver's benchmarks load is):
//
//   nvcc -O3 -arch=sm_90 -o launch bench/reference/launch.cu -lcuda
//   ./launch [driver/testdata/kernels.ptx]
//
// Each figure has its own key. The first ones (launch_ns_per_op,
// launch_ns_mean, h2d_GBps, d2h_GBps) are measured as they always were, so
// that old results stay comparable. The others are like for like with the
// Go benchmarks of issue 14 (driver/bench_test.go):
//   ptx_launch_*        the same empty kernel loaded from the PTX file with
//                       cuModuleLoadData, in the primary context, launched
//                       with kernelParams pointing at an empty array, as
//                       Function.Launch does (BenchmarkLaunch*);
//   *_batch128_issue_ns the time inside the launch calls alone, 128
//                       launches at a time from an empty queue
//                       (BenchmarkLaunch*Batch, issue-ns/op);
//   h2d_drv_GBps ...    copies through the driver API on cuMemHostAlloc
//                       memory (BenchmarkCopyH2D, BenchmarkCopyH2DRaw);
//   h2d_timed_*         events around each copy: the wall rate and the
//                       GPU's own rate (BenchmarkCopyH2DTimed, gpu-MB/s);
//   h2d_batch4_*        four copies per synchronisation, with events
//                       (BenchmarkCopyH2DBatch4).
#include "common.h"
#include "../../ptx/kernels/empty.cu"

#include <cuda.h>
#include <chrono>
#include <vector>

#define CU(x)                                                                  \
    do {                                                                       \
        CUresult r_ = (x);                                                     \
        if (r_ != CUDA_SUCCESS) {                                              \
            const char *s_ = "?";                                              \
            cuGetErrorName(r_, &s_);                                           \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, s_);   \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

typedef std::chrono::steady_clock Clock;

static double since_ns(Clock::time_point t0) {
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

static const int N = 200000;
static const int BATCH = 128;

// launches measures N back-to-back launches of f on s, five times, and
// prints the best and mean ns per launch under prefix; then N launches in
// batches of BATCH from an empty queue, printing the mean time inside the
// launch calls.
static void launches(const char *prefix, CUfunction f, CUstream s, void **params) {
    for (int i = 0; i < 1000; ++i) cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
    CU(cuStreamSynchronize(s));
    double best = 1e30, sum = 0;
    for (int r = 0; r < 5; ++r) {
        auto t0 = Clock::now();
        for (int i = 0; i < N; ++i) {
            if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr) != CUDA_SUCCESS) exit(1);
        }
        CU(cuStreamSynchronize(s));
        double ns = since_ns(t0) / N;
        if (ns < best) best = ns;
        sum += ns;
    }
    printf("%slaunch_ns_per_op=%.1f %slaunch_ns_mean=%.1f\n", prefix, best, prefix, sum / 5);
    double issue = 0;
    for (int done = 0; done < N; done += BATCH) {
        auto t0 = Clock::now();
        for (int i = 0; i < BATCH; ++i) {
            if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr) != CUDA_SUCCESS) exit(1);
        }
        issue += since_ns(t0);
        CU(cuStreamSynchronize(s));
    }
    printf("%slaunch_batch128_issue_ns=%.1f\n", prefix, issue / N);
}

// copies runs `copies` copies of bytes between h and d on s, perSync per
// synchronisation, with timing events around each group when timed, and
// prints the wall rate (and the GPU's) under key.
static void copies(const char *key, bool toDevice, void *h, CUdeviceptr d, size_t bytes, CUstream s, int copies,
                   int perSync, bool timed) {
    CUevent e0, e1;
    CU(cuEventCreate(&e0, CU_EVENT_DEFAULT));
    CU(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    double gpu_ms = 0;
    auto t0 = Clock::now();
    for (int done = 0; done < copies; done += perSync) {
        if (timed) CU(cuEventRecord(e0, s));
        for (int i = 0; i < perSync; ++i) {
            if (toDevice) CU(cuMemcpyHtoDAsync(d, h, bytes, s));
            else CU(cuMemcpyDtoHAsync(h, d, bytes, s));
        }
        if (timed) CU(cuEventRecord(e1, s));
        CU(cuStreamSynchronize(s));
        if (timed) {
            float ms;
            CU(cuEventElapsedTime(&ms, e0, e1));
            gpu_ms += ms;
        }
    }
    double sec = since_ns(t0) / 1e9;
    double total = (double)bytes * copies;
    if (timed) printf("%s_wall_GBps=%.2f %s_gpu_GBps=%.2f\n", key, total / sec / 1e9, key, total / (gpu_ms / 1e3) / 1e9);
    else printf("%s_GBps=%.2f\n", key, total / sec / 1e9);
    CU(cuEventDestroy(e0));
    CU(cuEventDestroy(e1));
}

int main(int argc, char **argv) {
    const char *ptxPath = argc > 1 ? argv[1] : "driver/testdata/kernels.ptx";
    CK(cudaFree(0));
    CUfunction f;
    CK(cudaGetFuncBySymbol(&f, (const void*)empty));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    launches("", f, (CUstream)s, nullptr);

    // The same kernel as package driver loads it: from PTX, through the
    // driver API, in the primary context that cudaFree(0) made current,
    // with kernelParams pointing at an empty array.
    FILE *fp = fopen(ptxPath, "rb");
    if (!fp) {
        fprintf(stderr, "launch: %s not found (run from the repository root, or pass the PTX path): "
                        "skipping the ptx_ figures\n", ptxPath);
    } else {
        std::vector<char> ptx;
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, fp)) > 0) ptx.insert(ptx.end(), buf, buf + n);
        fclose(fp);
        ptx.push_back(0);
        CUmodule mod;
        CU(cuModuleLoadData(&mod, ptx.data()));
        CUfunction pf;
        CU(cuModuleGetFunction(&pf, mod, "empty"));
        void *noParams[1] = {nullptr};
        launches("ptx_", pf, (CUstream)s, noParams);
        CU(cuModuleUnload(mod));
    }

    const size_t bytes = 64 << 20;
    void *h, *d;
    CK(cudaMallocHost(&h, bytes));
    CK(cudaMalloc(&d, bytes));
    // Measured as package driver's BenchmarkCopyH2D/D2H do: 200 copies,
    // each followed by a synchronisation, and the mean rate reported.
    const int ncopies = 200;
    for (int dir = 0; dir < 2; ++dir) {
        auto t0 = Clock::now();
        for (int r = 0; r < ncopies; ++r) {
            if (dir == 0) CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
            else CK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
        }
        double sec = std::chrono::duration<double>(Clock::now() - t0).count();
        printf("%s_GBps=%.2f\n", dir == 0 ? "h2d" : "d2h", (double)bytes * ncopies / sec / 1e9);
    }
    CK(cudaFreeHost(h));
    CK(cudaFree(d));

    // Like for like with Go: cuMemHostAlloc (flags 0, as AllocHost with
    // zero options), cuMemAlloc, cuMemcpy*Async and cuStreamSynchronize.
    void *dh;
    CUdeviceptr dd;
    CU(cuMemHostAlloc(&dh, bytes, 0));
    CU(cuMemAlloc(&dd, bytes));
    CUstream cs = (CUstream)s;
    copies("h2d_drv", true, dh, dd, bytes, cs, ncopies, 1, false);
    copies("d2h_drv", false, dh, dd, bytes, cs, ncopies, 1, false);
    copies("h2d_timed", true, dh, dd, bytes, cs, ncopies, 1, true);
    copies("d2h_timed", false, dh, dd, bytes, cs, ncopies, 1, true);
    copies("h2d_batch4", true, dh, dd, bytes, cs, ncopies, 4, true);
    copies("d2h_batch4", false, dh, dd, bytes, cs, ncopies, 4, true);
    CU(cuMemFreeHost(dh));
    CU(cuMemFree(dd));
    return 0;
}

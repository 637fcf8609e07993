// dlopen.c measures, in plain C through the driver API, what package
// driver's launch and copy benchmarks measure, with the driver library
// loaded at run time by dlopen(RTLD_NOW), as purego loads it, and every
// entry point found with dlsym and called through a function pointer. Set
// beside launch.cu (linked to libcuda at build time) it tells the cost of
// loading the driver at run time, which a cgo-free binding must do, apart
// from the binding's own cost. No CUDA header or nvcc is needed:
//
//   cc -O2 -o dl_dlopen dlopen.c -ldl && ./dl_dlopen driver/testdata/kernels.ptx [spin|yield|block]
//
// A second argument sets the primary context's wait mode before it is
// retained (cuDevicePrimaryCtxSetFlags_v2), as the Go benchmarks'
// NewContextWith does; without it the context keeps the driver's default.
// The PTX's `empty` kernel is the one the Go benchmarks launch. Last, it
// runs cloops.c's loops (the ones a Go process calls in
// BenchmarkLaunchLoopInC and BenchmarkCopyLoopInCH2D / D2H), so that the same code
// is timed in both processes.
#include "cloops.c"
#include "dlload.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef void *H; // any CUDA handle

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDevicePrimaryCtxRetain)(H *, int);
static CUresult (*cuDevicePrimaryCtxSetFlags)(int, unsigned);
static CUresult (*cuCtxSetCurrent)(H);
static CUresult (*cuModuleLoadData)(H *, const void *);
static CUresult (*cuModuleGetFunction)(H *, H, const char *);
static CUresult (*cuStreamCreate)(H *, unsigned);
static CUresult (*cuStreamSynchronize)(H);
static CUresult (*cuLaunchKernel)(H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void **, void **);
static CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
static CUresult (*cuMemAlloc)(uint64_t *, size_t);
static CUresult (*cuMemcpyHtoDAsync)(uint64_t, const void *, size_t, H);
static CUresult (*cuMemcpyDtoHAsync)(void *, uint64_t, size_t, H);
static CUresult (*cuEventCreate)(H *, unsigned);
static CUresult (*cuEventRecord)(H, H);
static CUresult (*cuEventSynchronize)(H);
static CUresult (*cuEventElapsedTime)(float *, H, H);

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    unsigned sched = 0;
    const char *how = "dlopen";
    if (argc == 3) {
        static const char *names[] = {"spin", "yield", "", "block"};
        static const unsigned flags[] = {1, 2, 0, 4}; // CU_CTX_SCHED_*
        for (int i = 0; i < 4; ++i)
            if (names[i][0] && strcmp(argv[2], names[i]) == 0) sched = flags[i], how = names[i];
        if (!sched) {
            fprintf(stderr, "wait mode %s: want spin, yield or block\n", argv[2]);
            return 2;
        }
    } else if (argc != 2) {
        fprintf(stderr, "usage: %s kernels.ptx [spin|yield|block]\n", argv[0]);
        return 2;
    }
    dlopen_driver();
    *(void **)&cuInit = sym("cuInit");
    *(void **)&cuDevicePrimaryCtxRetain = sym("cuDevicePrimaryCtxRetain");
    *(void **)&cuDevicePrimaryCtxSetFlags = sym("cuDevicePrimaryCtxSetFlags_v2");
    *(void **)&cuCtxSetCurrent = sym("cuCtxSetCurrent");
    *(void **)&cuModuleLoadData = sym("cuModuleLoadData");
    *(void **)&cuModuleGetFunction = sym("cuModuleGetFunction");
    *(void **)&cuStreamCreate = sym("cuStreamCreate");
    *(void **)&cuStreamSynchronize = sym("cuStreamSynchronize");
    *(void **)&cuLaunchKernel = sym("cuLaunchKernel");
    *(void **)&cuMemHostAlloc = sym("cuMemHostAlloc");
    *(void **)&cuMemAlloc = sym("cuMemAlloc_v2");
    *(void **)&cuMemcpyHtoDAsync = sym("cuMemcpyHtoDAsync_v2");
    *(void **)&cuMemcpyDtoHAsync = sym("cuMemcpyDtoHAsync_v2");
    *(void **)&cuEventCreate = sym("cuEventCreate");
    *(void **)&cuEventRecord = sym("cuEventRecord");
    *(void **)&cuEventSynchronize = sym("cuEventSynchronize");
    *(void **)&cuEventElapsedTime = sym("cuEventElapsedTime");

    char *ptx = read_file(argv[1]);

    H ctx, mod, fn, s;
    CK(cuInit(0));
    if (sched) CK(cuDevicePrimaryCtxSetFlags(0, sched));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(cuModuleLoadData(&mod, ptx));
    CK(cuModuleGetFunction(&fn, mod, "empty"));
    CK(cuStreamCreate(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    void *noargs[1] = {0};

    // Back to back, as BenchmarkLaunch: 200000 launches, then a sync.
    const int N = 200000;
    for (int i = 0; i < 1000; ++i) CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, noargs, 0));
    CK(cuStreamSynchronize(s));
    double best = 1e30, sum = 0;
    for (int r = 0; r < 5; ++r) {
        double t0 = now_ns();
        for (int i = 0; i < N; ++i) CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, noargs, 0));
        CK(cuStreamSynchronize(s));
        double ns = (now_ns() - t0) / N;
        if (ns < best) best = ns;
        sum += ns;
    }
    printf("%s_launch_ns_per_op=%.1f %s_launch_ns_mean=%.1f\n", how, best, how, sum / 5);

    // From an empty queue, as BenchmarkLaunchBatch: 128 launches timed, then
    // a sync outside the time.
    double issue = 0;
    for (int b = 0; b < N / 128; ++b) {
        double t0 = now_ns();
        for (int i = 0; i < 128; ++i) CK(cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, s, noargs, 0));
        issue += now_ns() - t0;
        CK(cuStreamSynchronize(s));
    }
    printf("%s_launch_batch128_issue_ns=%.1f\n", how, issue / (N / 128 * 128));

    // 64 MiB pinned copies, each followed by a sync, as BenchmarkCopyH2D/D2H,
    // with events around each copy for the device's own time.
    const size_t bytes = 64 << 20;
    const int copies = 200;
    void *h;
    uint64_t d;
    H e0, e1;
    CK(cuMemHostAlloc(&h, bytes, 0));
    CK(cuMemAlloc(&d, bytes));
    CK(cuEventCreate(&e0, 0));
    CK(cuEventCreate(&e1, 0));
    for (int dir = 0; dir < 2; ++dir) {
        double gpu_ms = 0;
        double t0 = now_ns();
        for (int r = 0; r < copies; ++r) {
            CK(cuEventRecord(e0, s));
            if (dir == 0)
                CK(cuMemcpyHtoDAsync(d, h, bytes, s));
            else
                CK(cuMemcpyDtoHAsync(h, d, bytes, s));
            CK(cuEventRecord(e1, s));
            CK(cuStreamSynchronize(s));
            float ms;
            CK(cuEventElapsedTime(&ms, e0, e1));
            gpu_ms += ms;
        }
        double sec = (now_ns() - t0) / 1e9;
        const char *dn = dir == 0 ? "h2d" : "d2h";
        printf("%s_%s_wall_GBps=%.2f %s_%s_gpu_GBps=%.2f\n", how, dn, (double)bytes * copies / sec / 1e9, how, dn,
               (double)bytes * copies / (gpu_ms / 1e3) / 1e9);
    }

    // cloops.c's loops, as the Go process calls them.
    int64_t ns = launch_loop((void *)cuLaunchKernel, (void *)cuStreamSynchronize, fn, s, N, 0);
    int64_t issue_ns = launch_loop((void *)cuLaunchKernel, (void *)cuStreamSynchronize, fn, s, N, 128);
    int64_t h2d_ns = copy_loop((void *)cuMemcpyHtoDAsync, (void *)cuStreamSynchronize, d, (uint64_t)(uintptr_t)h, bytes, s, copies);
    int64_t d2h_ns = copy_loop((void *)cuMemcpyDtoHAsync, (void *)cuStreamSynchronize, (uint64_t)(uintptr_t)h, d, bytes, s, copies);
    if (ns < 0 || issue_ns < 0 || h2d_ns < 0 || d2h_ns < 0) {
        fprintf(stderr, "cloops.c: a loop failed\n");
        return 1;
    }
    printf("cloop_launch_ns_per_op=%.1f cloop_launch_batch128_issue_ns=%.1f\n", (double)ns / N, (double)issue_ns / N);
    printf("cloop_h2d_GBps=%.2f cloop_d2h_GBps=%.2f\n", (double)bytes * copies / h2d_ns, (double)bytes * copies / d2h_ns);
    return 0;
}

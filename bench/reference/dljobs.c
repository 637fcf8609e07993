// dljobs.c runs bench/reference/smalljobs.cu's job (a copy of n floats in,
// the seed kernel, a copy out, a stream synchronisation) in plain C
// through the driver API, with the driver loaded by dlopen as purego loads
// it: cloops.c's job_loop, in a C process. Beside the C++ twin (the
// runtime API, in its own process) and driver's BenchmarkSmallJobLoopInC
// (the same job_loop inside a Go process) it tells whether what a small
// job costs more from Go comes from the driver API, the process, or Go's
// calls (issue 14). No CUDA header or nvcc is needed:
//
// from the repository's root:
//
//   cc -O2 -o dljobs bench/reference/dljobs.c -ldl -lm && ./dljobs ptx/kernels/seed.ptx [jobs] [rounds] [elems]
//
// It prints one dljobs line per round: the nanoseconds per job, back to
// back on one stream, after a warm-up, the primary context in the
// driver's default wait mode. It checks every element of the last job.
#include "cloops.c"
#include "dlload.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef CUresult (*init_fn)(unsigned);
typedef CUresult (*retain_fn)(H *, int);
typedef CUresult (*set_fn)(H);
typedef CUresult (*modload_fn)(H *, const void *);
typedef CUresult (*getfn_fn)(H *, H, const char *);
typedef CUresult (*screate_fn)(H *, unsigned);
typedef CUresult (*hostalloc_fn)(void **, size_t, unsigned);
typedef CUresult (*alloc_fn)(uint64_t *, size_t);

int main(int argc, char **argv) {
    if (argc < 2 || argc > 5) {
        fprintf(stderr, "usage: %s seed.ptx [jobs] [rounds] [elems]\n", argv[0]);
        return 2;
    }
    long jobs = argc > 2 ? atol(argv[2]) : 30000, rounds = argc > 3 ? atol(argv[3]) : 1;
    long n = argc > 4 ? atol(argv[4]) : 4096;
    const int iters = 100;
    if (jobs < 1 || rounds < 1 || n < 1 || n > (1 << 28)) {
        fprintf(stderr, "dljobs: jobs and rounds must be positive, elems 1 to 2^28\n");
        return 2;
    }
    char *ptx = read_file(argv[1]);
    dlopen_driver();
    H ctx, mod, fn, s;
    CK(((init_fn)sym("cuInit"))(0));
    CK(((retain_fn)sym("cuDevicePrimaryCtxRetain"))(&ctx, 0));
    CK(((set_fn)sym("cuCtxSetCurrent"))(ctx));
    CK(((modload_fn)sym("cuModuleLoadData"))(&mod, ptx));
    CK(((getfn_fn)sym("cuModuleGetFunction"))(&fn, mod, "seed"));
    CK(((screate_fn)sym("cuStreamCreate"))(&s, 1 /* CU_STREAM_NON_BLOCKING */));
    float *hin, *hout;
    uint64_t din, dout;
    CK(((hostalloc_fn)sym("cuMemHostAlloc"))((void **)&hin, n * 4, 0));
    CK(((hostalloc_fn)sym("cuMemHostAlloc"))((void **)&hout, n * 4, 0));
    CK(((alloc_fn)sym("cuMemAlloc_v2"))(&din, n * 4));
    CK(((alloc_fn)sym("cuMemAlloc_v2"))(&dout, n * 4));
    for (long i = 0; i < n; ++i) hin[i] = (float)(i % 1000) / 500 - 1;
    void *h2d = sym("cuMemcpyHtoDAsync_v2"), *d2h = sym("cuMemcpyDtoHAsync_v2");
    void *launch = sym("cuLaunchKernel"), *sync = sym("cuStreamSynchronize");

    int64_t r = job_loop(h2d, launch, d2h, sync, fn, s, din, dout, (uint64_t)(uintptr_t)hin, (uint64_t)(uintptr_t)hout, n,
                         iters, 100); // warm-up
    memset(hout, 0, n * 4);              // the check below sees the timed jobs' output
    for (long k = 0; k < rounds && r >= 0; ++k) {
        r = job_loop(h2d, launch, d2h, sync, fn, s, din, dout, (uint64_t)(uintptr_t)hin, (uint64_t)(uintptr_t)hout, n,
                     iters, jobs);
        if (r >= 0) printf("dljobs elems=%ld jobs=%ld ns_per_job=%.1f\n", n, jobs, (double)r / jobs);
    }
    if (r < 0) {
        fprintf(stderr, "dljobs: job_loop failed: CUresult %lld\n", (long long)-r);
        return 1;
    }
    // seed_check.h's reference and tolerance, written out: that header is
    // C++ and needs the CUDA headers, which this program does without.
    long bad = 0;
    const double tol = 4.0 * (iters + 2) * 1.1920929e-7;
    for (long i = 0; i < n; ++i) {
        double x = hin[i], v = x * 0.5 + x * x * 0.1;
        for (int k = 0; k < iters; ++k) v += sin(v * 0.01);
        if (!(fabs(hout[i] - v) <= tol * (fabs(v) > 1 ? fabs(v) : 1))) bad++;
    }
    if (bad) {
        fprintf(stderr, "dljobs: %ld of %ld elements wrong\n", bad, n);
        return 2;
    }
    return 0;
}

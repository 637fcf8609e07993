// cloops.c is the C loops that dlopen.c and dljobs.c run, as a shared
// library for a Go process to call too: launches (driver's
// BenchmarkLaunchLoopInC and BenchmarkLaunchPaired), copies
// (BenchmarkCopyLoopInCH2D / D2H) and small jobs (job_loop,
// BenchmarkSmallJobLoopInC). Each loop runs in C, inside the Go process,
// with one transition from Go for all of its calls. Beside the same loops
// in a C process and the same calls made from Go one by one, they tell
// whether what a call costs more from Go is the transition, the binding
// or the process (issue 14).
//
//   cc -O2 -shared -fPIC -o cloops.so cloops.c
//   OVERLAP_CLOOPS=$PWD/cloops.so driver.test -test.bench 'LoopInC'
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef int CUresult;
typedef void *H;
typedef CUresult (*launch_fn)(H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void **,
                              void **);
typedef CUresult (*sync_fn)(H);
typedef CUresult (*copy_fn)(uint64_t, uint64_t, size_t, H); // cuMemcpy{HtoD,DtoH}Async_v2

static int64_t cloop_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// launch_loop launches fn (no parameters, one thread) n times on stream s
// through the driver's cuLaunchKernel at launch, in batches of batch
// launches with a cuStreamSynchronize (at sync) after each, or back to back
// with one at the end when batch is 0. It returns the nanoseconds spent
// inside the launches of the batches (batch > 0) or in all (batch 0), or
// minus the first failing CUresult.
int64_t launch_loop(void *launch, void *sync, void *fn, void *s, int64_t n, int64_t batch) {
    launch_fn l = (launch_fn)launch;
    sync_fn y = (sync_fn)sync;
    void *noargs[1] = {0};
    CUresult r;
    if (batch == 0) {
        int64_t t0 = cloop_now_ns();
        for (int64_t i = 0; i < n; ++i)
            if ((r = l(fn, 1, 1, 1, 1, 1, 1, 0, s, noargs, 0)) != 0) return -(int64_t)r;
        if ((r = y(s)) != 0) return -(int64_t)r;
        return cloop_now_ns() - t0;
    }
    int64_t issue = 0;
    for (int64_t done = 0; done < n; done += batch) {
        int64_t k = n - done < batch ? n - done : batch;
        int64_t t0 = cloop_now_ns();
        for (int64_t i = 0; i < k; ++i)
            if ((r = l(fn, 1, 1, 1, 1, 1, 1, 0, s, noargs, 0)) != 0) return -(int64_t)r;
        issue += cloop_now_ns() - t0;
        if ((r = y(s)) != 0) return -(int64_t)r;
    }
    return issue;
}

// copy_loop copies bytes from src to dst n times on stream s through copy
// (cuMemcpyHtoDAsync_v2 or cuMemcpyDtoHAsync_v2, whose arguments are both
// destination, source, size, stream), each followed by a
// cuStreamSynchronize, as dlopen.c's copies without the events. It returns
// the nanoseconds of all, or minus the first failing CUresult.
int64_t copy_loop(void *copy, void *sync, uint64_t dst, uint64_t src, int64_t bytes, void *s, int64_t n) {
    copy_fn c = (copy_fn)copy;
    sync_fn y = (sync_fn)sync;
    CUresult r;
    int64_t t0 = cloop_now_ns();
    for (int64_t i = 0; i < n; ++i) {
        if ((r = c(dst, src, (size_t)bytes, s)) != 0) return -(int64_t)r;
        if ((r = y(s)) != 0) return -(int64_t)r;
    }
    return cloop_now_ns() - t0;
}

// copy_sync_once is one of copy_loop's steps: a copy and a synchronisation,
// for a Go loop to call (one transition from Go for the two calls). It
// returns 0, or minus the failing CUresult.
int64_t copy_sync_once(void *copy, void *sync, uint64_t dst, uint64_t src, int64_t bytes, void *s) {
    CUresult r;
    if ((r = ((copy_fn)copy)(dst, src, (size_t)bytes, s)) != 0) return -(int64_t)r;
    if ((r = ((sync_fn)sync)(s)) != 0) return -(int64_t)r;
    return 0;
}

// sync_call is cuStreamSynchronize (at sync) on s called from a C frame,
// for a Go loop that makes the copy itself. It returns 0, or minus the
// failing CUresult.
int64_t sync_call(void *sync, void *s) {
    CUresult r = ((sync_fn)sync)(s);
    return r ? -(int64_t)r : 0;
}

// job_loop runs jobs small jobs as bench/reference/smalljobs.cu's job()
// makes them, through the driver API: copy n floats from hin to din
// (h2d: cuMemcpyHtoDAsync_v2), launch the seed kernel fn on them into dout
// ((n + 255) / 256 blocks of 256 threads, iters iterations), copy dout
// back to hout (d2h: cuMemcpyDtoHAsync_v2) and wait (sync:
// cuStreamSynchronize), all on stream s. driver's BenchmarkSmallJobLoopInC
// runs it inside the Go process, entered once, beside the same four calls
// made from Go (issue 14). It returns the nanoseconds of all the jobs, or
// minus the first failing CUresult.
int64_t job_loop(void *h2d, void *launch, void *d2h, void *sync, void *fn, void *s, uint64_t din, uint64_t dout,
                 uint64_t hin, uint64_t hout, int64_t n, int64_t iters, int64_t jobs) {
    copy_fn in = (copy_fn)h2d, out = (copy_fn)d2h;
    launch_fn l = (launch_fn)launch;
    sync_fn y = (sync_fn)sync;
    unsigned n32 = (unsigned)n;
    int it32 = (int)iters;
    void *params[4] = {&dout, &din, &n32, &it32};
    unsigned grid = (unsigned)((n + 255) / 256);
    CUresult r;
    int64_t t0 = cloop_now_ns();
    for (int64_t j = 0; j < jobs; ++j) {
        if ((r = in(din, hin, (size_t)n * 4, s)) != 0) return -(int64_t)r;
        if ((r = l(fn, grid, 1, 1, 256, 1, 1, 0, s, params, 0)) != 0) return -(int64_t)r;
        if ((r = out(hout, dout, (size_t)n * 4, s)) != 0) return -(int64_t)r;
        if ((r = y(s)) != 0) return -(int64_t)r;
    }
    return cloop_now_ns() - t0;
}

// noop_call returns success and does nothing: driver's
// BenchmarkLaunchBindingCold puts it in place of cuLaunchKernel to time
// the binding's own work right after a real launch.
int noop_call(void) { return 0; }

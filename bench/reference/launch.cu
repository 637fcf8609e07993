// CUDA C reference figures for package driver's benchmarks, measured the
// same way: host submit cost of an empty-kernel launch through the driver
// API (cuLaunchKernel), and pinned H2D/D2H bandwidth for 64 MiB copies.
//
// Build: nvcc -O3 -arch=sm_90 -o launch launch.cu -lcuda
#include "common.h"
#include "../../ptx/kernels/empty.cu"

#include <cuda.h>
#include <chrono>

int main() {
    CK(cudaFree(0));
    CUfunction f;
    CK(cudaGetFuncBySymbol(&f, (const void*)empty));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    const int N = 200000;
    for (int i = 0; i < 1000; ++i) cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)s, nullptr, nullptr);
    CK(cudaStreamSynchronize(s));
    double best = 1e30, sum = 0;
    for (int r = 0; r < 5; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < N; ++i) {
            if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)s, nullptr, nullptr) != CUDA_SUCCESS) return 1;
        }
        CK(cudaStreamSynchronize(s));
        double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / N;
        if (ns < best) best = ns;
        sum += ns;
    }
    printf("launch_ns_per_op=%.1f launch_ns_mean=%.1f\n", best, sum / 5);

    const size_t bytes = 64 << 20;
    void *h, *d;
    CK(cudaMallocHost(&h, bytes));
    CK(cudaMalloc(&d, bytes));
    // Measured as package driver's BenchmarkCopyH2D/D2H do: 200 copies,
    // each followed by a synchronisation, and the mean rate reported.
    const int copies = 200;
    for (int dir = 0; dir < 2; ++dir) {
        auto t0 = std::chrono::steady_clock::now();
        for (int r = 0; r < copies; ++r) {
            if (dir == 0) CK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s));
            else CK(cudaMemcpyAsync(h, d, bytes, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
        }
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("%s_GBps=%.2f\n", dir == 0 ? "h2d" : "d2h", (double)bytes * copies / sec / 1e9);
    }
    return 0;
}

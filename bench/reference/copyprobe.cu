// What the device waits on between small copies: pinned copies of one
// chunk size, back to back, issued in several ways, each timed with events
// around the whole batch (best of 5). For 64K-element chunks (256 KiB) the
// pipeline reaches 0.70 of its bound; this program asks whether the copy
// engines themselves leave gaps between copies, and whether more copies in
// flight, more streams or a batched copy closes them.
//
// Modes (each for H2D alone, D2H alone, and both directions at once):
//   s1     one stream per direction, copies back to back
//   s2/s4  two or four streams per direction, copies dealt round-robin
//   batch  one cudaMemcpyBatchAsync per direction for the whole batch
//          (CUDA 12.8 and later; built only with -DWITH_BATCH)
//
// Build: nvcc -O3 -arch=sm_90 [-DWITH_BATCH] -o copyprobe copyprobe.cu
// Usage: copyprobe [chunk_bytes] [chunks]   (default 262144 1024)
// Prints one "copyprobe" line per mode and direction with GB/s and the
// time per copy.
#include "common.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

static const int kMaxStreams = 4;

struct Dir {
    bool h2d;
    char *host, *dev;
    cudaStream_t s[kMaxStreams];
};

static void issue(Dir& d, const std::string& mode, size_t chunk, int chunks) {
    int ns = mode == "s2" ? 2 : mode == "s4" ? 4 : 1;
#ifdef WITH_BATCH
    if (mode == "batch") {
        std::vector<void*> dst(chunks), src(chunks);
        std::vector<size_t> sizes(chunks, chunk);
        for (int i = 0; i < chunks; ++i) {
            char* h = d.host + (size_t)i * chunk;
            char* g = d.dev + (size_t)i * chunk;
            dst[i] = d.h2d ? (void*)g : (void*)h;
            src[i] = d.h2d ? (void*)h : (void*)g;
        }
        cudaMemcpyAttributes attr;
        memset(&attr, 0, sizeof attr);
        attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
        size_t idx = 0;
        CK(cudaMemcpyBatchAsync((const void**)dst.data(), (const void**)src.data(), sizes.data(), chunks, &attr, &idx, 1, d.s[0]));
        return;
    }
#endif
    for (int i = 0; i < chunks; ++i) {
        char* h = d.host + (size_t)i * chunk;
        char* g = d.dev + (size_t)i * chunk;
        if (d.h2d) CK(cudaMemcpyAsync(g, h, chunk, cudaMemcpyHostToDevice, d.s[i % ns]));
        else CK(cudaMemcpyAsync(h, g, chunk, cudaMemcpyDeviceToHost, d.s[i % ns]));
    }
}

int main(int argc, char** argv) {
    size_t chunk = argc > 1 ? strtoull(argv[1], 0, 0) : 262144;
    int chunks = argc > 2 ? atoi(argv[2]) : 1024;
    size_t total = chunk * chunks;
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("copyprobe device=%s asyncEngineCount=%d\n", prop.name, prop.asyncEngineCount);
    Dir dirs[2];
    for (int k = 0; k < 2; ++k) {
        dirs[k].h2d = k == 0;
        CK(cudaHostAlloc(&dirs[k].host, total, cudaHostAllocPortable));
        memset(dirs[k].host, k + 1, total);
        CK(cudaMalloc(&dirs[k].dev, total));
        for (auto& s : dirs[k].s) CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    }
    cudaStream_t origin;
    CK(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking));
    cudaEvent_t start, end, fork, join[2 * kMaxStreams];
    CK(cudaEventCreate(&start));
    CK(cudaEventCreate(&end));
    CK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    for (auto& e : join) CK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

    std::vector<std::string> modes = {"s1", "s2", "s4"};
#ifdef WITH_BATCH
    modes.push_back("batch");
#endif
    const char* which[] = {"h2d", "d2h", "both"};
    for (auto& mode : modes) {
        for (int w = 0; w < 3; ++w) {
            double best = 1e30;
            for (int rep = 0; rep < 5; ++rep) {
                // Every stream starts after the start event and the end
                // event waits for every stream, so that the time covers the
                // whole batch and nothing else.
                CK(cudaEventRecord(start, origin));
                CK(cudaEventRecord(fork, origin));
                int nj = 0;
                for (int k = 0; k < 2; ++k) {
                    if (w != 2 && w != k) continue;
                    for (auto s : dirs[k].s) CK(cudaStreamWaitEvent(s, fork, 0));
                    issue(dirs[k], mode, chunk, chunks);
                    for (auto s : dirs[k].s) {
                        CK(cudaEventRecord(join[nj], s));
                        CK(cudaStreamWaitEvent(origin, join[nj++], 0));
                    }
                }
                CK(cudaEventRecord(end, origin));
                CK(cudaEventSynchronize(end));
                float ms;
                CK(cudaEventElapsedTime(&ms, start, end));
                best = std::min(best, (double)ms);
            }
            double bytes = (double)total * (w == 2 ? 2 : 1);
            printf("copyprobe mode=%s dir=%s chunk_bytes=%zu chunks=%d ms=%.4f GBps=%.2f us_per_copy=%.3f\n", mode.c_str(), which[w], chunk, chunks, best,
                   bytes / best / 1e6, best * 1e3 / chunks);
            fflush(stdout);
        }
    }
    return 0;
}

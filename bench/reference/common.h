// Shared helpers for the CUDA C++ reference programs.
#pragma once
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                  \
    do {                                                                       \
        cudaError_t e_ = (x);                                                  \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,         \
                    cudaGetErrorString(e_));                                   \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

// The input pattern overlap uses everywhere (pipeline.SeedInput in Go):
// 65536 quantised values in [-1, 1), scattered by a multiplicative hash.
static inline unsigned seed_key(unsigned long long i) {
    return (unsigned)((unsigned)(i * 2654435761ull) >> 16);
}
static inline float seed_value(unsigned key) {
    return (float)((int)key - 32768) / 32768.0f;
}

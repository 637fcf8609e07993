// The seed kernel's CPU reference for the CUDA C++ reference programs:
// the float64 value of each element, and a check of every output element
// against it with the tolerance of kernels.Seed.Verify in Go.
#pragma once
#include "common.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

static double reference(float x, int iters) {
    double v = (double)x * 0.5 + (double)x * x * 0.1;
    for (int k = 0; k < iters; ++k) v += sin(v * 0.01);
    return v;
}

// verify counts the elements that miss the reference by more than the
// tolerance of kernels.Seed.Verify: 4·(iters+2)·2⁻²³ relative to max(1, |ref|).
static size_t verify(const float* out, size_t n, int iters) {
    std::vector<double> table(65536);
    for (unsigned k = 0; k < 65536; ++k) table[k] = reference(seed_value(k), iters);
    unsigned nt = std::max(1u, std::thread::hardware_concurrency());
    std::vector<size_t> bad(nt, 0);
    std::vector<std::thread> th;
    for (unsigned t = 0; t < nt; ++t) {
        th.emplace_back([&, t] {
            size_t lo = n * t / nt, hi = n * (t + 1) / nt;
            double tol_rel = 4.0 * (iters + 2) * 1.1920929e-7;
            for (size_t i = lo; i < hi; ++i) {
                double r = table[seed_key(i)];
                if (!(fabs(out[i] - r) <= tol_rel * std::max(1.0, fabs(r)))) bad[t]++;
            }
        });
    }
    for (auto& x : th) x.join();
    size_t total = 0;
    for (auto b : bad) total += b;
    return total;
}

/* A fake cuBLAS for package cublas's tests without a GPU, run beside
 * the fake CUDA driver (internal/fakecuda), whose device memory is host
 * memory: the GEMMs compute, column-major as cuBLAS does, on the host at
 * the call, so that a test can check the row-major helpers' mapping. It
 * exports the entry points package cublas binds, with cublas_api.h's
 * prototypes, and controls (fake_*):
 *
 *   fake_live()          handles created and not destroyed;
 *   fake_violations()    calls made without the handle's context current
 *                        (read through the fake driver's cuCtxGetCurrent),
 *                        or on a handle that is not live;
 *   fake_last(buf, n)    the last call and its arguments, as text;
 *   fake_fail(name, c)   every later call of name returns status c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct handle {
    int magic;
    uintptr_t ctx, stream;
    int math;
} handle;

#define MAGIC 0x63626c73

static int live, violations;
static char last[512], fail_name[64];
static int fail_code;

int fake_live(void) { return live; }
int fake_violations(void) { return violations; }
void fake_last(char *buf, size_t n) { snprintf(buf, n, "%s", last); }
void fake_fail(const char *name, int code) {
    snprintf(fail_name, sizeof fail_name, "%s", name);
    fail_code = code;
}
#define FAILPOINT(n) do { if (fail_code && strcmp(fail_name, n) == 0) return fail_code; } while (0)

/* current returns the calling thread's context, 0 without one. */
static uintptr_t current(void) {
    static int (*get)(uintptr_t *);
    if (!get) get = (int (*)(uintptr_t *))dlsym(RTLD_DEFAULT, "cuCtxGetCurrent");
    uintptr_t c = 0;
    if (get) get(&c);
    return c;
}

/* use checks a handle and that its context is current. */
static int use(handle *h) {
    if (!h || h->magic != MAGIC) {
        violations++;
        return 0;
    }
    if (current() != h->ctx) violations++;
    return 1;
}

int cublasCreate_v2(handle **out) {
    FAILPOINT("cublasCreate_v2");
    if (!out) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    uintptr_t c = current();
    if (!c) {
        violations++;
        return 1; /* CUBLAS_STATUS_NOT_INITIALIZED */
    }
    handle *h = calloc(1, sizeof *h);
    h->magic = MAGIC;
    h->ctx = c;
    live++;
    *out = h;
    snprintf(last, sizeof last, "cublasCreate_v2");
    return 0;
}

int cublasDestroy_v2(handle *h) {
    if (!use(h)) return 1;
    h->magic = 0;
    free(h);
    live--;
    snprintf(last, sizeof last, "cublasDestroy_v2");
    FAILPOINT("cublasDestroy_v2");
    return 0;
}

int cublasGetVersion_v2(handle *h, int *v) {
    FAILPOINT("cublasGetVersion_v2");
    if (!use(h)) return 1;
    if (!v) return 7;
    *v = 120804;
    return 0;
}

int cublasSetStream_v2(handle *h, uintptr_t s) {
    FAILPOINT("cublasSetStream_v2");
    if (!use(h)) return 1;
    h->stream = s;
    snprintf(last, sizeof last, "cublasSetStream_v2 stream=%s", s ? "set" : "null");
    return 0;
}

int cublasSetMathMode(handle *h, int m) {
    FAILPOINT("cublasSetMathMode");
    if (!use(h)) return 1;
    if (m != 0 && m != 2 && m != 3) return 7;
    h->math = m;
    snprintf(last, sizeof last, "cublasSetMathMode %d", m);
    return 0;
}

int cublasGetMathMode(handle *h, int *m) {
    FAILPOINT("cublasGetMathMode");
    if (!use(h)) return 1;
    if (!m) return 7;
    *m = h->math;
    return 0;
}

/* gemm computes C = alpha op(A) op(B) + beta C, column-major, in double. */
static void gemm(int ta, int tb, int m, int n, int k, float alpha, const float *A, int lda,
                 const float *B, int ldb, float beta, float *C, int ldc) {
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double a = ta ? A[p + (size_t)i * lda] : A[i + (size_t)p * lda];
                double b = tb ? B[j + (size_t)p * ldb] : B[p + (size_t)j * ldb];
                s += a * b;
            }
            float *c = &C[i + (size_t)j * ldc];
            *c = (float)(alpha * s + (beta == 0 ? 0 : beta * *c));
        }
    }
}

static int gemm_args(int ta, int tb, int m, int n, int k, const float *alpha, const void *A, int lda,
                     const void *B, int ldb, const float *beta, const void *C, int ldc) {
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1)) return 7;
    if (m < 0 || n < 0 || k < 0 || !alpha || !beta || !A || !B || !C) return 7;
    if (lda < (ta ? k : m) || ldb < (tb ? n : k) || ldc < m) return 7;
    return 0;
}

int cublasSgemm_v2(handle *h, int ta, int tb, int m, int n, int k, const float *alpha, const float *A, int lda,
                   const float *B, int ldb, const float *beta, float *C, int ldc) {
    FAILPOINT("cublasSgemm_v2");
    if (!use(h)) return 1;
    int r = gemm_args(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    snprintf(last, sizeof last, "cublasSgemm_v2 ta=%d tb=%d m=%d n=%d k=%d alpha=%g lda=%d ldb=%d beta=%g ldc=%d math=%d stream=%s",
             ta, tb, m, n, k, alpha ? *alpha : 0, lda, ldb, beta ? *beta : 0, ldc, h->math, h->stream ? "set" : "null");
    if (r) return r;
    gemm(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
    return 0;
}

int cublasGemmEx(handle *h, int ta, int tb, int m, int n, int k, const float *alpha, const void *A, int at, int lda,
                 const void *B, int bt, int ldb, const float *beta, void *C, int ct, int ldc, int compute, int algo) {
    FAILPOINT("cublasGemmEx");
    if (!use(h)) return 1;
    int r = gemm_args(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    snprintf(last, sizeof last, "cublasGemmEx ta=%d tb=%d m=%d n=%d k=%d alpha=%g types=%d,%d,%d lda=%d ldb=%d beta=%g ldc=%d compute=%d algo=%d stream=%s",
             ta, tb, m, n, k, alpha ? *alpha : 0, at, bt, ct, lda, ldb, beta ? *beta : 0, ldc, compute, algo, h->stream ? "set" : "null");
    if (r) return r;
    if (at != 0 || bt != 0 || ct != 0) return 15;                     /* CUBLAS_STATUS_NOT_SUPPORTED */
    if (compute != 68 && compute != 69 && compute != 77) return 15;
    if (algo != -1) return 7;
    gemm(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
    return 0;
}

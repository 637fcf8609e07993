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

/* cuBLASLt, in the same fake: point OVERLAP_CUBLASLT_LIBRARY at it too.
 * fake_lt_objects() counts the matmul descriptors and matrix layouts
 * alive, fake_lt_handles() the handles. */
#include <math.h>

typedef struct lt { int magic; uintptr_t ctx; } lt;
typedef struct ltdesc { int magic; int compute, scale, ta, tb; unsigned ep; const float *bias; } ltdesc;
typedef struct ltlayout { int magic; int type; uint64_t rows, cols; int64_t ld; } ltlayout;
#define LT_MAGIC 0x6c746c74
#define DESC_MAGIC 0x64657363
#define LAYOUT_MAGIC 0x6c61796f

static int lt_objects, lt_handles;
int fake_lt_objects(void) { return lt_objects; }
int fake_lt_handles(void) { return lt_handles; }

int cublasLtCreate(lt **out) {
    FAILPOINT("cublasLtCreate");
    if (!out) return 7;
    uintptr_t c = current();
    if (!c) {
        violations++;
        return 1;
    }
    lt *h = calloc(1, sizeof *h);
    h->magic = LT_MAGIC;
    h->ctx = c;
    lt_handles++;
    *out = h;
    return 0;
}

int cublasLtDestroy(lt *h) {
    if (!h || h->magic != LT_MAGIC) {
        violations++;
        return 1;
    }
    if (current() != h->ctx) violations++;
    h->magic = 0;
    free(h);
    lt_handles--;
    return 0;
}

int cublasLtMatmulDescCreate(ltdesc **out, int compute, int scale) {
    FAILPOINT("cublasLtMatmulDescCreate");
    if (!out) return 7;
    ltdesc *d = calloc(1, sizeof *d);
    d->magic = DESC_MAGIC;
    d->compute = compute;
    d->scale = scale;
    d->ep = 1;
    lt_objects++;
    *out = d;
    return 0;
}

int cublasLtMatmulDescDestroy(ltdesc *d) {
    if (!d || d->magic != DESC_MAGIC) {
        violations++;
        return 7;
    }
    d->magic = 0;
    free(d);
    lt_objects--;
    return 0;
}

int cublasLtMatmulDescSetAttribute(ltdesc *d, int attr, const void *buf, size_t size) {
    FAILPOINT("cublasLtMatmulDescSetAttribute");
    if (!d || d->magic != DESC_MAGIC || !buf) return 7;
    switch (attr) {
    case 3: if (size != 4) return 7; d->ta = *(const int *)buf; return 0;
    case 4: if (size != 4) return 7; d->tb = *(const int *)buf; return 0;
    case 7: if (size != 4) return 7; d->ep = *(const unsigned *)buf; return 0;
    case 8: if (size != sizeof(void *)) return 7; d->bias = *(const float *const *)buf; return 0;
    }
    return 7;
}

int cublasLtMatrixLayoutCreate(ltlayout **out, int type, uint64_t rows, uint64_t cols, int64_t ld) {
    FAILPOINT("cublasLtMatrixLayoutCreate");
    if (!out || ld < (int64_t)rows) return 7;
    ltlayout *l = calloc(1, sizeof *l);
    l->magic = LAYOUT_MAGIC;
    l->type = type;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    lt_objects++;
    *out = l;
    return 0;
}

int cublasLtMatrixLayoutDestroy(ltlayout *l) {
    if (!l || l->magic != LAYOUT_MAGIC) {
        violations++;
        return 7;
    }
    l->magic = 0;
    free(l);
    lt_objects--;
    return 0;
}

int cublasLtMatmul(lt *h, ltdesc *d, const float *alpha, const float *A, ltlayout *la, const float *B, ltlayout *lb,
                   const float *beta, const float *C, ltlayout *lc, float *D, ltlayout *ld, const void *algo,
                   void *ws, size_t wsSize, uintptr_t stream) {
    FAILPOINT("cublasLtMatmul");
    if (!h || h->magic != LT_MAGIC || !d || d->magic != DESC_MAGIC) {
        violations++;
        return 7;
    }
    if (current() != h->ctx) violations++;
    if (!la || !lb || !lc || !ld || la->magic != LAYOUT_MAGIC || lb->magic != LAYOUT_MAGIC || lc->magic != LAYOUT_MAGIC || ld->magic != LAYOUT_MAGIC) return 7;
    snprintf(last, sizeof last,
             "cublasLtMatmul compute=%d scale=%d ta=%d tb=%d ep=%u bias=%s A=%llux%llu/%lld B=%llux%llu/%lld D=%llux%llu/%lld C=D:%s alpha=%g beta=%g algo=%s ws=%zu stream=%s",
             d->compute, d->scale, d->ta, d->tb, d->ep, d->bias ? "set" : "null",
             (unsigned long long)la->rows, (unsigned long long)la->cols, (long long)la->ld,
             (unsigned long long)lb->rows, (unsigned long long)lb->cols, (long long)lb->ld,
             (unsigned long long)ld->rows, (unsigned long long)ld->cols, (long long)ld->ld,
             (C == D && lc == ld) ? "yes" : "no", alpha ? *alpha : 0, beta ? *beta : 0, algo ? "set" : "null",
             wsSize, stream ? "set" : "null");
    if (!alpha || !beta || !A || !B || !D || (wsSize && !ws)) return 7;
    int m = (int)ld->rows, n = (int)ld->cols, k = (int)(d->ta ? la->rows : la->cols);
    if ((d->ta ? la->cols : la->rows) != (uint64_t)m || (d->tb ? lb->rows : lb->cols) != (uint64_t)n ||
        (d->tb ? lb->cols : lb->rows) != (uint64_t)k)
        return 7;
    int hasbias = d->ep == 4 || d->ep == 6 || d->ep == 36;
    if (hasbias && !d->bias) return 7;
    for (int j = 0; j < n; j++) {
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double a = d->ta ? A[p + (size_t)i * la->ld] : A[i + (size_t)p * la->ld];
                double b = d->tb ? B[j + (size_t)p * lb->ld] : B[p + (size_t)j * lb->ld];
                s += a * b;
            }
            double v = *alpha * s + (*beta == 0 ? 0 : *beta * C[i + (size_t)j * lc->ld]);
            if (hasbias) v += d->bias[i];
            if (d->ep == 2 || d->ep == 6) v = v > 0 ? v : 0;
            if (d->ep == 32 || d->ep == 36) v = 0.5 * v * (1 + erf(v / sqrt(2.0)));
            D[i + (size_t)j * ld->ld] = (float)v;
        }
    }
    return 0;
}

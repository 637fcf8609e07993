/* Batched copies (driver/batch.go): CUDA 13.0's cuMemcpyBatchAsync_v2.
 * Every copy's pointers are classified first, device memory of the
 * current context or pinned host memory, each copy queued in order as
 * one operation; the attributes must be valid and cover the batch from
 * copy 0. Included by libcuda.c. */

/* CUmemcpyAttributes: 24 bytes. */
struct memcpy_attrs {
    int src_access_order;
    struct { int type, id; } src_hint, dst_hint;
    unsigned flags;
};

CUresult cuMemcpyBatchAsync_v2(uintptr_t *dsts, uintptr_t *srcs, size_t *sizes, size_t count,
                               const struct memcpy_attrs *attrs, size_t *idxs, size_t nattrs, handle_t s) {
    ENTER("cuMemcpyBatchAsync_v2");
    if (!count || !dsts || !srcs || !sizes || !attrs || !idxs || !nattrs || idxs[0] != 0) return E_INVALID_VALUE;
    for (size_t j = 0; j < nattrs; j++) {
        if (attrs[j].src_access_order < 1 || attrs[j].src_access_order > 3 || attrs[j].flags > 1) return E_INVALID_VALUE;
        if (j && (idxs[j] <= idxs[j - 1] || idxs[j] >= count)) return E_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuMemcpyBatchAsync_v2", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < count; i++) {
            struct obj *dd = find_mem(dsts[i], sizes[i], K_DEVMEM), *sd = find_mem(srcs[i], sizes[i], K_DEVMEM);
            struct obj *dh = dd ? NULL : find_mem(dsts[i], sizes[i], K_HOSTMEM);
            struct obj *sh = sd ? NULL : find_mem(srcs[i], sizes[i], K_HOSTMEM);
            if (pass == 0) {
                if ((!dd && !dh) || (!sd && !sh) || !sizes[i]) {
                    violation("cuMemcpyBatchAsync_v2: copy %zu of %zu bytes: neither live device memory nor pinned host memory", i, sizes[i]);
                    pthread_mutex_unlock(&mu);
                    return E_INVALID_VALUE;
                }
                if ((dd && !check_ctx("cuMemcpyBatchAsync_v2", dd)) || (sd && !check_ctx("cuMemcpyBatchAsync_v2", sd))) {
                    pthread_mutex_unlock(&mu);
                    return E_INVALID_CONTEXT;
                }
                continue;
            }
            struct op *op = calloc(1, sizeof *op);
            op->stream = so;
            op->dst = (char *)dsts[i];
            op->src = (char *)srcs[i];
            op->n = sizes[i];
            if (sh && dd) op->type = OP_H2D, op->host = sh, op->dev = dd;
            else if (sd && dh) op->type = OP_D2H, op->host = dh, op->dev = sd;
            else if (sd && dd) op->type = OP_D2D, op->dev = dd, op->dev2 = sd;
            else op->type = OP_D2D; /* pinned host to pinned host */
            enqueue(op);
        }
    pthread_mutex_unlock(&mu);
    return OK;
}

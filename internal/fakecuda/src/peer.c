/* Peer access and copies between contexts (driver/peer.go). Every pair
 * of distinct devices can access each other; access is one way, from the
 * current context to a peer, and ends when either primary context is
 * released (peer_forget). Peer copies need no access, as with the driver.
 * Included by libcuda.c. */

static int peer_on[MAX_DEVICES][MAX_DEVICES];

/* peer_forget ends every access from and to dev, whose primary context
 * libcuda.c has just released; called with mu held. */
static void peer_forget(int dev) {
    for (int i = 0; i < MAX_DEVICES; i++) peer_on[dev][i] = peer_on[i][dev] = 0;
}

CUresult cuDeviceCanAccessPeer(int *can, int dev, int peer) {
    ENTER("cuDeviceCanAccessPeer");
    if (dev < 0 || dev >= ndevices || peer < 0 || peer >= ndevices) return E_INVALID_DEVICE;
    *can = dev != peer;
    return OK;
}

/* peer_ctx checks the current context and the peer's for call. */
static struct obj *peer_ctx(const char *call, handle_t peer) {
    if (!need_ctx(call)) return NULL;
    return lookup(call, peer, K_CTX);
}

CUresult cuCtxEnablePeerAccess(handle_t peer, unsigned flags) {
    ENTER("cuCtxEnablePeerAccess");
    pthread_mutex_lock(&mu);
    struct obj *p = peer_ctx("cuCtxEnablePeerAccess", peer);
    CUresult r = OK;
    if (!p) r = E_INVALID_CONTEXT;
    else if (flags) r = E_INVALID_VALUE;
    else if (p->ctx == current->ctx) r = E_INVALID_DEVICE;
    else if (peer_on[current->ctx][p->ctx]) r = 704; /* CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED */
    else peer_on[current->ctx][p->ctx] = 1;
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuCtxDisablePeerAccess(handle_t peer) {
    ENTER("cuCtxDisablePeerAccess");
    pthread_mutex_lock(&mu);
    struct obj *p = peer_ctx("cuCtxDisablePeerAccess", peer);
    CUresult r = OK;
    if (!p) r = E_INVALID_CONTEXT;
    else if (!peer_on[current->ctx][p->ctx]) r = 705; /* CUDA_ERROR_PEER_ACCESS_NOT_ENABLED */
    else peer_on[current->ctx][p->ctx] = 0;
    pthread_mutex_unlock(&mu);
    return r;
}

/* peer_mem finds n bytes at p in live device memory of the context c;
 * called with mu held. */
static struct obj *peer_mem(const char *call, uintptr_t p, size_t n, handle_t c) {
    struct obj *co = lookup(call, c, K_CTX);
    if (!co) return NULL;
    struct obj *m = find_mem(p, n, K_DEVMEM);
    if (!m) {
        violation("%s: %zu bytes outside live device memory", call, n);
        return NULL;
    }
    if (m->ctx != co->ctx) {
        violation("%s: memory of context %d named as context %d's", call, m->ctx, co->ctx);
        return NULL;
    }
    return m;
}

CUresult cuMemcpyPeer(uintptr_t dst, handle_t dctx, uintptr_t src, handle_t sctx, size_t n) {
    ENTER("cuMemcpyPeer");
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuMemcpyPeer")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    if (!peer_mem("cuMemcpyPeer", dst, n, dctx) || !peer_mem("cuMemcpyPeer", src, n, sctx)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    wait_seq(issued_seq);
    memmove((void *)dst, (const void *)src, n);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemcpyPeerAsync(uintptr_t dst, handle_t dctx, uintptr_t src, handle_t sctx, size_t n, handle_t s) {
    ENTER("cuMemcpyPeerAsync");
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuMemcpyPeerAsync", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct obj *d = peer_mem("cuMemcpyPeerAsync", dst, n, dctx);
    struct obj *sm = d ? peer_mem("cuMemcpyPeerAsync", src, n, sctx) : NULL;
    if (!sm) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_D2D;
    op->stream = so;
    op->dev = d;
    op->dev2 = sm;
    op->dst = (char *)dst;
    op->src = (char *)src;
    op->n = n;
    enqueue(op);
    pthread_mutex_unlock(&mu);
    return OK;
}

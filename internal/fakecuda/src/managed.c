/* Managed memory (driver/managed.go): cuMemAllocManaged, cuMemAdvise_v2,
 * cuMemPrefetchAsync_v2 and cuMemRangeGetAttribute. The fake's device
 * memory is host memory already, so managed memory is device memory
 * marked managed; advice and prefetches are recorded per allocation, for
 * cuMemRangeGetAttribute to answer. Included by libcuda.c. */

#define MANAGED_FLAG 0x10000u /* in obj.flags: memory from cuMemAllocManaged */

/* CUmemLocation, passed by value. */
struct memloc { int type, id; };

struct managed_attrs {
    struct obj *mem;
    int read_mostly, preferred, last_prefetch; /* locations: -1 host, -2 none */
};
static struct managed_attrs *mattrs;
static size_t nmattrs, capmattrs;

/* managed_of finds the managed allocation that holds [p, p+n) and its
 * attributes; called with mu held. */
static struct managed_attrs *managed_of(const char *call, uintptr_t p, size_t n) {
    struct obj *o = find_mem(p, n, K_DEVMEM);
    if (!o || !(o->flags & MANAGED_FLAG)) {
        violation("%s: %zu bytes at %p are not managed memory", call, n, (void *)p);
        return NULL;
    }
    for (size_t i = 0; i < nmattrs; i++)
        if (mattrs[i].mem == o) return &mattrs[i];
    return NULL;
}

/* loc_id returns a location as cuMemRangeGetAttribute answers it: a
 * device ordinal or -1 for the host; -3 when it is not a valid one. */
static int loc_id(struct memloc l) {
    if (l.type == 2) return -1;
    if (l.type == 1 && l.id >= 0 && l.id < ndevices) return l.id;
    return -3;
}

CUresult cuMemAllocManaged(uintptr_t *p, size_t n, unsigned flags) {
    ENTER("cuMemAllocManaged");
    if (flags != 1 && flags != 2) return E_INVALID_VALUE; /* CU_MEM_ATTACH_GLOBAL or _HOST */
    CUresult r = alloc_mem("cuMemAllocManaged", K_DEVMEM, (void **)p, n, flags | MANAGED_FLAG);
    if (r) return r;
    pthread_mutex_lock(&mu);
    if (nmattrs == capmattrs) {
        capmattrs = capmattrs ? 2 * capmattrs : 16;
        mattrs = realloc(mattrs, capmattrs * sizeof *mattrs);
    }
    struct managed_attrs a = {find_mem(*p, n, K_DEVMEM), 0, -2, -2};
    mattrs[nmattrs++] = a;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemAdvise_v2(uintptr_t p, size_t n, int advice, struct memloc loc) {
    ENTER("cuMemAdvise_v2");
    pthread_mutex_lock(&mu);
    struct managed_attrs *a = need_ctx("cuMemAdvise_v2") ? managed_of("cuMemAdvise_v2", p, n) : NULL;
    CUresult r = OK;
    if (!a) r = E_INVALID_VALUE;
    else if (advice < 1 || advice > 6) r = E_INVALID_VALUE;
    else if (advice >= 3 && loc_id(loc) == -3) r = E_INVALID_DEVICE;
    else if (advice == 1) a->read_mostly = 1;
    else if (advice == 2) a->read_mostly = 0;
    else if (advice == 3) a->preferred = loc_id(loc);
    else if (advice == 4) a->preferred = -2;
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuMemPrefetchAsync_v2(uintptr_t p, size_t n, struct memloc loc, unsigned flags, handle_t s) {
    ENTER("cuMemPrefetchAsync_v2");
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuMemPrefetchAsync_v2", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct managed_attrs *a = managed_of("cuMemPrefetchAsync_v2", p, n);
    CUresult r = OK;
    if (!a || flags) r = E_INVALID_VALUE;
    else if (loc_id(loc) == -3) r = E_INVALID_DEVICE;
    else if (!check_ctx("cuMemPrefetchAsync_v2", a->mem)) r = E_INVALID_CONTEXT;
    if (!r) {
        a->last_prefetch = loc_id(loc);
        struct op *op = calloc(1, sizeof *op); /* moves nothing: the bytes are where they are */
        op->stream = so;
        op->dev = a->mem;
        enqueue(op);
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuMemRangeGetAttribute(void *data, size_t size, int attr, uintptr_t p, size_t n) {
    ENTER("cuMemRangeGetAttribute");
    pthread_mutex_lock(&mu);
    struct managed_attrs *a = managed_of("cuMemRangeGetAttribute", p, n);
    CUresult r = OK;
    int v = 0;
    if (!a || size != 4) r = E_INVALID_VALUE;
    else if (attr == 1) v = a->read_mostly;
    else if (attr == 2) v = a->preferred;
    else if (attr == 4) v = a->last_prefetch;
    else r = E_INVALID_VALUE;
    if (!r) memcpy(data, &v, 4);
    pthread_mutex_unlock(&mu);
    return r;
}

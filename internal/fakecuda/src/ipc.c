/* Interprocess memory and events (driver/ipc.go). The fake runs in one
 * process, so, unlike the driver, it opens its own handles: an opened
 * handle is the exporter's memory at the same address, counted as an open
 * mapping that cuIpcCloseMemHandle must close once; an opened event is a
 * new event that has seen the exporter's records made before the open.
 * The two open calls take their 64-byte handles by value, as the driver's
 * do, so the C compiler lays them out by the platform's ABI and the
 * binding's packing of them is tested. Also cuMemGetAddressRange_v2.
 * Included by libcuda.c. */

#define IPC_OPEN 0x100000u /* obj.flags: an opened memory handle */

struct ipc_handle { unsigned char reserved[64]; };
struct ipc_payload { char magic[8]; uintptr_t p; size_t size; int ctx; };

CUresult cuIpcGetMemHandle(struct ipc_handle *h, uintptr_t p) {
    ENTER("cuIpcGetMemHandle");
    pthread_mutex_lock(&mu);
    struct obj *o = find_mem(p, 1, K_DEVMEM);
    CUresult r = OK;
    if (!o || (uintptr_t)o->base != p || o->flags || o->async) r = E_INVALID_VALUE; /* only cuMemAlloc's */
    else if (!need_ctx("cuIpcGetMemHandle") || !check_ctx("cuIpcGetMemHandle", o)) r = E_INVALID_CONTEXT;
    if (!r) {
        struct ipc_payload pl = {"FAKEIPCM", p, o->size, o->ctx};
        memset(h, 0, sizeof *h);
        memcpy(h, &pl, sizeof pl);
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuIpcOpenMemHandle_v2(uintptr_t *p, struct ipc_handle h, unsigned flags) {
    ENTER("cuIpcOpenMemHandle_v2");
    struct ipc_payload pl;
    memcpy(&pl, &h, sizeof pl);
    if (memcmp(pl.magic, "FAKEIPCM", 8) != 0 || flags != 1) return E_INVALID_VALUE;
    for (size_t i = sizeof pl; i < sizeof h; i++)
        if (h.reserved[i]) return E_INVALID_VALUE; /* a torn handle */
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuIpcOpenMemHandle_v2")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct obj *o = find_mem(pl.p, pl.size, K_DEVMEM);
    if (!o || (uintptr_t)o->base != pl.p) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE; /* the exporter freed it */
    }
    struct obj *m = new_obj(K_DEVMEM, current->ctx);
    m->base = o->base;
    m->size = o->size;
    m->flags = IPC_OPEN;
    m->mod = o;
    if (nothers == capothers) { /* so that a leak shows at context release */
        capothers = capothers ? 2 * capothers : 64;
        others = realloc(others, capothers * sizeof *others);
    }
    others[nothers++] = m;
    *p = pl.p;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuIpcCloseMemHandle(uintptr_t p) {
    ENTER("cuIpcCloseMemHandle");
    pthread_mutex_lock(&mu);
    struct obj *m = NULL;
    for (size_t i = 0; i < nothers; i++)
        if (others[i]->kind == K_DEVMEM && others[i]->flags == IPC_OPEN && (uintptr_t)others[i]->base == p) {
            m = others[i];
            break;
        }
    if (!m) {
        violation("cuIpcCloseMemHandle: %#lx is not an opened handle's memory", (unsigned long)p);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (m->mod->pending > 0) violation("cuIpcCloseMemHandle: closed while %ld operation(s) on it are pending", m->mod->pending);
    kill_obj("cuIpcCloseMemHandle", m); /* removes it from others */
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuIpcGetEventHandle(struct ipc_handle *h, handle_t e) {
    ENTER("cuIpcGetEventHandle");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuIpcGetEventHandle", e, K_EVENT);
    CUresult r = OK;
    if (!o) r = E_INVALID_HANDLE;
    else if ((o->flags & 0x6) != 0x6) r = E_INVALID_VALUE; /* INTERPROCESS | DISABLE_TIMING */
    if (!r) {
        struct ipc_payload pl = {"FAKEIPCE", e, 0, o->ctx};
        memset(h, 0, sizeof *h);
        memcpy(h, &pl, sizeof pl);
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuIpcOpenEventHandle(handle_t *e, struct ipc_handle h) {
    ENTER("cuIpcOpenEventHandle");
    struct ipc_payload pl;
    memcpy(&pl, &h, sizeof pl);
    if (memcmp(pl.magic, "FAKEIPCE", 8) != 0) return E_INVALID_VALUE;
    for (size_t i = sizeof pl; i < sizeof h; i++)
        if (h.reserved[i]) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuIpcOpenEventHandle", pl.p, K_EVENT);
    if (!o || !need_ctx("cuIpcOpenEventHandle")) {
        pthread_mutex_unlock(&mu);
        return o ? E_INVALID_CONTEXT : E_INVALID_HANDLE;
    }
    struct obj *n = new_obj(K_EVENT, current->ctx);
    n->flags = o->flags;
    n->last_seq = o->last_seq;
    n->recorded = o->recorded;
    *e = (handle_t)n;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemGetAddressRange_v2(uintptr_t *base, size_t *size, uintptr_t p) {
    ENTER("cuMemGetAddressRange_v2");
    pthread_mutex_lock(&mu);
    struct obj *o = find_mem(p, 1, K_DEVMEM);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_NOT_FOUND;
    }
    if (base) *base = (uintptr_t)o->base;
    if (size) *size = o->size;
    pthread_mutex_unlock(&mu);
    return OK;
}

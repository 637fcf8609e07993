/* Virtual memory management (driver/vmm.go): physical allocations
 * (cuMemCreate, cuMemRelease), reserved address ranges
 * (cuMemAddressReserve, cuMemAddressFree), mappings (cuMemMap, cuMemUnmap)
 * and access (cuMemSetAccess). A reserved range owns the bytes; a mapping
 * is device memory that copies find only once cuMemSetAccess allowed it,
 * so that an access before then is a violation, as it is a fault on a GPU.
 * Freeing a range that is still mapped, or releasing an allocation twice,
 * is a violation too. Included by libcuda.c. */

#define VMM_ALLOC 0x20000u   /* obj.flags: a physical allocation */
#define VMM_RESERVE 0x40000u /* obj.flags: a reserved range */
#define VMM_MAP 0x80000u     /* obj.flags: a mapping */
#define VMM_GRANULARITY ((size_t)1 << 16)

/* CUmemAllocationProp as cuda.h lays it out: 32 bytes. */
struct alloc_prop {
    int type, handle_types;
    struct { int type, id; } location;
    void *win32;
    unsigned char compression, rdma;
    unsigned short usage;
    unsigned char reserved[4];
};

/* CUmemAccessDesc: 12 bytes. */
struct access_desc {
    struct { int type, id; } location;
    int flags;
};

struct vmm_map { struct obj *map, *alloc; int accessible; };
static struct obj **vranges;
static size_t nvranges, capvranges;
static struct vmm_map *vmaps;
static size_t nvmaps, capvmaps;

static CUresult check_prop(const struct alloc_prop *p) {
    if (!p || p->type != 1) return E_INVALID_VALUE;
    if (p->location.type != 1 || p->location.id < 0 || p->location.id >= ndevices) return E_INVALID_DEVICE;
    return OK;
}

/* vmm_obj checks that h is a live object of the VMM kind flag; mu held. */
static struct obj *vmm_obj(const char *call, handle_t h, unsigned flag) {
    struct obj *o = lookup(call, h, K_DEVMEM);
    if (o && !(o->flags & flag)) {
        violation("%s: %#lx is not a virtual memory handle of the right kind", call, (unsigned long)h);
        return NULL;
    }
    return o;
}

static int live_maps(const struct obj *alloc) {
    int n = 0;
    for (size_t i = 0; i < nvmaps; i++)
        if (vmaps[i].alloc == alloc && vmaps[i].map->live) n++;
    return n;
}

CUresult cuMemGetAllocationGranularity(size_t *g, const struct alloc_prop *p, int option) {
    ENTER("cuMemGetAllocationGranularity");
    CUresult r = check_prop(p);
    if (r) return r;
    if (option != 0 && option != 1) return E_INVALID_VALUE;
    *g = VMM_GRANULARITY;
    return OK;
}

CUresult cuMemCreate(unsigned long long *h, size_t size, const struct alloc_prop *p, unsigned long long flags) {
    ENTER("cuMemCreate");
    CUresult r = check_prop(p);
    if (r) return r;
    if (size == 0 || size % VMM_GRANULARITY || flags) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuMemCreate")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct obj *o = new_obj(K_DEVMEM, p->location.id);
    o->size = size;
    o->flags = VMM_ALLOC;
    *h = (unsigned long long)(handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemRelease(unsigned long long h) {
    ENTER("cuMemRelease");
    pthread_mutex_lock(&mu);
    struct obj *o = vmm_obj("cuMemRelease", (handle_t)h, VMM_ALLOC);
    if (!o || o->recorded) {
        if (o) violation("cuMemRelease: allocation released twice");
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    o->recorded = 1; /* released: freed once its last mapping goes */
    if (!live_maps(o)) kill_obj("cuMemRelease", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemAddressReserve(uintptr_t *ptr, size_t size, size_t align, uintptr_t addr, unsigned long long flags) {
    ENTER("cuMemAddressReserve");
    if (size == 0 || size % VMM_GRANULARITY || flags || (align & (align - 1))) return E_INVALID_VALUE;
    (void)addr; /* a hint */
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuMemAddressReserve")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct obj *o = new_obj(K_DEVMEM, current->ctx);
    o->base = calloc(1, size);
    o->size = size;
    o->flags = VMM_RESERVE;
    if (nvranges == capvranges) {
        capvranges = capvranges ? 2 * capvranges : 16;
        vranges = realloc(vranges, capvranges * sizeof *vranges);
    }
    vranges[nvranges++] = o;
    *ptr = (uintptr_t)o->base;
    pthread_mutex_unlock(&mu);
    return OK;
}

/* map_at finds the live mapping at exactly [p, p+size); mu held. */
static struct vmm_map *map_at(uintptr_t p, size_t size) {
    for (size_t i = 0; i < nvmaps; i++)
        if (vmaps[i].map->live && (uintptr_t)vmaps[i].map->base == p && vmaps[i].map->size == size) return &vmaps[i];
    return NULL;
}

CUresult cuMemAddressFree(uintptr_t p, size_t size) {
    ENTER("cuMemAddressFree");
    pthread_mutex_lock(&mu);
    struct obj *o = NULL;
    for (size_t i = 0; i < nvranges; i++)
        if (vranges[i]->live && (uintptr_t)vranges[i]->base == p && vranges[i]->size == size) {
            o = vranges[i];
            vranges[i] = vranges[--nvranges];
            break;
        }
    if (!o) {
        violation("cuMemAddressFree: [%#lx, +%zu) is not a reserved range", (unsigned long)p, size);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    for (size_t i = 0; i < nvmaps; i++) {
        struct obj *m = vmaps[i].map;
        if (m->live && m->base >= o->base && m->base < o->base + o->size)
            violation("cuMemAddressFree: range freed while still mapped");
    }
    kill_obj("cuMemAddressFree", o);
    bury(o);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemMap(uintptr_t p, size_t size, size_t offset, unsigned long long h, unsigned long long flags) {
    ENTER("cuMemMap");
    pthread_mutex_lock(&mu);
    struct obj *a = vmm_obj("cuMemMap", (handle_t)h, VMM_ALLOC);
    CUresult r = OK;
    struct obj *range = NULL;
    for (size_t i = 0; i < nvranges; i++)
        if (p >= (uintptr_t)vranges[i]->base && p + size <= (uintptr_t)vranges[i]->base + vranges[i]->size)
            range = vranges[i];
    if (!a || a->recorded) r = E_INVALID_HANDLE;
    else if (flags || size == 0 || offset + size > a->size || size % VMM_GRANULARITY) r = E_INVALID_VALUE;
    else if (!range) {
        violation("cuMemMap: [%#lx, +%zu) is not inside a reserved range", (unsigned long)p, size);
        r = E_INVALID_VALUE;
    }
    for (size_t i = 0; !r && i < nvmaps; i++) {
        struct obj *m = vmaps[i].map;
        if (m->live && (uintptr_t)m->base < p + size && p < (uintptr_t)m->base + m->size) r = 208; /* ALREADY_MAPPED */
    }
    if (!r) {
        struct obj *m = new_obj(K_DEVMEM, a->ctx);
        m->base = (char *)p;
        m->size = size;
        m->flags = VMM_MAP;
        if (nvmaps == capvmaps) {
            capvmaps = capvmaps ? 2 * capvmaps : 16;
            vmaps = realloc(vmaps, capvmaps * sizeof *vmaps);
        }
        struct vmm_map vm = {m, a, 0};
        vmaps[nvmaps++] = vm;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuMemSetAccess(uintptr_t p, size_t size, const struct access_desc *d, size_t count) {
    ENTER("cuMemSetAccess");
    pthread_mutex_lock(&mu);
    struct vmm_map *vm = map_at(p, size);
    CUresult r = OK;
    if (!vm || !d || count != 1) r = E_INVALID_VALUE;
    else if (d->location.type != 1 || d->location.id < 0 || d->location.id >= ndevices) r = E_INVALID_DEVICE;
    else if (d->flags != 0 && d->flags != 1 && d->flags != 3) r = E_INVALID_VALUE;
    else if (d->flags && !vm->accessible) {
        add_mem(vm->map);
        vm->accessible = 1;
    } else if (!d->flags && vm->accessible) {
        drop_mem(vm->map);
        vm->accessible = 0;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuMemUnmap(uintptr_t p, size_t size) {
    ENTER("cuMemUnmap");
    pthread_mutex_lock(&mu);
    struct vmm_map *vm = map_at(p, size);
    if (!vm) {
        violation("cuMemUnmap: [%#lx, +%zu) is not a mapping", (unsigned long)p, size);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    /* Like the driver, unmapping waits for the device's work on it. */
    wait_seq(issued_seq);
    if (vm->accessible) drop_mem(vm->map);
    kill_obj("cuMemUnmap", vm->map);
    struct obj *a = vm->alloc;
    *vm = vmaps[--nvmaps];
    if (a->recorded && a->live && !live_maps(a)) kill_obj("cuMemUnmap", a);
    pthread_mutex_unlock(&mu);
    return OK;
}

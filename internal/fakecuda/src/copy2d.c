/* 2D and 3D copies (driver/copy2d.go): cuMemcpy2D_v2, cuMemcpy3D_v2 and
 * their asynchronous forms, between host and device memory (CUDA arrays
 * are not faked). Every row is checked before any moves: device rows must
 * lie in live device memory of the current context, and the host rows of
 * an asynchronous copy in pinned or registered memory. A queued copy is
 * one operation per row, in the stream's order. Included by libcuda.c. */

/* CUDA_MEMCPY2D as cuda.h lays it out: 128 bytes. */
struct memcpy2d {
    size_t src_x, src_y;
    int src_type;
    const void *src_host;
    uintptr_t src_device;
    void *src_array;
    size_t src_pitch;
    size_t dst_x, dst_y;
    int dst_type;
    void *dst_host;
    uintptr_t dst_device;
    void *dst_array;
    size_t dst_pitch;
    size_t width, height;
};

/* row_addr returns the address of row r of slice z of one side. */
static char *row_addr(int type, const void *host, uintptr_t dev, size_t x, size_t y, size_t z, size_t pitch,
                      size_t rows, size_t r) {
    char *base = type == 1 ? (char *)host : (char *)dev;
    return base + (z * rows + y + r) * pitch + x;
}

/* pitched makes (s == 0, sync set) or queues on s the copy p describes. */
static CUresult pitched(const char *call, const struct memcpy3d *p, int sync, handle_t s) {
    if (!p) return E_INVALID_VALUE;
    if ((p->src_type != 1 && p->src_type != 2) || (p->dst_type != 1 && p->dst_type != 2) || p->src_array ||
        p->dst_array || p->src_lod || p->dst_lod)
        return E_INVALID_VALUE;
    if (p->width == 0 || p->height == 0 || p->depth == 0) return OK;
    if (p->src_pitch < p->width + p->src_x || p->dst_pitch < p->width + p->dst_x) return E_INVALID_VALUE;
    if (p->depth > 1 && (p->src_height < p->height + p->src_y || p->dst_height < p->height + p->dst_y))
        return E_INVALID_VALUE;
    size_t srows = p->depth > 1 ? p->src_height : 0, drows = p->depth > 1 ? p->dst_height : 0;
    pthread_mutex_lock(&mu);
    struct obj *so = NULL;
    if (!sync && !(so = stream_use(call, s))) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (!need_ctx(call)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    /* Check every row of every slice first. */
    for (size_t z = 0; z < p->depth; z++)
        for (size_t r = 0; r < p->height; r++) {
            char *src = row_addr(p->src_type, p->src_host, p->src_device, p->src_x, p->src_y, z, p->src_pitch, srows, r);
            char *dst = row_addr(p->dst_type, p->dst_host, p->dst_device, p->dst_x, p->dst_y, z, p->dst_pitch, drows, r);
            const struct { int type; char *a; } sides[2] = {{p->src_type, src}, {p->dst_type, dst}};
            for (int i = 0; i < 2; i++) {
                if (sides[i].type == 2) {
                    struct obj *d = find_mem((uintptr_t)sides[i].a, p->width, K_DEVMEM);
                    if (!d) {
                        violation("%s: row %zu of slice %zu (%zu bytes) outside live device memory", call, r, z, p->width);
                        pthread_mutex_unlock(&mu);
                        return E_INVALID_VALUE;
                    }
                    if (!check_ctx(call, d)) {
                        pthread_mutex_unlock(&mu);
                        return E_INVALID_CONTEXT;
                    }
                } else if (!sync && !find_mem((uintptr_t)sides[i].a, p->width, K_HOSTMEM)) {
                    violation("%s: host row %zu of slice %zu is neither pinned nor registered", call, r, z);
                    pthread_mutex_unlock(&mu);
                    return E_INVALID_VALUE;
                }
            }
        }
    if (sync) wait_seq(issued_seq); /* the legacy default stream */
    for (size_t z = 0; z < p->depth; z++)
        for (size_t r = 0; r < p->height; r++) {
            char *src = row_addr(p->src_type, p->src_host, p->src_device, p->src_x, p->src_y, z, p->src_pitch, srows, r);
            char *dst = row_addr(p->dst_type, p->dst_host, p->dst_device, p->dst_x, p->dst_y, z, p->dst_pitch, drows, r);
            if (sync) {
                memmove(dst, src, p->width);
                continue;
            }
            struct op *op = calloc(1, sizeof *op);
            op->stream = so;
            op->dst = dst;
            op->src = src;
            op->n = p->width;
            if (p->src_type == 1 && p->dst_type == 2) {
                op->type = OP_H2D;
                op->host = find_mem((uintptr_t)src, p->width, K_HOSTMEM);
                op->dev = find_mem((uintptr_t)dst, p->width, K_DEVMEM);
            } else if (p->src_type == 2 && p->dst_type == 1) {
                op->type = OP_D2H;
                op->host = find_mem((uintptr_t)dst, p->width, K_HOSTMEM);
                op->dev = find_mem((uintptr_t)src, p->width, K_DEVMEM);
            } else if (p->src_type == 2) {
                op->type = OP_D2D;
                op->dev = find_mem((uintptr_t)dst, p->width, K_DEVMEM);
                op->dev2 = find_mem((uintptr_t)src, p->width, K_DEVMEM);
            } else {
                op->type = OP_D2D; /* host to host: plain bytes */
            }
            enqueue(op);
        }
    pthread_mutex_unlock(&mu);
    return OK;
}

static struct memcpy3d from2d(const struct memcpy2d *p) {
    struct memcpy3d q;
    memset(&q, 0, sizeof q);
    q.src_x = p->src_x, q.src_y = p->src_y, q.src_type = p->src_type, q.src_host = p->src_host;
    q.src_device = p->src_device, q.src_array = p->src_array, q.src_pitch = p->src_pitch;
    q.dst_x = p->dst_x, q.dst_y = p->dst_y, q.dst_type = p->dst_type, q.dst_host = p->dst_host;
    q.dst_device = p->dst_device, q.dst_array = p->dst_array, q.dst_pitch = p->dst_pitch;
    q.width = p->width, q.height = p->height, q.depth = 1;
    return q;
}

CUresult cuMemcpy2D_v2(const struct memcpy2d *p) {
    ENTER("cuMemcpy2D_v2");
    if (!p) return E_INVALID_VALUE;
    struct memcpy3d q = from2d(p);
    return pitched("cuMemcpy2D_v2", &q, 1, 0);
}

CUresult cuMemcpy2DAsync_v2(const struct memcpy2d *p, handle_t s) {
    ENTER("cuMemcpy2DAsync_v2");
    if (!p) return E_INVALID_VALUE;
    struct memcpy3d q = from2d(p);
    return pitched("cuMemcpy2DAsync_v2", &q, 0, s);
}

CUresult cuMemcpy3D_v2(const struct memcpy3d *p) {
    ENTER("cuMemcpy3D_v2");
    return pitched("cuMemcpy3D_v2", p, 1, 0);
}

CUresult cuMemcpy3DAsync_v2(const struct memcpy3d *p, handle_t s) {
    ENTER("cuMemcpy3DAsync_v2");
    return pitched("cuMemcpy3DAsync_v2", p, 0, s);
}

/* Extended and cooperative launches (driver/launchex.go). Both launch as
 * cuLaunchKernel does (fake_copy runs; the arguments, grid and block are
 * recorded for fake_last_launch), and record their attributes for
 * fake_last_launch_ex. cuLaunchKernelEx checks its CUlaunchConfig: known
 * attribute ids only, a grid that is a multiple of the cluster, clusters
 * of at most 8 blocks. A cooperative grid may hold at most as many blocks
 * as the device holds at once (fake_max_blocks). Included by libcuda.c. */

struct launch_config {
    unsigned gx, gy, gz, bx, by, bz, shmem;
    handle_t stream;
    const struct launch_attr *attrs;
    unsigned nattrs;
};
struct launch_attr {
    int id;
    char pad[4];
    union {
        char raw[64];
        int i;
        struct { unsigned x, y, z; } cluster;
    } v;
};
_Static_assert(sizeof(struct launch_config) == 56, "CUlaunchConfig is 56 bytes");
_Static_assert(sizeof(struct launch_attr) == 72, "CUlaunchAttribute is 72 bytes");

/* The last extended launch's attributes: cooperative, cluster x, y, z,
 * priority, whether a priority was set, and the number of attributes. */
static int last_ex[7];

/* fake_max_blocks is how many blocks of bx*by*bz threads the fake's device
 * holds at once: 4 SMs of 2048 threads, at most 32 blocks each. */
static long fake_max_blocks(unsigned threads, unsigned shmem) {
    if (threads == 0 || threads > 1024) return 0;
    long per = 2048 / threads;
    if (per > 32) per = 32;
    if (shmem) {
        long by_smem = (228L << 10) / shmem;
        if (by_smem < per) per = by_smem;
    }
    return 4 * per;
}

static CUresult launch_as(const char *call, handle_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned shmem, handle_t s, void **params, void **extra) {
    struct obj *fo = func_use(call, f);
    struct obj *so = stream_use(call, s);
    if (!fo || !so) return E_INVALID_HANDLE;
    if (fo->ctx != so->ctx) {
        violation("%s: function of context %d launched on a stream of context %d", call, fo->ctx, so->ctx);
        return E_INVALID_HANDLE;
    }
    if (!gx || !gy || !gz || !bx || !by || !bz || (unsigned long)bx * by * bz > 1024) return E_INVALID_VALUE;
    int n = nparam_sizes > 0 ? nparam_sizes : 0;
    last_nparams = 0;
    for (int i = 0; i < n && i < 16 && params; i++) {
        size_t sz = param_sizes[i] > 16 ? 16 : param_sizes[i];
        memcpy(last_params[i], params[i], sz);
        last_nparams++;
    }
    last_grid[0] = gx, last_grid[1] = gy, last_grid[2] = gz;
    last_block[0] = bx, last_block[1] = by, last_block[2] = bz;
    last_shmem = shmem;
    last_extra = extra;
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_LAUNCH;
    op->stream = so;
    memcpy(op->params, last_params, sizeof op->params);
    op->nparams = last_nparams;
    op->func = fo;
    enqueue(op);
    return OK;
}

CUresult cuLaunchKernelEx(const struct launch_config *cfg, handle_t f, void **params, void **extra) {
    ENTER("cuLaunchKernelEx");
    if (!cfg || (cfg->nattrs && !cfg->attrs) || cfg->nattrs > 16) return E_INVALID_VALUE;
    int ex[7] = {0, 0, 0, 0, 0, 0, (int)cfg->nattrs};
    for (unsigned i = 0; i < cfg->nattrs; i++) {
        const struct launch_attr *a = &cfg->attrs[i];
        switch (a->id) {
        case 2: ex[0] = a->v.i; break;
        case 4:
            ex[1] = (int)a->v.cluster.x, ex[2] = (int)a->v.cluster.y, ex[3] = (int)a->v.cluster.z;
            if (!ex[1] || !ex[2] || !ex[3] || cfg->gx % ex[1] || cfg->gy % ex[2] || cfg->gz % ex[3] ||
                ex[1] * ex[2] * ex[3] > 8)
                return 912; /* CUDA_ERROR_INVALID_CLUSTER_SIZE */
            break;
        case 8: ex[4] = a->v.i, ex[5] = 1; break;
        default: return E_INVALID_VALUE;
        }
    }
    if (ex[0] && (long)cfg->gx * cfg->gy * cfg->gz > fake_max_blocks(cfg->bx * cfg->by * cfg->bz, cfg->shmem))
        return 720; /* CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE */
    pthread_mutex_lock(&mu);
    CUresult r = launch_as("cuLaunchKernelEx", f, cfg->gx, cfg->gy, cfg->gz, cfg->bx, cfg->by, cfg->bz, cfg->shmem,
                           cfg->stream, params, extra);
    if (!r) memcpy(last_ex, ex, sizeof ex);
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuLaunchCooperativeKernel(handle_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                   unsigned bz, unsigned shmem, handle_t s, void **params) {
    ENTER("cuLaunchCooperativeKernel");
    if ((long)gx * gy * gz > fake_max_blocks(bx * by * bz, shmem)) return 720;
    pthread_mutex_lock(&mu);
    CUresult r = launch_as("cuLaunchCooperativeKernel", f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
    if (!r) {
        int ex[7] = {1, 0, 0, 0, 0, 0, 0};
        memcpy(last_ex, ex, sizeof ex);
    }
    pthread_mutex_unlock(&mu);
    return r;
}

/* fake_last_launch_ex copies the last extended or cooperative launch's
 * attributes into out[0..6] (see last_ex). */
void fake_last_launch_ex(int *out) {
    pthread_mutex_lock(&mu);
    memcpy(out, last_ex, sizeof last_ex);
    pthread_mutex_unlock(&mu);
}

/* Occupancy (driver/occupancy.go), for the fake's device: 4 SMs of 2048
 * threads, at most 32 blocks and 228 KiB of shared memory each, blocks of
 * at most 1024 threads and 227 KiB of dynamic shared memory. Included by
 * libcuda.c. */

static long blocks_per_sm(int bs, size_t dyn) {
    if (dyn > (227u << 10)) return 0;
    long per = 2048 / bs;
    if (per > 32) per = 32;
    if (dyn) {
        long by_smem = (long)((228u << 10) / (dyn + 1024)); /* 1 KiB reserved per block */
        if (by_smem < per) per = by_smem;
    }
    return per;
}

static CUresult occupancy_blocks(const char *call, int *n, handle_t f, int bs, size_t dyn, unsigned flags) {
    ENTER(call);
    if (!n || bs <= 0 || bs > 1024 || flags > 1) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *fo = func_use(call, f);
    if (fo && !check_ctx(call, fo)) fo = NULL;
    if (fo) *n = (int)blocks_per_sm(bs, dyn);
    pthread_mutex_unlock(&mu);
    return fo ? OK : E_INVALID_HANDLE;
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, handle_t f, int bs, size_t dyn) {
    return occupancy_blocks("cuOccupancyMaxActiveBlocksPerMultiprocessor", n, f, bs, dyn, 0);
}

CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, handle_t f, int bs, size_t dyn, unsigned flags) {
    return occupancy_blocks("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", n, f, bs, dyn, flags);
}

static CUresult potential(const char *call, int *grid, int *block, handle_t f, void *cb, size_t dyn, int limit,
                          unsigned flags) {
    ENTER(call);
    if (!grid || !block || limit < 0 || flags > 1) return E_INVALID_VALUE;
    if (cb) {
        violation("%s: the binding passes no callback", call);
        return E_INVALID_VALUE;
    }
    pthread_mutex_lock(&mu);
    struct obj *fo = func_use(call, f);
    if (fo && !check_ctx(call, fo)) fo = NULL;
    if (!fo) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    int max = limit && limit < 1024 ? limit : 1024;
    long best = -1;
    int best_bs = 0;
    for (int bs = 32; bs <= max; bs += 32) {
        long t = blocks_per_sm(bs, dyn) * bs;
        if (t >= best) best = t, best_bs = bs; /* the largest block of the best occupancy */
    }
    *block = best > 0 ? best_bs : 0;
    *grid = best > 0 ? (int)(4 * blocks_per_sm(best_bs, dyn)) : 0;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuOccupancyMaxPotentialBlockSize(int *grid, int *block, handle_t f, void *cb, size_t dyn, int limit) {
    return potential("cuOccupancyMaxPotentialBlockSize", grid, block, f, cb, dyn, limit, 0);
}

CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *grid, int *block, handle_t f, void *cb, size_t dyn, int limit,
                                                   unsigned flags) {
    return potential("cuOccupancyMaxPotentialBlockSizeWithFlags", grid, block, f, cb, dyn, limit, flags);
}

CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *out, handle_t f, int nblocks, int bs) {
    ENTER("cuOccupancyAvailableDynamicSMemPerBlock");
    if (!out || nblocks <= 0 || bs <= 0 || bs > 1024) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *fo = func_use("cuOccupancyAvailableDynamicSMemPerBlock", f);
    if (!fo) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    long per = 2048 / bs > 32 ? 32 : 2048 / bs;
    long avail = nblocks > per ? 0 : (long)(228u << 10) / nblocks - 1024;
    if (avail > (227L << 10)) avail = 227L << 10;
    *out = avail > 0 ? (size_t)avail : 0;
    pthread_mutex_unlock(&mu);
    return OK;
}

static CUresult cluster_query(const char *call, int *out, handle_t f, const struct launch_config *cfg, int active) {
    ENTER(call);
    if (!out || !cfg || (cfg->nattrs && !cfg->attrs)) return E_INVALID_VALUE;
    unsigned cluster = 0;
    for (unsigned i = 0; i < cfg->nattrs; i++)
        if (cfg->attrs[i].id == 4)
            cluster = cfg->attrs[i].v.cluster.x * cfg->attrs[i].v.cluster.y * cfg->attrs[i].v.cluster.z;
    unsigned threads = cfg->bx * cfg->by * cfg->bz;
    if (threads == 0 || threads > 1024 || (active && cluster == 0)) return E_INVALID_VALUE;
    if (active && cluster > 8) return 912;
    pthread_mutex_lock(&mu);
    struct obj *fo = func_use(call, f);
    if (!fo) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    *out = active ? (int)(4 * blocks_per_sm((int)threads, cfg->shmem) / cluster) : 8;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuOccupancyMaxPotentialClusterSize(int *out, handle_t f, const struct launch_config *cfg) {
    return cluster_query("cuOccupancyMaxPotentialClusterSize", out, f, cfg, 0);
}

CUresult cuOccupancyMaxActiveClusters(int *out, handle_t f, const struct launch_config *cfg) {
    return cluster_query("cuOccupancyMaxActiveClusters", out, f, cfg, 1);
}

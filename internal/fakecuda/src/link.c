/* The JIT linker (driver/link.go). A link state collects inputs: PTX text,
 * NUL-terminated within its size ("error" in it fails with a log line, as
 * in cuModuleLoadDataEx), cubins and fatbins by their magic.
 * cuLinkComplete makes a cubin the fake loads: a 64-byte ELF header for
 * EM_CUDA followed by the inputs' sizes, owned by the state until
 * cuLinkDestroy. Included by libcuda.c. */

struct link_state {
    char *info, *err;
    size_t infosz, errsz;
    int inputs;
    unsigned char *cubin;
    size_t cubinsz;
};

static struct obj *link_use(const char *call, handle_t h) {
    struct obj *o = lookup(call, h, K_LINK);
    if (o && !check_ctx(call, o)) return NULL;
    return o;
}

CUresult cuLinkCreate_v2(unsigned n, int *keys, void **vals, handle_t *out) {
    ENTER("cuLinkCreate_v2");
    if (!out || (n && (!keys || !vals))) return E_INVALID_VALUE;
    struct link_state *ls = calloc(1, sizeof *ls);
    for (unsigned i = 0; i < n; i++) {
        switch (keys[i]) {
        case 3: ls->info = vals[i]; break;
        case 4: ls->infosz = (size_t)(uintptr_t)vals[i]; break;
        case 5: ls->err = vals[i]; break;
        case 6: ls->errsz = (size_t)(uintptr_t)vals[i]; break;
        case 7:
            if ((uintptr_t)vals[i] > 4) {
                free(ls);
                return E_INVALID_VALUE;
            }
            break;
        case 8: case 12: break;
        default:
            free(ls);
            return E_INVALID_VALUE;
        }
    }
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuLinkCreate_v2")) {
        pthread_mutex_unlock(&mu);
        free(ls);
        return E_INVALID_CONTEXT;
    }
    struct obj *o = new_obj(K_LINK, current->ctx);
    o->base = (char *)ls;
    *out = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuLinkAddData_v2(handle_t h, int type, void *data, size_t size, const char *name, unsigned n, int *keys,
                          void **vals) {
    ENTER("cuLinkAddData_v2");
    (void)keys, (void)vals;
    pthread_mutex_lock(&mu);
    struct obj *o = link_use("cuLinkAddData_v2", h);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct link_state *ls = (struct link_state *)o->base;
    CUresult r = OK;
    const unsigned char *b = data;
    if (!data || size < 4 || n != 0) r = E_INVALID_VALUE;
    else if (type == 1) {
        if (b[size - 1] != 0) {
            violation("cuLinkAddData_v2: PTX input %s of %zu bytes is not NUL-terminated", name ? name : "?", size);
            r = E_INVALID_VALUE;
        } else if (image_kind(data) != 0) {
            r = E_INVALID_PTX;
        } else if (strstr(data, "error")) {
            if (ls->err && ls->errsz)
                snprintf(ls->err, ls->errsz, "ptxas fake: %s, line 1; error : the input asks for an error", name ? name : "?");
            r = E_INVALID_PTX;
        }
    } else if (type == 0) {
        if (image_kind(data) != 1) r = E_INVALID_IMAGE;
    } else if (type == 2) {
        if (image_kind(data) != 2) r = E_INVALID_IMAGE;
    } else {
        r = E_INVALID_VALUE;
    }
    if (!r) {
        ls->inputs++;
        if (ls->info && ls->infosz) snprintf(ls->info, ls->infosz, "fake linker: %d input(s), last %s", ls->inputs, name ? name : "?");
    }
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuLinkComplete(handle_t h, void **cubin, size_t *size) {
    ENTER("cuLinkComplete");
    pthread_mutex_lock(&mu);
    struct obj *o = link_use("cuLinkComplete", h);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct link_state *ls = (struct link_state *)o->base;
    if (!cubin || !size || ls->inputs == 0) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    free(ls->cubin);
    ls->cubinsz = 64 + 16;
    ls->cubin = calloc(1, ls->cubinsz);
    memcpy(ls->cubin, "\x7f" "ELF\x02\x01\x01", 7);
    ls->cubin[18] = 190; /* EM_CUDA */
    snprintf((char *)ls->cubin + 64, 16, "inputs %d", ls->inputs);
    *cubin = ls->cubin;
    *size = ls->cubinsz;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuLinkDestroy(handle_t h) {
    ENTER("cuLinkDestroy");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuLinkDestroy", h, K_LINK);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct link_state *ls = (struct link_state *)o->base;
    /* Poison the cubin, so that a reader after the destroy sees garbage. */
    if (ls->cubin) memset(ls->cubin, 0xEE, ls->cubinsz);
    free(ls->cubin);
    free(ls);
    o->base = NULL;
    kill_obj("cuLinkDestroy", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

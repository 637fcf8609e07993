/* Context-independent loading (driver/library.go). A library is loaded
 * once, with no context current; it has one module per context, made when
 * a context first asks for it (cuLibraryGetModule, cuKernelGetFunction),
 * and a kernel gives a function on the current context, of that module.
 * Unloading the library kills its modules, so that a function of it used
 * afterwards is a violation. Every kernel name exists except ones that
 * start with "missing". Included by libcuda.c. */

#define MAX_LIBS 256
static struct {
    struct obj *lib;
    struct obj *mods[MAX_DEVICES];
} libs[MAX_LIBS];

/* lib_mod returns lib's module on the current context, making it; mu held. */
static struct obj *lib_mod(struct obj *lib) {
    int ctx = cur_ctx();
    for (int i = 0; i < MAX_LIBS; i++) {
        if (libs[i].lib != lib) continue;
        struct obj *m = libs[i].mods[ctx];
        if (!m) {
            /* Not counted nor listed with the context's objects: the
             * library owns it, and a context may go with it loaded. */
            m = calloc(1, sizeof *m);
            m->magic = MAGIC;
            m->kind = K_MODULE;
            m->live = 1;
            m->ctx = ctx;
            snprintf(m->name, sizeof m->name, "library module");
            libs[i].mods[ctx] = m;
        }
        return m;
    }
    return NULL;
}

CUresult cuLibraryLoadData(handle_t *out, const void *code, int *jit, void **jitvals, unsigned njit, int *libopts,
                           void **libvals, unsigned nlib) {
    ENTER("cuLibraryLoadData");
    (void)libopts, (void)libvals;
    if (!out || !code || nlib != 0 || (njit && (!jit || !jitvals))) return E_INVALID_VALUE;
    char *errlog = NULL, *info = NULL;
    size_t errsz = 0, infosz = 0;
    for (unsigned i = 0; i < njit; i++) {
        switch (jit[i]) {
        case 3: info = jitvals[i]; break;
        case 4: infosz = (size_t)(uintptr_t)jitvals[i]; break;
        case 5: errlog = jitvals[i]; break;
        case 6: errsz = (size_t)(uintptr_t)jitvals[i]; break;
        case 7: case 12: break;
        default: return E_INVALID_VALUE; /* 8, the target from the context, has no context here */
        }
    }
    int kind = image_kind(code);
    if (kind < 0) return E_INVALID_IMAGE;
    if (kind == 0 && strstr(code, "error")) {
        if (errlog && errsz) snprintf(errlog, errsz, "ptxas fake: line 1; error : the library asks for an error");
        return E_INVALID_PTX;
    }
    pthread_mutex_lock(&mu);
    int slot = -1;
    for (int i = 0; i < MAX_LIBS && slot < 0; i++)
        if (!libs[i].lib) slot = i;
    if (slot < 0) {
        pthread_mutex_unlock(&mu);
        return E_OUT_OF_MEMORY;
    }
    struct obj *o = new_obj(K_LIBRARY, -1);
    libs[slot].lib = o;
    if (info && infosz) snprintf(info, infosz, "fake JIT: library of kind %d", kind);
    *out = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuLibraryUnload(handle_t h) {
    ENTER("cuLibraryUnload");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuLibraryUnload", h, K_LIBRARY);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    for (int i = 0; i < MAX_LIBS; i++) {
        if (libs[i].lib != o) continue;
        for (int d = 0; d < MAX_DEVICES; d++) {
            struct obj *m = libs[i].mods[d];
            if (!m) continue;
            if (m->inflight > 0) violation("cuLibraryUnload: module of context %d unloaded while %ld call(s) on it were in flight", d, m->inflight);
            m->live = 0; /* kept, never freed, so that stale functions find it dead */
        }
        memset(&libs[i], 0, sizeof libs[i]);
    }
    kill_obj("cuLibraryUnload", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuLibraryGetKernel(handle_t *k, handle_t h, const char *name) {
    ENTER("cuLibraryGetKernel");
    if (!k || !name) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *lo = lookup("cuLibraryGetKernel", h, K_LIBRARY);
    if (!lo) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (strncmp(name, "missing", 7) == 0) {
        pthread_mutex_unlock(&mu);
        return E_NOT_FOUND;
    }
    struct obj *o = new_obj(K_KERNEL, -1);
    live_count[K_KERNEL]--; /* kernels die with their library */
    o->mod = lo;
    snprintf(o->name, sizeof o->name, "%s", name);
    *k = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuLibraryGetModule(handle_t *m, handle_t h) {
    ENTER("cuLibraryGetModule");
    if (!m) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *lo = lookup("cuLibraryGetModule", h, K_LIBRARY);
    if (!lo || !need_ctx("cuLibraryGetModule")) {
        pthread_mutex_unlock(&mu);
        return lo ? E_INVALID_CONTEXT : E_INVALID_HANDLE;
    }
    *m = (handle_t)lib_mod(lo);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuKernelGetFunction(handle_t *f, handle_t k) {
    ENTER("cuKernelGetFunction");
    if (!f) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *ko = lookup("cuKernelGetFunction", k, K_KERNEL);
    if (ko && !ko->mod->live) {
        violation("cuKernelGetFunction: kernel %s used after its library was unloaded", ko->name);
        ko = NULL;
    }
    if (!ko || !need_ctx("cuKernelGetFunction")) {
        pthread_mutex_unlock(&mu);
        return ko ? E_INVALID_CONTEXT : E_INVALID_HANDLE;
    }
    struct obj *o = new_obj(K_FUNC, cur_ctx());
    live_count[K_FUNC]--;
    o->mod = lib_mod(ko->mod);
    snprintf(o->name, sizeof o->name, "%s", ko->name);
    *f = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

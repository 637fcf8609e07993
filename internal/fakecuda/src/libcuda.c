/*
 * A fake libcuda.so.1 for tests on machines without a GPU.
 *
 * It implements the driver entry points that package driver binds, through
 * cuGetProcAddress_v2 and through the versioned export names, with:
 *   - devices whose memory is host memory, so copies move real bytes;
 *   - streams whose work runs asynchronously on one worker thread, in issue
 *     order, with a configurable delay per operation, so that host memory
 *     can be dropped or freed while a copy is still pending;
 *   - a registry of every handle, so that a call on a destroyed or unknown
 *     handle, a destroy while a call on the same handle is in flight, an
 *     asynchronous copy that touches host memory that is no longer pinned
 *     or registered, and an operation on another context's object are all
 *     recorded as violations, with a message, instead of crashing;
 *   - failure injection (the nth call of a named entry point returns a
 *     given CUresult) and delays (a named entry point sleeps first);
 *   - stream-ordered allocation: default and created memory pools, and
 *     cuMemFreeAsync that frees only when the stream's earlier work has
 *     run, while cuMemFree on such memory does not wait (as the driver);
 *   - stream capture into graphs, in thread-local or global mode, whose
 *     forbidden calls invalidate the capture (among them, from any thread,
 *     a wait for the capturing stream or for its context), and graph execs
 *     whose launches replay the captured operations after checking that
 *     the memory they use is still live, and whose nodes keep the handles
 *     of the graph they were instantiated from, also after an update.
 *   - a no-op mode (fake_noop) in which the hot entry points, the ones a
 *     stream's issue loop calls, return at once and do nothing, so that a
 *     benchmark measures the binding's own cost per call.
 *
 * The fake_* functions are the test-side controls; package fakecuda binds
 * them. Everything is guarded by one mutex: the fake is for correctness,
 * not speed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef uintptr_t handle_t;

enum {
    OK = 0,
    E_INVALID_VALUE = 1,
    E_OUT_OF_MEMORY = 2,
    E_NOT_INITIALIZED = 3,
    E_INVALID_DEVICE = 101,
    E_INVALID_IMAGE = 200,
    E_INVALID_CONTEXT = 201,
    E_INVALID_PTX = 218,
    E_INVALID_HANDLE = 400,
    E_NOT_FOUND = 500,
    E_NOT_READY = 600,
    E_ALREADY_REGISTERED = 712,
    E_NOT_REGISTERED = 713,
    E_NOT_SUPPORTED = 801,
    E_ILLEGAL_STATE = 401,
    E_CAPTURE_UNSUPPORTED = 900,
    E_CAPTURE_INVALIDATED = 901,
    E_CAPTURE_WRONG_THREAD = 908,
    E_GRAPH_UPDATE = 910,
};

enum kind { K_CTX = 1, K_STREAM, K_EVENT, K_MODULE, K_FUNC, K_DEVMEM, K_HOSTMEM, K_REG, K_POOL, K_GRAPH, K_GEXEC,
            K_LIBRARY, K_KERNEL, K_LINK, K_NKINDS };
static const char *kind_names[] = {"?", "context", "stream", "event", "module", "function",
                                   "device memory", "host memory", "registration", "memory pool", "graph", "graph exec",
                                   "library", "kernel", "link state"};

#define MAGIC 0x0FAC0DAu
#define MAX_DEVICES 8

struct obj {
    unsigned magic;
    int kind;
    int live;
    int ctx;          /* owning device ordinal, -1 for none */
    long inflight;    /* calls using this handle right now */
    char *base;       /* memory objects: the bytes */
    size_t size;
    unsigned flags;
    long pending;     /* memory objects: queued async ops that touch it */
    long last_seq;    /* streams: the last op queued; events: the record's op */
    int recorded;
    int timing;
    double done_at;   /* events: when the record completed, in ms */
    struct obj *mod;  /* functions: their module */
    char name[64];
    /* Stream-ordered memory: allocated from a pool, and the pool. */
    int async;
    struct obj *pool;
    unsigned long long threshold; /* pools: CU_MEMPOOL_ATTR_RELEASE_THRESHOLD */
    int is_default;               /* pools: a device's default pool */
    /* Streams: the graph being captured, by which thread, in which mode. */
    struct obj *cap_graph;
    pthread_t cap_thread;
    int cap_mode, cap_invalid;
    /* Graphs and graph execs: the captured operations. */
    struct op *ops;
    int nops;
    /* Graph execs: the graph instantiated from, whose node handles name
     * the exec's nodes, also after an update from another graph. */
    struct obj *graph;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static int ndevices = 2;
static int initialised;
static int primary_refs[MAX_DEVICES];
static struct obj *primary[MAX_DEVICES];
static __thread struct obj *current;
/* The stream this thread captures in thread-local or global mode. */
static __thread struct obj *capturing;
/* How many threads are in capture mode (capturing set), across the
 * process: a thread that goes back to a pool with a capture that was
 * never ended stays counted, and fails its forbidden calls for ever. */
static long capturing_threads;

/* Live memory objects, for address lookups. */
static struct obj **mems;
static size_t nmems, capmems;
static long live_count[K_NKINDS];

/* Violations. */
static long violations;
static char last_violation[512];

/* sleep_us sleeps for usec microseconds in full: a signal (the Go
 * runtime's preemption signal among them) does not cut it short, as it
 * would cut usleep, so a delayed call blocks as a driver's wait would. */
static void sleep_us(int usec) {
    struct timespec left = {usec / 1000000, (long)(usec % 1000000) * 1000};
    while (nanosleep(&left, &left) == -1 && errno == EINTR) {
    }
}

/* Failure injection and delays, by export name. */
struct plan { char name[64]; long calls; long fail_at; int fail_every; int code; int delay_us; };
static struct plan plans[64];
static int nplans;
static int exec_delay_us;

/* No-op mode (fake_noop): cuLaunchKernel, the asynchronous host copies,
 * cuEventRecord and cuStreamWaitEvent return CUDA_SUCCESS at once, and
 * cuCtxGetCurrent only reads the thread's context, with no lock, no
 * bookkeeping and no checks. Read without the mutex: set it before the
 * calls it affects. */
static int noop;
#define NOOP() do { if (__atomic_load_n(&noop, __ATOMIC_RELAXED)) return OK; } while (0)

/* Last launch, for tests of argument marshalling. */
static unsigned char last_params[16][16];
static int last_nparams;
static unsigned last_grid[3], last_block[3], last_shmem;
static void **last_extra;

static void violation(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
static void violation(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_violation, sizeof last_violation, fmt, ap);
    va_end(ap);
    violations++;
    if (getenv("FAKE_CUDA_VERBOSE")) fprintf(stderr, "fakecuda: violation: %s\n", last_violation);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static struct plan *plan_for(const char *name, int create) {
    for (int i = 0; i < nplans; i++)
        if (strcmp(plans[i].name, name) == 0) return &plans[i];
    if (!create || nplans == 64) return NULL;
    struct plan *p = &plans[nplans++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    return p;
}

/* enter counts the call, sleeps if asked, and returns an injected failure
 * or OK. It is called with mu unlocked. */
static CUresult enter(const char *name) {
    pthread_mutex_lock(&mu);
    struct plan *p = plan_for(name, 1);
    CUresult r = OK;
    int delay = 0;
    if (p) {
        p->calls++;
        if (p->code && (p->fail_every || p->calls == p->fail_at)) r = p->code;
        delay = p->delay_us;
    }
    pthread_mutex_unlock(&mu);
    if (delay) sleep_us(delay);
    return r;
}

/* Live streams, events and modules, so that destroying a context can
 * find what was left on it. */
static struct obj **others;
static size_t nothers, capothers;

static struct obj *new_obj(int kind, int ctx) {
    struct obj *o = calloc(1, sizeof *o);
    o->magic = MAGIC;
    o->kind = kind;
    o->live = 1;
    o->ctx = ctx;
    live_count[kind]++;
    if (kind == K_STREAM || kind == K_EVENT || kind == K_MODULE || kind == K_POOL || kind == K_GRAPH ||
        kind == K_GEXEC) {
        if (nothers == capothers) {
            capothers = capothers ? 2 * capothers : 64;
            others = realloc(others, capothers * sizeof *others);
        }
        others[nothers++] = o;
    }
    return o;
}

/* lookup checks that h is a live object of kind; it never frees objects, so
 * a stale handle still points at its (dead) record. */
static struct obj *lookup(const char *call, handle_t h, int kind) {
    struct obj *o = (struct obj *)h;
    if (h == 0 || o->magic != MAGIC || o->kind != kind) {
        violation("%s: unknown %s handle %#lx", call, kind_names[kind], (unsigned long)h);
        return NULL;
    }
    if (!o->live) {
        violation("%s: %s handle %#lx used after it was destroyed", call, kind_names[kind], (unsigned long)h);
        return NULL;
    }
    return o;
}

static void kill_obj(const char *call, struct obj *o) {
    if (o->inflight > 0)
        violation("%s: %s destroyed while %ld call(s) on it were in flight", call, kind_names[o->kind], o->inflight);
    o->live = 0;
    live_count[o->kind]--;
    for (size_t i = 0; i < nothers; i++)
        if (others[i] == o) {
            others[i] = others[--nothers];
            break;
        }
}

static int cur_ctx(void) { return current ? current->ctx : -1; }

/* forbidden reports a call that stream capture forbids: made by a thread
 * that is capturing, or on a stream that is. Like the driver, it
 * invalidates the capture; called with mu held. */
static int forbidden(struct obj *so) {
    struct obj *c = so && so->cap_graph ? so : capturing;
    if (!c || !c->cap_graph) return 0;
    c->cap_invalid = 1;
    return 1;
}

/* ctx_capturing reports whether a stream of context ctx is capturing, and
 * invalidates every such capture: waiting for a context with a capture in
 * progress on it is invalid in every capture mode, from every thread, and
 * the driver refuses it. Called with mu held. */
static int ctx_capturing(int ctx) {
    int any = 0;
    for (size_t i = 0; i < nothers; i++) {
        struct obj *o = others[i];
        if (o->kind == K_STREAM && o->live && o->ctx == ctx && o->cap_graph) {
            o->cap_invalid = 1;
            any = 1;
        }
    }
    return any;
}

static int check_ctx(const char *call, struct obj *o) {
    if (o->ctx != cur_ctx()) {
        violation("%s: %s of context %d used while context %d is current", call, kind_names[o->kind], o->ctx, cur_ctx());
        return 0;
    }
    return 1;
}

static void add_mem(struct obj *o) {
    if (nmems == capmems) {
        capmems = capmems ? 2 * capmems : 64;
        mems = realloc(mems, capmems * sizeof *mems);
    }
    mems[nmems++] = o;
}

static void drop_mem(struct obj *o) {
    for (size_t i = 0; i < nmems; i++)
        if (mems[i] == o) {
            mems[i] = mems[--nmems];
            return;
        }
}

/* find_mem returns the live memory object of kind (or, for host memory,
 * either host kind) that holds [p, p+n). */
static struct obj *find_mem(uintptr_t p, size_t n, int kind) {
    for (size_t i = 0; i < nmems; i++) {
        struct obj *o = mems[i];
        int match = o->kind == kind || (kind == K_HOSTMEM && o->kind == K_REG);
        if (match && p >= (uintptr_t)o->base && p + n <= (uintptr_t)o->base + o->size && n <= o->size) return o;
    }
    return NULL;
}

static void bury(struct obj *o);
static void peer_forget(int dev);
static struct op *graph_append(struct obj *g, const struct op *op);

/* ---- the asynchronous engine: one worker runs every stream's work in
 * issue order, which respects each stream's order and every event wait. */

enum { OP_H2D = 1, OP_D2H, OP_D2D, OP_MEMSET, OP_RECORD, OP_WAIT, OP_LAUNCH, OP_FREE, OP_HOST };
struct op {
    int type;
    long seq;
    struct obj *stream, *event, *host, *dev, *dev2;
    struct obj *freeing; /* OP_FREE: the memory it frees */
    char *dst, *src;
    size_t n;
    int value;
    int width;                    /* OP_MEMSET: bytes per element, 1 (or 0), 2 or 4 */
    unsigned char params[16][16]; /* OP_LAUNCH: the argument values */
    int nparams;
    struct obj *func;             /* OP_LAUNCH: the kernel */
    long node;                    /* in a graph: the node's handle */
    void (*hostfn)(void *);       /* OP_HOST: the host function and its argument */
    void *user;
    struct op *next;
};
static void run_host(struct op *op); /* hostfunc.c */
static int image_kind(const void *image); /* image.c */
static struct op *qhead, *qtail;

/* fill sets n bytes at dst to v, repeated in elements of width bytes (1, 2
 * or 4; 0 counts as 1), as cuMemsetD8, cuMemsetD16 and cuMemsetD32 do. */
static void fill(char *dst, unsigned v, int width, size_t n) {
    if (width <= 1) {
        memset(dst, (unsigned char)v, n);
        return;
    }
    uint16_t v16 = (uint16_t)v;
    uint32_t v32 = v;
    for (size_t i = 0; i + (size_t)width <= n; i += (size_t)width)
        memcpy(dst + i, width == 2 ? (const void *)&v16 : (const void *)&v32, (size_t)width);
}
static long issued_seq, done_seq;
static pthread_t worker;
static int worker_started;

/* run_kernel runs the one kernel the fake can: a function named
 * "fake_copy" with parameters (float *out, const float *in, unsigned n)
 * copies n floats of device memory, so that tests of the engine's paths
 * see their data arrive. Every other kernel does nothing. mu held. */
static void run_kernel(struct op *op) {
    if (!op->func || strcmp(op->func->name, "fake_copy") != 0) return;
    if (op->nparams < 3) {
        violation("fake_copy launched with %d recorded parameters; set the sizes (8, 8, 4) first", op->nparams);
        return;
    }
    char *dst, *src;
    unsigned n;
    memcpy(&dst, op->params[0], sizeof dst);
    memcpy(&src, op->params[1], sizeof src);
    memcpy(&n, op->params[2], sizeof n);
    size_t bytes = (size_t)n * 4;
    if (!find_mem((uintptr_t)dst, bytes, K_DEVMEM) || !find_mem((uintptr_t)src, bytes, K_DEVMEM)) {
        violation("fake_copy of %u floats outside live device memory", n);
        return;
    }
    memmove(dst, src, bytes);
}

static void *work(void *arg) {
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!qhead) pthread_cond_wait(&cv, &mu);
        struct op *op = qhead;
        int delay = exec_delay_us;
        pthread_mutex_unlock(&mu);
        if (delay) sleep_us(delay);
        pthread_mutex_lock(&mu);
        /* Check the host side at the moment the DMA would touch it. */
        if (op->host) {
            uintptr_t hp = (uintptr_t)(op->type == OP_H2D ? op->src : op->dst);
            struct obj *h = find_mem(hp, op->n, K_HOSTMEM);
            if (!h || h != op->host)
                violation("async %s copy of %zu bytes ran after its host memory %p was freed or unregistered",
                          op->type == OP_H2D ? "H2D" : "D2H", op->n, (void *)hp);
        }
        if (op->dev && !op->dev->live)
            violation("async operation ran on freed device memory");
        int safe = !op->host || find_mem((uintptr_t)(op->type == OP_H2D ? op->src : op->dst), op->n, K_HOSTMEM);
        switch (op->type) {
        case OP_H2D: case OP_D2H: case OP_D2D:
            if (safe) memmove(op->dst, op->src, op->n);
            break;
        case OP_MEMSET:
            fill(op->dst, (unsigned)op->value, op->width, op->n);
            break;
        case OP_LAUNCH:
            run_kernel(op);
            break;
        case OP_HOST:
            run_host(op); /* unlocks mu around the call */
            break;
        case OP_RECORD:
            op->event->done_at = now_ms();
            break;
        case OP_FREE:
            if (op->freeing->pending > 0)
                violation("cuMemFreeAsync: memory freed while %ld operation(s) on it are pending",
                          op->freeing->pending);
            kill_obj("cuMemFreeAsync", op->freeing);
            bury(op->freeing);
            break;
        default:
            break;
        }
        if (op->host) op->host->pending--;
        if (op->dev) op->dev->pending--;
        if (op->dev2) op->dev2->pending--;
        done_seq = op->seq;
        qhead = op->next;
        if (!qhead) qtail = NULL;
        free(op);
        pthread_cond_broadcast(&cv);
    }
    return NULL;
}

/* enqueue adds op to the queue, or to the graph its stream is capturing;
 * called with mu held. */
static void enqueue(struct op *op) {
    if (op->stream && op->stream->cap_graph) {
        graph_append(op->stream->cap_graph, op);
        free(op);
        return;
    }
    if (!worker_started) {
        pthread_create(&worker, NULL, work, NULL);
        pthread_detach(worker);
        worker_started = 1;
    }
    op->seq = ++issued_seq;
    if (op->stream) op->stream->last_seq = op->seq;
    if (op->host) op->host->pending++;
    if (op->dev) op->dev->pending++;
    if (op->dev2) op->dev2->pending++;
    if (qtail) qtail->next = op; else qhead = op;
    qtail = op;
    pthread_cond_broadcast(&cv);
}

static void wait_seq(long seq) {
    while (done_seq < seq) pthread_cond_wait(&cv, &mu);
}

/* ---- the driver API ---- */

#define ENTER(name) do { CUresult _r = enter(name); if (_r) return _r; } while (0)

CUresult cuInit(unsigned flags) {
    ENTER("cuInit");
    (void)flags;
    const char *n = getenv("FAKE_CUDA_DEVICES");
    if (n) ndevices = atoi(n) > MAX_DEVICES ? MAX_DEVICES : atoi(n);
    initialised = 1;
    return OK;
}

CUresult cuDriverGetVersion(int *v) {
    ENTER("cuDriverGetVersion");
    const char *s = getenv("FAKE_CUDA_VERSION");
    *v = s ? atoi(s) : 13000;
    return OK;
}

struct errname { int code; const char *name, *text; };
static const struct errname errnames[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {401, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {901, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
    {908, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread"},
    {910, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE", "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
};

static const struct errname *errname_of(int code) {
    for (size_t i = 0; i < sizeof errnames / sizeof errnames[0]; i++)
        if (errnames[i].code == code) return &errnames[i];
    return NULL;
}

CUresult cuGetErrorName(CUresult e, const char **s) {
    const struct errname *n = errname_of(e);
    if (!n) return E_INVALID_VALUE;
    *s = n->name;
    return OK;
}

CUresult cuGetErrorString(CUresult e, const char **s) {
    const struct errname *n = errname_of(e);
    if (!n) return E_INVALID_VALUE;
    *s = n->text;
    return OK;
}

CUresult cuDeviceGetCount(int *n) {
    ENTER("cuDeviceGetCount");
    if (!initialised) return E_NOT_INITIALIZED;
    *n = ndevices;
    return OK;
}

CUresult cuDeviceGet(int *d, int ordinal) {
    ENTER("cuDeviceGet");
    if (ordinal < 0 || ordinal >= ndevices) return E_INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

CUresult cuDeviceGetName(char *name, int len, int dev) {
    ENTER("cuDeviceGetName");
    if (dev < 0 || dev >= ndevices) return E_INVALID_DEVICE;
    snprintf(name, len, "Fake GPU %d", dev);
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, int dev) {
    ENTER("cuDeviceGetAttribute");
    if (dev < 0 || dev >= ndevices) return E_INVALID_DEVICE;
    switch (attr) {
    case 1: *v = 1024; break;  /* max threads per block */
    case 16: *v = 4; break;    /* SMs */
    case 31: *v = 1; break;    /* concurrent kernels */
    case 33: *v = dev + 1; break; /* PCI bus */
    case 34: *v = 0; break;
    case 40: *v = 2; break;    /* copy engines */
    case 41: *v = 1; break;
    case 50: *v = 0; break;
    case 75: *v = 9; break;
    case 76: *v = 0; break;
    case 99: *v = 1; break;
    default: *v = 0; break;
    }
    return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *b, int dev) {
    ENTER("cuDeviceTotalMem_v2");
    if (dev < 0 || dev >= ndevices) return E_INVALID_DEVICE;
    *b = (size_t)1 << 32;
    return OK;
}

CUresult cuDeviceGetPCIBusId(char *s, int len, int dev) {
    ENTER("cuDeviceGetPCIBusId");
    if (dev < 0 || dev >= ndevices) return E_INVALID_DEVICE;
    snprintf(s, len, "00fa:%02x:00.0", dev + 1); /* a PCI domain no real host uses */
    return OK;
}

CUresult cuDevicePrimaryCtxRetain(handle_t *ctx, int dev) {
    ENTER("cuDevicePrimaryCtxRetain");
    if (dev < 0 || dev >= ndevices) return E_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    if (!primary[dev]) primary[dev] = new_obj(K_CTX, dev);
    if (primary_refs[dev]++ == 0 && !primary[dev]->live) {
        primary[dev]->live = 1;
        live_count[K_CTX]++;
    }
    *ctx = (handle_t)primary[dev];
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(int dev) {
    ENTER("cuDevicePrimaryCtxRelease_v2");
    if (dev < 0 || dev >= ndevices) return E_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    if (primary_refs[dev] == 0) {
        violation("cuDevicePrimaryCtxRelease_v2: device %d released more often than retained", dev);
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    if (--primary_refs[dev] == 0) {
        kill_obj("cuDevicePrimaryCtxRelease_v2", primary[dev]);
        peer_forget(dev); /* peer.c */
        /* Like the real driver, destroying the context frees what is left
         * on it; the fake reports it as a leak. */
        for (size_t i = 0; i < nmems;) {
            if (mems[i]->ctx == dev) {
                violation("context %d destroyed with %s of %zu bytes still allocated", dev,
                          kind_names[mems[i]->kind], mems[i]->size);
                mems[i]->live = 0;
                live_count[mems[i]->kind]--;
                mems[i] = mems[--nmems];
            } else {
                i++;
            }
        }
        for (size_t i = 0; i < nothers;) {
            struct obj *o = others[i];
            if (o->ctx == dev) {
                violation("context %d destroyed with a %s still alive", dev, kind_names[o->kind]);
                kill_obj("cuDevicePrimaryCtxRelease_v2", o); /* removes others[i] */
            } else {
                i++;
            }
        }
    }
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuCtxSetCurrent(handle_t ctx) {
    ENTER("cuCtxSetCurrent");
    pthread_mutex_lock(&mu);
    if (ctx == 0) {
        current = NULL;
    } else {
        struct obj *o = lookup("cuCtxSetCurrent", ctx, K_CTX);
        if (!o) {
            pthread_mutex_unlock(&mu);
            return E_INVALID_CONTEXT;
        }
        current = o;
    }
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuCtxGetCurrent(handle_t *ctx) {
    if (__atomic_load_n(&noop, __ATOMIC_RELAXED)) {
        *ctx = (handle_t)current;
        return OK;
    }
    ENTER("cuCtxGetCurrent");
    *ctx = (handle_t)current;
    return OK;
}

static int need_ctx(const char *call) {
    if (!current || !current->live) {
        violation("%s: no live context is current on this thread", call);
        return 0;
    }
    return 1;
}

CUresult cuCtxSynchronize(void) {
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuCtxSynchronize")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    if (forbidden(NULL) || ctx_capturing(current->ctx)) {
        pthread_mutex_unlock(&mu);
        return E_CAPTURE_UNSUPPORTED;
    }
    struct obj *c = current;
    c->inflight++;
    pthread_mutex_unlock(&mu);
    CUresult r = enter("cuCtxSynchronize"); /* a delay here widens the window */
    pthread_mutex_lock(&mu);
    if (!r) wait_seq(issued_seq);
    pthread_mutex_unlock(&mu);
    /* A delay here holds the call after its wait, before it returns. */
    if (!r) r = enter("cuCtxSynchronize.return");
    pthread_mutex_lock(&mu);
    c->inflight--;
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuMemGetInfo_v2(size_t *free_, size_t *total) {
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuMemGetInfo_v2")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct obj *c = current;
    c->inflight++;
    pthread_mutex_unlock(&mu);
    CUresult r = enter("cuMemGetInfo_v2"); /* a delay here widens the window */
    pthread_mutex_lock(&mu);
    size_t used = 0;
    for (size_t i = 0; i < nmems; i++)
        if (mems[i]->kind == K_DEVMEM && mems[i]->ctx == c->ctx) used += mems[i]->size;
    *total = (size_t)1 << 32;
    *free_ = *total - used;
    c->inflight--;
    pthread_mutex_unlock(&mu);
    return r;
}

static CUresult alloc_mem(const char *call, int kind, void **out, size_t n, unsigned flags) {
    pthread_mutex_lock(&mu);
    if (!need_ctx(call)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    if (n == 0) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    const char *lim = getenv("FAKE_CUDA_MEM_LIMIT");
    if (lim && kind == K_DEVMEM && n > (size_t)atoll(lim)) {
        pthread_mutex_unlock(&mu);
        return E_OUT_OF_MEMORY;
    }
    struct obj *o = new_obj(kind, current->ctx);
    o->base = calloc(1, n);
    o->size = n;
    o->flags = flags;
    if (!o->base) {
        o->live = 0;
        live_count[kind]--;
        pthread_mutex_unlock(&mu);
        return E_OUT_OF_MEMORY;
    }
    add_mem(o);
    *out = o->base;
    pthread_mutex_unlock(&mu);
    return OK;
}

/* Freed memory is kept (poisoned) for a while rather than returned to
 * malloc, so that a use after free reads garbage instead of crashing, and
 * a test can tell what happened. */
static char *graveyard[256];
static int grave_next;
static void bury(struct obj *o) {
    memset(o->base, 0xDB, o->size);
    if (graveyard[grave_next]) free(graveyard[grave_next]);
    graveyard[grave_next] = o->base;
    grave_next = (grave_next + 1) % 256;
}

static CUresult free_mem(const char *call, int kind, uintptr_t p) {
    pthread_mutex_lock(&mu);
    struct obj *o = NULL;
    for (size_t i = 0; i < nmems; i++)
        if (mems[i]->kind == kind && (uintptr_t)mems[i]->base == p) o = mems[i];
    if (!o) {
        violation("%s: %#lx is not the start of live %s", call, (unsigned long)p, kind_names[kind]);
        pthread_mutex_unlock(&mu);
        return kind == K_REG ? E_NOT_REGISTERED : E_INVALID_VALUE;
    }
    if (!check_ctx(call, o)) {
        /* The real driver frees by address whatever context is current;
         * the violation is recorded, the free still happens. */
    }
    if (o->pending > 0)
        violation("%s: %s %#lx freed while %ld asynchronous operation(s) on it are pending", call,
                  kind_names[kind], (unsigned long)p, o->pending);
    kill_obj(call, o);
    drop_mem(o);
    if (kind != K_REG) bury(o);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemAlloc_v2(uintptr_t *p, size_t n) {
    ENTER("cuMemAlloc_v2");
    pthread_mutex_lock(&mu);
    int no = forbidden(NULL);
    pthread_mutex_unlock(&mu);
    if (no) return E_CAPTURE_UNSUPPORTED;
    return alloc_mem("cuMemAlloc_v2", K_DEVMEM, (void **)p, n, 0);
}

CUresult cuMemFree_v2(uintptr_t p) {
    ENTER("cuMemFree_v2");
    /* Like the real driver, freeing device memory waits for the device
     * first (the implicit synchronisation that stream-ordered allocation
     * exists to avoid). */
    pthread_mutex_lock(&mu);
    if (forbidden(NULL)) {
        pthread_mutex_unlock(&mu);
        return E_CAPTURE_UNSUPPORTED;
    }
    /* Memory from a pool is the exception: cuMemFree does not wait for
     * it, and the caller must know that nothing uses it any more. */
    struct obj *o = find_mem(p, 1, K_DEVMEM);
    if (!o || !o->async || (uintptr_t)o->base != p) wait_seq(issued_seq);
    pthread_mutex_unlock(&mu);
    return free_mem("cuMemFree_v2", K_DEVMEM, p);
}

CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
    ENTER("cuMemHostAlloc");
    return alloc_mem("cuMemHostAlloc", K_HOSTMEM, p, n, flags);
}

CUresult cuMemFreeHost(void *p) {
    ENTER("cuMemFreeHost");
    return free_mem("cuMemFreeHost", K_HOSTMEM, (uintptr_t)p);
}

CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
    ENTER("cuMemHostRegister_v2");
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuMemHostRegister_v2")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    for (size_t i = 0; i < nmems; i++) {
        struct obj *o = mems[i];
        if ((o->kind == K_REG || o->kind == K_HOSTMEM) && (char *)p < o->base + o->size && (char *)p + n > o->base) {
            pthread_mutex_unlock(&mu);
            return E_ALREADY_REGISTERED;
        }
    }
    struct obj *o = new_obj(K_REG, current->ctx);
    o->base = p;
    o->size = n;
    o->flags = flags;
    add_mem(o);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemHostUnregister(void *p) {
    ENTER("cuMemHostUnregister");
    return free_mem("cuMemHostUnregister", K_REG, (uintptr_t)p);
}

/* Synchronous copies and memset. */
static CUresult sync_copy(const char *call, char *dst, int dkind, const char *src, int skind, size_t n) {
    pthread_mutex_lock(&mu);
    if (!need_ctx(call)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct obj *d = dkind ? find_mem((uintptr_t)dst, n, dkind) : NULL;
    struct obj *s = skind ? find_mem((uintptr_t)src, n, skind) : NULL;
    if ((dkind && !d) || (skind && !s)) {
        violation("%s: %zu bytes outside live device memory", call, n);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if ((d && !check_ctx(call, d)) || (s && !check_ctx(call, s))) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    /* The legacy default stream: wait for everything queued first. */
    wait_seq(issued_seq);
    pthread_mutex_unlock(&mu);
    memmove(dst, src, n);
    return OK;
}

CUresult cuMemcpyHtoD_v2(uintptr_t dst, const void *src, size_t n) {
    ENTER("cuMemcpyHtoD_v2");
    return sync_copy("cuMemcpyHtoD_v2", (char *)dst, K_DEVMEM, src, 0, n);
}

CUresult cuMemcpyDtoH_v2(void *dst, uintptr_t src, size_t n) {
    ENTER("cuMemcpyDtoH_v2");
    return sync_copy("cuMemcpyDtoH_v2", dst, 0, (const char *)src, K_DEVMEM, n);
}

CUresult cuMemcpyDtoD_v2(uintptr_t dst, uintptr_t src, size_t n) {
    ENTER("cuMemcpyDtoD_v2");
    return sync_copy("cuMemcpyDtoD_v2", (char *)dst, K_DEVMEM, (const char *)src, K_DEVMEM, n);
}

/* sync_memset sets count elements of width bytes at dst to v, on the
 * legacy default stream: after everything queued. A misaligned address is a
 * violation, as it is an error of the driver's. */
static CUresult sync_memset(const char *call, uintptr_t dst, unsigned v, int width, size_t count) {
    size_t n = count * (size_t)width;
    pthread_mutex_lock(&mu);
    struct obj *d = find_mem(dst, n, K_DEVMEM);
    if (!d) {
        violation("%s: %zu bytes outside live device memory", call, n);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (dst % (uintptr_t)width) {
        violation("%s: address %p is not aligned to %d bytes", call, (void *)dst, width);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (!check_ctx(call, d)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    wait_seq(issued_seq);
    fill((char *)dst, v, width, n);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemsetD8_v2(uintptr_t dst, unsigned char v, size_t n) {
    ENTER("cuMemsetD8_v2");
    return sync_memset("cuMemsetD8_v2", dst, v, 1, n);
}

CUresult cuMemsetD16_v2(uintptr_t dst, unsigned short v, size_t n) {
    ENTER("cuMemsetD16_v2");
    return sync_memset("cuMemsetD16_v2", dst, v, 2, n);
}

CUresult cuMemsetD32_v2(uintptr_t dst, unsigned v, size_t n) {
    ENTER("cuMemsetD32_v2");
    return sync_memset("cuMemsetD32_v2", dst, v, 4, n);
}

/* Streams. */
CUresult cuStreamCreate(handle_t *s, unsigned flags) {
    ENTER("cuStreamCreate");
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuStreamCreate")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct obj *o = new_obj(K_STREAM, current->ctx);
    o->flags = flags;
    *s = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuStreamCreateWithPriority(handle_t *s, unsigned flags, int prio) {
    (void)prio;
    ENTER("cuStreamCreateWithPriority");
    return cuStreamCreate(s, flags);
}

CUresult cuStreamDestroy_v2(handle_t s) {
    ENTER("cuStreamDestroy_v2");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuStreamDestroy_v2", s, K_STREAM);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    check_ctx("cuStreamDestroy_v2", o);
    if (o->cap_graph) violation("cuStreamDestroy_v2: stream destroyed while capturing a graph");
    kill_obj("cuStreamDestroy_v2", o); /* queued work still completes */
    pthread_mutex_unlock(&mu);
    return OK;
}

/* stream_use looks up a stream for a call and marks it in flight. */
static struct obj *stream_use(const char *call, handle_t s) {
    struct obj *o = lookup(call, s, K_STREAM);
    if (!o) return NULL;
    if (!check_ctx(call, o)) return NULL;
    return o;
}

CUresult cuStreamSynchronize(handle_t s) {
    pthread_mutex_lock(&mu);
    struct obj *o = stream_use("cuStreamSynchronize", s);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (forbidden(o)) {
        pthread_mutex_unlock(&mu);
        return E_CAPTURE_UNSUPPORTED;
    }
    o->inflight++;
    pthread_mutex_unlock(&mu);
    CUresult r = enter("cuStreamSynchronize"); /* a delay here widens the window */
    pthread_mutex_lock(&mu);
    if (!r) wait_seq(o->last_seq);
    if (!o->live) violation("cuStreamSynchronize: stream destroyed during the call");
    o->inflight--;
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuStreamQuery(handle_t s) {
    ENTER("cuStreamQuery");
    pthread_mutex_lock(&mu);
    struct obj *o = stream_use("cuStreamQuery", s);
    if (o && forbidden(o)) {
        pthread_mutex_unlock(&mu);
        return E_CAPTURE_UNSUPPORTED;
    }
    CUresult r = !o ? E_INVALID_HANDLE : (done_seq >= o->last_seq ? OK : E_NOT_READY);
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuStreamWaitEvent(handle_t s, handle_t e, unsigned flags) {
    (void)flags;
    NOOP();
    ENTER("cuStreamWaitEvent");
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuStreamWaitEvent", s);
    struct obj *eo = lookup("cuStreamWaitEvent", e, K_EVENT);
    if (!so || !eo) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (!check_ctx("cuStreamWaitEvent", eo)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_WAIT;
    op->stream = so;
    enqueue(op);
    pthread_mutex_unlock(&mu);
    return OK;
}

static CUresult async_copy(const char *call, int type, char *dst, const char *src, size_t n, handle_t s) {
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use(call, s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct obj *host = NULL, *dev = NULL, *dev2 = NULL;
    if (type == OP_H2D) {
        host = find_mem((uintptr_t)src, n, K_HOSTMEM);
        dev = find_mem((uintptr_t)dst, n, K_DEVMEM);
    } else if (type == OP_D2H) {
        host = find_mem((uintptr_t)dst, n, K_HOSTMEM);
        dev = find_mem((uintptr_t)src, n, K_DEVMEM);
    } else {
        dev = find_mem((uintptr_t)dst, n, K_DEVMEM);
        dev2 = find_mem((uintptr_t)src, n, K_DEVMEM);
        if (!dev2) dev = NULL;
    }
    if (type != OP_D2D && !host) {
        violation("%s: host memory %p (%zu bytes) is neither pinned nor registered", call,
                  type == OP_H2D ? (const void *)src : (void *)dst, n);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (!dev) {
        violation("%s: %zu bytes outside live device memory", call, n);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (!check_ctx(call, dev)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct op *op = calloc(1, sizeof *op);
    op->type = type;
    op->stream = so;
    op->host = host;
    op->dev = dev;
    op->dev2 = dev2;
    op->dst = dst;
    op->src = (char *)src;
    op->n = n;
    enqueue(op);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemcpyHtoDAsync_v2(uintptr_t dst, const void *src, size_t n, handle_t s) {
    NOOP();
    ENTER("cuMemcpyHtoDAsync_v2");
    return async_copy("cuMemcpyHtoDAsync_v2", OP_H2D, (char *)dst, src, n, s);
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, uintptr_t src, size_t n, handle_t s) {
    NOOP();
    ENTER("cuMemcpyDtoHAsync_v2");
    return async_copy("cuMemcpyDtoHAsync_v2", OP_D2H, dst, (const char *)src, n, s);
}

CUresult cuMemcpyDtoDAsync_v2(uintptr_t dst, uintptr_t src, size_t n, handle_t s) {
    ENTER("cuMemcpyDtoDAsync_v2");
    return async_copy("cuMemcpyDtoDAsync_v2", OP_D2D, (char *)dst, (const char *)src, n, s);
}

/* async_memset queues setting count elements of width bytes at dst to v
 * on the stream s. */
static CUresult async_memset(const char *call, uintptr_t dst, unsigned v, int width, size_t count, handle_t s) {
    size_t n = count * (size_t)width;
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use(call, s);
    struct obj *d = find_mem(dst, n, K_DEVMEM);
    if (!so || !d) {
        if (so) violation("%s: %zu bytes outside live device memory", call, n);
        pthread_mutex_unlock(&mu);
        return so ? E_INVALID_VALUE : E_INVALID_HANDLE;
    }
    if (dst % (uintptr_t)width) {
        violation("%s: address %p is not aligned to %d bytes", call, (void *)dst, width);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_MEMSET;
    op->stream = so;
    op->dev = d;
    op->dst = (char *)dst;
    op->n = n;
    op->value = (int)v;
    op->width = width;
    enqueue(op);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemsetD8Async(uintptr_t dst, unsigned char v, size_t n, handle_t s) {
    ENTER("cuMemsetD8Async");
    return async_memset("cuMemsetD8Async", dst, v, 1, n, s);
}

CUresult cuMemsetD16Async(uintptr_t dst, unsigned short v, size_t n, handle_t s) {
    ENTER("cuMemsetD16Async");
    return async_memset("cuMemsetD16Async", dst, v, 2, n, s);
}

CUresult cuMemsetD32Async(uintptr_t dst, unsigned v, size_t n, handle_t s) {
    ENTER("cuMemsetD32Async");
    return async_memset("cuMemsetD32Async", dst, v, 4, n, s);
}

/* Events. */
CUresult cuEventCreate(handle_t *e, unsigned flags) {
    ENTER("cuEventCreate");
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuEventCreate")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    struct obj *o = new_obj(K_EVENT, current->ctx);
    o->flags = flags;
    o->timing = !(flags & 0x2);
    *e = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuEventDestroy_v2(handle_t e) {
    ENTER("cuEventDestroy_v2");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuEventDestroy_v2", e, K_EVENT);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    kill_obj("cuEventDestroy_v2", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuEventRecord(handle_t e, handle_t s) {
    NOOP();
    ENTER("cuEventRecord");
    pthread_mutex_lock(&mu);
    struct obj *eo = lookup("cuEventRecord", e, K_EVENT);
    struct obj *so = stream_use("cuEventRecord", s);
    if (!eo || !so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (!check_ctx("cuEventRecord", eo)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_RECORD;
    op->stream = so;
    op->event = eo;
    if (so->cap_graph) { /* a captured record: a node, nothing to wait for */
        enqueue(op);
        pthread_mutex_unlock(&mu);
        return OK;
    }
    enqueue(op);
    eo->last_seq = op->seq;
    eo->recorded = 1;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuEventQuery(handle_t e) {
    ENTER("cuEventQuery");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuEventQuery", e, K_EVENT);
    CUresult r = !o ? E_INVALID_HANDLE : (done_seq >= o->last_seq ? OK : E_NOT_READY);
    if (o) o->inflight++;
    pthread_mutex_unlock(&mu);
    /* A delay here holds the call after its answer, before it returns. */
    if (o) {
        CUresult d = enter("cuEventQuery.return");
        if (d) r = d;
        pthread_mutex_lock(&mu);
        o->inflight--;
        pthread_mutex_unlock(&mu);
    }
    return r;
}

CUresult cuEventSynchronize(handle_t e) {
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuEventSynchronize", e, K_EVENT);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    o->inflight++;
    pthread_mutex_unlock(&mu);
    CUresult r = enter("cuEventSynchronize");
    pthread_mutex_lock(&mu);
    if (!r) wait_seq(o->last_seq);
    pthread_mutex_unlock(&mu);
    /* A delay here holds the call after its wait, before it returns. */
    if (!r) r = enter("cuEventSynchronize.return");
    pthread_mutex_lock(&mu);
    o->inflight--;
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuEventElapsedTime_v2(float *ms, handle_t a, handle_t b) {
    ENTER("cuEventElapsedTime_v2");
    pthread_mutex_lock(&mu);
    struct obj *ao = lookup("cuEventElapsedTime_v2", a, K_EVENT);
    struct obj *bo = lookup("cuEventElapsedTime_v2", b, K_EVENT);
    CUresult r = OK;
    if (!ao || !bo) r = E_INVALID_HANDLE;
    else if (!ao->timing || !bo->timing) r = E_INVALID_HANDLE;
    else if (!ao->recorded || !bo->recorded) r = E_INVALID_HANDLE;
    else if (done_seq < ao->last_seq || done_seq < bo->last_seq) r = E_NOT_READY;
    else *ms = (float)(bo->done_at - ao->done_at);
    pthread_mutex_unlock(&mu);
    return r;
}

/* Modules and functions. A module is any image; "error" in PTX text makes
 * the JIT fail with a log line. Every entry name exists except ones that
 * start with "missing". */
CUresult cuModuleLoadDataEx(handle_t *m, const void *image, unsigned n, int *keys, void **vals) {
    ENTER("cuModuleLoadDataEx");
    char *info = NULL, *errlog = NULL;
    size_t infosz = 0, errsz = 0;
    for (unsigned i = 0; i < n; i++) {
        switch (keys[i]) {
        case 3: info = vals[i]; break;
        case 4: infosz = (size_t)(uintptr_t)vals[i]; break;
        case 5: errlog = vals[i]; break;
        case 6: errsz = (size_t)(uintptr_t)vals[i]; break;
        case 7:
            if ((uintptr_t)vals[i] > 4) return E_INVALID_VALUE;
            break;
        case 8: case 12: break;
        default: return E_INVALID_VALUE;
        }
    }
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuModuleLoadDataEx")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    const char *text = image;
    if (image_kind(image) == 0 && strstr(text, "error")) {
        if (errlog && errsz) snprintf(errlog, errsz, "ptxas fake: line 1; error : the image asks for an error");
        pthread_mutex_unlock(&mu);
        return E_INVALID_PTX;
    }
    if (info && infosz) snprintf(info, infosz, "fake JIT: %zu bytes of image", strlen(text));
    struct obj *o = new_obj(K_MODULE, current->ctx);
    *m = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuModuleUnload(handle_t m) {
    ENTER("cuModuleUnload");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuModuleUnload", m, K_MODULE);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    kill_obj("cuModuleUnload", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuModuleGetFunction(handle_t *f, handle_t m, const char *name) {
    ENTER("cuModuleGetFunction");
    pthread_mutex_lock(&mu);
    struct obj *mo = lookup("cuModuleGetFunction", m, K_MODULE);
    if (!mo) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (strncmp(name, "missing", 7) == 0) {
        pthread_mutex_unlock(&mu);
        return E_NOT_FOUND;
    }
    struct obj *o = new_obj(K_FUNC, mo->ctx);
    live_count[K_FUNC]--; /* functions die with their module, not on their own */
    o->mod = mo;
    snprintf(o->name, sizeof o->name, "%s", name);
    *f = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

static struct obj *func_use(const char *call, handle_t f) {
    struct obj *o = (struct obj *)f;
    if (f == 0 || o->magic != MAGIC || o->kind != K_FUNC) {
        violation("%s: unknown function handle", call);
        return NULL;
    }
    if (!o->mod->live) {
        violation("%s: function %s used after its module was unloaded", call, o->name);
        return NULL;
    }
    return o;
}

CUresult cuFuncGetAttribute(int *v, int attr, handle_t f) {
    ENTER("cuFuncGetAttribute");
    pthread_mutex_lock(&mu);
    struct obj *o = func_use("cuFuncGetAttribute", f);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    o->mod->inflight++;
    pthread_mutex_unlock(&mu);
    CUresult r = enter("cuFuncGetAttribute.body");
    *v = attr == 0 ? 1024 : 0;
    pthread_mutex_lock(&mu);
    o->mod->inflight--;
    pthread_mutex_unlock(&mu);
    return r;
}

/* Parameter layouts are unknown to the fake unless a test sets them with
 * fake_set_params; then it answers like CUDA 12.4+. */
static size_t param_sizes[64];
static int nparam_sizes = -1;

CUresult cuFuncGetParamInfo(handle_t f, size_t i, size_t *off, size_t *size) {
    ENTER("cuFuncGetParamInfo");
    if (nparam_sizes < 0) return E_NOT_SUPPORTED;
    (void)f;
    if ((int)i >= nparam_sizes) return E_INVALID_VALUE;
    size_t o = 0;
    for (size_t k = 0; k <= i; k++) {
        size_t a = param_sizes[k] >= 8 ? 8 : param_sizes[k];
        o = (o + a - 1) / a * a;
        if (k < i) o += param_sizes[k];
    }
    *off = o;
    *size = param_sizes[i];
    return OK;
}

CUresult cuLaunchKernel(handle_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shmem, handle_t s, void **params, void **extra) {
    NOOP();
    ENTER("cuLaunchKernel");
    pthread_mutex_lock(&mu);
    struct obj *fo = func_use("cuLaunchKernel", f);
    struct obj *so = stream_use("cuLaunchKernel", s);
    if (!fo || !so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (fo->ctx != so->ctx) {
        violation("cuLaunchKernel: function of context %d launched on a stream of context %d", fo->ctx, so->ctx);
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    /* The driver copies the argument values at the call, as here. */
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
    fo->mod->inflight++;
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_LAUNCH;
    op->stream = so;
    memcpy(op->params, last_params, sizeof op->params);
    op->nparams = last_nparams;
    op->func = fo;
    enqueue(op);
    fo->mod->inflight--;
    pthread_mutex_unlock(&mu);
    return OK;
}

/* ---- stream-ordered allocation ---- */

static struct obj *default_pools[MAX_DEVICES];

/* pool_use looks up a created pool or a device's default pool. */
static struct obj *pool_use(const char *call, handle_t p) {
    for (int d = 0; d < MAX_DEVICES; d++)
        if (default_pools[d] && (handle_t)default_pools[d] == p) return default_pools[d];
    return lookup(call, p, K_POOL);
}

CUresult cuDeviceGetDefaultMemPool(handle_t *p, int dev) {
    ENTER("cuDeviceGetDefaultMemPool");
    if (dev < 0 || dev >= ndevices) return E_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    if (!default_pools[dev]) {
        /* Not counted among live objects: it lives as long as the device. */
        struct obj *o = calloc(1, sizeof *o);
        o->magic = MAGIC;
        o->kind = K_POOL;
        o->live = 1;
        o->ctx = dev;
        o->is_default = 1;
        default_pools[dev] = o;
    }
    *p = (handle_t)default_pools[dev];
    pthread_mutex_unlock(&mu);
    return OK;
}

/* CUmemPoolProps as cuda.h of CUDA 12.6..13.0 lays it out: 88 bytes. */
struct pool_props {
    int alloc_type, handle_types, location_type, location_id;
    void *win32;
    size_t max_size;
    unsigned short usage;
    unsigned char reserved[54];
};

CUresult cuMemPoolCreate(handle_t *p, const struct pool_props *props) {
    ENTER("cuMemPoolCreate");
    if (!props) return E_INVALID_VALUE;
    for (int i = 0; i < 54; i++)
        if (props->reserved[i]) return E_INVALID_VALUE;
    if (props->alloc_type != 1 || props->handle_types != 0 || props->location_type != 1 || props->win32 ||
        props->usage)
        return E_INVALID_VALUE;
    if (props->location_id < 0 || props->location_id >= ndevices) return E_INVALID_DEVICE;
    pthread_mutex_lock(&mu);
    struct obj *o = new_obj(K_POOL, props->location_id);
    *p = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemPoolDestroy(handle_t p) {
    ENTER("cuMemPoolDestroy");
    pthread_mutex_lock(&mu);
    struct obj *o = pool_use("cuMemPoolDestroy", p);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (o->is_default) {
        violation("cuMemPoolDestroy: a device's default pool destroyed");
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    /* Like the driver, allocations still out stay valid until freed. */
    kill_obj("cuMemPoolDestroy", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

static CUresult pool_attr(const char *call, handle_t p, int attr, void *v, int set) {
    ENTER(call);
    pthread_mutex_lock(&mu);
    struct obj *o = pool_use(call, p);
    CUresult r = OK;
    if (!o) r = E_INVALID_HANDLE;
    else if (attr == 4 && set) o->threshold = *(unsigned long long *)v;
    else if (attr == 4) *(unsigned long long *)v = o->threshold;
    else if (attr < 1 || attr > 8) r = E_INVALID_VALUE;
    else if (!set) memset(v, 0, attr >= 4 ? 8 : 4);
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuMemPoolSetAttribute(handle_t p, int attr, void *v) {
    return pool_attr("cuMemPoolSetAttribute", p, attr, v, 1);
}

CUresult cuMemPoolGetAttribute(handle_t p, int attr, void *v) {
    return pool_attr("cuMemPoolGetAttribute", p, attr, v, 0);
}

static CUresult alloc_async(const char *call, uintptr_t *d, size_t n, handle_t pool, handle_t s) {
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use(call, s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (so->cap_graph) violation("%s: allocation nodes in a capture are not modelled by the fake", call);
    struct obj *po;
    if (pool) {
        po = pool_use(call, pool);
        if (!po) {
            pthread_mutex_unlock(&mu);
            return E_INVALID_HANDLE;
        }
        if (po->ctx != so->ctx) {
            violation("%s: pool of device %d used with a stream of device %d", call, po->ctx, so->ctx);
            pthread_mutex_unlock(&mu);
            return E_INVALID_VALUE;
        }
    }
    pthread_mutex_unlock(&mu);
    if (!pool) {
        handle_t dp;
        CUresult r = cuDeviceGetDefaultMemPool(&dp, so->ctx);
        if (r) return r;
        po = (struct obj *)dp;
    }
    CUresult r = alloc_mem(call, K_DEVMEM, (void **)d, n, 0);
    if (r) return r;
    pthread_mutex_lock(&mu);
    struct obj *o = find_mem(*d, n, K_DEVMEM);
    o->async = 1;
    o->pool = po;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuMemAllocAsync(uintptr_t *d, size_t n, handle_t s) {
    ENTER("cuMemAllocAsync");
    return alloc_async("cuMemAllocAsync", d, n, 0, s);
}

CUresult cuMemAllocFromPoolAsync(uintptr_t *d, size_t n, handle_t pool, handle_t s) {
    ENTER("cuMemAllocFromPoolAsync");
    if (!pool) return E_INVALID_VALUE;
    return alloc_async("cuMemAllocFromPoolAsync", d, n, pool, s);
}

/* cuMemFreeAsync frees in the stream's order: the memory leaves the
 * registry at once (a later use is a violation) and is released when the
 * worker reaches the free, after every operation queued before it. */
CUresult cuMemFreeAsync(uintptr_t d, handle_t s) {
    ENTER("cuMemFreeAsync");
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuMemFreeAsync", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct obj *o = NULL;
    for (size_t i = 0; i < nmems; i++)
        if (mems[i]->kind == K_DEVMEM && (uintptr_t)mems[i]->base == d) o = mems[i];
    if (!o) {
        violation("cuMemFreeAsync: %#lx is not the start of live device memory", (unsigned long)d);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (!o->async) {
        violation("cuMemFreeAsync: %#lx is from cuMemAlloc, not from a pool", (unsigned long)d);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (o->ctx != so->ctx) {
        violation("cuMemFreeAsync: memory of context %d freed on a stream of context %d", o->ctx, so->ctx);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    if (so->cap_graph) violation("cuMemFreeAsync: free nodes in a capture are not modelled by the fake");
    drop_mem(o);
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_FREE;
    op->stream = so;
    op->freeing = o;
    enqueue(op);
    pthread_mutex_unlock(&mu);
    return OK;
}

/* ---- stream capture and graphs ---- */

/* Node handles are small numbers, unique in the process. */
static long next_node;

static struct op *graph_append(struct obj *g, const struct op *op) {
    g->ops = realloc(g->ops, (size_t)(g->nops + 1) * sizeof *g->ops);
    struct op *n = &g->ops[g->nops++];
    *n = *op;
    n->next = NULL;
    n->stream = NULL;
    n->node = ++next_node;
    return n;
}

static struct op *find_node(struct obj *g, long node) {
    for (int i = 0; i < g->nops; i++)
        if (g->ops[i].node == node) return &g->ops[i];
    return NULL;
}

CUresult cuStreamBeginCapture_v2(handle_t s, int mode) {
    ENTER("cuStreamBeginCapture_v2");
    if (mode < 0 || mode > 2) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuStreamBeginCapture_v2", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (so->cap_graph) {
        pthread_mutex_unlock(&mu);
        return E_ILLEGAL_STATE;
    }
    so->cap_graph = new_obj(K_GRAPH, so->ctx);
    so->cap_thread = pthread_self();
    so->cap_mode = mode;
    so->cap_invalid = 0;
    if (mode != 2) {
        if (!capturing) capturing_threads++;
        capturing = so;
    }
    pthread_mutex_unlock(&mu);
    return OK;
}

static void free_graph(const char *call, struct obj *g) {
    kill_obj(call, g);
    free(g->ops);
    g->ops = NULL;
    g->nops = 0;
}

CUresult cuStreamEndCapture(handle_t s, handle_t *g) {
    ENTER("cuStreamEndCapture");
    pthread_mutex_lock(&mu);
    *g = 0;
    struct obj *so = stream_use("cuStreamEndCapture", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (!so->cap_graph) {
        pthread_mutex_unlock(&mu);
        return E_ILLEGAL_STATE;
    }
    if (so->cap_mode == 1 && !pthread_equal(so->cap_thread, pthread_self())) {
        violation("cuStreamEndCapture: a thread-local capture ended by another thread");
        pthread_mutex_unlock(&mu);
        return E_CAPTURE_WRONG_THREAD;
    }
    struct obj *gr = so->cap_graph;
    so->cap_graph = NULL;
    if (capturing == so) {
        capturing = NULL;
        capturing_threads--;
    }
    if (so->cap_invalid) {
        free_graph("cuStreamEndCapture", gr);
        pthread_mutex_unlock(&mu);
        return E_CAPTURE_INVALIDATED;
    }
    *g = (handle_t)gr;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuStreamIsCapturing(handle_t s, int *status) {
    ENTER("cuStreamIsCapturing");
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuStreamIsCapturing", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    *status = !so->cap_graph ? 0 : so->cap_invalid ? 2 : 1;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuGraphDestroy(handle_t g) {
    ENTER("cuGraphDestroy");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuGraphDestroy", g, K_GRAPH);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    free_graph("cuGraphDestroy", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

static void copy_ops(struct obj *to, const struct obj *from) {
    free(to->ops);
    to->ops = from->nops ? malloc((size_t)from->nops * sizeof *to->ops) : NULL;
    if (from->nops) memcpy(to->ops, from->ops, (size_t)from->nops * sizeof *to->ops);
    to->nops = from->nops;
}

CUresult cuGraphInstantiateWithFlags(handle_t *e, handle_t g, unsigned long long flags) {
    ENTER("cuGraphInstantiateWithFlags");
    pthread_mutex_lock(&mu);
    struct obj *go = lookup("cuGraphInstantiateWithFlags", g, K_GRAPH);
    if (!go || !need_ctx("cuGraphInstantiateWithFlags")) {
        pthread_mutex_unlock(&mu);
        return go ? E_INVALID_CONTEXT : E_INVALID_HANDLE;
    }
    if (flags) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    check_ctx("cuGraphInstantiateWithFlags", go);
    struct obj *o = new_obj(K_GEXEC, go->ctx);
    copy_ops(o, go);
    o->graph = go;
    *e = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

/* mem_live reports whether o is still in the registry of live memory. */
static int mem_live(const struct obj *o) {
    for (size_t i = 0; i < nmems; i++)
        if (mems[i] == o) return 1;
    return 0;
}

CUresult cuGraphLaunch(handle_t e, handle_t s) {
    ENTER("cuGraphLaunch");
    pthread_mutex_lock(&mu);
    struct obj *eo = lookup("cuGraphLaunch", e, K_GEXEC);
    struct obj *so = stream_use("cuGraphLaunch", s);
    if (!eo || !so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    if (eo->ctx != so->ctx) {
        violation("cuGraphLaunch: graph exec of context %d launched on a stream of context %d", eo->ctx, so->ctx);
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    /* Check, as the copies would find it, the memory every node uses. */
    for (int i = 0; i < eo->nops; i++) {
        struct op *n = &eo->ops[i];
        if (n->host && !mem_live(n->host))
            violation("cuGraphLaunch: node %d copies host memory %p that is no longer pinned or registered", i,
                      (void *)(n->type == OP_H2D ? n->src : n->dst));
        if ((n->dev && !mem_live(n->dev)) || (n->dev2 && !mem_live(n->dev2)))
            violation("cuGraphLaunch: node %d uses device memory that was freed", i);
        if (n->event && !n->event->live) violation("cuGraphLaunch: node %d records a destroyed event", i);
    }
    for (int i = 0; i < eo->nops; i++) {
        struct op *op = malloc(sizeof *op);
        *op = eo->ops[i];
        op->stream = so;
        op->next = NULL;
        if (op->type == OP_LAUNCH) {
            memcpy(last_params, op->params, sizeof last_params);
            last_nparams = op->nparams;
        }
        enqueue(op);
    }
    pthread_mutex_unlock(&mu);
    return OK;
}

struct update_info { int result; void *error_node, *error_from_node; };

CUresult cuGraphExecUpdate_v2(handle_t e, handle_t g, struct update_info *info) {
    ENTER("cuGraphExecUpdate_v2");
    pthread_mutex_lock(&mu);
    struct obj *eo = lookup("cuGraphExecUpdate_v2", e, K_GEXEC);
    struct obj *go = lookup("cuGraphExecUpdate_v2", g, K_GRAPH);
    if (!eo || !go || !info) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    info->error_node = info->error_from_node = NULL;
    int result = 0;
    if (eo->nops != go->nops) result = 2; /* topology changed */
    for (int i = 0; !result && i < eo->nops; i++)
        if (eo->ops[i].type != go->ops[i].type) result = 3; /* node type changed */
        else if (eo->ops[i].func != go->ops[i].func) result = 4; /* function changed */
    info->result = result;
    if (result) {
        pthread_mutex_unlock(&mu);
        return E_GRAPH_UPDATE;
    }
    /* The parameters are g's; the nodes keep the handles of the graph e
     * was instantiated from, the ones the exec's Set calls take. */
    long *nodes = malloc((size_t)(eo->nops ? eo->nops : 1) * sizeof *nodes);
    for (int i = 0; i < eo->nops; i++) nodes[i] = eo->ops[i].node;
    copy_ops(eo, go);
    for (int i = 0; i < eo->nops; i++) eo->ops[i].node = nodes[i];
    free(nodes);
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuGraphExecDestroy(handle_t e) {
    ENTER("cuGraphExecDestroy");
    pthread_mutex_lock(&mu);
    struct obj *o = lookup("cuGraphExecDestroy", e, K_GEXEC);
    if (!o) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    free_graph("cuGraphExecDestroy", o);
    pthread_mutex_unlock(&mu);
    return OK;
}

/* ---- graphs built node by node ---- */

CUresult cuGraphCreate(handle_t *g, unsigned flags) {
    ENTER("cuGraphCreate");
    if (flags) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    if (!need_ctx("cuGraphCreate")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    *g = (handle_t)new_obj(K_GRAPH, current->ctx);
    pthread_mutex_unlock(&mu);
    return OK;
}

/* check_deps reports dependencies that are not nodes of g. */
static int check_deps(const char *call, struct obj *g, const long *deps, size_t n) {
    if (n && !deps) {
        violation("%s: %zu dependencies and no array", call, n);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        if (!find_node(g, deps[i])) {
            violation("%s: dependency %zu (%ld) is not a node of the graph", call, i, deps[i]);
            return 0;
        }
    return 1;
}

/* CUDA_KERNEL_NODE_PARAMS_v2 as cuda.h of CUDA 12.0..13.0 lays it out. */
struct kernel_params {
    handle_t func;
    unsigned grid[3], block[3], shmem;
    void **params, **extra;
    handle_t kern, ctx;
};

/* kernel_op fills op from p; called with mu held. */
static CUresult kernel_op(const char *call, const struct kernel_params *p, struct op *op) {
    struct obj *fo = func_use(call, p->func);
    if (!fo) return E_INVALID_HANDLE;
    if (fo->ctx != cur_ctx()) {
        violation("%s: function of context %d used while context %d is current", call, fo->ctx, cur_ctx());
        return E_INVALID_CONTEXT;
    }
    if (p->extra || p->kern || (p->ctx && p->ctx != (handle_t)current)) return E_INVALID_VALUE;
    for (int i = 0; i < 3; i++)
        if (!p->grid[i] || !p->block[i]) return E_INVALID_VALUE;
    op->type = OP_LAUNCH;
    op->func = fo;
    /* The driver copies the argument values now. */
    int n = nparam_sizes > 0 ? nparam_sizes : 0;
    op->nparams = 0;
    for (int i = 0; i < n && i < 16 && p->params; i++) {
        size_t sz = param_sizes[i] > 16 ? 16 : param_sizes[i];
        memcpy(op->params[i], p->params[i], sz);
        op->nparams++;
    }
    return OK;
}

CUresult cuGraphAddKernelNode_v2(long *node, handle_t g, const long *deps, size_t ndeps, const struct kernel_params *p) {
    ENTER("cuGraphAddKernelNode_v2");
    pthread_mutex_lock(&mu);
    struct obj *go = lookup("cuGraphAddKernelNode_v2", g, K_GRAPH);
    if (!go || !p || !check_deps("cuGraphAddKernelNode_v2", go, deps, ndeps)) {
        pthread_mutex_unlock(&mu);
        return go && p ? E_INVALID_VALUE : E_INVALID_HANDLE;
    }
    struct op op;
    memset(&op, 0, sizeof op);
    CUresult r = kernel_op("cuGraphAddKernelNode_v2", p, &op);
    if (!r) *node = graph_append(go, &op)->node;
    pthread_mutex_unlock(&mu);
    return r;
}

/* CUDA_MEMCPY3D as cuda.h lays it out. */
struct memcpy3d {
    size_t src_x, src_y, src_z, src_lod;
    int src_type;
    const void *src_host;
    uintptr_t src_device;
    void *src_array, *reserved0;
    size_t src_pitch, src_height;
    size_t dst_x, dst_y, dst_z, dst_lod;
    int dst_type;
    void *dst_host;
    uintptr_t dst_device;
    void *dst_array, *reserved1;
    size_t dst_pitch, dst_height;
    size_t width, height, depth;
};

/* copy_op fills op from a one-dimensional host-device copy; called with mu
 * held. */
static CUresult copy_op(const char *call, const struct memcpy3d *p, handle_t ctx, struct op *op) {
    if (ctx != (handle_t)current || !need_ctx(call)) {
        violation("%s: the copy's context is not the current one", call);
        return E_INVALID_CONTEXT;
    }
    if (p->height != 1 || p->depth != 1 || p->src_y || p->src_z || p->dst_y || p->dst_z || p->src_array ||
        p->dst_array || p->src_x || p->dst_x || p->src_pitch < p->width || p->dst_pitch < p->width)
        return E_INVALID_VALUE;
    size_t n = p->width;
    if (p->src_type == 1 && p->dst_type == 2) {
        op->type = OP_H2D;
        op->src = (char *)p->src_host;
        op->dst = (char *)p->dst_device;
        op->host = find_mem((uintptr_t)p->src_host, n, K_HOSTMEM);
        op->dev = find_mem(p->dst_device, n, K_DEVMEM);
    } else if (p->src_type == 2 && p->dst_type == 1) {
        op->type = OP_D2H;
        op->src = (char *)p->src_device;
        op->dst = p->dst_host;
        op->host = find_mem((uintptr_t)p->dst_host, n, K_HOSTMEM);
        op->dev = find_mem(p->src_device, n, K_DEVMEM);
    } else {
        return E_INVALID_VALUE;
    }
    op->n = n;
    if (!op->host) {
        violation("%s: host memory of %zu bytes is neither pinned nor registered", call, n);
        return E_INVALID_VALUE;
    }
    if (!op->dev) {
        violation("%s: %zu bytes outside live device memory", call, n);
        return E_INVALID_VALUE;
    }
    if (!check_ctx(call, op->dev)) return E_INVALID_CONTEXT;
    return OK;
}

CUresult cuGraphAddMemcpyNode(long *node, handle_t g, const long *deps, size_t ndeps, const struct memcpy3d *p,
                              handle_t ctx) {
    ENTER("cuGraphAddMemcpyNode");
    pthread_mutex_lock(&mu);
    struct obj *go = lookup("cuGraphAddMemcpyNode", g, K_GRAPH);
    if (!go || !p || !check_deps("cuGraphAddMemcpyNode", go, deps, ndeps)) {
        pthread_mutex_unlock(&mu);
        return go && p ? E_INVALID_VALUE : E_INVALID_HANDLE;
    }
    struct op op;
    memset(&op, 0, sizeof op);
    CUresult r = copy_op("cuGraphAddMemcpyNode", p, ctx, &op);
    if (!r) *node = graph_append(go, &op)->node;
    pthread_mutex_unlock(&mu);
    return r;
}

/* exec_node finds node in the exec eo: nodes are named by the handles of
 * the graph eo was instantiated from (not those of a graph it was updated
 * from), which must not have been destroyed. Called with mu held. */
static struct op *exec_node(const char *call, struct obj *eo, long node) {
    if (!eo) return NULL;
    if (!eo->graph->live) {
        violation("%s: node %ld of a graph destroyed since the exec was instantiated from it", call, node);
        return NULL;
    }
    return find_node(eo, node);
}

CUresult cuGraphExecKernelNodeSetParams_v2(handle_t e, long node, const struct kernel_params *p) {
    ENTER("cuGraphExecKernelNodeSetParams_v2");
    pthread_mutex_lock(&mu);
    struct obj *eo = lookup("cuGraphExecKernelNodeSetParams_v2", e, K_GEXEC);
    struct op *n = exec_node("cuGraphExecKernelNodeSetParams_v2", eo, node);
    if (!n || n->type != OP_LAUNCH || !p) {
        if (eo && eo->graph->live) /* else exec_node said why */
            violation("cuGraphExecKernelNodeSetParams_v2: %ld is not a kernel node of the exec", node);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    struct op op = *n;
    CUresult r = kernel_op("cuGraphExecKernelNodeSetParams_v2", p, &op);
    if (!r && op.func != n->func) r = E_INVALID_VALUE; /* the kernel cannot change */
    if (!r) *n = op;
    pthread_mutex_unlock(&mu);
    return r;
}

CUresult cuGraphExecMemcpyNodeSetParams(handle_t e, long node, const struct memcpy3d *p, handle_t ctx) {
    ENTER("cuGraphExecMemcpyNodeSetParams");
    pthread_mutex_lock(&mu);
    struct obj *eo = lookup("cuGraphExecMemcpyNodeSetParams", e, K_GEXEC);
    struct op *n = exec_node("cuGraphExecMemcpyNodeSetParams", eo, node);
    if (!n || (n->type != OP_H2D && n->type != OP_D2H) || !p) {
        if (eo && eo->graph->live) /* else exec_node said why */
            violation("cuGraphExecMemcpyNodeSetParams: %ld is not a copy node of the exec", node);
        pthread_mutex_unlock(&mu);
        return E_INVALID_VALUE;
    }
    struct op op = *n;
    CUresult r = copy_op("cuGraphExecMemcpyNodeSetParams", p, ctx, &op);
    if (!r && op.type != n->type) r = E_INVALID_VALUE; /* the direction cannot change */
    if (!r) *n = op;
    pthread_mutex_unlock(&mu);
    return r;
}

/* The API families added after the core, one file each (src/<family>.c),
 * included here so that the fake stays one translation unit with one lock
 * and one set of handle tables. A family file adds one #include line below,
 * in the order of driver/prototypes.go. */
#include "image.c"
#include "link.c"
#include "library.c"
#include "launch.c"
#include "occupancy.c"
#include "hostfunc.c"
#include "copy2d.c"
#include "peer.c"
#include "managed.c"
#include "vmm.c"
#include "ipc.c"
#include "batch.c"

/* cuGetProcAddress_v2: every entry point by its plain name. The list is
 * package driver's (driver/prototypes.go), generated into zexports.h, so
 * that an entry point the fake lacks fails to compile, unless it lacks it
 * on purpose: these are NULL in the table, and not found, so that tests
 * see how the binding reports a symbol that the driver does not have. */
#define cuDevicePrimaryCtxGetState NULL
#define cuDevicePrimaryCtxSetFlags_v2 NULL
struct entry { const char *name; void *fn; };
#define E(plain, fn, nargs) {plain, (void *)fn}
static const struct entry entries[] = {
#include "zexports.h"
};

CUresult cuGetProcAddress_v2(const char *name, void **fn, int version, unsigned long long flags, int *status) {
    (void)version;
    (void)flags;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (entries[i].fn && strcmp(entries[i].name, name) == 0) {
            *fn = entries[i].fn;
            if (status) *status = 0;
            return OK;
        }
    *fn = NULL;
    if (status) *status = 1;
    return E_NOT_FOUND;
}

/* ---- controls for tests ---- */

void fake_reset(void) {
    pthread_mutex_lock(&mu);
    wait_seq(issued_seq);
    violations = 0;
    last_violation[0] = 0;
    nplans = 0;
    exec_delay_us = 0;
    nparam_sizes = -1;
    __atomic_store_n(&noop, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mu);
}

/* fake_fail makes the nth call of name from now return code; nth 0 means
 * every call. code 0 clears it. */
void fake_fail(const char *name, long nth, int code) {
    pthread_mutex_lock(&mu);
    struct plan *p = plan_for(name, 1);
    p->calls = 0;
    p->fail_at = nth;
    p->fail_every = nth == 0;
    p->code = code;
    pthread_mutex_unlock(&mu);
}

void fake_delay(const char *name, int usec) {
    pthread_mutex_lock(&mu);
    plan_for(name, 1)->delay_us = usec;
    pthread_mutex_unlock(&mu);
}

/* fake_noop turns the no-op mode on (1) or off (0); fake_reset turns it off. */
void fake_noop(int on) { __atomic_store_n(&noop, on != 0, __ATOMIC_RELAXED); }

void fake_exec_delay(int usec) {
    pthread_mutex_lock(&mu);
    exec_delay_us = usec;
    pthread_mutex_unlock(&mu);
}

long fake_calls(const char *name) {
    pthread_mutex_lock(&mu);
    struct plan *p = plan_for(name, 0);
    long n = p ? p->calls : 0;
    pthread_mutex_unlock(&mu);
    return n;
}

long fake_violations(void) {
    pthread_mutex_lock(&mu);
    long n = violations;
    pthread_mutex_unlock(&mu);
    return n;
}

void fake_last_violation(char *buf, int n) {
    pthread_mutex_lock(&mu);
    snprintf(buf, n, "%s", last_violation);
    pthread_mutex_unlock(&mu);
}

/* fake_live returns the live objects of a kind (1 context .. 11 graph
 * exec), or of every kind but contexts for 0. */
long fake_live(int kind) {
    pthread_mutex_lock(&mu);
    long n = 0;
    if (kind > 0 && kind < K_NKINDS) n = live_count[kind];
    else
        for (int k = K_STREAM; k < K_NKINDS; k++) n += live_count[k];
    pthread_mutex_unlock(&mu);
    return n;
}

int fake_primary_refs(int dev) { return dev >= 0 && dev < MAX_DEVICES ? primary_refs[dev] : -1; }

int fake_current_device(void) { return cur_ctx(); }

/* fake_host_live reports whether [p, p+n) is pinned or registered now. */
int fake_host_live(void *p, long n) {
    pthread_mutex_lock(&mu);
    int live = find_mem((uintptr_t)p, (size_t)n, K_HOSTMEM) != NULL;
    pthread_mutex_unlock(&mu);
    return live;
}

/* fake_capturing_threads returns how many threads are in capture mode. */
long fake_capturing_threads(void) {
    pthread_mutex_lock(&mu);
    long n = capturing_threads;
    pthread_mutex_unlock(&mu);
    return n;
}

long fake_pending(void) {
    pthread_mutex_lock(&mu);
    long n = issued_seq - done_seq;
    pthread_mutex_unlock(&mu);
    return n;
}

void fake_set_params(int n, const long *sizes) {
    pthread_mutex_lock(&mu);
    nparam_sizes = n;
    for (int i = 0; i < n && i < 64; i++) param_sizes[i] = (size_t)sizes[i];
    pthread_mutex_unlock(&mu);
}

/* fake_last_launch writes the last launch's grid, block and shared memory
 * size into dims[0..6], and returns its extra argument. */
void *fake_last_launch(unsigned *dims) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < 3; i++) dims[i] = last_grid[i], dims[3 + i] = last_block[i];
    dims[6] = last_shmem;
    void *extra = (void *)last_extra;
    pthread_mutex_unlock(&mu);
    return extra;
}

/* fake_last_param copies up to 16 bytes of parameter i of the last launch. */
int fake_last_param(int i, void *out, int n) {
    pthread_mutex_lock(&mu);
    int ok = i >= 0 && i < last_nparams;
    if (ok) memcpy(out, last_params[i], n > 16 ? 16 : n);
    pthread_mutex_unlock(&mu);
    return ok;
}

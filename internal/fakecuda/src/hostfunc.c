/* Host functions (driver/hostfunc.go): cuLaunchHostFunc queues the call
 * on the stream, and the worker makes it in the stream's order, with the
 * fake's lock let go (a host function may take its own locks), counting
 * the calls made for fake_host_calls. Included by libcuda.c. */

static long host_calls;

static void run_host(struct op *op) {
    pthread_mutex_unlock(&mu);
    op->hostfn(op->user);
    pthread_mutex_lock(&mu);
    host_calls++;
}

CUresult cuLaunchHostFunc(handle_t s, void *fn, void *user) {
    ENTER("cuLaunchHostFunc");
    if (!fn) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    struct obj *so = stream_use("cuLaunchHostFunc", s);
    if (!so) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_HANDLE;
    }
    struct op *op = calloc(1, sizeof *op);
    op->type = OP_HOST;
    op->stream = so;
    op->hostfn = (void (*)(void *))fn;
    op->user = user;
    enqueue(op);
    pthread_mutex_unlock(&mu);
    return OK;
}

/* fake_host_calls returns how many host functions the worker has run. */
long fake_host_calls(void) {
    pthread_mutex_lock(&mu);
    long n = host_calls;
    pthread_mutex_unlock(&mu);
    return n;
}

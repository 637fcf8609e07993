/* Module images by kind (driver/image.go): cuModuleLoadData takes PTX
 * text, a cubin or a fatbin, told apart by their magic, and
 * cuModuleLoadFatBinary only a fatbin. Anything else is
 * CUDA_ERROR_INVALID_IMAGE. Included by libcuda.c. */

/* image_kind returns 0 for PTX text, 1 for a cubin (ELF), 2 for a fatbin,
 * and -1 for anything else (a control byte before the first NUL). */
static int image_kind(const void *image) {
    const unsigned char *b = image;
    if (memcmp(b, "\x7f" "ELF", 4) == 0) return 1;
    uint32_t magic;
    memcpy(&magic, b, 4);
    if (magic == 0xBA55ED50u) return 2;
    for (const unsigned char *p = b; *p; p++)
        if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r' && *p != '\f' && *p != '\v') return -1;
    return 0;
}

static CUresult load_image(const char *call, handle_t *m, const void *image, int fatbin_only) {
    ENTER(call);
    if (!m || !image) return E_INVALID_VALUE;
    pthread_mutex_lock(&mu);
    if (!need_ctx(call)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_CONTEXT;
    }
    int kind = image_kind(image);
    if (kind < 0 || (fatbin_only && kind != 2)) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_IMAGE;
    }
    if (kind == 0 && strstr(image, "error")) {
        pthread_mutex_unlock(&mu);
        return E_INVALID_PTX;
    }
    struct obj *o = new_obj(K_MODULE, current->ctx);
    *m = (handle_t)o;
    pthread_mutex_unlock(&mu);
    return OK;
}

CUresult cuModuleLoadData(handle_t *m, const void *image) { return load_image("cuModuleLoadData", m, image, 0); }

CUresult cuModuleLoadFatBinary(handle_t *m, const void *image) {
    return load_image("cuModuleLoadFatBinary", m, image, 1);
}

// dlload.h is what dlopen.c and dljobs.c share: the driver library opened
// at run time as purego opens it (dlopen_driver), its entry points found
// by name (sym), a driver call checked (CK), and a file read whole
// (read_file). Each failure prints where and exits.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static void *lib;

static void dlopen_driver(void) {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
        exit(1);
    }
}

static void *sym(const char *name) {
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "dlsym %s: %s\n", name, dlerror());
        exit(1);
    }
    return p;
}

#define CK(x)                                                                                 \
    do {                                                                                      \
        int r_ = (x);                                                                         \
        if (r_ != 0) {                                                                        \
            fprintf(stderr, "%s:%d: %s failed: CUresult %d\n", __FILE__, __LINE__, #x, r_); \
            exit(1);                                                                          \
        }                                                                                     \
    } while (0)

// read_file returns path's bytes with a NUL after them (a PTX image is
// text).
static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(size + 1);
    if (!buf || fread(buf, 1, size, f) != (size_t)size) {
        perror(path);
        exit(1);
    }
    buf[size] = 0;
    fclose(f);
    return buf;
}

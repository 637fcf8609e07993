/* A fake NVRTC for package nvrtc's tests without a CUDA toolkit. It
 * exports the entry points package nvrtc binds, with nvrtc.h's
 * prototypes, and a few controls (fake_*). Compiling does no compiling:
 *
 *   - a source that contains "#error" fails with NVRTC_ERROR_COMPILATION
 *     (6) and the log "NAME(1): error: fake error";
 *   - otherwise the PTX is a header (.version 8.0, .target from the
 *     --gpu-architecture option) followed by every line of the source
 *     that starts with "//ptx ", without that prefix, so that a test
 *     writes the PTX it wants in its source;
 *   - the log lists the options and the headers (name=source) it was
 *     given, so that a test can check how they were passed;
 *   - an sm_XY architecture also gives a CUBIN, "FAKECUBIN sm_XY".
 *
 * fake_fail(name, code) makes every later call of entry point name return
 * code (0 clears it); fake_live() is the number of programs created and
 * not destroyed; fake_bad_destroys() the destroy calls given a handle
 * that is not live. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct prog {
    int magic;
    char *src, *name, *ptx, *log, *cubin;
    size_t cubin_len;
    int compiled;
} prog;

#define MAGIC 0x6e767274

static int live, bad_destroys;
static char fail_name[64];
static int fail_code;

int fake_live(void) { return live; }
int fake_bad_destroys(void) { return bad_destroys; }
void fake_fail(const char *name, int code) {
    snprintf(fail_name, sizeof fail_name, "%s", name);
    fail_code = code;
}

static int failing(const char *name) { return fail_code != 0 && strcmp(name, fail_name) == 0; }
#define FAILPOINT(n) do { if (failing(n)) return fail_code; } while (0)

static int valid(prog *p) { return p != NULL && p->magic == MAGIC; }

const char *nvrtcGetErrorString(int r) { return r == 0 ? "NVRTC_SUCCESS" : "NVRTC_ERROR fake"; }

int nvrtcVersion(int *major, int *minor) {
    FAILPOINT("nvrtcVersion");
    if (!major || !minor) return 3;
    *major = 12;
    *minor = 8;
    return 0;
}

/* append adds text to a malloc'd string. */
static char *append(char *s, const char *t) {
    size_t a = s ? strlen(s) : 0, b = strlen(t);
    char *r = realloc(s, a + b + 1);
    memcpy(r + a, t, b + 1);
    return r;
}

int nvrtcCreateProgram(prog **out, const char *src, const char *name, int n,
                       const char *const *headers, const char *const *names) {
    FAILPOINT("nvrtcCreateProgram");
    if (!out || !src) return 3; /* NVRTC_ERROR_INVALID_INPUT */
    if (n < 0 || (n > 0 && (!headers || !names))) return 3;
    prog *p = calloc(1, sizeof *p);
    p->magic = MAGIC;
    p->src = strdup(src);
    p->name = strdup(name ? name : "default_program");
    p->log = strdup("");
    for (int i = 0; i < n; i++) {
        p->log = append(p->log, "header ");
        p->log = append(p->log, names[i]);
        p->log = append(p->log, "=");
        p->log = append(p->log, headers[i]);
        p->log = append(p->log, "\n");
    }
    live++;
    *out = p;
    return 0;
}

int nvrtcDestroyProgram(prog **pp) {
    if (!pp || !valid(*pp)) {
        bad_destroys++;
        return 4; /* NVRTC_ERROR_INVALID_PROGRAM */
    }
    prog *p = *pp;
    p->magic = 0;
    free(p->src);
    free(p->name);
    free(p->ptx);
    free(p->log);
    free(p->cubin);
    free(p);
    *pp = NULL;
    live--;
    return failing("nvrtcDestroyProgram") ? fail_code : 0;
}

int nvrtcCompileProgram(prog *p, int n, const char *const *opts) {
    FAILPOINT("nvrtcCompileProgram");
    if (!valid(p)) return 4;
    if (n < 0 || (n > 0 && !opts)) return 3;
    char target[32] = "sm_52";
    int real = 0;
    for (int i = 0; i < n; i++) {
        p->log = append(p->log, "option ");
        p->log = append(p->log, opts[i]);
        p->log = append(p->log, "\n");
        const char *a = NULL;
        if (strncmp(opts[i], "--gpu-architecture=", 19) == 0) a = opts[i] + 19;
        if (a && strncmp(a, "compute_", 8) == 0) snprintf(target, sizeof target, "sm_%s", a + 8);
        if (a && strncmp(a, "sm_", 3) == 0) {
            snprintf(target, sizeof target, "%s", a);
            real = 1;
        }
    }
    if (strstr(p->src, "#error")) {
        p->log = append(p->log, p->name);
        p->log = append(p->log, "(1): error: fake error\n");
        return 6; /* NVRTC_ERROR_COMPILATION */
    }
    char head[128];
    snprintf(head, sizeof head, ".version 8.0\n.target %s\n.address_size 64\n", target);
    p->ptx = append(NULL, head);
    for (const char *l = p->src; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len >= 6 && strncmp(l, "//ptx ", 6) == 0) {
            char *line = strndup(l + 6, len - 6);
            p->ptx = append(p->ptx, line);
            p->ptx = append(p->ptx, "\n");
            free(line);
        }
        l += len + (e ? 1 : 0);
    }
    if (real) {
        char c[64];
        int k = snprintf(c, sizeof c, "FAKECUBIN %s", target);
        p->cubin = malloc(k);
        memcpy(p->cubin, c, k); /* no NUL: a binary */
        p->cubin_len = k;
    }
    p->compiled = 1;
    return 0;
}

int nvrtcGetPTXSize(prog *p, size_t *n) {
    FAILPOINT("nvrtcGetPTXSize");
    if (!valid(p) || !p->compiled) return 4;
    if (!n) return 3;
    *n = strlen(p->ptx) + 1;
    return 0;
}

int nvrtcGetPTX(prog *p, char *out) {
    FAILPOINT("nvrtcGetPTX");
    if (!valid(p) || !p->compiled) return 4;
    if (!out) return 3;
    memcpy(out, p->ptx, strlen(p->ptx) + 1);
    return 0;
}

int nvrtcGetCUBINSize(prog *p, size_t *n) {
    FAILPOINT("nvrtcGetCUBINSize");
    if (!valid(p) || !p->compiled) return 4;
    if (!n) return 3;
    *n = p->cubin_len;
    return 0;
}

int nvrtcGetCUBIN(prog *p, char *out) {
    FAILPOINT("nvrtcGetCUBIN");
    if (!valid(p) || !p->compiled) return 4;
    if (!out) return 3;
    if (p->cubin_len) memcpy(out, p->cubin, p->cubin_len);
    return 0;
}

int nvrtcGetProgramLogSize(prog *p, size_t *n) {
    FAILPOINT("nvrtcGetProgramLogSize");
    if (!valid(p)) return 4;
    if (!n) return 3;
    *n = strlen(p->log) + 1;
    return 0;
}

int nvrtcGetProgramLog(prog *p, char *out) {
    FAILPOINT("nvrtcGetProgramLog");
    if (!valid(p)) return 4;
    if (!out) return 3;
    memcpy(out, p->log, strlen(p->log) + 1);
    return 0;
}

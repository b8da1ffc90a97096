/* optimized/cuda_plugin.c — loading the CUDA backend plugin (optimized/cuda_plugin.h). */
#include "optimized/cuda_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static opt_backend_create_fn opt_plugin_fn = NULL;

/* dir of the running binary + "/" + OPT_CUDA_PLUGIN_NAME into out; 0 when unknown. */
static int plugin_next_to_exe(char *out, size_t cap) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = '\0';
    int w = snprintf(out, cap, "%s/%s", exe, OPT_CUDA_PLUGIN_NAME);
    return w > 0 && (size_t)w < cap;
}

dp_status opt_cuda_plugin_load(opt_backend_create_fn *fn) {
    *fn = NULL;
    if (opt_plugin_fn) { *fn = opt_plugin_fn; return DP_OK; }
    char path[PATH_MAX + 64];
    const char *env = getenv(OPT_CUDA_PLUGIN_ENV);
    if (!(plugin_next_to_exe(path, sizeof path) && access(path, F_OK) == 0)) {
        if (!env || !*env)
            return dp_error(DP_ERR_NOT_SUPPORTED,
                            "backend 'cuda' is not built into this binary (no plugin %s next to the dpcert binary and %s "
                            "is not set; the plugin needs nvcc, cuBLAS and NCCL at build time, docs/cuda.md; use "
                            "--backend host)", OPT_CUDA_PLUGIN_NAME, OPT_CUDA_PLUGIN_ENV);
        snprintf(path, sizeof path, "%s", env);
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend 'cuda': cannot load plugin %s: %s", path, e ? e : "unknown error");
    }
    void *sym = dlsym(h, "opt_backend_cuda_create");
    if (!sym) {
        const char *e = dlerror();
        dlclose(h);
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend 'cuda': cannot load plugin %s: %s", path,
                        e ? e : "no opt_backend_cuda_create");
    }
    /* the handle stays open for the life of the process (the backend's code lives there) */
    memcpy(&opt_plugin_fn, &sym, sizeof opt_plugin_fn);
    *fn = opt_plugin_fn;
    return DP_OK;
}

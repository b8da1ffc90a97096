/* optimized/cuda_plugin.c — loading the CUDA backend plugins (optimized/cuda_plugin.h):
 * libdpcert_cuda.so (--backend cuda, a GPU) and libdpcert_cuda_emu.so (--backend cuda-emu,
 * the same sources on the CPU emulation). A library that defines cu_emu_runtime_marker is
 * an emulated build: refused for cuda, required for cuda-emu. */
#include "optimized/cuda_plugin.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static opt_backend_create_fn opt_plugin_fn[2] = {NULL, NULL};

/* defined by the emulation's runtime (optimized/cuda/emu/cu_emu_runtime.cc) only */
extern const int cu_emu_runtime_marker __attribute__((weak));

int opt_cuda_linked_is_emulated(void) { return &cu_emu_runtime_marker != NULL; }

/* dir of the running binary + "/" + name into out; 0 when unknown. */
static int plugin_next_to_exe(char *out, size_t cap, const char *name) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return 0;
    *slash = '\0';
    int w = snprintf(out, cap, "%s/%s", exe, name);
    return w > 0 && (size_t)w < cap;
}

dp_status opt_cuda_plugin_load(opt_backend_create_fn *fn, int emu) {
    emu = emu != 0;
    *fn = NULL;
    if (opt_plugin_fn[emu]) { *fn = opt_plugin_fn[emu]; return DP_OK; }
    const char *bname = emu ? "cuda-emu" : "cuda", *lib = emu ? OPT_CUDA_EMU_PLUGIN_NAME : OPT_CUDA_PLUGIN_NAME;
    const char *envname = emu ? OPT_CUDA_EMU_PLUGIN_ENV : OPT_CUDA_PLUGIN_ENV;
    char path[PATH_MAX + 64];
    const char *env = getenv(envname);
    if (!(plugin_next_to_exe(path, sizeof path, lib) && access(path, F_OK) == 0)) {
        if (!env || !*env)
            return dp_error(DP_ERR_NOT_SUPPORTED,
                            "backend '%s' is not built into this binary (no plugin %s next to the dpcert binary and %s "
                            "is not set; %s, docs/cuda.md; use --backend host)", bname, lib, envname,
                            emu ? "the emulation plugin is built by make with g++" :
                                  "the plugin needs nvcc, cuBLAS and NCCL at build time");
        snprintf(path, sizeof path, "%s", env);
    }
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend '%s': cannot load plugin %s: %s", bname, path, e ? e : "unknown error");
    }
    int is_emu = dlsym(h, "cu_emu_runtime_marker") != NULL;
    if (is_emu != emu) {
        dlclose(h);
        return dp_error(DP_ERR_NOT_SUPPORTED,
                        is_emu ? "backend 'cuda': plugin %s is the CPU emulation of the CUDA backend, not a GPU build "
                                 "(an emulated run is selected with --backend cuda-emu only)"
                               : "backend 'cuda-emu': plugin %s is not the emulation (a GPU build; use --backend cuda)",
                        path);
    }
    dlerror();
    void *sym = dlsym(h, "opt_backend_cuda_create");
    if (!sym) {
        const char *e = dlerror();
        dlclose(h);
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend '%s': cannot load plugin %s: %s", bname, path,
                        e ? e : "no opt_backend_cuda_create");
    }
    /* the handle stays open for the life of the process (the backend's code lives there) */
    memcpy(&opt_plugin_fn[emu], &sym, sizeof opt_plugin_fn[emu]);
    *fn = opt_plugin_fn[emu];
    return DP_OK;
}

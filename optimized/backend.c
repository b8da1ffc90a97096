/* optimized/backend.c — the backend registry: create by name, support queries.
 * "host" is optimized/host/host_backend.c; "cuda" is the weak hook
 * opt_backend_cuda_create that optimized/cuda/ defines once it exists (or the plugin);
 * "cuda-emu" the same sources on the CPU emulation (optimized/cuda_plugin.h); "plugin:SPEC"
 * is optimized/plugin_loader.c. */
#include "optimized/backend.h"
#include "common/alloc.h"
#include "optimized/backend_decl.h"
#include "optimized/ledger.h"
#include "optimized/cuda_plugin.h"
#include "optimized/plugin_loader.h"

#include <stdlib.h>
#include <string.h>

/* Link anchor. opt_backend_cuda_create is weak here, and a weak reference does not
 * extract an object from a static library, so whatever pulls this file (every user of a
 * backend, tests included) also pulls the CUDA adapter: optimized/cuda/cu_backend.cu
 * defines cu_backend_linked = 1 and opt_backend_cuda_create; cu_stub.c defines
 * cu_backend_linked = 0 without CUDA. (build/dpcert links every library whole.) */
#ifndef OPT_CUDA_PLUGIN_ONLY /* build/dpcert's copy: CUDA only through the plugin (optimized/cuda_plugin.h) */
extern const int cu_backend_linked;
__attribute__((used)) static const int *const opt_cuda_anchor_ = &cu_backend_linked;
#endif

static const char *const opt_op_names[OPT_OP_COUNT] = {
#define OPT_OP_NAME_(ID, name, ret, args) #name,
    OPT_BACKEND_OPS(OPT_OP_NAME_)
#undef OPT_OP_NAME_
};

const char *const opt_coll_names[OPT_COLL_COUNT] = {
#define OPT_COLL_NAME_(ID, name) #name,
    OPT_COLL_KINDS(OPT_COLL_NAME_)
#undef OPT_COLL_NAME_
};

int opt_backend_is_cuda(const char *name) {
    return name && (strcmp(name, "cuda") == 0 || strcmp(name, "cuda-emu") == 0);
}

const char *opt_op_name(opt_op op) {
    return (op >= 0 && op < OPT_OP_COUNT) ? opt_op_names[op] : "?";
}

int opt_backend_supports(const opt_backend *be, opt_op op) {
    if (!be || op < 0 || op >= OPT_OP_COUNT) return 0;
    const opt_backend_ops *o = &be->ops;
    switch (op) {
#define OPT_OP_CASE_(ID, name, ret, args) case OPT_OP_##ID: return o->name != NULL;
        OPT_BACKEND_OPS(OPT_OP_CASE_)
#undef OPT_OP_CASE_
    default: return 0;
    }
}

dp_status opt_backend_require(const opt_backend *be, const opt_op *ops, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!opt_backend_supports(be, ops[i]))
            return dp_error(DP_ERR_NOT_SUPPORTED, "backend '%s' does not support operation '%s'",
                            be ? be->name : "(null)", opt_op_name(ops[i]));
    return DP_OK;
}

size_t opt_backend_esize(const opt_backend *be) { return dp_dtype_size(be->dtype); }

const char *const opt_backend_builtin_names[] = {"host", "cuda", "cuda-emu", NULL};
#define OPT_PLUGIN_PREFIX "plugin:"

dp_status opt_backend_name_check(char *canon, size_t cap, const char *name) {
    if (!name || !*name) return dp_error(DP_ERR_USAGE, "--backend: empty name");
    if (strncmp(name, OPT_PLUGIN_PREFIX, strlen(OPT_PLUGIN_PREFIX)) == 0) {
        char path[4096];
        DP_TRY(opt_plugin_resolve(path, sizeof path, name + strlen(OPT_PLUGIN_PREFIX)));
        DP_TRY(opt_plugin_probe(path, NULL));
        if (snprintf(canon, cap, OPT_PLUGIN_PREFIX "%s", path) >= (int)cap)
            return dp_error(DP_ERR_INVALID, "--backend: plugin path too long");
        return DP_OK;
    }
    for (const char *const *b = opt_backend_builtin_names; *b; b++)
        if (strcmp(name, *b) == 0) {
            snprintf(canon, cap, "%s", name);
            return DP_OK;
        }
    return dp_error(DP_ERR_USAGE, "unknown backend '%s' (expected host, cuda or plugin:PATH)", name);
}

dp_status opt_unsupported(const opt_backend *be, const char *op) {
    return dp_error(DP_ERR_NOT_SUPPORTED, "backend '%s' does not support operation '%s'", be->name, op);
}

dp_status opt_backend_create(opt_backend **out, const opt_backend_config *cfg) {
    *out = NULL;
    if (!cfg || !cfg->name) return dp_error(DP_ERR_INVALID, "backend: no name given");
    if (cfg->dtype != DP_F64 && cfg->dtype != DP_F32)
        return dp_error(DP_ERR_INVALID, "backend: dtype must be f64 or f32 (got %s)", dp_dtype_name(cfg->dtype));
    if (cfg->threads < 1 || cfg->threads > 256)
        return dp_error(DP_ERR_INVALID, "backend: --threads must be in [1, 256] (got %d)", cfg->threads);
    opt_backend *be = dp_calloc(1, sizeof *be);
    if (!be) return DP_ERR_NOMEM;
    dp_status st;
    if (strcmp(cfg->name, "host") == 0) {
        st = opt_backend_host_create(be, cfg);
    } else if (opt_backend_is_cuda(cfg->name)) {
        /* linked in (of the kind asked for: GPU or emulation), else the plugin */
        const int emu = strcmp(cfg->name, "cuda-emu") == 0;
        opt_backend_create_fn fn = opt_backend_cuda_create;
        if (fn && opt_cuda_linked_is_emulated() != emu) fn = NULL;
        st = fn ? DP_OK : opt_cuda_plugin_load(&fn, emu);
        if (st == DP_OK) st = fn(be, cfg);
        if (st == DP_OK) be->name = emu ? "cuda-emu" : "cuda"; /* reports and exports say which */
    } else if (strncmp(cfg->name, OPT_PLUGIN_PREFIX, strlen(OPT_PLUGIN_PREFIX)) == 0) {
        st = opt_plugin_backend_create(be, cfg, cfg->name + strlen(OPT_PLUGIN_PREFIX));
    } else {
        st = dp_error(DP_ERR_USAGE, "unknown backend '%s' (expected host, cuda, cuda-emu or plugin:PATH)", cfg->name);
    }
    if (st == DP_OK && !be->decl) st = opt_backend_decl_builtin(&be->decl, be);
    if (st == DP_OK) st = opt_ledger_create(&be->ledger);
    if (st != DP_OK) {
        if (be->ctx && be->ops.destroy) be->ops.destroy(be->ctx);
        opt_backend_decl_free(be->decl);
        dp_free(be);
        return st;
    }
    *out = be;
    return DP_OK;
}

void opt_backend_destroy(opt_backend *be) {
    if (!be) return;
    if (be->ops.destroy) be->ops.destroy(be->ctx);
    opt_ledger_destroy(be->ledger);
    opt_backend_decl_free(be->decl);
    dp_free(be);
}

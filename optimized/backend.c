/* optimized/backend.c — the backend registry: create by name, support queries.
 * "host" is optimized/host/host_backend.c; "cuda" is the weak hook
 * opt_backend_cuda_create that optimized/cuda/ defines once it exists. */
#include "optimized/backend.h"
#include "optimized/cuda_plugin.h"

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
    "alloc", "free", "to_device", "to_host", "copy", "zero", "upload_f64", "download_f64",
    "gemm", "add_bias", "sum_rows", "axpby", "add", "div_scalar",
    "tanh_fwd", "tanh_bwd", "silu_fwd", "silu_bwd", "swiglu_fwd", "swiglu_bwd", "rmsnorm_fwd",
    "rmsnorm_bwd", "rope_fwd", "rope_bwd", "attn_fwd", "attn_bwd", "xent_fwd", "xent_bwd",
    "embed_fwd", "embed_bwd",
    "sqnorm_rows", "ghost_sqnorm", "clip_factors", "mul", "clip_accum", "bk_gemm",
    "fused_clip_accum", "fused_sqnorm", "noise_add",
    "sgd_momentum", "adamw",
    "allreduce_sum", "reduce_scatter_sum", "allgather", "alltoall", "broadcast", "send", "recv",
    "wait", "allgatherv_bytes", "barrier",
};

const char *opt_op_name(opt_op op) {
    return (op >= 0 && op < OPT_OP_COUNT) ? opt_op_names[op] : "?";
}

int opt_backend_supports(const opt_backend *be, opt_op op) {
    if (!be || op < 0 || op >= OPT_OP_COUNT) return 0;
    const opt_backend_ops *o = &be->ops;
#define E(id, f) case id: return o->f != NULL
    switch (op) {
        E(OPT_OP_ALLOC, alloc); E(OPT_OP_FREE, free); E(OPT_OP_TO_DEVICE, to_device);
        E(OPT_OP_TO_HOST, to_host); E(OPT_OP_COPY, copy); E(OPT_OP_ZERO, zero);
        E(OPT_OP_UPLOAD_F64, upload_f64); E(OPT_OP_DOWNLOAD_F64, download_f64);
        E(OPT_OP_GEMM, gemm); E(OPT_OP_ADD_BIAS, add_bias); E(OPT_OP_SUM_ROWS, sum_rows);
        E(OPT_OP_AXPBY, axpby); E(OPT_OP_ADD, add); E(OPT_OP_DIV_SCALAR, div_scalar);
        E(OPT_OP_TANH_FWD, tanh_fwd); E(OPT_OP_TANH_BWD, tanh_bwd); E(OPT_OP_SILU_FWD, silu_fwd);
        E(OPT_OP_SILU_BWD, silu_bwd); E(OPT_OP_SWIGLU_FWD, swiglu_fwd); E(OPT_OP_SWIGLU_BWD, swiglu_bwd);
        E(OPT_OP_RMSNORM_FWD, rmsnorm_fwd); E(OPT_OP_RMSNORM_BWD, rmsnorm_bwd);
        E(OPT_OP_ROPE_FWD, rope_fwd); E(OPT_OP_ROPE_BWD, rope_bwd); E(OPT_OP_ATTN_FWD, attn_fwd);
        E(OPT_OP_ATTN_BWD, attn_bwd); E(OPT_OP_XENT_FWD, xent_fwd); E(OPT_OP_XENT_BWD, xent_bwd);
        E(OPT_OP_EMBED_FWD, embed_fwd); E(OPT_OP_EMBED_BWD, embed_bwd);
        E(OPT_OP_SQNORM_ROWS, sqnorm_rows); E(OPT_OP_GHOST_SQNORM, ghost_sqnorm);
        E(OPT_OP_CLIP_FACTORS, clip_factors); E(OPT_OP_MUL, mul); E(OPT_OP_CLIP_ACCUM, clip_accum);
        E(OPT_OP_BK_GEMM, bk_gemm); E(OPT_OP_FUSED_CLIP_ACCUM, fused_clip_accum);
        E(OPT_OP_FUSED_SQNORM, fused_sqnorm); E(OPT_OP_NOISE_ADD, noise_add);
        E(OPT_OP_SGD_MOMENTUM, sgd_momentum); E(OPT_OP_ADAMW, adamw);
        E(OPT_OP_ALLREDUCE_SUM, allreduce_sum); E(OPT_OP_REDUCE_SCATTER_SUM, reduce_scatter_sum);
        E(OPT_OP_ALLGATHER, allgather); E(OPT_OP_ALLTOALL, alltoall); E(OPT_OP_BROADCAST, broadcast);
        E(OPT_OP_SEND, send); E(OPT_OP_RECV, recv); E(OPT_OP_WAIT, wait);
        E(OPT_OP_ALLGATHERV_BYTES, allgatherv_bytes); E(OPT_OP_BARRIER, barrier);
        default: return 0;
    }
#undef E
}

dp_status opt_backend_require(const opt_backend *be, const opt_op *ops, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!opt_backend_supports(be, ops[i]))
            return dp_error(DP_ERR_NOT_SUPPORTED, "backend '%s' does not support operation '%s'",
                            be ? be->name : "(null)", opt_op_name(ops[i]));
    return DP_OK;
}

size_t opt_backend_esize(const opt_backend *be) { return dp_dtype_size(be->dtype); }

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
    } else if (strcmp(cfg->name, "cuda") == 0) {
        opt_backend_create_fn fn = opt_backend_cuda_create; /* linked in, else the plugin */
        st = fn ? DP_OK : opt_cuda_plugin_load(&fn);
        if (st == DP_OK) st = fn(be, cfg);
    } else {
        st = dp_error(DP_ERR_USAGE, "unknown backend '%s' (expected host or cuda)", cfg->name);
    }
    if (st != DP_OK) { free(be); return st; }
    *out = be;
    return DP_OK;
}

void opt_backend_destroy(opt_backend *be) {
    if (!be) return;
    if (be->ops.destroy) be->ops.destroy(be->ctx);
    free(be);
}

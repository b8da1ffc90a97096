/* optimized/attn_local.c — the llama's attention over the rank's whole sequence
 * (opt_attn_local, the seam of optimized/engine.h): RoPE at positions 0..T-1 and causal
 * attention with the probabilities [B, H, T, T] kept for the backward (docs/engine.md
 * section 3). */
#include "optimized/engine.h"

static dp_status local_alloc(opt_arena *ar, void **probs, const opt_model *om, int64_t B) {
    const int64_t T = om->Tl, H = om->cfg.heads, n = B * H * T * T;
    return opt_arena_alloc(ar, probs, opt_backend_esize(ar->be) * (size_t)(n > 0 ? n : 1));
}

static dp_status local_fwd(opt_arena *ar, void *y, void **q, void **k, void **v, void **probs, const opt_model *om,
                           int64_t B) {
    (void)ar;
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t T = om->Tl, H = c->heads, hd = c->dim / H;
    DP_TRY(OPT_CALL(be, rope_fwd, *q, *q, c->rope_theta, B, T, H, hd));
    DP_TRY(OPT_CALL(be, rope_fwd, *k, *k, c->rope_theta, B, T, H, hd));
    return OPT_CALL(be, attn_fwd, y, *probs, *q, *k, *v, B, T, H, hd);
}

static dp_status local_bwd(opt_arena *ar, void *dq, void *dk, void *dv, const void *dy, const void *q, const void *k,
                           const void *v, const void *probs, const void *y, const opt_model *om, int64_t B) {
    (void)ar; (void)y;
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t T = om->Tl, H = c->heads, hd = c->dim / H;
    DP_TRY(OPT_CALL(be, attn_bwd, dq, dk, dv, dy, q, k, v, probs, B, T, H, hd));
    DP_TRY(OPT_CALL(be, rope_bwd, dq, dq, c->rope_theta, B, T, H, hd));
    return OPT_CALL(be, rope_bwd, dk, dk, c->rope_theta, B, T, H, hd);
}

const opt_attn opt_attn_local = {"local", local_alloc, local_fwd, local_bwd};

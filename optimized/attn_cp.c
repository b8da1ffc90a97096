/* optimized/attn_cp.c — the sequence-sharded pieces of the llama under context
 * parallelism (docs/longshield.md): the shard of a CP rank, the all-gather of rows over
 * the CP group, and causal attention across the shards by all-gather
 * (opt_attn_cp_allgather, --cp-attention allgather; the seam of optimized/engine.h).
 * Every other per-position part of the model runs on the rank's rows in engine.c
 * unchanged. */
#include "optimized/engine.h"
#include "optimized/ledger.h"

void opt_cp_shard(int64_t *t0, int64_t *Tl, int64_t T, int M, int r) {
    *t0 = T * r / M;
    *Tl = T * (r + 1) / M - *t0;
}

/* full [B, T, D] = every CP rank's rows [B, Tl_j, D] at their positions: each rank packs
 * its rows into [B, Tmax, D] (padding unused), one all-gather over the CP group, then the
 * blocks are copied to their positions. */
dp_status opt_cp_gather_rows(opt_arena *ar, void *full, const void *local, const opt_model *om, int64_t B, int64_t D) {
    opt_backend *be = om->be;
    const opt_cp *cp = om->cp;
    const size_t es = opt_backend_esize(be);
    const int64_t blk = B * cp->Tmax * D;
    void *send, *recv;
    DP_TRY(opt_arena_alloc_tag(ar, &send, es * (size_t)blk, OPT_MEM_COMM));
    DP_TRY(opt_arena_alloc_tag(ar, &recv, es * (size_t)(blk * cp->M), OPT_MEM_COMM));
    for (int64_t b = 0; b < B && cp->Tl > 0; b++)
        DP_TRY(OPT_CALL(be, copy, (char *)send + es * (size_t)(b * cp->Tmax * D),
                        (const char *)local + es * (size_t)(b * cp->Tl * D), es * (size_t)(cp->Tl * D)));
    DP_TRY(OPT_CALL(be, allgather, cp->g, recv, send, blk, NULL));
    for (int j = 0; j < cp->M; j++) {
        int64_t t0, Tl;
        opt_cp_shard(&t0, &Tl, cp->T, cp->M, j);
        for (int64_t b = 0; b < B && Tl > 0; b++)
            DP_TRY(OPT_CALL(be, copy, (char *)full + es * (size_t)((b * cp->T + t0) * D),
                            (const char *)recv + es * (size_t)(j * blk + b * cp->Tmax * D), es * (size_t)(Tl * D)));
    }
    return DP_OK;
}

/* local [B, Tl, D] = this rank's rows of full [B, T, D] */
static dp_status local_rows(void *local, const void *full, const opt_model *om, int64_t B, int64_t D) {
    const opt_cp *cp = om->cp;
    const size_t es = opt_backend_esize(om->be);
    for (int64_t b = 0; b < B && cp->Tl > 0; b++)
        DP_TRY(OPT_CALL(om->be, copy, (char *)local + es * (size_t)(b * cp->Tl * D),
                        (const char *)full + es * (size_t)((b * cp->T + cp->t0) * D), es * (size_t)(cp->Tl * D)));
    return DP_OK;
}

/* nothing is reserved with the layer's activations: fwd allocates the whole sequence's */
static dp_status allgather_alloc(opt_arena *ar, void **probs, const opt_model *om, int64_t B) {
    (void)ar; (void)om; (void)B;
    *probs = NULL;
    return DP_OK;
}

static dp_status allgather_fwd(opt_arena *ar, void *y, void **q, void **k, void **v, void **probs, const opt_model *om,
                               int64_t B) {
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t D = c->dim, H = c->heads, hd = D / H, T = om->cp->T;
    const size_t es = opt_backend_esize(be);
    void *qf, *kf, *vf, *pf, *yf;
    DP_TRY(opt_arena_alloc(ar, &qf, es * (size_t)(B * T * D)));
    DP_TRY(opt_arena_alloc(ar, &kf, es * (size_t)(B * T * D)));
    DP_TRY(opt_arena_alloc(ar, &vf, es * (size_t)(B * T * D)));
    DP_TRY(opt_arena_alloc(ar, &pf, es * (size_t)(B * H * T * T)));
    DP_TRY(opt_arena_alloc(ar, &yf, es * (size_t)(B * T * D)));
    DP_TRY(opt_cp_gather_rows(ar, qf, *q, om, B, D));
    DP_TRY(opt_cp_gather_rows(ar, kf, *k, om, B, D));
    DP_TRY(opt_cp_gather_rows(ar, vf, *v, om, B, D));
    /* RoPE and attention over the whole sequence (global positions), as one rank would */
    DP_TRY(OPT_CALL(be, rope_fwd, qf, qf, c->rope_theta, B, T, H, hd));
    DP_TRY(OPT_CALL(be, rope_fwd, kf, kf, c->rope_theta, B, T, H, hd));
    DP_TRY(OPT_CALL(be, attn_fwd, yf, pf, qf, kf, vf, B, T, H, hd));
    DP_TRY(local_rows(y, yf, om, B, D));
    *q = qf; *k = kf; *v = vf; *probs = pf;
    return DP_OK;
}

static dp_status allgather_bwd(opt_arena *ar, void *dq, void *dk, void *dv, const void *dy, const void *q, const void *k,
                               const void *v, const void *probs, const void *y, const opt_model *om, int64_t B) {
    (void)y;
    opt_backend *be = om->be;
    const dp_model_config *c = &om->cfg;
    const int64_t D = c->dim, H = c->heads, hd = D / H, T = om->cp->T;
    const size_t es = opt_backend_esize(be);
    void *dyf, *dqf, *dkf, *dvf;
    DP_TRY(opt_arena_alloc(ar, &dyf, es * (size_t)(B * T * D)));
    DP_TRY(opt_arena_alloc(ar, &dqf, es * (size_t)(B * T * D)));
    DP_TRY(opt_arena_alloc(ar, &dkf, es * (size_t)(B * T * D)));
    DP_TRY(opt_arena_alloc(ar, &dvf, es * (size_t)(B * T * D)));
    /* every rank holds the whole dy, so the whole backward (the keys' and values'
     * gradients receive contributions from every later query) is exact on each rank */
    DP_TRY(opt_cp_gather_rows(ar, dyf, dy, om, B, D));
    DP_TRY(OPT_CALL(be, attn_bwd, dqf, dkf, dvf, dyf, q, k, v, probs, B, T, H, hd));
    DP_TRY(OPT_CALL(be, rope_bwd, dqf, dqf, c->rope_theta, B, T, H, hd));
    DP_TRY(OPT_CALL(be, rope_bwd, dkf, dkf, c->rope_theta, B, T, H, hd));
    DP_TRY(local_rows(dq, dqf, om, B, D));
    DP_TRY(local_rows(dk, dkf, om, B, D));
    return local_rows(dv, dvf, om, B, D);
}

const opt_attn opt_attn_cp_allgather = {"cp-allgather", allgather_alloc, allgather_fwd, allgather_bwd};

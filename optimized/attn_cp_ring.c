/* optimized/attn_cp_ring.c — ring attention across the CP group (opt_attn_cp_ring, the
 * seam of optimized/engine.h; --cp-attention ring,
 * docs/longshield.md "Ring attention"): each rank keeps its query rows; the key/value
 * blocks travel around the ring (rank r sends to r + 1 and receives from r - 1, M - 1
 * steps) and every block updates an online softmax; the backward passes the key/value
 * blocks with their gradient accumulators the same way and one last step returns each
 * accumulator to its owner. */
#include <math.h>
#include <stdlib.h>

#include "optimized/engine.h"
#include "common/alloc.h"
#include "optimized/ledger.h"

/* dst [n] on this rank = src [n] of CP rank r - 1 (every rank sends to r + 1). */
static dp_status ring_pass(const opt_model *om, void *dst, const void *src, int64_t n, int tag) {
    opt_backend *be = om->be;
    const opt_cp *cp = om->cp;
    opt_async *rq = NULL, *sq = NULL;
    if (cp->M == 1) /* one CP rank (--cp 1 --cp-attention ring): the block comes back to its owner */
        return dst == src ? DP_OK : OPT_CALL(be, copy, dst, src, opt_backend_esize(be) * (size_t)n);
    DP_TRY(OPT_CALL(be, recv, cp->g, dst, n, (cp->r + cp->M - 1) % cp->M, tag, &rq));
    dp_status st = OPT_CALL(be, send, cp->g, src, n, (cp->r + 1) % cp->M, tag, &sq);
    dp_status w1 = OPT_CALL(be, wait, rq);
    dp_status w2 = sq ? OPT_CALL(be, wait, sq) : DP_OK;
    return st != DP_OK ? st : w1 != DP_OK ? w1 : w2;
}

/* nb padded ring buffers [B, Tmax, D] */
static dp_status ring_bufs(opt_arena *ar, void **buf, int nb, const opt_model *om, int64_t B) {
    const size_t es = opt_backend_esize(om->be);
    for (int i = 0; i < nb; i++)
        DP_TRY(opt_arena_alloc_tag(ar, &buf[i], es * (size_t)(B * om->cp->Tmax * om->cfg.dim), OPT_MEM_COMM));
    return DP_OK;
}

static dp_status ring_alloc(opt_arena *ar, void **probs, const opt_model *om, int64_t B) {
    (void)ar; (void)om; (void)B;
    *probs = NULL; /* the log-sum-exp is allocated by ring_fwd */
    return DP_OK;
}

static dp_status ring_fwd(opt_arena *ar, void *y, void **q, void **k, void **v, void **lse, const opt_model *om,
                          int64_t B) {
    opt_backend *be = om->be;
    const opt_cp *cp = om->cp;
    const dp_model_config *c = &om->cfg;
    const int64_t D = c->dim, H = c->heads, hd = D / H, Tl = cp->Tl, n = B * cp->Tmax * D;
    const size_t es = opt_backend_esize(be);
    DP_TRY(OPT_CALL(be, rope_at, *q, *q, c->rope_theta, cp->t0, 1, B, Tl, H, hd));
    DP_TRY(OPT_CALL(be, rope_at, *k, *k, c->rope_theta, cp->t0, 1, B, Tl, H, hd));
    void *o, *m, *l, *ls, *buf[4];
    DP_TRY(opt_arena_alloc(ar, &o, es * (size_t)(B * Tl * D)));
    DP_TRY(opt_arena_alloc(ar, &m, es * (size_t)(B * H * Tl)));
    DP_TRY(opt_arena_alloc(ar, &l, es * (size_t)(B * H * Tl)));
    DP_TRY(opt_arena_alloc(ar, &ls, es * (size_t)(B * H * Tl)));
    DP_TRY(OPT_CALL(be, zero, o, es * (size_t)(B * Tl * D)));
    DP_TRY(OPT_CALL(be, zero, l, es * (size_t)(B * H * Tl)));
    double *hm = dp_malloc(sizeof(double) * (size_t)(B * H * Tl + 1));
    if (!hm) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    for (int64_t i = 0; i < B * H * Tl; i++) hm[i] = -INFINITY;
    dp_status st = OPT_CALL(be, upload_f64, m, hm, B * H * Tl);
    dp_free(hm);
    DP_TRY(st);
    DP_TRY(ring_bufs(ar, buf, 4, om, B)); /* current k, v | next k, v */
    DP_TRY(OPT_CALL(be, copy, buf[0], *k, es * (size_t)(B * Tl * D)));
    DP_TRY(OPT_CALL(be, copy, buf[1], *v, es * (size_t)(B * Tl * D)));
    for (int s = 0; s < cp->M; s++) {
        int j = (cp->r - s + cp->M) % cp->M;
        int64_t t0j, Tlj;
        opt_cp_shard(&t0j, &Tlj, cp->T, cp->M, j);
        if (t0j < cp->t0 + Tl) /* a later shard's keys are invisible to every query here */
            DP_TRY(OPT_CALL(be, attn_block_fwd, o, m, l, *q, buf[0], buf[1], B, Tl, Tlj, H, hd, cp->t0, t0j));
        if (s + 1 == cp->M) break;
        DP_TRY(ring_pass(om, buf[2], buf[0], n, 101));
        DP_TRY(ring_pass(om, buf[3], buf[1], n, 102));
        void *t0b = buf[0], *t1b = buf[1];
        buf[0] = buf[2]; buf[1] = buf[3]; buf[2] = t0b; buf[3] = t1b;
    }
    DP_TRY(OPT_CALL(be, attn_block_finish, y, ls, o, m, l, B, Tl, H, hd));
    *lse = ls;
    return DP_OK;
}

static dp_status ring_bwd(opt_arena *ar, void *dq, void *dk, void *dv, const void *dy, const void *q, const void *k,
                          const void *v, const void *lse, const void *y, const opt_model *om, int64_t B) {
    opt_backend *be = om->be;
    const opt_cp *cp = om->cp;
    const dp_model_config *c = &om->cfg;
    const int64_t D = c->dim, H = c->heads, hd = D / H, Tl = cp->Tl, n = B * cp->Tmax * D;
    const size_t es = opt_backend_esize(be);
    void *buf[8]; /* current k, v, dk, dv | next k, v, dk, dv */
    DP_TRY(ring_bufs(ar, buf, 8, om, B));
    for (int i = 0; i < 8; i++) DP_TRY(OPT_CALL(be, zero, buf[i], es * (size_t)n));
    DP_TRY(OPT_CALL(be, zero, dq, es * (size_t)(B * Tl * D)));
    DP_TRY(OPT_CALL(be, copy, buf[0], k, es * (size_t)(B * Tl * D)));
    DP_TRY(OPT_CALL(be, copy, buf[1], v, es * (size_t)(B * Tl * D)));
    for (int s = 0; s < cp->M; s++) {
        int j = (cp->r - s + cp->M) % cp->M;
        int64_t t0j, Tlj;
        opt_cp_shard(&t0j, &Tlj, cp->T, cp->M, j);
        if (t0j < cp->t0 + Tl)
            DP_TRY(OPT_CALL(be, attn_block_bwd, dq, buf[2], buf[3], dy, q, buf[0], buf[1], y, lse, B, Tl, Tlj, H, hd,
                            cp->t0, t0j));
        /* after the last block, only the accumulators move: back to their owner */
        for (int i = s + 1 == cp->M ? 2 : 0; i < 4; i++) DP_TRY(ring_pass(om, buf[4 + i], buf[i], n, 111 + i));
        for (int i = 0; i < 4; i++) { void *t = buf[i]; buf[i] = buf[4 + i]; buf[4 + i] = t; }
    }
    DP_TRY(OPT_CALL(be, copy, dk, buf[2], es * (size_t)(B * Tl * D)));
    DP_TRY(OPT_CALL(be, copy, dv, buf[3], es * (size_t)(B * Tl * D)));
    DP_TRY(OPT_CALL(be, rope_at, dq, dq, c->rope_theta, cp->t0, -1, B, Tl, H, hd));
    return OPT_CALL(be, rope_at, dk, dk, c->rope_theta, cp->t0, -1, B, Tl, H, hd);
}

const opt_attn opt_attn_cp_ring = {"cp-ring", ring_alloc, ring_fwd, ring_bwd};

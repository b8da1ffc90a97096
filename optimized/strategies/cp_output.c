/* optimized/strategies/cp_output.c — per-example gradients of a linear parameter under
 * context parallelism, output-stationary (--cp-pattern output, docs/longshield.md
 * "Per-sample gradients: output-stationary"). For W [P, d] (y = x W^T), CP rank j owns the
 * rows [r0_j, r1_j) of W (opt_cp_slice); their per-example gradient is
 * G_b[:, r0_j:r1_j]^T A_b summed over ALL T positions, so the rank needs
 *   - the whole sequence's input activations A [Bc, T, d]: an all-gather over the CP group
 *     (opt_cp_gather_rows; the next parameter with the same input, e.g. k and v after q,
 *     reuses it);
 *   - the columns [r0_j, r1_j) of the output gradients G at every position: an all-to-all
 *     (rank i sends rank j those columns of its Tl_i positions),
 * then one batched GEMM gives the complete slice directly, with no reduction over ranks. */
#include "optimized/ledger.h"
#include "optimized/shard.h"

/* Rows [r0, r1) of W [P, d] in CP rank j's slice. */
static void slice_rows(int64_t *r0, int64_t *r1, const opt_dpsgd *s, int p, int j) {
    const int64_t cols = s->om.numel[p] / s->om.shape[p][0];
    int64_t a, b;
    opt_cp_slice(&a, &b, s, p, j);
    *r0 = a / cols;
    *r1 = b / cols;
}

/* ga->full = the whole sequence's A [Bc, T, d] of the tape buffer A. */
static dp_status gather_input(opt_cp_gathered *ga, opt_dpsgd *s, const void *A, int64_t d, int64_t Bc) {
    if (ga->src == A) return DP_OK;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    opt_arena_free(&ga->ar);
    ga->ar.be = s->be;
    ga->src = NULL;
    DP_TRY(opt_arena_alloc_tag(&ga->ar, &ga->full, opt_backend_esize(s->be) * (size_t)(Bc * cs->cp.T * d), OPT_MEM_COMM));
    DP_TRY(opt_cp_gather_rows(&ga->ar, ga->full, A, &s->om, Bc, d));
    ga->src = A;
    return DP_OK;
}

/* gs [Bc, T, w] = the columns of this rank's slice of G at every position (all-to-all of
 * [Bc, Tmax, pr] blocks, pr = ceil(P / M): block j of send = slice j's columns of the
 * rank's Tl positions; block i of recv = this slice's columns of rank i's positions). */
static dp_status gather_columns(void *gs, opt_arena *ar, opt_dpsgd *s, const void *G, int p, int64_t P, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const int M = cs->cp.M, r = cs->cp.r;
    const int64_t Tmax = cs->cp.Tmax, Tl = cs->cp.Tl, T = cs->cp.T, pr = (P + M - 1) / M, blk = Bc * Tmax * pr;
    void *send, *recv;
    int64_t r0, r1;
    DP_TRY(opt_arena_alloc_tag(ar, &send, opt_backend_esize(be) * (size_t)(M * blk), OPT_MEM_COMM));
    DP_TRY(opt_arena_alloc_tag(ar, &recv, opt_backend_esize(be) * (size_t)(M * blk), OPT_MEM_COMM));
    for (int j = 0; j < M; j++) {
        slice_rows(&r0, &r1, s, p, j);
        for (int64_t e = 0; e < Bc * Tl && r1 > r0; e++) /* e = b Tl + t */
            DP_TRY(OPT_CALL(be, copy, opt_dev_at(s, send, j * blk + (e / Tl * Tmax + e % Tl) * pr),
                            opt_dev_at(s, (void *)G, e * P + r0), opt_backend_esize(be) * (size_t)(r1 - r0)));
    }
    if (s->hooks->cp_drop_partial && r == M - 1) /* negative control: this rank's positions are lost */
        DP_TRY(OPT_CALL(be, zero, send, opt_backend_esize(be) * (size_t)(M * blk)));
    DP_TRY(OPT_CALL(be, alltoall, cs->cp.g, recv, send, blk, NULL));
    slice_rows(&r0, &r1, s, p, r);
    const int64_t w = r1 - r0;
    for (int i = 0; i < M && w > 0; i++) {
        int64_t t0, Ti;
        opt_cp_shard(&t0, &Ti, T, M, i);
        for (int64_t b = 0; b < Bc; b++)
            for (int64_t t = 0; t < Ti; t++)
                DP_TRY(OPT_CALL(be, copy, opt_dev_at(s, gs, (b * T + t0 + t) * w),
                                opt_dev_at(s, recv, i * blk + (b * Tmax + t) * pr), opt_backend_esize(be) * (size_t)w));
    }
    return DP_OK;
}

dp_status opt_cp_output_slice(void *slice, opt_cp_gathered *ga, opt_dpsgd *s, const opt_tape *tp, int p, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const int64_t d = tp->din[p], P = tp->dout[p], T = cs->cp.T, pm = cs->pmax[p];
    int64_t r0, r1;
    slice_rows(&r0, &r1, s, p, cs->cp.r);
    const int64_t w = r1 - r0;
    DP_TRY(gather_input(ga, s, tp->A[p], d, Bc));
    opt_arena ar = {.be = be};
    void *gs = NULL;
    dp_status st = opt_arena_alloc_tag(&ar, &gs, opt_backend_esize(be) * (size_t)(Bc * T * (w > 0 ? w : 1)), OPT_MEM_COMM);
    if (st == DP_OK) st = gather_columns(gs, &ar, s, tp->G[p], p, P, Bc);
    if (st == DP_OK) st = OPT_CALL(be, zero, slice, opt_backend_esize(be) * (size_t)(Bc * pm));
    /* slice_b [w, d] = gs_b^T [w, T] A_b [T, d] (example b at stride pm) */
    if (st == DP_OK && w > 0) st = OPT_CALL(be, gemm, slice, gs, ga->full, 1, 0, w, d, T, 1.0, 0.0, Bc, T * w, T * d, pm);
    opt_arena_free(&ar);
    return st;
}

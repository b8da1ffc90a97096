/* optimized/strategies/cp_output.c — per-example gradients of a linear parameter under
 * context parallelism, output-stationary (--cp-pattern output, docs/longshield.md
 * "Per-sample gradients: output-stationary"). For W [P, d] (y = x W^T) the per-example
 * gradient G_b^T A_b is a sum over ALL T positions; of the input activations A [Bc, Tl, d]
 * and the output gradients G [Bc, Tl, P] the narrower one is all-gathered whole over the
 * CP group and the other one is exchanged column-wise by an all-to-all, following the
 * orientation of the slice (opt_cp_geom_of):
 *   - row slice (P >= d): CP rank j owns the rows [r0_j, r1_j) of W: A is all-gathered
 *     (opt_cp_gather_rows; the next parameter with the same input, e.g. k and v after q,
 *     reuses it) and the columns [r0_j, r1_j) of G at every position come by all-to-all;
 *     slice_b [w, d] = Gs_b^T A_b;
 *   - column slice (P < d, e.g. down): CP rank j owns the columns [c0_j, c1_j) of every row:
 *     G is all-gathered and the columns [c0_j, c1_j) of A come by all-to-all;
 *     slice_b [P, w] = G_b^T As_b;
 * one batched GEMM gives the complete slice directly, with no reduction over ranks. */
#include "optimized/ledger.h"
#include "optimized/shard.h"

/* [c0, c1): the columns of the all-to-all'ed tensor (row slice: G, column slice: A) that
 * CP rank j's slice of parameter p needs. */
static void exch_cols(int64_t *c0, int64_t *c1, const opt_dpsgd *s, int p, int j) {
    opt_cp_geom g;
    opt_cp_geom_of(&g, s, p, j);
    const int64_t div = g.cols ? 1 : s->om.numel[p] / s->om.shape[p][0]; /* row slice: e0 = r0 d */
    *c0 = g.e0 / div;
    *c1 = (g.e0 + g.w) / div;
}

/* ga->full = the whole sequence's [Bc, T, width] of the tape buffer X [Bc, Tl, width]. */
static dp_status gather_full(opt_cp_gathered *ga, opt_dpsgd *s, const void *X, int64_t width, int64_t Bc) {
    if (ga->src == X) return DP_OK;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    opt_arena_free(&ga->ar);
    ga->ar.be = s->be;
    ga->src = NULL;
    DP_TRY(opt_arena_alloc_tag(&ga->ar, &ga->full, opt_backend_esize(s->be) * (size_t)(Bc * cs->cp.T * width), OPT_MEM_COMM));
    DP_TRY(opt_cp_gather_rows(&ga->ar, ga->full, X, &s->om, Bc, width));
    ga->src = X;
    return DP_OK;
}

/* gs [Bc, T, w] = the columns [c0, c1) of this rank's slice (exch_cols) of Y [Bc, Tl, width]
 * at every position (all-to-all of [Bc, Tmax, pr] blocks, pr = ceil(width / M): block j of
 * send = slice j's columns of the rank's Tl positions; block i of recv = this slice's
 * columns of rank i's positions). */
static dp_status gather_columns(void *gs, opt_arena *ar, opt_dpsgd *s, const void *Y, int p, int64_t width, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const int M = cs->cp.M, r = cs->cp.r;
    const int64_t Tmax = cs->cp.Tmax, Tl = cs->cp.Tl, T = cs->cp.T, pr = (width + M - 1) / M, blk = Bc * Tmax * pr;
    void *send, *recv;
    int64_t r0, r1;
    DP_TRY(opt_arena_alloc_tag(ar, &send, opt_backend_esize(be) * (size_t)(M * blk), OPT_MEM_COMM));
    DP_TRY(opt_arena_alloc_tag(ar, &recv, opt_backend_esize(be) * (size_t)(M * blk), OPT_MEM_COMM));
    for (int j = 0; j < M; j++) {
        exch_cols(&r0, &r1, s, p, j);
        for (int64_t e = 0; e < Bc * Tl && r1 > r0; e++) /* e = b Tl + t */
            DP_TRY(OPT_CALL(be, copy, opt_dev_at(s, send, j * blk + (e / Tl * Tmax + e % Tl) * pr),
                            opt_dev_at(s, (void *)Y, e * width + r0), opt_backend_esize(be) * (size_t)(r1 - r0)));
    }
    DP_TRY(s->hooks->cp_partial(s, send, opt_backend_esize(be) * (size_t)(M * blk))); /* the CP-partial seam */
    DP_TRY(OPT_CALL(be, alltoall, cs->cp.g, recv, send, blk, NULL));
    exch_cols(&r0, &r1, s, p, r);
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
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const int64_t d = tp->din[p], P = tp->dout[p], T = cs->cp.T, pm = cs->pmax[p];
    const int cols = opt_cp_by_columns(s, p);
    int64_t c0, c1;
    exch_cols(&c0, &c1, s, p, cs->cp.r);
    const int64_t w = c1 - c0;
    /* the gathered tensor X and the exchanged one Y */
    DP_TRY(gather_full(ga, s, cols ? tp->G[p] : tp->A[p], cols ? P : d, Bc));
    opt_arena ar = {.be = be};
    void *gs = NULL;
    dp_status st = opt_arena_alloc_tag(&ar, &gs, opt_backend_esize(be) * (size_t)(Bc * T * (w > 0 ? w : 1)), OPT_MEM_COMM);
    if (st == DP_OK) st = gather_columns(gs, &ar, s, cols ? tp->A[p] : tp->G[p], p, cols ? d : P, Bc);
    if (st == DP_OK) st = OPT_CALL(be, zero, slice, opt_backend_esize(be) * (size_t)(Bc * pm));
    /* row: slice_b [w, d] = gs_b^T [w, T] A_b [T, d]; column: slice_b [P, w] = G_b^T [P, T] gs_b [T, w]
     * (example b at stride pm) */
    if (st == DP_OK && w > 0)
        st = cols ? OPT_CALL(be, gemm, slice, ga->full, gs, 1, 0, P, w, T, 1.0, 0.0, Bc, T * P, T * w, pm)
                  : OPT_CALL(be, gemm, slice, gs, ga->full, 1, 0, w, d, T, 1.0, 0.0, Bc, T * w, T * d, pm);
    opt_arena_free(&ar);
    return st;
}

/* optimized/clip/source_cp.c — the CP norm source of the clipping pipeline
 * (optimized/clip/clip.h; docs/longshield.md "Per-sample gradients"): one chunk under
 * context parallelism, input-stationary (--cp-pattern input; with --cp-pattern output the
 * linear parameters' slices come from cp_output.c instead of step 2's reduce-scatter):
 *   1. forward and backward on the rank's positions (engine.c, the CP attention of
 *      attn_cp.c / attn_cp_ring.c);
 *   2. per parameter, the partial per-example gradients of those positions, in rounds of
 *      Bq = ceil(Bc / M) examples: a round's partials [Bq, numel] packed by destination
 *      slice (opt_cp_geom_of) and reduce-scattered over the CP group into the rows of
 *      those examples of the rank's slice [Bc, pmax] (no buffer ever holds more than Bq
 *      examples' partials, so the per-example bytes in flight are O(Bc numel / M),
 *      docs/longshield.md 6b);
 *   3. squared norms of the slice, all-reduced over the CP group (the norm-reduce seam;
 *      Bc scalars per parameter), added into the groups' norms (flat: every parameter);
 *   4. (the pipeline) clip factors, dropped and special examples, then the clipped sum of
 *      the slice into the CP layout's packed S.
 * Losses are per-position sums: the partial losses are all-reduced over the CP group. The
 * whole per-example gradients (the overflow path's host rows, the exports) are the slices
 * all-gathered over the CP group. */
#include <math.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/clip/clip.h"
#include "common/alloc.h"
#include "optimized/ledger.h"

typedef struct {
    opt_dpsgd *s;
    void **slice;      /* [np] -> [Bc, pmax[p]] complete per-example gradients of the slice */
    char *done;        /* [np] 1: slice[p] is complete (every round waited, or output-stationary) */
    void **send;       /* [np] the last round's send buffer while it is in flight */
    opt_async **as;    /* [np] the posted last round, until waited */
    int64_t Bq;        /* examples per round: ceil(Bc / M) */
    int pf, pn;        /* the posted group not yet waited: parameters [pf, pf + pn) (pn 0: none) */
    double t_post;     /* when that group was posted (seconds) */
    opt_cp_gathered gathered; /* output-stationary: the last all-gathered input activations */
    const int *mode;   /* [np] the pipeline's modes (opt_layer_mode) */
    char *left_out;    /* [Bc] 1: a dropped or special example (the whole-sequence terms leave it out) */
} cp_chunk;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1: linear parameter p's norms come from its whole-sequence tape entries (ghost or
 * streaming norms, the norm strategy's mode): no per-example slice, A and G all-gathered
 * over the CP group when they are needed (norms, clipped sum, whole rows). */
static int whole_sequence(const cp_chunk *k, int p) {
    return k->mode[p] == OPT_LM_GHOST || k->mode[p] == OPT_LM_FUSEDNORM || k->mode[p] == OPT_LM_FUSED1;
}

/* 1: parameter p's slice comes from the reduce-scatter of partials (every instantiated
 * parameter with --cp-pattern input; the parameters without a GEMM with output). */
static int uses_reduce_scatter(const cp_chunk *k, int p) {
    const opt_dpsgd *s = k->s;
    return !whole_sequence(k, p) && (!((const opt_cp_state *)s->layout_state)->output || s->om.src[p] != OPT_SRC_LINEAR);
}

/* Step 2 for parameter p, input-stationary, round i: the partials of the examples
 * [i Bq, min((i + 1) Bq, Bc)) instantiated, packed by destination slice into *send
 * [M, ne, pm] and reduce-scattered into those examples' rows of k->slice[p] (posted
 * non-blocking: *as; nothing when the round has no examples). The partial is freed once
 * packed; both buffers hold partial per-example gradients (tag per_example). */
static dp_status post_round(void **send_out, opt_async **as, cp_chunk *k, const opt_tape *tp, int p, int64_t i) {
    opt_dpsgd *s = k->s;
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const int M = cs->cp.M;
    const int64_t n = om->numel[p], pm = cs->pmax[p], e0 = i * k->Bq;
    const int64_t ne = tp->B - e0 < k->Bq ? tp->B - e0 : k->Bq;
    const size_t es = opt_backend_esize(be);
    void *inst = NULL, *send = NULL;
    *send_out = NULL;
    *as = NULL;
    if (ne <= 0) return DP_OK;
    dp_status st = opt_mem_alloc(be, &inst, es * (size_t)(ne * n), OPT_MEM_PER_EXAMPLE);
    if (st == DP_OK) st = opt_instantiate_examples(inst, om, tp, p, e0, ne);
    if (st == DP_OK) st = opt_mem_alloc(be, &send, es * (size_t)(M * ne * pm), OPT_MEM_PER_EXAMPLE);
    if (st == DP_OK) st = OPT_CALL(be, zero, send, es * (size_t)(M * ne * pm));
    /* block j of send [M, ne, pm] = the rows of slice j of every example of the round */
    for (int j = 0; st == DP_OK && j < M; j++) {
        opt_cp_geom g;
        opt_cp_geom_of(&g, s, p, j);
        for (int64_t e = 0; st == DP_OK && e < ne; e++)
            st = opt_cp_geom_copy(s, &g, opt_dev_at(s, inst, e * n), opt_dev_at(s, send, (j * ne + e) * pm), 0,
                                  g.nseg * g.w, 0);
    }
    opt_mem_free(be, inst);
    if (st == DP_OK) st = s->hooks->cp_partial(s, send, es * (size_t)(M * ne * pm)); /* the CP-partial seam */
    if (st == DP_OK)
        st = OPT_CALL(be, reduce_scatter_sum, cs->cp.g, opt_dev_at(s, k->slice[p], e0 * pm), send, ne * pm, as);
    if (st != DP_OK) { opt_mem_free(be, send); *as = NULL; return st; }
    *send_out = send;
    return DP_OK;
}

/* Step 2 for parameter p: rounds 0 .. nr - 2 one at a time (posted, waited and freed
 * before the next one is instantiated; their time from post to completion counts as
 * exposed), then the last round
 * posted non-blocking (k->send[p], k->as[p]), waited by wait_posted. Every round needs the
 * tape, which --checkpoint block frees after the hook: so the round left in flight is the
 * last one. */
static dp_status post_rounds(cp_chunk *k, const opt_tape *tp, int p) {
    opt_backend *be = k->s->be;
    opt_cp_state *cs = (opt_cp_state *)k->s->layout_state;
    const int64_t nr = k->Bq > 0 ? (tp->B + k->Bq - 1) / k->Bq : 0;
    for (int64_t i = 0; i + 1 < nr; i++) {
        void *send;
        opt_async *as;
        DP_TRY(post_round(&send, &as, k, tp, p, i));
        const double t0 = now_s(); /* posted: its time to completion is exposed */
        dp_status st = OPT_CALL(be, wait, as);
        if (st != DP_OK) { /* the round may still be in flight: its buffers stay (the run ends) */
            k->as[p] = as;
            k->send[p] = send;
            return st;
        }
        opt_mem_free(be, send);
        cs->ovl_total += now_s() - t0;
    }
    return nr > 0 ? post_round(&k->send[p], &k->as[p], k, tp, p, nr - 1) : DP_OK;
}

/* Wait for the last rounds of the posted group [pf, pf + pn) (the collective timeout
 * applies) and account their times: hidden += t_wait - t_post, total += t_done - t_post. */
static dp_status wait_posted(cp_chunk *k) {
    opt_dpsgd *s = k->s;
    opt_cp_state *cs = (opt_cp_state *)s->layout_state;
    if (k->pn == 0) return DP_OK;
    const double tw = now_s();
    for (int p = k->pf; p < k->pf + k->pn; p++) {
        if (!uses_reduce_scatter(k, p)) continue;
        k->done[p] = 1;
        if (!k->as[p] && !k->send[p]) continue; /* an empty chunk has no rounds */
        dp_status st = OPT_CALL(s->be, wait, k->as[p]);
        if (st != DP_OK) return st; /* still in flight: k->as[p] keeps the slice and send alive */
        k->as[p] = NULL;
        opt_mem_free(s->be, k->send[p]);
        k->send[p] = NULL;
    }
    const double td = now_s();
    cs->ovl_hidden += tw - k->t_post;
    cs->ovl_total += td - k->t_post;
    k->pn = 0;
    return DP_OK;
}

static dp_status output_slice(cp_chunk *k, const opt_tape *tp, int p);

/* opt_tape_hook: the tape of [first, first + n) is final: wait for the group posted before
 * (one layer later in the model), whose last rounds have overlapped this group's
 * backward, then run this group's rounds and post their last ones (waited at the next
 * hook). The previous group is waited first, so that the rounds of one group only are
 * in flight at a time. */
static dp_status tape_ready(void *ctx, const opt_tape *tp, int first, int n) {
    cp_chunk *k = ctx;
    opt_dpsgd *s = k->s;
    DP_TRY(wait_posted(k));
    for (int p = first; p < first + n; p++)
        if (uses_reduce_scatter(k, p)) DP_TRY(post_rounds(k, tp, p));
    k->pf = first; k->pn = n; k->t_post = now_s();
    if (s->o.cp_no_overlap) DP_TRY(wait_posted(k)); /* --cp-overlap off: waited at once */
    if (s->om.checkpoint) { /* the block's tape is freed after this hook: the output-stationary slices now */
        for (int p = first; p < first + n; p++)
            if (!uses_reduce_scatter(k, p) && !whole_sequence(k, p)) DP_TRY(output_slice(k, tp, p));
        opt_arena_free(&k->gathered.ar);
        k->gathered.src = NULL;
    }
    return DP_OK;
}

/* After the backward: every reduce-scatter not posted by the hook (an empty chunk has no
 * backward) posted and waited at once, one parameter at a time. */
static dp_status finish_reduce_scatters(cp_chunk *k, const opt_tape *tp) {
    DP_TRY(wait_posted(k));
    for (int p = 0; p < k->s->om.np; p++)
        if (uses_reduce_scatter(k, p) && !k->done[p]) {
            DP_TRY(post_rounds(k, tp, p));
            k->pf = p; k->pn = 1; k->t_post = now_s();
            DP_TRY(wait_posted(k));
        }
    return DP_OK;
}

/* Output-stationary slice of linear parameter p (cp_output.c) into k->slice[p]. */
static dp_status output_slice(cp_chunk *k, const opt_tape *tp, int p) {
    DP_TRY(opt_cp_output_slice(k->slice[p], &k->gathered, k->s, tp, p, tp->B));
    k->done[p] = 1;
    return DP_OK;
}

/* Steps 2 and 3 for parameter p: the slice (output-stationary for the linear parameters
 * with --cp-pattern output, cp_output.c; else already reduce-scattered), then its norms
 * added into sq [G, Bc]. */
static dp_status whole_norm(void *sq, cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int p, int64_t Bc);

static dp_status slice_and_norm(void *sq, cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int p, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const int64_t pm = cs->pmax[p];
    const size_t es = opt_backend_esize(be);
    void *sqp;
    if (whole_sequence(k, p)) return whole_norm(sq, k, s, tp, p, Bc);
    if (!k->done[p]) DP_TRY(output_slice(k, tp, p));
    DP_TRY(opt_arena_alloc_tag(&tp->ar, &sqp, es * (size_t)Bc, OPT_MEM_WORKSPACE));
    DP_TRY(OPT_CALL(be, zero, sqp, es * (size_t)Bc));
    DP_TRY(OPT_CALL(be, sqnorm_rows, sqp, k->slice[p], Bc, pm));
    DP_TRY(s->hooks->norm_reduce(s, sqp, Bc)); /* the norm-reduce seam: all-reduce over the CP group */
    void *sqg = opt_dev_at(s, sq, s->groups.group_of[p] * Bc);
    return OPT_CALL(be, add, sqg, sqg, sqp, Bc);
}

/* ---- the whole-sequence parameters (ghost and streaming norms under CP) ---- */
/* *A [Bc, T, d], *G [Bc, T, p] = linear parameter p's tape entries of every position: the
 * rank's rows all-gathered over the CP group (opt_cp_gather_rows, buffers of ar), the rows
 * of the examples left out zeroed (their terms then add an exact 0). */
static dp_status whole_tape(const void **A, const void **G, opt_arena *ar, cp_chunk *k, const opt_tape *tp, int p,
                            int zero_left_out) {
    opt_dpsgd *s = k->s;
    const int64_t Bc = tp->B, T = s->om.T, d = tp->din[p], P = tp->dout[p];
    const size_t es = opt_backend_esize(s->be);
    void *a, *g;
    DP_TRY(opt_arena_alloc_tag(ar, &a, es * (size_t)(Bc * T * d + 1), OPT_MEM_COMM));
    DP_TRY(opt_arena_alloc_tag(ar, &g, es * (size_t)(Bc * T * P + 1), OPT_MEM_COMM));
    DP_TRY(opt_cp_gather_rows(ar, a, tp->A[p], &s->om, Bc, d));
    DP_TRY(opt_cp_gather_rows(ar, g, tp->G[p], &s->om, Bc, P));
    for (int64_t b = 0; zero_left_out && b < Bc; b++)
        if (k->left_out[b]) {
            DP_TRY(OPT_CALL(s->be, zero, opt_dev_at(s, a, b * T * d), es * (size_t)(T * d)));
            DP_TRY(OPT_CALL(s->be, zero, opt_dev_at(s, g, b * T * P), es * (size_t)(T * P)));
        }
    *A = a;
    *G = g;
    return DP_OK;
}

/* The whole per-example squared norms of p (every CP rank computes the same: no
 * reduction), into its group's row of sq. */
static dp_status whole_norm(void *sq, cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int p, int64_t Bc) {
    opt_arena ar = {.be = s->be};
    const void *A, *G;
    void *sqg = opt_dev_at(s, sq, s->groups.group_of[p] * Bc);
    dp_status st = whole_tape(&A, &G, &ar, k, tp, p, 0);
    if (st == DP_OK && k->mode[p] == OPT_LM_GHOST)
        st = OPT_CALL(s->be, ghost_sqnorm, sqg, A, G, Bc, s->om.T, tp->din[p], tp->dout[p]);
    else if (st == DP_OK)
        st = OPT_CALL(s->be, fused_sqnorm, sqg, A, G, Bc, s->om.T, tp->din[p], tp->dout[p]);
    opt_arena_free(&ar);
    return st;
}

/* h [Bc, numel] (host) = p's whole per-example gradients G_b^T A_b over every position */
static dp_status whole_grads(double *h, cp_chunk *k, const opt_tape *tp, int p) {
    opt_dpsgd *s = k->s;
    const int64_t Bc = tp->B, T = s->om.T, d = tp->din[p], P = tp->dout[p];
    opt_arena ar = {.be = s->be};
    const void *A, *G;
    void *g = NULL;
    dp_status st = whole_tape(&A, &G, &ar, k, tp, p, 0);
    if (st == DP_OK) st = opt_arena_alloc_tag(&ar, &g, opt_backend_esize(s->be) * (size_t)(Bc * P * d + 1), OPT_MEM_PER_EXAMPLE);
    if (st == DP_OK) st = OPT_CALL(s->be, gemm, g, G, A, 1, 0, P, d, T, 1.0, 0.0, Bc, T * P, T * d, P * d);
    if (st == DP_OK) st = OPT_CALL(s->be, download_f64, h, g, Bc * P * d);
    opt_arena_free(&ar);
    return st;
}

/* The clipped sum of p over every position, sum_b c_b G_b^T A_b (the book-keeping GEMM on
 * the whole sequence, the examples left out zeroed), and this rank's slice of it added
 * into the packed S. */
static dp_status whole_accumulate(cp_chunk *k, const opt_tape *tp, const void *cg, int p) {
    opt_dpsgd *s = k->s;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const int64_t Bc = tp->B, T = s->om.T, d = tp->din[p], P = tp->dout[p];
    const size_t es = opt_backend_esize(s->be);
    opt_arena ar = {.be = s->be};
    const void *A, *G;
    void *sum = NULL, *packed = NULL, *sp = opt_dev_at(s, s->flat, s->voff[p]);
    opt_cp_geom g;
    opt_cp_geom_of(&g, s, p, cs->cp.r);
    dp_status st = whole_tape(&A, &G, &ar, k, tp, p, 1);
    if (st == DP_OK) st = opt_arena_alloc_tag(&ar, &sum, es * (size_t)(P * d), OPT_MEM_WORKSPACE);
    if (st == DP_OK) st = opt_arena_alloc_tag(&ar, &packed, es * (size_t)s->vlen[p], OPT_MEM_WORKSPACE);
    if (st == DP_OK) st = OPT_CALL(s->be, zero, sum, es * (size_t)(P * d));
    if (st == DP_OK) st = OPT_CALL(s->be, zero, packed, es * (size_t)s->vlen[p]);
    if (st == DP_OK) st = OPT_CALL(s->be, bk_gemm, sum, A, G, cg, Bc, T, d, P);
    if (st == DP_OK) st = opt_cp_geom_copy(s, &g, sum, packed, 0, g.nseg * g.w, 0);
    if (st == DP_OK) st = OPT_CALL(s->be, add, sp, sp, packed, s->vlen[p]);
    opt_arena_free(&ar);
    return st;
}

/* h [Bc, numel] (host) = every CP rank's slices of parameter p's per-example gradients:
 * all-gathered over the CP group into recv (a buffer of ar) and unpacked. */
static dp_status gather_grads(double *h, opt_arena *ar, cp_chunk *k, opt_dpsgd *s, int p, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const int M = cs->cp.M;
    const size_t es = opt_backend_esize(be);
    const int64_t n = s->om.numel[p], pm = cs->pmax[p];
    void *recv;
    DP_TRY(opt_arena_alloc_tag(ar, &recv, es * (size_t)(M * Bc * pm), OPT_MEM_COMM));
    DP_TRY(OPT_CALL(be, allgather, cs->cp.g, recv, k->slice[p], Bc * pm, NULL));
    double *hr = dp_malloc(sizeof(double) * (size_t)(M * Bc * pm + 1));
    if (!hr) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    dp_status st = OPT_CALL(be, download_f64, hr, recv, M * Bc * pm);
    for (int j = 0; st == DP_OK && j < M; j++) {
        opt_cp_geom g;
        int64_t u, x, len;
        opt_cp_geom_of(&g, s, p, j);
        for (int64_t e = 0; e < Bc; e++)
            for (int64_t r = 0; opt_cp_geom_run(&u, &x, &len, &g, 0, g.nseg * g.w, r); r++)
                memcpy(h + e * n + x, hr + (j * Bc + e) * pm + u, sizeof(double) * (size_t)len);
    }
    dp_free(hr);
    return st;
}

/* ---------------------------------------------------------------- the source */
static dp_status cp_begin(opt_clip_ctx *c, const dp_dataset *d, const int64_t *idx) {
    opt_dpsgd *s = c->s;
    const int np = c->np;
    const int64_t Bc = c->Bc;
    cp_chunk *k = dp_calloc(1, sizeof *k);
    c->st = k;
    memset(&c->tp, 0, sizeof c->tp);
    if (!k) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    k->s = s;
    k->slice = dp_calloc((size_t)np, sizeof(void *));
    k->send = dp_calloc((size_t)np, sizeof(void *));
    k->as = dp_calloc((size_t)np, sizeof(opt_async *));
    k->done = dp_calloc((size_t)np + 1, 1);
    k->left_out = dp_calloc((size_t)Bc + 1, 1);
    k->mode = c->mode;
    if (!k->slice || !k->send || !k->as || !k->done || !k->left_out) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    /* every slice [Bc, pmax] allocated up front (the rounds reduce-scatter into it) */
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const size_t es = opt_backend_esize(s->be);
    k->Bq = (Bc + cs->cp.M - 1) / cs->cp.M;
    for (int p = 0; p < np; p++)
        if (!whole_sequence(k, p))
            DP_TRY(opt_mem_alloc(s->be, &k->slice[p], es * (size_t)(Bc * cs->pmax[p]), OPT_MEM_PER_EXAMPLE));
    const opt_tape_hook hook = {k, tape_ready};
    s->om.tape_hook = &hook;
    dp_status st = opt_forward_backward(&c->tp, &s->om, d, idx, Bc);
    s->om.tape_hook = NULL;
    return st;
}

/* per-example losses: sums over the positions of the CP group */
static dp_status cp_losses(opt_clip_ctx *c, double *loss) {
    opt_dpsgd *s = c->s;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    DP_TRY(OPT_CALL(s->be, allreduce_sum, cs->cp.g, c->tp.loss, c->Bc, NULL));
    return OPT_CALL(s->be, download_f64, loss, c->tp.loss, c->Bc);
}

static dp_status cp_norms(opt_clip_ctx *c) {
    cp_chunk *k = c->st;
    DP_TRY(finish_reduce_scatters(k, &c->tp));
    for (int p = 0; p < c->np; p++) DP_TRY(slice_and_norm(c->sq, k, c->s, &c->tp, p, c->Bc));
    opt_arena_free(&k->gathered.ar);
    k->gathered.src = NULL;
    return DP_OK;
}

static dp_status cp_factors(opt_clip_ctx *c, int g, double C, double gamma) {
    opt_dpsgd *s = c->s;
    return OPT_CALL(s->be, clip_factors, opt_dev_at(s, c->cdev, g * c->Bc), opt_dev_at(s, c->sq, g * c->Bc), C,
                    s->cfg.clip_fn, gamma, c->Bc);
}

/* every parameter's slices are already complete: nothing to fall back from */
static dp_status cp_fallback(opt_clip_ctx *c) { (void)c; return DP_OK; }

static dp_status cp_rows(opt_clip_ctx *c, double *h, int p) {
    if (whole_sequence(c->st, p)) return whole_grads(h, c->st, &c->tp, p);
    opt_arena ar = {.be = c->s->be};
    dp_status st = gather_grads(h, &ar, c->st, c->s, p, c->Bc);
    opt_arena_free(&ar);
    return st;
}

/* a dropped or host-handled example: its slice rows zeroed (0 * NaN would be NaN) */
static dp_status cp_drop(opt_clip_ctx *c, int64_t b) {
    opt_dpsgd *s = c->s;
    cp_chunk *k = c->st;
    const size_t es = opt_backend_esize(s->be);
    k->left_out[b] = 1;
    for (int p = 0; p < c->np; p++)
        if (k->slice[p]) DP_TRY(OPT_CALL(s->be, zero, opt_dev_at(s, k->slice[p], b * s->vlen[p]), es * (size_t)s->vlen[p]));
    return DP_OK;
}

/* step 5 of docs/longshield.md section 4: S[slice] += sum_b c_b g_b[slice] */
static dp_status cp_accumulate(opt_clip_ctx *c, int any_bad) {
    (void)any_bad;
    opt_dpsgd *s = c->s;
    cp_chunk *k = c->st;
    for (int p = 0; p < c->np; p++) {
        const void *cg = opt_dev_at(s, c->cdev, s->groups.group_of[p] * c->Bc);
        if (whole_sequence(k, p)) DP_TRY(whole_accumulate(k, &c->tp, cg, p));
        else DP_TRY(OPT_CALL(s->be, clip_accum, opt_dev_at(s, s->flat, s->voff[p]), k->slice[p], cg, c->Bc, s->vlen[p]));
    }
    return DP_OK;
}

/* the rank's slice of each term row (packed, the tail zero) added into its packed S */
static dp_status cp_add_rows(opt_clip_ctx *c, int p, const double *terms, int nb) {
    opt_dpsgd *s = c->s;
    const opt_cp_state *cs = (const opt_cp_state *)s->layout_state;
    const int64_t n = s->om.numel[p], pm = s->vlen[p];
    void *dt = NULL, *sp = opt_dev_at(s, s->flat, s->voff[p]);
    double *h = dp_calloc((size_t)(pm + 1), sizeof(double));
    dp_status st = h ? opt_arena_alloc_tag(&c->tp.ar, &dt, opt_backend_esize(s->be) * (size_t)(pm + 1), OPT_MEM_WORKSPACE)
                     : dp_error(DP_ERR_NOMEM, "engine: out of memory");
    opt_cp_geom g;
    opt_cp_geom_of(&g, s, p, cs->cp.r);
    for (int i = 0; st == DP_OK && i < nb; i++) {
        int64_t u, e, len;
        for (int64_t r = 0; opt_cp_geom_run(&u, &e, &len, &g, 0, g.nseg * g.w, r); r++)
            memcpy(h + u, terms + (int64_t)i * n + e, sizeof(double) * (size_t)len);
        st = OPT_CALL(s->be, upload_f64, dt, h, pm);
        if (st == DP_OK) st = OPT_CALL(s->be, add, sp, sp, dt, pm);
    }
    dp_free(h);
    return st;
}

static dp_status cp_grads(opt_clip_ctx *c, double *h, int p) {
    if (whole_sequence(c->st, p)) return whole_grads(h, c->st, &c->tp, p);
    return gather_grads(h, &c->tp.ar, c->st, c->s, p, c->Bc);
}

static void cp_end(opt_clip_ctx *c) {
    cp_chunk *k = c->st;
    if (!k) return;
    opt_arena_free(&k->gathered.ar);
    /* after a failure a reduce-scatter may still be in flight: its buffers stay (the run ends) */
    for (int p = 0; k->slice && k->as && p < c->np; p++)
        if (!k->as[p]) { opt_mem_free(c->s->be, k->slice[p]); opt_mem_free(c->s->be, k->send ? k->send[p] : NULL); }
    dp_free(k->slice); dp_free(k->send); dp_free(k->as); dp_free(k->done); dp_free(k->left_out);
    dp_free(k);
    c->st = NULL;
}

const opt_norm_source opt_source_cp = {"cp", 0, cp_begin, cp_losses, cp_norms, cp_factors, cp_fallback, cp_rows,
                                       cp_drop, cp_accumulate, cp_add_rows, cp_grads, cp_end};

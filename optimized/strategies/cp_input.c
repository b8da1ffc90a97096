/* optimized/strategies/cp_input.c — one chunk of DP-SGD under context parallelism,
 * input-stationary (--cp-pattern input, docs/longshield.md "Per-sample gradients"; with
 * --cp-pattern output the linear parameters' slices come from cp_output.c instead of
 * step 2's reduce-scatter):
 *   1. forward and backward on the rank's positions (engine.c, engine_cp.c);
 *   2. per parameter, the partial per-example gradients of those positions, in rounds of
 *      Bq = ceil(Bc / M) examples: a round's partials [Bq, numel] packed by destination
 *      slice (opt_cp_geom_of) and reduce-scattered over the CP group into the rows of
 *      those examples of the rank's slice [Bc, pmax] (no buffer ever holds more than Bq
 *      examples' partials, so the per-example bytes in flight are O(Bc numel / M),
 *      docs/longshield.md 6b);
 *   3. squared norms of the slice, all-reduced over the CP group (Bc scalars per
 *      parameter), added into the groups' norms (flat: every parameter) before any clip
 *      factor is formed;
 *   4. clip factors, and the clipped sum of the slice into the packed S.
 * Losses are per-position sums: the partial losses are all-reduced over the CP group. */
#include <math.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ledger.h"
#include "common/alloc.h"
#include "optimized/opt_spec.h"
#include "optimized/shard.h"

typedef struct {
    opt_dpsgd *s;
    void **slice;      /* [np] -> [Bc, pmax[p]] complete per-example gradients of the slice */
    char *done;        /* [np] 1: slice[p] is complete (every round waited, or output-stationary) */
    void **send;       /* [np] the last round's send buffer while it is in flight */
    opt_async **as;    /* [np] the posted last round, until waited */
    int64_t Bq;        /* examples per round: ceil(Bc / M) */
    int pf, pn;        /* the posted group not yet waited: parameters [pf, pf + pn) (pn 0: none) */
    double t_post;     /* when that group was posted (seconds) */
    double *hsq, *hc;  /* [G, Bc] */
    void *sq, *cdev;   /* [G, Bc] device */
    opt_cp_gathered gathered; /* output-stationary: the last all-gathered input activations */
} cp_chunk;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 1: parameter p's slice comes from the reduce-scatter of partials (every parameter with
 * --cp-pattern input; the parameters without a GEMM with output). */
static int uses_reduce_scatter(const opt_dpsgd *s, int p) {
    return !((const opt_cp_state *)s->shard_state)->output || s->om.src[p] != OPT_SRC_LINEAR;
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
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
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
    if (st == DP_OK && s->hooks->cp_drop_partial && cs->cp.r == M - 1) /* negative control: this rank's partial is lost */
        st = OPT_CALL(be, zero, send, es * (size_t)(M * ne * pm));
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
    opt_cp_state *cs = (opt_cp_state *)k->s->shard_state;
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
    opt_cp_state *cs = (opt_cp_state *)s->shard_state;
    if (k->pn == 0) return DP_OK;
    const double tw = now_s();
    for (int p = k->pf; p < k->pf + k->pn; p++) {
        if (!uses_reduce_scatter(s, p)) continue;
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
        if (uses_reduce_scatter(s, p)) DP_TRY(post_rounds(k, tp, p));
    k->pf = first; k->pn = n; k->t_post = now_s();
    if (s->o.cp_no_overlap) DP_TRY(wait_posted(k)); /* --cp-overlap off: waited at once */
    if (s->om.checkpoint) { /* the block's tape is freed after this hook: the output-stationary slices now */
        for (int p = first; p < first + n; p++)
            if (!uses_reduce_scatter(s, p)) DP_TRY(output_slice(k, tp, p));
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
        if (uses_reduce_scatter(k->s, p) && !k->done[p]) {
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
 * with --cp-pattern output, cp_output.c; else already reduce-scattered), then its norms. */
static dp_status slice_and_norm(cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int p, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const int64_t pm = cs->pmax[p];
    const size_t es = opt_backend_esize(be);
    void *sqp;
    if (!k->done[p]) DP_TRY(output_slice(k, tp, p));
    DP_TRY(opt_arena_alloc_tag(&tp->ar, &sqp, es * (size_t)Bc, OPT_MEM_WORKSPACE));
    DP_TRY(OPT_CALL(be, zero, sqp, es * (size_t)Bc));
    DP_TRY(OPT_CALL(be, sqnorm_rows, sqp, k->slice[p], Bc, pm));
    if (!s->hooks->cp_local_norms) DP_TRY(OPT_CALL(be, allreduce_sum, cs->cp.g, sqp, Bc, NULL));
    void *sqg = opt_dev_at(s, k->sq, s->groups.group_of[p] * Bc);
    return OPT_CALL(be, add, sqg, sqg, sqp, Bc);
}

/* co->grad[p] (host [Bc, numel]) = every CP rank's slices of the per-example gradients. */
static dp_status export_grads(opt_chunk_out *co, cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const int M = cs->cp.M;
    const size_t es = opt_backend_esize(be);
    for (int p = 0; p < s->om.np; p++) {
        const int64_t n = s->om.numel[p], pm = cs->pmax[p];
        void *recv;
        DP_TRY(opt_arena_alloc_tag(&tp->ar, &recv, es * (size_t)(M * Bc * pm), OPT_MEM_COMM));
        DP_TRY(OPT_CALL(be, allgather, cs->cp.g, recv, k->slice[p], Bc * pm, NULL));
        double *h = dp_malloc(sizeof(double) * (size_t)(M * Bc * pm + 1));
        if (!h) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
        dp_status st = OPT_CALL(be, download_f64, h, recv, M * Bc * pm);
        for (int j = 0; st == DP_OK && j < M; j++) {
            opt_cp_geom g;
            int64_t u, x, len;
            opt_cp_geom_of(&g, s, p, j);
            for (int64_t e = 0; e < Bc; e++)
                for (int64_t k = 0; opt_cp_geom_run(&u, &x, &len, &g, 0, g.nseg * g.w, k); k++)
                    memcpy(co->grad[p] + e * n + x, h + (j * Bc + e) * pm + u, sizeof(double) * (size_t)len);
        }
        dp_free(h);
        DP_TRY(st);
    }
    return DP_OK;
}

static dp_status chunk_body(opt_chunk_out *co, cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const dp_clip_groups *gr = &s->groups;
    const int G = gr->ngroups, np = om->np;
    const size_t es = opt_backend_esize(be);
    /* per-example losses: sums over the positions of the CP group */
    DP_TRY(OPT_CALL(be, allreduce_sum, cs->cp.g, tp->loss, Bc, NULL));
    DP_TRY(OPT_CALL(be, download_f64, co->loss, tp->loss, Bc));
    for (int64_t b = 0; b < Bc; b++) co->dropped[b] = !isfinite(co->loss[b]);
    DP_TRY(opt_arena_alloc_tag(&tp->ar, &k->sq, es * (size_t)(G * Bc), OPT_MEM_WORKSPACE));
    DP_TRY(opt_arena_alloc_tag(&tp->ar, &k->cdev, es * (size_t)(G * Bc), OPT_MEM_WORKSPACE));
    DP_TRY(OPT_CALL(be, zero, k->sq, es * (size_t)(G * Bc)));
    DP_TRY(finish_reduce_scatters(k, tp));
    for (int p = 0; p < np; p++) DP_TRY(slice_and_norm(k, s, tp, p, Bc));
    opt_arena_free(&k->gathered.ar);
    k->gathered.src = NULL;
    for (int g = 0; g < G; g++)
        DP_TRY(OPT_CALL(be, clip_factors, opt_dev_at(s, k->cdev, g * Bc), opt_dev_at(s, k->sq, g * Bc), gr->thresh[g],
                        (opt_clip_fn)s->cfg.clip_fn, s->cfg.gamma, Bc));
    DP_TRY(OPT_CALL(be, download_f64, k->hsq, k->sq, G * Bc));
    DP_TRY(OPT_CALL(be, download_f64, k->hc, k->cdev, G * Bc));
    for (int64_t b = 0; b < Bc; b++) {
        double tot = 0;
        int bad = 0;
        for (int g = 0; g < G; g++) {
            tot += k->hsq[g * Bc + b];
            bad |= !isfinite(k->hsq[g * Bc + b]);
            co->gn[b * (G + 1) + g] = sqrt(k->hsq[g * Bc + b]);
        }
        co->gn[b * (G + 1) + G] = sqrt(tot);
        if (bad && !co->dropped[b])
            return dp_error(DP_ERR_NOT_SUPPORTED, "--cp: example %lld of the chunk has a finite loss but a non-finite "
                            "squared norm; the overflow path (docs/engine.md) is not implemented under context "
                            "parallelism", (long long)b);
    }
    if (co->grad) DP_TRY(export_grads(co, k, s, tp, Bc));
    /* dropped examples: c = 0 and their slice rows zeroed (0 * NaN would be NaN) */
    for (int64_t b = 0; b < Bc; b++) {
        if (!co->dropped[b]) continue;
        for (int g = 0; g < G; g++) k->hc[g * Bc + b] = 0.0;
        for (int p = 0; p < np; p++)
            DP_TRY(OPT_CALL(be, zero, opt_dev_at(s, k->slice[p], b * cs->pmax[p]), es * (size_t)cs->pmax[p]));
    }
    s->hooks->factors(k->hc, co->dropped, G, Bc);
    DP_TRY(OPT_CALL(be, upload_f64, k->cdev, k->hc, G * Bc));
    for (int64_t b = 0; b < Bc; b++)
        for (int g = 0; g < G; g++) co->c[b * G + g] = k->hc[g * Bc + b];
    for (int p = 0; p < np; p++)
        DP_TRY(OPT_CALL(be, clip_accum, opt_dev_at(s, s->flat, cs->poff[p]), k->slice[p],
                        opt_dev_at(s, k->cdev, gr->group_of[p] * Bc), Bc, cs->pmax[p]));
    return DP_OK;
}

dp_status opt_cp_run_chunk(opt_chunk_out *co, opt_dpsgd *s, const dp_dataset *d, const int64_t *idx, int64_t Bc) {
    const int G = s->groups.ngroups, np = s->om.np;
    opt_tape tp;
    cp_chunk k = {.s = s};
    k.slice = dp_calloc((size_t)np, sizeof(void *));
    k.send = dp_calloc((size_t)np, sizeof(void *));
    k.as = dp_calloc((size_t)np, sizeof(opt_async *));
    k.done = dp_calloc((size_t)np + 1, 1);
    k.hsq = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1));
    k.hc = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1));
    const opt_tape_hook hook = {&k, tape_ready};
    dp_status st = (!k.slice || !k.send || !k.as || !k.done || !k.hsq || !k.hc)
                       ? dp_error(DP_ERR_NOMEM, "engine: out of memory") : DP_OK;
    /* every slice [Bc, pmax] allocated up front (the rounds reduce-scatter into it) */
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const size_t es = opt_backend_esize(s->be);
    k.Bq = (Bc + cs->cp.M - 1) / cs->cp.M;
    for (int p = 0; st == DP_OK && p < np; p++)
        st = opt_mem_alloc(s->be, &k.slice[p], es * (size_t)(Bc * cs->pmax[p]), OPT_MEM_PER_EXAMPLE);
    s->om.tape_hook = &hook;
    if (st == DP_OK) st = opt_forward_backward(&tp, &s->om, d, idx, Bc);
    else memset(&tp, 0, sizeof tp);
    s->om.tape_hook = NULL;
    if (st == DP_OK) st = chunk_body(co, &k, s, &tp, Bc);
    opt_arena_free(&k.gathered.ar);
    opt_tape_free(&tp);
    /* after a failure a reduce-scatter may still be in flight: its buffers stay (the run ends) */
    for (int p = 0; k.slice && k.as && p < np; p++)
        if (!k.as[p]) { opt_mem_free(s->be, k.slice[p]); opt_mem_free(s->be, k.send ? k.send[p] : NULL); }
    dp_free(k.slice); dp_free(k.send); dp_free(k.as); dp_free(k.done); dp_free(k.hsq); dp_free(k.hc);
    return st;
}

/* optimized/strategies/cp_input.c — one chunk of DP-SGD under context parallelism,
 * input-stationary (--cp-pattern input, docs/longshield.md "Per-sample gradients"; with
 * --cp-pattern output the linear parameters' slices come from cp_output.c instead of
 * step 2's reduce-scatter):
 *   1. forward and backward on the rank's positions (engine.c, engine_cp.c);
 *   2. per parameter, the partial per-example gradients of those positions [Bc, numel],
 *      packed by destination slice and reduce-scattered over the CP group: the rank
 *      receives the complete per-example gradients of its row slice [Bc, pmax];
 *   3. squared norms of the slice, all-reduced over the CP group (Bc scalars per
 *      parameter), added into the groups' norms (flat: every parameter) before any clip
 *      factor is formed;
 *   4. clip factors, and the clipped sum of the slice into the packed S.
 * Losses are per-position sums: the partial losses are all-reduced over the CP group. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ledger.h"
#include "optimized/opt_spec.h"
#include "optimized/shard.h"

typedef struct {
    void **slice;      /* [np] -> [Bc, pmax[p]] complete per-example gradients of the slice */
    double *hsq, *hc;  /* [G, Bc] */
    void *sq, *cdev;   /* [G, Bc] device */
    opt_cp_gathered gathered; /* output-stationary: the last all-gathered input activations */
} cp_chunk;

/* Step 2 for parameter p, input-stationary: k->slice[p] from the reduce-scatter of the
 * partials. */
static dp_status reduce_scatter_slice(cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int p, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_model *om = &s->om;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const int M = cs->cp.M;
    const int64_t n = om->numel[p], pm = cs->pmax[p];
    const size_t es = opt_backend_esize(be);
    void *inst = NULL, *send = NULL;
    /* the partial [Bc, numel] and the send buffer live only until the reduce-scatter */
    dp_status st = opt_mem_alloc(be, &inst, es * (size_t)(Bc * n), OPT_MEM_PER_EXAMPLE);
    if (st == DP_OK) st = opt_instantiate(inst, om, tp, p);
    if (st == DP_OK) st = opt_mem_alloc(be, &send, es * (size_t)(M * Bc * pm), OPT_MEM_COMM);
    if (st == DP_OK) st = OPT_CALL(be, zero, send, es * (size_t)(M * Bc * pm));
    /* block j of send [M, Bc, pm] = the rows of slice j of every example */
    for (int j = 0; st == DP_OK && j < M; j++) {
        int64_t a, b;
        opt_cp_slice(&a, &b, s, p, j);
        for (int64_t e = 0; st == DP_OK && e < Bc && b > a; e++)
            st = OPT_CALL(be, copy, opt_dev_at(s, send, (j * Bc + e) * pm), opt_dev_at(s, inst, e * n + a),
                          es * (size_t)(b - a));
    }
    opt_mem_free(be, inst);
    if (st == DP_OK && s->hooks->cp_drop_partial && cs->cp.r == M - 1) /* negative control: this rank's partial is lost */
        st = OPT_CALL(be, zero, send, es * (size_t)(M * Bc * pm));
    if (st == DP_OK) st = opt_arena_alloc_tag(&tp->ar, &k->slice[p], es * (size_t)(Bc * pm), OPT_MEM_PER_EXAMPLE);
    if (st == DP_OK) st = OPT_CALL(be, reduce_scatter_sum, cs->cp.g, k->slice[p], send, Bc * pm, NULL);
    opt_mem_free(be, send);
    return st;
}

/* Steps 2 and 3 for parameter p: the slice (output-stationary for the linear parameters
 * with --cp-pattern output, cp_output.c; else the reduce-scatter), then its norms. */
static dp_status slice_and_norm(cp_chunk *k, opt_dpsgd *s, opt_tape *tp, int p, int64_t Bc) {
    opt_backend *be = s->be;
    const opt_cp_state *cs = (const opt_cp_state *)s->shard_state;
    const int64_t pm = cs->pmax[p];
    const size_t es = opt_backend_esize(be);
    void *sqp;
    if (cs->output && s->om.src[p] == OPT_SRC_LINEAR) {
        DP_TRY(opt_arena_alloc_tag(&tp->ar, &k->slice[p], es * (size_t)(Bc * pm), OPT_MEM_PER_EXAMPLE));
        DP_TRY(opt_cp_output_slice(k->slice[p], &k->gathered, s, tp, p, Bc));
    } else {
        DP_TRY(reduce_scatter_slice(k, s, tp, p, Bc));
    }
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
        double *h = malloc(sizeof(double) * (size_t)(M * Bc * pm + 1));
        if (!h) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
        dp_status st = OPT_CALL(be, download_f64, h, recv, M * Bc * pm);
        for (int j = 0; st == DP_OK && j < M; j++) {
            int64_t a, b;
            opt_cp_slice(&a, &b, s, p, j);
            for (int64_t e = 0; e < Bc; e++)
                memcpy(co->grad[p] + e * n + a, h + (j * Bc + e) * pm, sizeof(double) * (size_t)(b - a));
        }
        free(h);
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
    const int G = s->groups.ngroups;
    opt_tape tp;
    cp_chunk k = {0};
    dp_status st = opt_forward_backward(&tp, &s->om, d, idx, Bc);
    k.slice = calloc((size_t)s->om.np, sizeof(void *));
    k.hsq = malloc(sizeof(double) * (size_t)(G * Bc + 1));
    k.hc = malloc(sizeof(double) * (size_t)(G * Bc + 1));
    if (st == DP_OK && (!k.slice || !k.hsq || !k.hc)) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
    if (st == DP_OK) st = chunk_body(co, &k, s, &tp, Bc);
    opt_arena_free(&k.gathered.ar);
    opt_tape_free(&tp);
    free(k.slice); free(k.hsq); free(k.hc);
    return st;
}

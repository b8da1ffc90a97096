/* optimized/clip/pipeline.c — the one clipping pipeline of DP-SGD (optimized/clip/clip.h):
 * one chunk of examples, whatever norm source holds its per-example gradients.
 * docs/engine.md sections 4 ("Dropped and overflowing examples") and docs/dpsgd.md steps
 * 3-4 define what it computes; the loss-scaling seam of the step hooks (clip and export
 * scales) applies to every source. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/clip/clip.h"
#include "common/alloc.h"
#include "optimized/ledger.h"
#include "optimized/opt_spec.h"

/* Host arrays of one chunk. */
typedef struct {
    int *special;   /* [Bc] finite loss but a non-finite squared group norm */
    double *hsq;    /* [G, Bc] squared group norms */
    double *hc;     /* [G, Bc] batched clip factors (0 for dropped and special examples) */
    double *hcx;    /* [G, Bc] host clip factors of special examples (exported) */
    double **hrow;  /* [np] -> [Bc, numel] whole per-example gradients (dropped / special rows used) */
} chunk_host;

/* The mode of every parameter: direct rows, the tied embedding instantiated, a linear one
 * W [p, d] by the norm strategy (T: the example's positions, whatever part of them the
 * rank holds; alone: its group's only linear tensor) through the layer-mode seam. */
static void pick_modes(opt_clip_ctx *k) {
    const opt_dpsgd *s = k->s;
    const opt_model *om = &s->om;
    int nlin[k->G > 0 ? k->G : 1];
    memset(nlin, 0, sizeof nlin);
    for (int p = 0; p < k->np; p++)
        if (om->src[p] == OPT_SRC_LINEAR) nlin[s->groups.group_of[p]]++;
        else if (om->src[p] == OPT_SRC_BOTH) nlin[s->groups.group_of[p]] += 2; /* never single-pass fused */
    for (int p = 0; p < k->np; p++) {
        if (om->src[p] == OPT_SRC_DIRECT) { k->mode[p] = OPT_LM_DIRECT; continue; }
        if (om->src[p] == OPT_SRC_BOTH) { k->mode[p] = OPT_LM_INST; continue; }
        const int alone = nlin[s->groups.group_of[p]] == 1;
        k->mode[p] = (int)s->hooks->layer_mode(s->norm->linear_mode(&s->o, om->T, om->shape[p][1], om->shape[p][0], alone));
    }
}

/* The overflow path of an example b with a finite loss whose squared norm is not finite
 * (docs/dpsgd.md step 4): dropped if an element of its gradient is not finite, else its
 * norms by the definition's scaled form and its clip factors, on the host. */
static dp_status special_example(opt_chunk_out *co, chunk_host *h, opt_clip_ctx *k, const dp_model *hm, int64_t b,
                                 double lsS) {
    const opt_dpsgd *s = k->s;
    const int G = k->G, np = k->np;
    const int64_t Bc = k->Bc;
    double *gi[np > 0 ? np : 1];
    int fin = 1;
    for (int p = 0; p < np; p++) {
        gi[p] = h->hrow[p] + b * s->om.numel[p];
        for (int64_t e = 0; e < s->om.numel[p]; e++) fin &= isfinite(gi[p][e]) != 0;
    }
    if (!fin) {
        h->special[b] = 0;
        co->dropped[b] = 1;
        return DP_OK;
    }
    DP_TRY(opt_norms_double(&co->gn[b * (G + 1) + G], &co->gn[b * (G + 1)], hm, &s->groups, gi, 1));
    for (int g = 0; g < G; g++)
        h->hcx[g * Bc + b] = opt_clip_factor(s->cfg.clip_fn, co->gn[b * (G + 1) + g], lsS * s->groups.thresh[g],
                                             lsS * s->cfg.gamma);
    return DP_OK;
}

/* Per example: the exported norms, the overflow path, and every dropped or special example
 * left out of the batched sums (c = 0, its terms zeroed by the source). *changed = 1 when a
 * batched factor was zeroed. */
static dp_status examples(opt_chunk_out *co, chunk_host *h, opt_clip_ctx *k, int nspecial, double lsS, int *changed) {
    const opt_dpsgd *s = k->s;
    const int G = k->G, np = k->np;
    const int64_t Bc = k->Bc;
    dp_model hm = {0}; /* a shape-only model for opt_norms_double */
    dp_status st = DP_OK;
    if (nspecial) {
        hm.nparams = np;
        hm.params = dp_calloc((size_t)np, sizeof(dp_param));
        if (!hm.params) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; p < np; p++) hm.params[p].numel = s->om.numel[p];
    }
    for (int64_t b = 0; st == DP_OK && b < Bc; b++) {
        /* exported norms: sqrt of the squared ones (total: their sum in group order) */
        double tot = 0;
        for (int g = 0; g < G; g++) {
            tot += h->hsq[g * Bc + b];
            co->gn[b * (G + 1) + g] = sqrt(h->hsq[g * Bc + b]);
        }
        co->gn[b * (G + 1) + G] = sqrt(tot);
        if (h->special[b]) st = special_example(co, h, k, &hm, b, lsS);
        if (st == DP_OK && (co->dropped[b] || h->special[b])) {
            st = k->src->drop(k, b);
            for (int g = 0; g < G; g++) h->hc[g * Bc + b] = 0.0;
            *changed = 1;
        }
    }
    dp_free(hm.params);
    return st;
}

/* The special examples' clipped terms c g_b, on the host, added to the sums parameter by
 * parameter. */
static dp_status special_terms(chunk_host *h, opt_clip_ctx *k, int nspecial) {
    const opt_dpsgd *s = k->s;
    const int64_t Bc = k->Bc;
    for (int p = 0; p < k->np; p++) {
        const int64_t n = s->om.numel[p];
        double *t = dp_malloc(sizeof(double) * (size_t)(nspecial * n + 1));
        if (!t) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
        int nb = 0;
        for (int64_t b = 0; b < Bc; b++) {
            if (!h->special[b]) continue;
            const double cb = h->hcx[s->groups.group_of[p] * Bc + b];
            for (int64_t e = 0; e < n; e++) t[nb * n + e] = cb * h->hrow[p][b * n + e];
            nb++;
        }
        dp_status st = k->src->add_rows(k, p, t, nb);
        dp_free(t);
        DP_TRY(st);
    }
    return DP_OK;
}

/* co->grad: the source's per-example gradients, the rows of dropped and special examples
 * as they were before zeroing, all / the export scale */
static dp_status export_grads(opt_chunk_out *co, chunk_host *h, opt_clip_ctx *k, double lsE) {
    const opt_dpsgd *s = k->s;
    for (int p = 0; p < k->np; p++) {
        const int64_t n = s->om.numel[p];
        DP_TRY(k->src->grads(k, co->grad[p], p));
        for (int64_t b = 0; h->hrow && b < k->Bc; b++)
            if (co->dropped[b] || h->special[b]) memcpy(co->grad[p] + b * n, h->hrow[p] + b * n, sizeof(double) * (size_t)n);
        for (int64_t e = 0; lsE != 1 && e < k->Bc * n; e++) co->grad[p][e] /= lsE;
    }
    return DP_OK;
}

static dp_status chunk_body(opt_chunk_out *co, chunk_host *h, opt_clip_ctx *k) {
    opt_dpsgd *s = k->s;
    const opt_norm_source *src = k->src;
    const int G = k->G, np = k->np;
    const int64_t Bc = k->Bc;
    const size_t es = opt_backend_esize(s->be);
    /* loss scaling: the tape holds S x the gradients; clipping at S C (and gamma S) gives the
     * unscaled factors exactly; exported norms and gradients / S (the clip and export scales
     * of the step hooks) */
    const double lsS = opt_ls_clip_scale(s), lsE = opt_ls_export_scale(s);
    DP_TRY(opt_arena_alloc_tag(&k->tp.ar, &k->sq, es * (size_t)(G * Bc + src->sq_extra), OPT_MEM_WORKSPACE));   /* [G, Bc] */
    DP_TRY(opt_arena_alloc_tag(&k->tp.ar, &k->cdev, es * (size_t)(G * Bc + src->sq_extra), OPT_MEM_WORKSPACE)); /* [G, Bc] */

    /* ---- losses; an example with a non-finite loss is dropped ---- */
    DP_TRY(src->losses(k, co->loss));
    for (int64_t b = 0; b < Bc; b++) co->dropped[b] = !isfinite(co->loss[b]);

    /* ---- norms, then clip factors ---- */
    DP_TRY(OPT_CALL(s->be, zero, k->sq, es * (size_t)(G * Bc)));
    DP_TRY(src->norms(k));
    for (int g = 0; g < G; g++) DP_TRY(src->factors(k, g, lsS * s->groups.thresh[g], lsS * s->cfg.gamma));

    /* ---- special examples: a finite loss but a non-finite squared group norm. Either a
     * gradient element is not finite (dropped, as the reference), or the squares / ghost
     * Gram products overflowed for a finite gradient: then the norms follow the definition
     * of docs/dpsgd.md step 4 (opt_norms_double, scaled form), computed on the host from
     * the example's whole gradient, and its clipped terms are added from it. Every dropped
     * or special example gets c = 0 in the batched path and its terms zeroed
     * (docs/engine.md "Dropped and overflowing examples"). ---- */
    DP_TRY(OPT_CALL(s->be, download_f64, h->hsq, k->sq, G * Bc));
    DP_TRY(OPT_CALL(s->be, download_f64, h->hc, k->cdev, G * Bc));
    int nspecial = 0, any_bad = 0, changed = 0;
    for (int64_t b = 0; b < Bc; b++) {
        int bad = 0;
        for (int g = 0; g < G; g++) bad |= !isfinite(h->hsq[g * Bc + b]);
        h->special[b] = bad && !co->dropped[b];
        nspecial += h->special[b];
        any_bad |= co->dropped[b] | h->special[b];
    }
    if (any_bad) {
        DP_TRY(src->fallback(k));
        h->hrow = dp_calloc((size_t)np, sizeof(double *));
        if (!h->hrow) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
        for (int p = 0; p < np; p++) {
            h->hrow[p] = dp_malloc(sizeof(double) * (size_t)(Bc * s->om.numel[p] + 1));
            if (!h->hrow[p]) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
            DP_TRY(src->rows(k, h->hrow[p], p));
        }
    }
    DP_TRY(examples(co, h, k, nspecial, lsS, &changed));
    for (int64_t i = 0; lsE != 1 && i < Bc * (G + 1); i++) co->gn[i] /= lsE;
    changed |= s->hooks->factors(h->hc, co->dropped, G, Bc); /* the clip-factors seam */
    if (changed) DP_TRY(OPT_CALL(s->be, upload_f64, k->cdev, h->hc, G * Bc));

    /* ---- clipped sums: the batched ones, then the special examples' host terms ---- */
    DP_TRY(src->accumulate(k, any_bad));
    if (nspecial) DP_TRY(special_terms(h, k, nspecial));

    /* ---- host copies: [b, G] layout as the reference ---- */
    for (int64_t b = 0; b < Bc; b++)
        for (int g = 0; g < G; g++) co->c[b * G + g] = h->special[b] ? h->hcx[g * Bc + b] : h->hc[g * Bc + b];
    if (co->grad) DP_TRY(export_grads(co, h, k, lsE));
    return DP_OK;
}

dp_status opt_clip_chunk(opt_chunk_out *co, opt_dpsgd *s, const opt_norm_source *src, const dp_dataset *d,
                         const int64_t *idx, int64_t Bc) {
    opt_clip_ctx k = {.s = s, .src = src, .Bc = Bc, .G = s->groups.ngroups, .np = s->om.np};
    chunk_host h = {0};
    const int G = k.G;
    k.mode = dp_calloc((size_t)k.np + 1, sizeof(int));
    h.special = dp_calloc((size_t)Bc + 1, sizeof(int));
    h.hsq = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1));
    h.hc = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1));
    h.hcx = dp_malloc(sizeof(double) * (size_t)(G * Bc + 1));
    if (k.mode) pick_modes(&k);
    dp_status st = src->begin(&k, d, idx); /* the forward and backward (the tape is valid, or zeroed, after it) */
    if (st == DP_OK && (!k.mode || !h.special || !h.hsq || !h.hc || !h.hcx)) st = dp_error(DP_ERR_NOMEM, "engine: out of memory");
    if (st == DP_OK) st = chunk_body(co, &h, &k);
    src->end(&k);
    opt_tape_free(&k.tp);
    if (h.hrow) { for (int p = 0; p < k.np; p++) dp_free(h.hrow[p]); dp_free(h.hrow); }
    dp_free(k.mode); dp_free(h.special); dp_free(h.hsq); dp_free(h.hc); dp_free(h.hcx);
    return st;
}

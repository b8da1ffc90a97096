/* optimized/dpzo.c — DP-ZO on the engine, data-parallel (docs/engine.md "DP-ZO"); its
 * command, `dpcert train dpzo`, is in optimized/train_cmd.c next to `train dpsgd`. */
#include "optimized/dpzo.h"
#include "common/alloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/dpsgd.h"
#include "optimized/opt_spec.h"
#include "optimized/precision.h"

dp_status opt_dpzo_init(opt_dpzo *s, opt_backend *be, const dp_dpzo_hparams *hp, const dp_model *m) {
    memset(s, 0, sizeof *s);
    DP_TRY(opt_dpzo_check(hp));
    if (m->nparams > DP_DPZO_MAX_PARAMS) return dp_error(DP_ERR_INVALID, "too many parameter tensors for DP-ZO lanes");
    s->be = be;
    s->hp = *hp;
    s->nparams = m->nparams;
    s->numel = dp_calloc((size_t)m->nparams, sizeof(int64_t));
    if (!s->numel) return dp_error(DP_ERR_NOMEM, "out of memory");
    for (int p = 0; p < m->nparams; p++) s->numel[p] = m->params[p].numel;
    s->theta = opt_f64_arrays_alloc(s->numel, s->nparams);
    s->work = opt_f64_arrays_alloc(s->numel, s->nparams);
    s->z = opt_f64_arrays_alloc(s->numel, s->nparams);
    if (!s->theta || !s->work || !s->z) { opt_dpzo_free(s); return dp_error(DP_ERR_NOMEM, "out of memory"); }
    for (int p = 0; p < m->nparams; p++) memcpy(s->theta[p], m->params[p].data, sizeof(double) * (size_t)s->numel[p]);
    dp_status st = opt_model_create(&s->om, be, m);
    if (st != DP_OK) { opt_dpzo_free(s); return st; }
    return DP_OK;
}

void opt_dpzo_free(opt_dpzo *s) {
    if (s->om.be) opt_model_free(&s->om);
    opt_f64_arrays_free(s->theta, s->nparams); opt_f64_arrays_free(s->work, s->nparams); opt_f64_arrays_free(s->z, s->nparams);
    dp_free(s->numel);
    memset(s, 0, sizeof *s);
}

dp_status opt_dpzo_set_precision(opt_dpzo *s, opt_prec p, opt_bug bug) {
    DP_TRY(opt_dpzo_bug(&s->master_round, bug, p));
    s->prec = p;
    if (!opt_prec_is_half(p)) return DP_OK;
    if (s->be->dtype != DP_F32)
        return dp_error(DP_ERR_INTERNAL, "--precision %s needs an f32 backend (got %s)", opt_prec_names[p],
                        dp_dtype_name(s->be->dtype));
    for (int q = 0; q < s->nparams; q++) /* the f32 master weights */
        for (int64_t e = 0; e < s->numel[q]; e++) s->theta[q][e] = (double)(float)s->theta[q][e];
    s->om.prec = p;
    return DP_OK;
}

/* theta +- phi z of one element. Half precision (docs/precision.md "DP-ZO"): from the f32
 * master m in f32 arithmetic, round_h(m +- (phi z)), every operand f32. */
static double perturbed(const opt_dpzo *s, double m, double z, double sign) {
    if (!opt_prec_is_half(s->prec)) return sign > 0 ? m + s->hp.phi * z : m - s->hp.phi * z;
    float pz = (float)s->hp.phi * (float)z;
    float t = sign > 0 ? (float)m + pz : (float)m - pz;
    return (double)opt_prec_round_value(s->prec, t);
}

/* Losses of the share idx[0..nl) at theta + sign phi z (z of the current direction). */
static dp_status share_losses(double *out, opt_dpzo *s, const dp_dataset *d, const int64_t *idx, int64_t nl,
                              double sign) {
    for (int p = 0; p < s->nparams; p++)
        for (int64_t e = 0; e < s->numel[p]; e++) s->work[p][e] = perturbed(s, s->theta[p][e], s->z[p][e], sign);
    DP_TRY(opt_model_set_params(&s->om, s->work));
    return opt_forward_loss(out, &s->om, d, idx, nl);
}

static double r32_(double x, int f32) { return f32 ? (double)(float)x : x; }

dp_status opt_dpzo_step(dp_dpzo_step_out *out, opt_dpzo *s, const dp_dataset *d, int64_t step, int gather) {
    const dp_dpzo_hparams *hp = &s->hp;
    const int half = opt_prec_is_half(s->prec);
    opt_backend *be = s->be;
    const int n = hp->n_spsa, R = be->comm.size, rank = be->comm.rank;
    if (out->cap_n_data < hp->n_data || out->n != n)
        return dp_error(DP_ERR_INTERNAL, "DP-ZO step output allocated for the wrong sizes");
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " out of range", step);
    out->step = step;
    DP_TRY(opt_poisson(out->idx, &out->b, hp->key, step, hp->q, hp->n_data)); /* global */
    int64_t b = out->b, lo, hi;
    opt_rank_share(&lo, &hi, b, rank, R);
    int64_t nl = hi - lo;
    double *lp = dp_calloc((size_t)(n * nl + 1), sizeof(double)), *lm = dp_calloc((size_t)(n * nl + 1), sizeof(double));
    double *dc = dp_calloc((size_t)(n * nl + 1), sizeof(double));
    double *red = dp_calloc((size_t)(n + 2), sizeof(double)); /* [n clipped sums, loss sum, dropped count] */
    dp_status st = (lp && lm && dc && red) ? DP_OK : dp_error(DP_ERR_NOMEM, "out of memory");
    for (int j = 0; st == DP_OK && j < n; j++) {
        for (int p = 0; st == DP_OK && p < s->nparams; p++)
            st = opt_dpzo_direction(s->z[p], hp->seed, step, p, j, s->numel[p]); /* public DPZO_DIR stream */
        if (st == DP_OK && nl > 0) st = share_losses(lp + j * nl, s, d, out->idx + lo, nl, +1.0);
        if (st == DP_OK && nl > 0) st = share_losses(lm + j * nl, s, d, out->idx + lo, nl, -1.0);
        double sum = 0;
        for (int64_t k = 0; st == DP_OK && k < nl; k++) {
            /* half: the f32 losses' difference, clip at the f32 C and the sum in f32 */
            double df = r32_(lp[j * nl + k] - lm[j * nl + k], half);
            if (!isfinite(df)) { /* dropped as in the reference: contributes 0, counted */
                dc[j * nl + k] = 0.0;
                red[n + 1] += 1.0;
            } else {
                dc[j * nl + k] = opt_dpzo_clip(df, r32_(hp->clip, half));
                red[n] += 0.5 * (lp[j * nl + k] + lm[j * nl + k]);
            }
            sum = r32_(sum + dc[j * nl + k], half);
        }
        red[j] = sum;
    }
    /* the one all-reduce of the step: n + 2 doubles (sums, loss sum, dropped count), through the backend's host-byte
     * gather (f64 whatever --dtype is), summed in rank order */
    if (st == DP_OK && R > 1) {
        void *all = NULL;
        size_t len = 0;
        st = OPT_CALL(be, allgatherv_bytes, &all, &len, red, sizeof(double) * (size_t)(n + 2));
        if (st == DP_OK && len != sizeof(double) * (size_t)(R * (n + 2)))
            st = dp_error(DP_ERR_INTERNAL, "DP-ZO all-reduce: %zu bytes gathered", len);
        const double *a = all;
        for (int j = 0; st == DP_OK && j <= n + 1; j++) {
            double acc = a[j];
            for (int r = 1; r < R; r++) acc = r32_(acc + a[r * (n + 2) + j], half && j < n);
            red[j] = acc;
        }
        dp_free(all);
    }
    for (int j = 0; st == DP_OK && j < n; j++) out->sum[j] = red[j]; /* (red is NULL when its allocation failed) */
    if (st == DP_OK) st = opt_dpzo_noise(out->noise, hp, step); /* the single draw, same on every rank */
    for (int j = 0; half && j < n; j++) out->noise[j] = r32_(out->noise[j], 1); /* f32 noise */
    if (st == DP_OK) st = opt_dpzo_scalars(out->scalar, hp, out->sum, out->noise, step);
    for (int j = 0; half && j < n; j++) out->scalar[j] = r32_(out->scalar[j], 1); /* the f32 released scalar */
    if (st == DP_OK) {
        out->ndropped = (int64_t)red[n + 1]; /* an exact integer count (< 2^53) */
        int64_t kept = b * (int64_t)n - out->ndropped;
        out->loss = kept ? red[n] / (double)kept : NAN;
    }
    /* per-example arrays [n][b] in global order (exports) */
    if (st == DP_OK && gather) {
        double *arrs[3] = {lp, lm, dc}, *dst[3] = {out->loss_plus, out->loss_minus, out->diff_clipped};
        for (int a = 0; st == DP_OK && a < 3; a++)
            for (int j = 0; st == DP_OK && j < n; j++) {
                void *g = NULL;
                size_t len = 0;
                st = OPT_CALL(be, allgatherv_bytes, &g, &len, arrs[a] + j * nl, sizeof(double) * (size_t)nl);
                if (st == DP_OK && len != sizeof(double) * (size_t)b) st = dp_error(DP_ERR_INTERNAL, "DP-ZO gather size");
                if (st == DP_OK && b) memcpy(dst[a] + (size_t)j * (size_t)b, g, len);
                dp_free(g);
            }
    }
    /* the public update, identical on every rank */
    if (st == DP_OK && !half)
        st = opt_dpzo_update(s->theta, s->numel, s->nparams, hp->seed, step, out->scalar, n, hp->lr, hp->weight_decay);
    else if (st == DP_OK) /* the f32 master weights */
        st = opt_dpzo_update_f32(s->theta, s->numel, s->nparams, hp->seed, step, out->scalar, n, hp->lr,
                                 hp->weight_decay, s->master_round);
    dp_free(lp); dp_free(lm); dp_free(dc); dp_free(red);
    return st;
}

/* reference/dpzo_inplace.c — Algorithm 2 of the DP-ZO paper: the memory-efficient
 * variant that perturbs the stored parameters in place (+phi z, -2 phi z, +phi z,
 * z regenerated from the public seed each time), with f32 or bf16 storage.
 * Used to measure the drift of the in-place path against the exact f64 path
 * (docs/dpzo.md, "In-place variant and drift bound"). */
#include "reference/dpzo.h"
#include "common/alloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/tensor.h"

#define U_F64 (1.0 / 9007199254740992.0)  /* 2^-53 */
#define U_F32 (1.0 / 16777216.0)          /* 2^-24 */
#define U_BF16 (1.0 / 256.0)              /* 2^-8  */

double ref_dpzo_inplace_unit(ref_dpzo_store dt) {
    /* One operation w <- rd_D(w + c z): f64 product and sum (3 u_f64 with the
     * second-order terms), then f64 -> f32 (u_f32) and, for bf16, f32 -> bf16
     * (u_bf16 (1 + u_f32)). */
    double ud = dt == REF_DPZO_F32 ? U_F32 : U_BF16 * (1.0 + U_F32) + U_F32;
    return ud + 3.0 * U_F64;
}

static void store(ref_dpzo_inplace *ip, int p, int64_t e, double v) {
    if (ip->dtype == REF_DPZO_F32) ip->w32[p][e] = (float)v;
    else ip->w16[p][e] = dp_f32_to_bf16((float)v);
}

double ref_dpzo_inplace_get(const ref_dpzo_inplace *ip, int p, int64_t e) {
    return ip->dtype == REF_DPZO_F32 ? (double)ip->w32[p][e] : (double)dp_bf16_to_f32(ip->w16[p][e]);
}

void ref_dpzo_inplace_free(ref_dpzo_inplace *ip) {
    for (int p = 0; p < ip->nparams; p++) {
        if (ip->w32) dp_free(ip->w32[p]);
        if (ip->w16) dp_free(ip->w16[p]);
        if (ip->wide) dp_free(ip->wide[p]);
    }
    dp_free(ip->w32); dp_free(ip->w16); dp_free(ip->wide); dp_free(ip->numel);
    memset(ip, 0, sizeof *ip);
}

dp_status ref_dpzo_inplace_init(ref_dpzo_inplace *ip, ref_dpzo_store dt, const ref_dpzo_problem *pb) {
    memset(ip, 0, sizeof *ip);
    int P = pb->nparams;
    ip->dtype = dt;
    ip->numel = dp_calloc((size_t)P, sizeof *ip->numel);
    ip->w32 = dp_calloc((size_t)P, sizeof *ip->w32);
    ip->w16 = dp_calloc((size_t)P, sizeof *ip->w16);
    ip->wide = dp_calloc((size_t)P, sizeof *ip->wide);
    if (!ip->numel || !ip->w32 || !ip->w16 || !ip->wide) { ref_dpzo_inplace_free(ip); return DP_ERR_NOMEM; }
    ip->nparams = P;
    for (int p = 0; p < P; p++) {
        int64_t n = pb->numel[p];
        ip->numel[p] = n;
        ip->wide[p] = dp_calloc((size_t)n, sizeof(double));
        if (dt == REF_DPZO_F32) ip->w32[p] = dp_calloc((size_t)n, sizeof(float));
        else ip->w16[p] = dp_calloc((size_t)n, sizeof(uint16_t));
        if (!ip->wide[p] || (dt == REF_DPZO_F32 ? !ip->w32[p] : !ip->w16[p])) { ref_dpzo_inplace_free(ip); return DP_ERR_NOMEM; }
        for (int64_t e = 0; e < n; e++) {
            store(ip, p, e, pb->theta[p][e]); /* w_0 = rd_D(theta_0) */
            ip->wide[p][e] = ref_dpzo_inplace_get(ip, p, e);
        }
    }
    return DP_OK;
}

/* PerturbParameters(w, c, seed): w_e <- rd_D(w_e + c z_e) for every element, z of
 * direction j regenerated; `wide` refreshed. */
static dp_status perturb(ref_dpzo_inplace *ip, double *zbuf, dp_seed seed, int64_t step, int j, double c) {
    for (int p = 0; p < ip->nparams; p++) {
        DP_TRY(ref_dpzo_direction(zbuf, seed, step, p, j, ip->numel[p]));
        for (int64_t e = 0; e < ip->numel[p]; e++) {
            store(ip, p, e, ref_dpzo_inplace_get(ip, p, e) + c * zbuf[e]);
            ip->wide[p][e] = ref_dpzo_inplace_get(ip, p, e);
        }
    }
    return DP_OK;
}

static int64_t max_numel(const ref_dpzo_inplace *ip) {
    int64_t m = 1;
    for (int p = 0; p < ip->nparams; p++) if (ip->numel[p] > m) m = ip->numel[p];
    return m;
}

dp_status ref_dpzo_inplace_step(ref_dpzo_step_out *out, double *restore_drift, int64_t *restore_violations,
                                ref_dpzo_inplace *ip, const ref_dpzo_problem *pb, const ref_dpzo_hparams *hp,
                                int64_t step, const double *force_scalar) {
    DP_TRY(ref_dpzo_check(hp));
    if (ip->nparams != pb->nparams) return dp_error(DP_ERR_INTERNAL, "in-place storage does not match the problem");
    if (out->cap_n_data < hp->n_data || out->n != hp->n_spsa)
        return dp_error(DP_ERR_INTERNAL, "DP-ZO step output allocated for a different N or n");
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " outside 1..2^32-1", step);
    out->step = step;
    DP_TRY(ref_dpzo_poisson(out->idx, &out->b, hp->key, step, hp->q, hp->n_data));
    int P = ip->nparams;
    int64_t mx = max_numel(ip);
    double *zbuf = dp_calloc((size_t)mx, sizeof(double));
    double **before = dp_calloc((size_t)P, sizeof *before);
    dp_status st = zbuf && before ? DP_OK : DP_ERR_NOMEM;
    for (int p = 0; st == DP_OK && p < P; p++) {
        before[p] = dp_calloc((size_t)ip->numel[p], sizeof(double));
        if (!before[p]) st = DP_ERR_NOMEM;
    }
    double drift = 0.0;
    int64_t viol = 0;
    double eps = ref_dpzo_inplace_unit(ip->dtype);
    for (int j = 0; st == DP_OK && j < hp->n_spsa; j++) {
        for (int p = 0; p < P; p++) memcpy(before[p], ip->wide[p], (size_t)ip->numel[p] * sizeof(double));
        size_t off = (size_t)j * (size_t)out->b;
        st = perturb(ip, zbuf, hp->seed, step, j, hp->phi);                                   /* +phi z  */
        if (st == DP_OK) st = ref_dpzo_release_losses_(out->loss_plus + off, pb, ip->wide, out->idx, out->b);
        if (st == DP_OK) st = perturb(ip, zbuf, hp->seed, step, j, -2.0 * hp->phi);          /* -2phi z */
        if (st == DP_OK) st = ref_dpzo_release_losses_(out->loss_minus + off, pb, ip->wide, out->idx, out->b);
        if (st == DP_OK) st = perturb(ip, zbuf, hp->seed, step, j, hp->phi);                 /* +phi z  */
        for (int p = 0; st == DP_OK && p < P; p++) {
            st = ref_dpzo_direction(zbuf, hp->seed, step, p, j, ip->numel[p]);
            for (int64_t e = 0; st == DP_OK && e < ip->numel[p]; e++) {
                double w = before[p][e], d = fabs(ip->wide[p][e] - w);
                double a = hp->phi * fabs(zbuf[e]);
                double bound = 3.0 * eps * (fabs(w) + 3.0 * a) * (1.0 + 3.0 * eps);
                if (d > drift) drift = d;
                if (d > bound) viol++;
            }
        }
        if (st == DP_OK) st = ref_dpzo_finish_direction_(out, hp, step, j);
    }
    if (st == DP_OK) ref_dpzo_finish_loss_(out);
    /* update: w <- rd_D(w - lr ((sum_j s_j z_j) / n + wd w)), z regenerated */
    const double *s = force_scalar ? force_scalar : out->scalar;
    for (int p = 0; st == DP_OK && p < P; p++) {
        double *u = dp_calloc((size_t)ip->numel[p], sizeof(double));
        if (!u) { st = DP_ERR_NOMEM; break; }
        for (int j = 0; st == DP_OK && j < hp->n_spsa; j++) {
            st = ref_dpzo_direction(zbuf, hp->seed, step, p, j, ip->numel[p]);
            for (int64_t e = 0; st == DP_OK && e < ip->numel[p]; e++) u[e] += s[j] * zbuf[e];
        }
        for (int64_t e = 0; st == DP_OK && e < ip->numel[p]; e++) {
            double w = ref_dpzo_inplace_get(ip, p, e);
            store(ip, p, e, w - hp->lr * (u[e] / (double)hp->n_spsa + hp->weight_decay * w));
            ip->wide[p][e] = ref_dpzo_inplace_get(ip, p, e);
        }
        dp_free(u);
    }
    if (before) for (int p = 0; p < P; p++) dp_free(before[p]);
    dp_free(before);
    dp_free(zbuf);
    if (restore_drift) *restore_drift = drift;
    if (restore_violations) *restore_violations = viol;
    return st;
}

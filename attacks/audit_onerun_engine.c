/* attacks/audit_onerun_engine.c — the one-run audit of the engine (--impl optimized;
 * docs/audits.md "One-run audit on the engine"). The engine has no gradient hook, so the m
 * canaries are input examples of the mlp (as the white-box audit's input canary): canary c
 * has x_c = lambda_c x0_c (x0_c Gaussian, attack data of the public seed, stream 2, lane c),
 * label c mod classes, lambda_c doubling from 1 until ||g(x_c; theta_0)|| >= scale C. Each is
 * included with probability 1/2 (the secret bits of the reference's one-run audit); ONE run
 * of K steps of opt_dpsgd (lr 0.1) on D plus the included canaries. Before step t the
 * auditor (white box: it reads theta_{t-1} back from the engine) computes the clipped canary
 * gradients a_c = clip_C(g_c(theta_{t-1})) and D's expected clipped sum q sum_i clip_C(g_i);
 * from the released G_t it forms R_t = q N' G_t - q sum_i clip_C(g_i) (N' = |D| + m/2, public)
 * and the coefficients b_t = (A^T A)^{-1} A^T R_t (A = [a_1 .. a_m]: the dual basis removes
 * the canaries' interference); score_c = sum_t b_{t,c} (about q for an included canary, 0
 * otherwise, plus noise). Guesses and bound: audit_onerun_finish. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/audit.h"
#include "common/alloc.h"
#include "attacks/audit_candidate.h"
#include "optimized/dpsgd.h"
#include "reference/dpsgd.h"

/* Clipped flat gradient of example i of d at m into a[total] (clip_C(g) = g min(1, C/||g||)). */
static dp_status clipped(double *a, double **view, const ref_model *m, const ref_dataset *d, int64_t i, double C,
                         double *norm) {
    double loss, s = 0;
    DP_TRY(ref_example_grad(&loss, view, m, d, i));
    for (int64_t k = 0; k < m->total; k++) s += view[0][k] * view[0][k];
    s = sqrt(s);
    if (norm) *norm = s;
    double f = isfinite(s) ? (s > C ? C / s : 1.0) : 0.0; /* a non-finite gradient is dropped */
    for (int64_t k = 0; k < m->total; k++) a[k] = f * view[0][k];
    return DP_OK;
}

/* Cholesky solve of the m x m SPD system A b = y in place (A destroyed); DP_ERR_INVALID when
 * a pivot falls below 1e-10 of the largest diagonal (the canaries' gradients are linearly
 * dependent: the dual basis does not exist). */
static dp_status chol_solve(double *A, double *y, int64_t m) {
    double dmax = 0;
    for (int64_t i = 0; i < m; i++) dmax = fmax(dmax, A[i * m + i]);
    for (int64_t j = 0; j < m; j++) {
        double d = A[j * m + j];
        for (int64_t k = 0; k < j; k++) d -= A[j * m + k] * A[j * m + k];
        if (!(d > 1e-10 * dmax))
            return dp_error(DP_ERR_INVALID,
                            "--onerun-canaries %lld: the input canaries' clipped gradients are linearly dependent (the "
                            "canaries cannot be represented by this model; use fewer canaries or a wider model)",
                            (long long)m);
        d = sqrt(d);
        A[j * m + j] = d;
        for (int64_t i = j + 1; i < m; i++) {
            double s = A[i * m + j];
            for (int64_t k = 0; k < j; k++) s -= A[i * m + k] * A[j * m + k];
            A[i * m + j] = s / d;
        }
    }
    for (int64_t i = 0; i < m; i++) { /* L z = y */
        double s = y[i];
        for (int64_t k = 0; k < i; k++) s -= A[i * m + k] * y[k];
        y[i] = s / A[i * m + i];
    }
    for (int64_t i = m - 1; i >= 0; i--) { /* L^T b = z */
        double s = y[i];
        for (int64_t k = i + 1; k < m; k++) s -= A[k * m + i] * y[k];
        y[i] = s / A[i * m + i];
    }
    return DP_OK;
}

/* The canary inputs xs[m][in], labels ys[m]: lambda doubles until the gradient norm reaches
 * scale C (the largest finite norm is kept); a canary whose gradient is zero or non-finite at
 * every scale cannot be represented (DP_ERR_INVALID). */
static dp_status make_canaries(double *xs, int32_t *ys, double *g, double **view, const audit_setup *s, int64_t m) {
    const audit_config *c = &s->cfg;
    int in = c->mc.in;
    for (int64_t k = 0; k < m; k++) {
        dp_stream st;
        DP_TRY(dp_stream_public(&st, c->seed, DP_PURPOSE_ATTACK_DATA, 2, (uint32_t)k));
        double *x = xs + k * in, best = 0, best_l = 1;
        dp_rng_fill_gaussian(x, &st, 0, (size_t)in);
        ys[k] = (int32_t)(k % c->mc.classes);
        ref_dataset one = {.kind = REF_MLP, .n = 1, .in = in, .x = g + s->m0.total, .y = &ys[k]};
        for (double l = 1.0; best < c->canary_scale * c->clip && l <= 0x1p30; l *= 2.0) {
            for (int j = 0; j < in; j++) one.x[j] = l * x[j];
            double nrm;
            DP_TRY(clipped(g, view, &s->m0, &one, 0, INFINITY, &nrm));
            if (isfinite(nrm) && nrm > best) { best = nrm; best_l = l; }
        }
        if (!(best > 0))
            return dp_error(DP_ERR_INVALID, "one-run input canary %lld: its gradient is 0 or not finite at every input "
                            "scale up to 2^30 (the canary cannot be represented)", (long long)k);
        for (int j = 0; j < in; j++) x[j] *= best_l;
    }
    return DP_OK;
}

dp_status audit_onerun_engine(audit_onerun_result *res, const audit_config *c, int64_t m, int64_t r, int64_t steps) {
    memset(res, 0, sizeof *res);
    DP_TRY(audit_config_check(c));
    if (c->mc.kind != REF_MLP) return dp_error(DP_ERR_INVALID, "the engine's one-run audit uses input canaries: --model mlp");
    if (c->plant == AUDIT_PLANT_CLIP_AFTER_SUM) return dp_error(DP_ERR_INVALID, "--plant clip-after-sum: not a one-run release");
    DP_TRY(audit_onerun_check(m, r, steps));
    double t0 = audit_now_s();
    audit_setup s;
    DP_TRY(audit_setup_make(&s, c));
    int64_t P = s.m0.total, n = c->n, in_dim = c->mc.in;
    dp_status st = DP_OK;
    if (m > P)
        st = dp_error(DP_ERR_INVALID, "--onerun-canaries %lld: more canaries than the model's %lld parameters (their "
                      "gradients cannot be independent: the canaries cannot be represented)", (long long)m, (long long)P);
    int *in = dp_calloc((size_t)m, sizeof *in);
    double *xs = dp_malloc((size_t)(m * in_dim) * sizeof *xs), *A = dp_malloc((size_t)(m * P) * sizeof *A);
    double *gram = dp_malloc((size_t)(m * m) * sizeof *gram), *y = dp_malloc((size_t)m * sizeof *y);
    double *score = dp_calloc((size_t)m, sizeof *score), *g = dp_malloc((size_t)(P + in_dim) * sizeof *g);
    double *base = dp_malloc((size_t)P * sizeof *base), *a = dp_malloc((size_t)P * sizeof *a);
    int32_t *ys = dp_malloc((size_t)m * sizeof *ys);
    double **view = NULL, **theta = NULL;
    ref_model mt = {0};
    ref_dataset d = {0};
    opt_backend *be = NULL;
    opt_dpsgd e;
    int e_ok = 0;
    ref_dpsgd_step_out out = {0};
    if (st == DP_OK && (!in || !xs || !A || !gram || !y || !score || !g || !base || !a || !ys)) st = DP_ERR_NOMEM;
    if (st == DP_OK) st = audit_flat_buffers(&view, &s.m0);
    if (st == DP_OK) st = ref_model_copy(&mt, &s.m0);
    if (st == DP_OK) {
        theta = dp_calloc((size_t)mt.nparams, sizeof *theta);
        if (!theta) st = DP_ERR_NOMEM;
        for (int p = 0; st == DP_OK && p < mt.nparams; p++) theta[p] = mt.params[p].data;
    }
    if (st == DP_OK) st = make_canaries(xs, ys, g, view, &s, m);
    dp_stream bits;
    if (st == DP_OK) st = dp_stream_secret(&bits, c->key, DP_PURPOSE_AUDIT_NOISE, 3, 0);
    int64_t nin = 0;
    for (int64_t k = 0; st == DP_OK && k < m; k++) nin += in[k] = dp_rng_uniform(&bits, (uint64_t)k) < 0.5;
    if (st == DP_OK) { /* D plus the included canaries, in canary order */
        d = s.d0;
        d.n = n + nin;
        d.x = dp_malloc((size_t)(d.n * in_dim) * sizeof *d.x);
        d.y = dp_malloc((size_t)d.n * sizeof *d.y);
        if (!d.x || !d.y) st = DP_ERR_NOMEM;
        for (int64_t i = 0, j = n; st == DP_OK && i < m + n; i++) {
            if (i < n) { memcpy(d.x + i * in_dim, s.d0.x + i * in_dim, (size_t)in_dim * sizeof *d.x); d.y[i] = s.d0.y[i]; }
            else if (in[i - n]) { memcpy(d.x + j * in_dim, xs + (i - n) * in_dim, (size_t)in_dim * sizeof *d.x); d.y[j++] = ys[i - n]; }
        }
    }
    ref_dpsgd_config rc;
    if (st == DP_OK) st = audit_onerun_train_config(&rc, &s, d.n, steps);
    int cuda = opt_backend_is_cuda(c->backend);
    opt_backend_config bc = {.name = c->backend, .dtype = cuda ? DP_F32 : DP_F64, .threads = 1, .use_mpi = 0};
    if (st == DP_OK) st = opt_backend_create(&be, &bc);
    opt_dp_options o = {.strategy = (opt_strategy)c->strategy};
    if (st == DP_OK && (st = opt_dpsgd_init(&e, be, &rc, &o, &s.m0)) == DP_OK) e_ok = 1;
    double nq = c->q * ((double)n + (double)m / 2); /* q N', N' public */
    for (int64_t t = 1; st == DP_OK && t <= steps; t++) {
        if (t > 1) st = opt_model_get_params(&e.om, theta); /* theta_{t-1}, released (white box) */
        memset(base, 0, (size_t)P * sizeof *base);
        for (int64_t i = 0; st == DP_OK && i < n; i++) {
            st = clipped(a, view, &mt, &s.d0, i, c->clip, NULL);
            for (int64_t k = 0; k < P; k++) base[k] += c->q * a[k];
        }
        ref_dataset one = {.kind = REF_MLP, .n = 1, .in = (int)in_dim};
        for (int64_t k = 0; st == DP_OK && k < m; k++) {
            one.x = xs + k * in_dim;
            one.y = ys + k;
            st = clipped(A + k * P, view, &mt, &one, 0, c->clip, NULL);
        }
        for (int64_t i = 0; st == DP_OK && i < m; i++)
            for (int64_t j = 0; j <= i; j++) {
                double acc = 0;
                for (int64_t k = 0; k < P; k++) acc += A[i * P + k] * A[j * P + k];
                gram[i * m + j] = gram[j * m + i] = acc;
            }
        if (st == DP_OK) st = opt_dpsgd_step(&out, &e, &d, t);
        for (int64_t j = 0; st == DP_OK && j < m; j++) {
            double acc = 0;
            int64_t off = 0;
            for (int p = 0; p < mt.nparams; p++)
                for (int64_t k = 0; k < mt.params[p].numel; k++, off++)
                    acc += A[j * P + off] * (nq * out.private_grad[p][k] - base[off]);
            y[j] = acc;
        }
        if (st == DP_OK) st = chol_solve(gram, y, m);
        for (int64_t j = 0; st == DP_OK && j < m; j++) score[j] += y[j];
        if (st == DP_OK && c->progress) fprintf(stderr, "audit: one-run (engine) step %lld/%lld\n", (long long)t, (long long)steps);
    }
    if (st == DP_OK) st = audit_onerun_finish(res, c, in, score, m, r, steps, "input");
    res->seconds = audit_now_s() - t0;
    ref_dpsgd_step_free(&out);
    if (e_ok) opt_dpsgd_free(&e);
    if (be) opt_backend_destroy(be);
    if (view) dp_free(view[0]);
    dp_free(view); dp_free(theta);
    ref_model_free(&mt);
    dp_free(d.x); dp_free(d.y);
    dp_free(in); dp_free(xs); dp_free(A); dp_free(gram); dp_free(y); dp_free(score); dp_free(g); dp_free(base); dp_free(a); dp_free(ys);
    audit_setup_free(&s);
    return st;
}

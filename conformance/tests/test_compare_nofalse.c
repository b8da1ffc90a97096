/* conformance/tests/test_compare_nofalse.c — no false alarms from `compare` on correct
 * third-party implementations (issue 13, section 3; docs/tolerances.md "Confident
 * examples", "Dropped examples", "Declared clip conventions").
 *
 * An independent DP-SGD step of the mlp, written here from docs/models.md and docs/dpsgd.md
 * alone (its own forward/backward, every sum in reverse order), is run in f64 and in
 * emulated f32 (every operation rounded to float: +,-,*,/,sqrt round correctly through
 * double, exp/log/tanh are correctly rounded f32 approximations) on 100 fresh batches per
 * variant. Every batch holds confident examples (the output bias of class 0 is raised to
 * 11..26, so examples labelled 0 have losses of 1e-5..1e-11 and an output gradient p_y - 1
 * that cancels), a dropped example (a NaN input: non-finite loss), clipped and unclipped
 * examples. The reference is `ref_dpsgd_step`. Required: zero FAILs in 100 batches for
 * f64 and f32, for a candidate declaring Opacus's rule abadi_eps:1e-6 (computed with it);
 * and, as negative controls that must FAIL: the same Opacus candidate declaring plain abadi
 * (FAIL at per_sample.clip_factor), a candidate that does not clip one clipped example, and
 * one whose noise is 1e-6 too large (relative). Seed: DPCERT_TEST_SEED. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "conformance/compare/compare.h"
#include "reference/dpsgd.h"

enum { NB = 100 };

typedef struct {
    int f32;          /* round every operation to float */
    double eps;       /* clip rule min(1, C / (n + eps)) */
    const char *decl; /* declared clip_fn ("" = none) */
    int noclip_one;   /* bug: the first clipped example is not clipped */
    double noise_mul; /* bug: noise scale */
    int shares;       /* compare as noise shares (--noise-shares --noise-ranks 1), reference without noise_key */
} cand_opts;

static int g_f32;
static double R(double x) { return g_f32 ? (double)(float)x : x; }

/* Per-example loss and gradient of the mlp, reverse-order sums. g[p] sized like the params. */
static double cand_grad(double **g, const ref_model *m, const double *x, int y) {
    const ref_model_config *c = &m->cfg;
    int nl = c->nhidden + 1;
    double h[REF_MAX_HIDDEN + 2][64]; /* activations: h[0] = x, h[i+1] = layer i output */
    int width[REF_MAX_HIDDEN + 2];
    width[0] = c->in;
    for (int j = 0; j < c->in; j++) h[0][j] = R(x[j]);
    for (int i = 0; i < nl; i++) {
        const ref_param *W = &m->params[2 * i], *b = &m->params[2 * i + 1];
        int out = (int)W->shape[0], in = (int)W->shape[1];
        width[i + 1] = out;
        for (int o = 0; o < out; o++) {
            double a = R(b->data[o]);
            for (int k = in - 1; k >= 0; k--) a = R(a + R(R(W->data[o * in + k]) * h[i][k]));
            h[i + 1][o] = i < nl - 1 ? R(tanh(a)) : a;
        }
    }
    int V = width[nl];
    double *z = h[nl], mx = -INFINITY, s = 0, p[64], d[64];
    for (int k = 0; k < V; k++) mx = z[k] > mx ? z[k] : mx;
    for (int k = V - 1; k >= 0; k--) s = R(s + R(exp(R(z[k] - mx))));
    double loss = R(R(mx + R(log(s))) - z[y]);
    for (int k = 0; k < V; k++) {
        p[k] = R(R(exp(R(z[k] - mx))) / s);
        d[k] = k == y ? R(p[k] - 1) : p[k];
    }
    for (int i = nl - 1; i >= 0; i--) {
        const ref_param *W = &m->params[2 * i];
        int out = (int)W->shape[0], in = (int)W->shape[1];
        double dn[64];
        for (int o = 0; o < out; o++) {
            g[2 * i + 1][o] = d[o];
            for (int k = 0; k < in; k++) g[2 * i][o * in + k] = R(d[o] * h[i][k]);
        }
        if (i == 0) break;
        for (int k = 0; k < in; k++) {
            double a = 0;
            for (int o = out - 1; o >= 0; o--) a = R(a + R(R(W->data[o * in + k]) * d[o]));
            dn[k] = R(a * R(1 - R(h[i][k] * h[i][k])));
        }
        memcpy(d, dn, sizeof(double) * (size_t)in);
    }
    return loss;
}

/* The candidate's export of step 1 (same names as the reference). */
static void cand_step(dp_tensor_set *cs, const dp_tensor_set *ref, const ref_model *m, const ref_dataset *ds,
                      const ref_dpsgd_config *cfg, const cand_opts *co) {
    g_f32 = co->f32;
    dp_tset_init(cs);
    const dp_tensor *bi = dp_tset_find(ref, "batch.indices");
    int64_t B = bi->shape[0], P = m->nparams;
    double *loss = calloc((size_t)B + 1, sizeof *loss), *nrm = calloc((size_t)B + 1, sizeof *nrm);
    double *cf = calloc((size_t)B + 1, sizeof *cf), **gi = calloc((size_t)(B + 1) * (size_t)P, sizeof *gi);
    int noclip_done = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t ex = (int64_t)dp_tensor_get(bi, b);
        for (int p = 0; p < P; p++) gi[b * P + p] = calloc((size_t)m->params[p].numel, sizeof(double));
        loss[b] = cand_grad(gi + b * P, m, ds->x + ex * ds->in, ds->y[ex]);
        double sq = 0;
        for (int p = (int)P - 1; p >= 0; p--)
            for (int64_t e = m->params[p].numel - 1; e >= 0; e--) sq = R(sq + R(gi[b * P + p][e] * gi[b * P + p][e]));
        nrm[b] = R(sqrt(sq));
        if (!isfinite(loss[b]) || !isfinite(nrm[b])) { cf[b] = 0; continue; } /* dropped */
        double dn = R(nrm[b] + co->eps);
        cf[b] = dn <= cfg->clip ? 1.0 : R(cfg->clip / dn);
        if (co->noclip_one && cf[b] < 1 && !noclip_done) { cf[b] = 1; noclip_done = 1; }
    }
    int64_t sb[1] = {B};
    dp_tset_add(cs, "batch.indices", bi);
    dp_tset_add(cs, "batch.y", dp_tset_find(ref, "batch.y"));
    const dp_tensor *bx = dp_tset_find(ref, "batch.x");
    double *xr = calloc((size_t)dp_tensor_numel(bx) + 1, sizeof *xr);
    for (int64_t e = 0; e < dp_tensor_numel(bx); e++) xr[e] = R(dp_tensor_get(bx, e));
    dp_tset_add_f64(cs, "batch.x", xr, 2, bx->shape);
    free(xr);
    for (int p = 0; p < P; p++) {
        char nm[160];
        snprintf(nm, sizeof nm, "params.%s", m->params[p].name);
        dp_tset_add(cs, nm, dp_tset_find(ref, nm));
    }
    dp_tset_add_f64(cs, "per_sample.loss", loss, 1, sb);
    dp_tset_add_f64(cs, "per_sample.norm", nrm, 1, sb);
    dp_tset_add_f64(cs, "per_sample.clip_factor", cf, 1, sb);
    double qn = R(cfg->q * (double)cfg->n), scale = R(R(cfg->sigma * cfg->clip) * co->noise_mul);
    for (int p = 0; p < P; p++) {
        const ref_param *pr = &m->params[p];
        int64_t n = pr->numel;
        double *S = calloc((size_t)n, sizeof *S), *Z = calloc((size_t)n, sizeof *Z), *G = calloc((size_t)n, sizeof *G);
        double *A = calloc((size_t)n, sizeof *A);
        for (int64_t e = 0; e < n; e++) {
            for (int64_t b = B - 1; b >= 0; b--)
                if (cf[b] != 0) S[e] = R(S[e] + R(cf[b] * gi[b * P + p][e]));
            Z[e] = R(scale * ref_dpsgd_noise_z(cfg->key, 1, p, e));
            G[e] = R(R(S[e] + Z[e]) / qn);
            A[e] = R(R(pr->data[e]) - R(cfg->lr * G[e]));
        }
        char nm[160];
        snprintf(nm, sizeof nm, "step.clipped_sum.%s", pr->name);
        dp_tset_add_f64(cs, nm, S, pr->ndim, pr->shape);
        snprintf(nm, sizeof nm, "step.noise.%s", pr->name);
        dp_tset_add_f64(cs, nm, Z, pr->ndim, pr->shape);
        snprintf(nm, sizeof nm, "step.private_grad.%s", pr->name);
        dp_tset_add_f64(cs, nm, G, pr->ndim, pr->shape);
        snprintf(nm, sizeof nm, "params_after.%s", pr->name);
        dp_tset_add_f64(cs, nm, A, pr->ndim, pr->shape);
        free(S); free(Z); free(G); free(A);
    }
    if (co->decl[0]) dp_tset_set_meta(cs, "clip_fn", co->decl);
    for (int64_t i = 0; i < B * P; i++) free(gi[i]);
    free(gi); free(loss); free(nrm); free(cf);
}

typedef struct { int fails, incomplete, confident, dropped, clipped, unclipped; double worst; char first[200], worstname[200]; } tally;

static void run_variant(tally *t, const char *label, const cand_opts *co, uint64_t seed0) {
    memset(t, 0, sizeof *t);
    for (int it = 0; it < NB; it++) {
        uint64_t seed = seed0 + (uint64_t)it;
        ref_model_config mc;
        ref_config_default(&mc, REF_MLP);
        ref_dpsgd_config c;
        ref_dpsgd_config_default(&c);
        c.n = 24; c.q = 0.5; c.clip = 0.6; c.sigma = 0.8; c.lr = 0.1;
        c.seed.k = seed; c.key.k = seed ^ 0x9e3779b97f4a7c15ULL; c.key_given = !co->shares;
        ref_model m, after;
        ref_dataset d;
        T_OK(ref_model_init(&m, &mc, c.seed));
        T_OK(ref_dataset_generate(&d, &mc, c.n, c.seed));
        /* confident class 0; a spread of norms; one dropped example */
        ref_param *bo = &m.params[2 * mc.nhidden + 1], *wo = &m.params[2 * mc.nhidden];
        bo->data[0] = 11 + 15 * (double)((seed * 2654435761u) % 1000) / 1000.0;
        for (int64_t e = 0; e < wo->numel; e++) wo->data[e] *= 40;
        for (int64_t i = 0; i < c.n; i++)
            if (i % 5 == 1) d.y[i] = 0;
        d.x[(int64_t)(seed % (uint64_t)c.n) * d.in] = NAN;
        T_OK(ref_model_copy(&after, &m));
        ref_dpsgd_state st;
        T_OK(ref_dpsgd_init(&st, &c, &after));
        ref_dpsgd_step_out o;
        memset(&o, 0, sizeof o);
        T_OK(ref_dpsgd_step(&o, &after, &st, &d, 1));
        dp_tensor_set rs, cs;
        T_OK(ref_dpsgd_export_set(&rs, &mc, &c, &st.groups, &m, &after, &d, &o, NULL));
        cand_step(&cs, &rs, &m, &d, &c, co);
        for (int64_t b = 0; b < o.b; b++) {
            if (o.dropped[b]) t->dropped++;
            else if (o.loss[b] < 1e-5) t->confident++;
            if (!o.dropped[b]) { if (o.clip_factor[b] < 1) t->clipped++; else t->unclipped++; }
        }
        conf_cmp_opts co2;
        conf_cmp_opts_default(&co2);
        co2.cand_dtype = co->f32 ? DP_F32 : DP_F64;
        co2.noise_statistical = co->shares;
        co2.noise_ranks = co->shares;
        conf_cmp_result r;
        conf_cmp_result_init(&r);
        T_OK(conf_compare_sets(&r, &rs, &cs, &co2, ""));
        if (r.incomplete && r.status != CONF_FAIL && strcmp(conf_cmp_overall(&r), "INCOMPLETE") == 0) t->incomplete++;
        if (r.status == CONF_FAIL || r.incomplete) {
            if (!t->fails++) snprintf(t->first, sizeof t->first, "%s", r.first_fail);
        }
        for (size_t i = 0; i < r.n; i++)
            if ((r.items[i].status == CONF_PASS || r.items[i].status == CONF_MARGINAL) && r.items[i].worst_frac > t->worst) {
                t->worst = r.items[i].worst_frac;
                snprintf(t->worstname, sizeof t->worstname, "%s", r.items[i].name);
            }
        conf_cmp_result_free(&r);
        dp_tset_free(&rs); dp_tset_free(&cs);
        ref_dpsgd_step_free(&o); ref_dpsgd_free(&st);
        ref_model_free(&m); ref_model_free(&after); ref_dataset_free(&d);
    }
    printf("%-40s %3d/%d batches FAIL (first at %s), worst passing fraction %.3g (%s); examples: %d confident (loss < 1e-5), "
           "%d dropped, %d clipped, %d unclipped\n",
           label, t->fails, NB, t->first[0] ? t->first : "-", t->worst, t->worstname, t->confident, t->dropped, t->clipped, t->unclipped);
}

int main(void) {
    uint64_t seed = t_seed(1300);
    tally t;
    cand_opts f64 = {0, 0, "", 0, 1, 0}, f32 = {1, 0, "", 0, 1, 0}, opa = {0, 1e-6, "abadi_eps:1e-6", 0, 1, 0};
    run_variant(&t, "f64, reverse-order sums", &f64, seed);
    T_CHECK(t.fails == 0, "f64: %d false alarms (first %s)", t.fails, t.first);
    T_CHECK(t.confident >= 100 && t.dropped >= 30 && t.clipped >= 100 && t.unclipped >= 100,
            "the batches lack confident/dropped/clipped/unclipped examples");
    run_variant(&t, "f32 (emulated), reverse-order sums", &f32, seed + 1000);
    T_CHECK(t.fails == 0, "f32: %d false alarms (first %s)", t.fails, t.first);
    run_variant(&t, "f64, Opacus rule, declared abadi_eps:1e-6", &opa, seed + 2000);
    T_CHECK(t.fails == 0, "abadi_eps declared: %d false alarms (first %s)", t.fails, t.first);
    /* negative controls */
    cand_opts opa_undecl = {0, 1e-6, "abadi", 0, 1, 0}, noclip = {1, 0, "", 1, 1, 0}, loud = {0, 0, "", 0, 1 + 1e-6, 0};
    run_variant(&t, "NEG: Opacus rule declared abadi", &opa_undecl, seed + 3000);
    T_CHECK(t.fails == NB && strstr(t.first, "clip_factor"), "Opacus rule undeclared: %d/%d caught (first %s)", t.fails,
            NB, t.first);
    run_variant(&t, "NEG: f32, one clipped example not clipped", &noclip, seed + 4000);
    T_CHECK(t.fails == NB, "missing clip: %d/%d caught", t.fails, NB);
    run_variant(&t, "NEG: noise 1e-6 too large", &loud, seed + 5000);
    T_CHECK(t.fails == NB && strstr(t.first, "noise"), "loud noise: %d/%d caught (first %s)", t.fails, NB, t.first);
    /* the no-noise candidate that `compare --noise-shares --noise-ranks 1` used to PASS: INCOMPLETE */
    cand_opts quiet = {0, 0, "", 0, 0, 1};
    run_variant(&t, "NEG: no noise, compared as shares", &quiet, seed + 6000);
    T_CHECK(t.incomplete == NB, "no-noise candidate under --noise-shares: %d/%d INCOMPLETE", t.incomplete, NB);
    /* building blocks */
    conf_clip_conv cv;
    T_CHECK(conf_clip_conv_parse(&cv, "t", "abadi_eps:1e-6") == DP_OK && cv.eps == 1e-6 && !cv.automatic, "abadi_eps");
    T_CHECK(conf_clip_conv_parse(&cv, "t", "automatic") == DP_OK && cv.automatic && cv.eps == 0.01, "automatic");
    T_CHECK(conf_clip_conv_parse(&cv, "t", "automatic:0.5") == DP_OK && cv.eps == 0.5, "automatic:G");
    T_CHECK(conf_clip_conv_parse(&cv, "t", "abadi_eps:nan") != DP_OK && conf_clip_conv_parse(&cv, "t", "abadi_eps:") != DP_OK &&
                conf_clip_conv_parse(&cv, "t", "opacus") != DP_OK && conf_clip_conv_parse(&cv, "t", "abadi_eps:1x") != DP_OK,
            "bad clip_fn strings rejected");
    T_CHECK(conf_cancel_factor(NAN) == 1 && conf_cancel_factor(5) > 1 && conf_cancel_factor(5) < 1.01 &&
                isinf(conf_cancel_factor(0)) && fabs(conf_cancel_factor(1e-6) / 1e6 - 1) < 1e-5,
            "cancellation factor");
    return t_finish();
}

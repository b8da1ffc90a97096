/* reference/tests/test_dpsgd.c — the DP-SGD reference (docs/dpsgd.md):
 * clipping bounds (flat, per-layer, group, automatic, norm 0, ||g|| = C and its
 * neighbours), the private gradient formula, accumulation equivalence (bitwise),
 * the empty batch, non-finite examples, Poisson batch sizes (chi-square), noise-only
 * variance, determinism of the export, the MPFR path within the bound of docs/dpsgd.md
 * ("Double versus MPFR"), the optimizers, and the groups parser. Every statistical
 * check states its false-reject probability and has a negative control. */
#include <float.h>
#include <string.h>

#include <mpfr.h>

#include "common/safetensors.h"
#include "common/test.h"
#include "reference/dpsgd.h"

static const double U = DBL_EPSILON / 2;

/* ---- helpers ---- */

typedef struct {
    ref_model m;
    ref_dataset d;
    ref_dpsgd_state st;
    ref_dpsgd_step_out o;
} run_t;

static void small_mlp(ref_model_config *c) {
    ref_config_default(c, REF_MLP);
    c->in = 6; c->nhidden = 2; c->hidden[0] = 5; c->hidden[1] = 4; c->classes = 3;
}

static int setup(run_t *r, const ref_model_config *mc, const ref_dpsgd_config *c) {
    memset(r, 0, sizeof *r);
    int ok = ref_model_init(&r->m, mc, c->seed) == DP_OK;
    ok = ok && ref_dataset_generate(&r->d, mc, c->n, c->seed) == DP_OK;
    ok = ok && ref_dpsgd_init(&r->st, c, &r->m) == DP_OK;
    /* weights scaled so that per-example norms spread around the thresholds */
    for (int p = 0; ok && p < r->m.nparams; p++)
        if (r->m.params[p].ndim == 2)
            for (int64_t e = 0; e < r->m.params[p].numel; e++) r->m.params[p].data[e] *= 30;
    T_CHECK(ok, "setup: %s", dp_last_error());
    return ok;
}
static void teardown(run_t *r) {
    ref_dpsgd_step_free(&r->o);
    ref_dpsgd_free(&r->st);
    ref_model_free(&r->m);
    ref_dataset_free(&r->d);
}

static void base_cfg(ref_dpsgd_config *c, uint64_t seed) {
    ref_dpsgd_config_default(c);
    c->n = 24; c->q = 0.5; c->clip = 0.5; c->sigma = 0.7;
    c->seed.k = seed; c->key.k = seed ^ 0x5eed5eedULL; c->key_given = 1;
}

/* Neumaier sum of squares of the clipped example i restricted to group k (k < 0: all) */
static double clipped_norm(const run_t *r, int64_t i, int k) {
    double s = 0, comp = 0;
    const ref_clip_groups *g = &r->st.groups;
    for (int p = 0; p < r->m.nparams; p++) {
        if (k >= 0 && g->group_of[p] != k) continue;
        double c = r->o.clip_factor[i * g->ngroups + g->group_of[p]];
        for (int64_t e = 0; e < r->m.params[p].numel; e++) {
            double x = c * r->o.grad[p][i * r->m.params[p].numel + e], x2 = x * x, t = s + x2;
            comp += fabs(s) >= x2 ? (s - t) + x2 : (x2 - t) + s;
            s = t;
        }
    }
    return sqrt(s + comp);
}

static dp_status zero_grad(double *loss, double *const *g, const ref_model *m, const ref_dataset *d, int64_t i,
                           void *ctx) {
    (void)d; (void)i; (void)ctx;
    *loss = 0;
    for (int p = 0; p < m->nparams; p++) memset(g[p], 0, (size_t)m->params[p].numel * sizeof(double));
    return DP_OK;
}

/* one non-zero element g[0][0] = *(double *)ctx */
static dp_status spike_grad(double *loss, double *const *g, const ref_model *m, const ref_dataset *d, int64_t i,
                            void *ctx) {
    zero_grad(loss, g, m, d, i, NULL);
    g[0][0] = *(const double *)ctx;
    return DP_OK;
}

typedef struct { int64_t target; int mode; } poison_ctx; /* mode 0: NaN grad, 1: inf loss, 2: zero grad */
static dp_status poison_grad(double *loss, double *const *g, const ref_model *m, const ref_dataset *d, int64_t i,
                             void *ctx) {
    const poison_ctx *pc = ctx;
    DP_TRY(ref_example_grad(loss, g, m, d, i));
    if (i == pc->target) {
        if (pc->mode == 0) g[1][2] = NAN;
        else if (pc->mode == 1) *loss = INFINITY;
        else zero_grad(loss, g, m, d, i, NULL);
    }
    return DP_OK;
}

static int same_out(const ref_dpsgd_step_out *a, const ref_dpsgd_step_out *b, const ref_model *m) {
    if (a->b != b->b || a->ngroups != b->ngroups) return 0;
    size_t nb = (size_t)a->b, G = (size_t)a->ngroups;
    int ok = memcmp(a->indices, b->indices, nb * sizeof(int64_t)) == 0 &&
             memcmp(a->loss, b->loss, nb * sizeof(double)) == 0 && memcmp(a->norm, b->norm, nb * sizeof(double)) == 0 &&
             memcmp(a->clip_factor, b->clip_factor, nb * G * sizeof(double)) == 0;
    for (int p = 0; p < m->nparams; p++) {
        size_t n = (size_t)m->params[p].numel * sizeof(double);
        ok &= memcmp(a->grad[p], b->grad[p], nb * n) == 0 && memcmp(a->clipped_sum[p], b->clipped_sum[p], n) == 0 &&
              memcmp(a->noise[p], b->noise[p], n) == 0 && memcmp(a->private_grad[p], b->private_grad[p], n) == 0;
    }
    return ok;
}

/* ---- clipping ---- */

/* ||c_i g_i|| <= R (1 + 7u + 2 n u^2): docs/dpsgd.md "Clipping bound". */
static double clip_slack(int64_t n) { return 7 * U + 2 * (double)n * U * U; }

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median over the dataset of the per-example gradient norm restricted to parameters whose
 * name ends with `suffix` ("" = all), at the model that setup() builds. */
static double median_norm(const ref_model_config *mc, const ref_dpsgd_config *c, const char *suffix) {
    run_t r;
    if (!setup(&r, mc, c)) return 1;
    double **g = calloc((size_t)r.m.nparams, sizeof *g), *nrm = calloc((size_t)c->n, sizeof(double));
    for (int p = 0; p < r.m.nparams; p++) g[p] = calloc((size_t)r.m.params[p].numel, sizeof(double));
    for (int64_t i = 0; i < c->n; i++) {
        double l, ss = 0;
        T_OK(ref_example_grad(&l, g, &r.m, &r.d, i));
        for (int p = 0; p < r.m.nparams; p++) {
            size_t ln = strlen(r.m.params[p].name), ls = strlen(suffix);
            if (ln < ls || strcmp(r.m.params[p].name + ln - ls, suffix) != 0) continue;
            for (int64_t e = 0; e < r.m.params[p].numel; e++) ss += g[p][e] * g[p][e];
        }
        nrm[i] = sqrt(ss);
    }
    qsort(nrm, (size_t)c->n, sizeof(double), cmp_d);
    double med = nrm[c->n / 2];
    for (int p = 0; p < r.m.nparams; p++) free(g[p]);
    free(g);
    free(nrm);
    teardown(&r);
    return med;
}

static void test_clip_bounds(uint64_t seed) {
    const char *specs[4] = {"", "", "tensor", "wts=layers.*.weight:0.3;bias=*.bias:0.05"};
    const ref_clip_style styles[4] = {REF_CLIP_FLAT, REF_CLIP_FLAT, REF_CLIP_PER_LAYER, REF_CLIP_GROUP};
    for (int v = 0; v < 4; v++) {
        ref_model_config mc;
        small_mlp(&mc);
        ref_dpsgd_config c;
        base_cfg(&c, seed + (uint64_t)v);
        c.style = styles[v];
        snprintf(c.groups, sizeof c.groups, "%s", specs[v]);
        if (v == 1) c.clip_fn = REF_CLIPFN_AUTOMATIC;
        /* thresholds at the median norms, so that about half of the examples are clipped */
        double rw = median_norm(&mc, &c, "weight"), rb = median_norm(&mc, &c, "bias");
        if (v == 0 || v == 2) c.clip = median_norm(&mc, &c, "");
        if (v == 3) snprintf(c.groups, sizeof c.groups, "wts=layers.*.weight:%.17g;bias=*.bias:%.17g", rw, rb);
        run_t r;
        if (!setup(&r, &mc, &c)) return;
        T_OK(ref_dpsgd_step(&r.o, &r.m, &r.st, &r.d, 1));
        const ref_clip_groups *g = &r.st.groups;
        int clipped = 0, unclipped = 0, bad = 0;
        for (int64_t i = 0; i < r.o.b; i++)
            for (int k = 0; k < g->ngroups; k++) {
                double cf = r.o.clip_factor[i * g->ngroups + k], nrm = r.o.group_norm[i * g->ngroups + k];
                double want = c.clip_fn == REF_CLIPFN_AUTOMATIC ? g->thresh[k] / (nrm + c.gamma)
                            : nrm <= g->thresh[k] ? 1.0 : g->thresh[k] / nrm;
                bad += cf != want;
                if (cf < 1) clipped++; else unclipped++;
                double cn = clipped_norm(&r, i, k);
                T_CHECK(cn <= g->thresh[k] * (1 + clip_slack(r.m.total)), "clipped norm %.17g > R %.17g", cn,
                        g->thresh[k]);
            }
        T_CHECK(bad == 0, "%d clip factors differ from the formula", bad);
        if (c.clip_fn == REF_CLIPFN_ABADI)
            T_CHECK(clipped > 0 && unclipped > 0, "style %d: want clipped and unclipped examples (%d, %d)", v, clipped,
                    unclipped);
        for (int64_t i = 0; i < r.o.b; i++) {
            double cn = clipped_norm(&r, i, -1);
            T_CHECK(cn <= g->c_total * (1 + clip_slack(r.m.total)), "total clipped norm %.17g > C_total %.17g", cn,
                    g->c_total);
        }
        if (v == 2) T_CLOSE(g->c_total, c.clip, 4 * U * c.clip, "per-layer C/sqrt(G) thresholds have C_total = C");
        if (v == 3) T_CLOSE(g->c_total, sqrt(rw * rw + rb * rb), 4 * U * g->c_total, "group C_total");
        /* private = (clipped_sum + noise) / (q N) and noise = (sigma C_total) z, bitwise */
        int okp = 1;
        for (int p = 0; p < r.m.nparams; p++)
            for (int64_t e = 0; e < r.m.params[p].numel; e++) {
                double z = (c.sigma * g->c_total) * ref_dpsgd_noise_z(c.key, 1, p, e);
                okp &= r.o.noise[p][e] == z;
                okp &= r.o.private_grad[p][e] == (r.o.clipped_sum[p][e] + r.o.noise[p][e]) / (c.q * (double)c.n);
            }
        T_CHECK(okp, "private gradient / noise formula (style %d)", v);
        teardown(&r);
    }
}

static void test_clip_edges(uint64_t seed) {
    const double C = 1.5;
    T_CHECK(ref_clip_factor(REF_CLIPFN_ABADI, 0.0, C, 0.01) == 1.0, "norm 0 -> factor 1");
    T_CHECK(ref_clip_factor(REF_CLIPFN_ABADI, C, C, 0.01) == 1.0, "norm = C -> factor 1");
    T_CHECK(ref_clip_factor(REF_CLIPFN_ABADI, nextafter(C, 0), C, 0.01) == 1.0, "norm just below C -> 1");
    double up = nextafter(C, 10);
    double f = ref_clip_factor(REF_CLIPFN_ABADI, up, C, 0.01);
    T_CHECK(f < 1.0 && f * up <= C * (1 + U), "norm just above C -> factor %.17g < 1, clipped norm <= C", f);
    T_CHECK(ref_clip_factor(REF_CLIPFN_AUTOMATIC, 0.0, C, 0.01) == C / 0.01, "automatic at norm 0 = C/gamma");
    /* through a whole step: every example has gradient (v, 0, ..., 0) */
    const double vals[4] = {0.0, C, nextafter(C, 0), nextafter(C, 10)};
    for (int k = 0; k < 4; k++) {
        ref_model_config mc;
        small_mlp(&mc);
        ref_dpsgd_config c;
        base_cfg(&c, seed);
        c.clip = C;
        c.q = 1.0;
        c.n = 3;
        c.sigma = 0;
        run_t r;
        if (!setup(&r, &mc, &c)) return;
        double v = vals[k];
        r.st.grad_fn = spike_grad;
        r.st.grad_ctx = &v;
        T_OK(ref_dpsgd_step(&r.o, &r.m, &r.st, &r.d, 1));
        T_CHECK(r.o.b == 3, "q = 1 takes every example");
        T_CHECK(r.o.norm[0] == v, "norm of (v, 0...) is v exactly (%.17g vs %.17g)", r.o.norm[0], v);
        double want = v <= C ? 1.0 : C / v;
        T_CHECK(r.o.clip_factor[0] == want, "case %d factor %.17g want %.17g", k, r.o.clip_factor[0], want);
        T_CHECK(fabs(r.o.clip_factor[0] * v) <= C * (1 + U), "clipped |g| within one rounding of C");
        /* sigma = 0: the noise is exactly zero and the sum is 3 c v (Neumaier of 3 equal terms) */
        double t = want * v;
        T_CHECK(r.o.noise[0][0] == 0 && r.o.clipped_sum[0][0] == (t + t) + t, "sum of three clipped spikes");
        teardown(&r);
    }
}

/* ---- accumulation, empty batch, non-finite ---- */

static void test_accumulation(uint64_t seed) {
    for (int prec = 0; prec < 2; prec++) {
        ref_model_config mc;
        small_mlp(&mc);
        ref_dpsgd_config c;
        base_cfg(&c, seed);
        c.precision = (ref_precision)prec;
        c.opt = REF_OPT_ADAMW;
        run_t r1, rk;
        if (!setup(&r1, &mc, &c)) return;
        const int64_t ks[3] = {2, 5, 1000};
        for (int s = 1; s <= 2; s++) T_OK(ref_dpsgd_step(&r1.o, &r1.m, &r1.st, &r1.d, s));
        for (int j = 0; j < 3; j++) {
            c.micro_batches = ks[j];
            if (!setup(&rk, &mc, &c)) return;
            for (int s = 1; s <= 2; s++) T_OK(ref_dpsgd_step(&rk.o, &rk.m, &rk.st, &rk.d, s));
            int same = same_out(&r1.o, &rk.o, &r1.m);
            for (int p = 0; p < r1.m.nparams; p++)
                same &= memcmp(r1.m.params[p].data, rk.m.params[p].data,
                               (size_t)r1.m.params[p].numel * sizeof(double)) == 0;
            T_CHECK(same, "k = %lld micro-batches differ from k = 1 (precision %d)", (long long)ks[j], prec);
            teardown(&rk);
        }
        /* negative controls (mutants the bitwise check must reject): the k = 1 run's own
         * clipped terms c_i g_i re-summed (a) as per-micro-batch Neumaier partial sums combined
         * with plain additions (k = 5 and k = b: one example per micro-batch), (b) with the
         * noise added once per micro-batch (k = 2) */
        if (prec == 0) {
            const ref_dpsgd_step_out *o = &r1.o;
            const int64_t b = o->b, G = o->ngroups;
            int detected_naive = 0, detected_noise = 0, faithful = 0;
            for (int v = 0; v < 4; v++) { /* v = 3: k = 1, the mutant code must reproduce the step */
                int64_t kk = v == 0 ? 5 : v == 1 ? (b > 0 ? b : 1) : v == 2 ? 2 : 1;
                ref_dpsgd_step_out mut = *o; /* shallow: only clipped_sum / private_grad replaced */
                double *cs[64], *pg[64];
                T_CHECK(r1.m.nparams <= 64, "too many parameters for the mutant");
                int differs = 0;
                for (int p = 0; p < r1.m.nparams && p < 64; p++) {
                    int64_t ne = r1.m.params[p].numel;
                    int grp = r1.st.groups.group_of[p];
                    cs[p] = calloc((size_t)ne, sizeof(double));
                    pg[p] = calloc((size_t)ne, sizeof(double));
                    for (int64_t e = 0; e < ne; e++) {
                        double tot = 0;
                        for (int64_t j = 0; j < kk; j++) {
                            double ss = 0, cc = 0; /* Neumaier within micro-batch j */
                            for (int64_t i = j * b / kk; i < (j + 1) * b / kk; i++) {
                                if (o->dropped[i]) continue;
                                double x = o->clip_factor[i * G + grp] * o->grad[p][i * ne + e], t = ss + x;
                                if (fabs(ss) >= fabs(x)) cc += (ss - t) + x;
                                else cc += (x - t) + ss;
                                ss = t;
                            }
                            tot = v == 2 ? o->clipped_sum[p][e] : tot + (ss + cc);
                        }
                        cs[p][e] = tot;
                        double z = v == 2 ? (double)kk * o->noise[p][e] : o->noise[p][e];
                        pg[p][e] = (cs[p][e] + z) / (c.q * (double)c.n);
                    }
                }
                mut.clipped_sum = cs;
                mut.private_grad = pg;
                differs = !same_out(o, &mut, &r1.m);
                if (v < 2) detected_naive |= differs;
                else if (v == 2) detected_noise = differs;
                else faithful = !differs;
                for (int p = 0; p < r1.m.nparams && p < 64; p++) { free(cs[p]); free(pg[p]); }
            }
            T_CHECK(faithful, "the mutant re-summation with k = 1 does not reproduce the step (test bug)");
            T_CHECK(detected_naive, "negative control: naive combination of micro-batch partial sums not detected");
            T_CHECK(detected_noise, "negative control: noise added per micro-batch not detected");
        }
        /* negative control: a different noise key changes the result */
        c.micro_batches = 1;
        c.key.k ^= 1;
        if (!setup(&rk, &mc, &c)) return;
        for (int s = 1; s <= 2; s++) T_OK(ref_dpsgd_step(&rk.o, &rk.m, &rk.st, &rk.d, s));
        T_CHECK(!same_out(&r1.o, &rk.o, &r1.m), "negative control: another noise key gives the same step");
        teardown(&rk);
        teardown(&r1);
    }
}

/* Overflow of the sum of squares for a finite gradient (docs/dpsgd.md step 4): an mlp
 * without hidden layers, weights set so that example 2 (input [X, 0, 0, 0], label 1) has
 * logits [X/2, 0, 0], p = [1, 0, 0] exactly, dlogits = [1, -1, 0], so its gradient is
 * weight rows (X, -X) and bias (1, -1): norm = X sqrt(2) exactly as the scaled form
 * computes it (s = X, sum 2). X = 1e300: finite norm, c = R / (X sqrt 2), kept;
 * X = 1.5e308: the true norm exceeds DBL_MAX, norm = inf, c = 0, kept (not dropped). */
static void test_overflow(uint64_t seed) {
    for (int big = 0; big < 2; big++)
        for (int style = 0; style < 2; style++)
            for (int prec = 0; prec < 2; prec++) {
                ref_model_config mc;
                ref_config_default(&mc, REF_MLP);
                mc.in = 4; mc.nhidden = 0; mc.classes = 3;
                ref_dpsgd_config c;
                base_cfg(&c, seed);
                c.n = 6; c.q = 1.0; c.style = style ? REF_CLIP_PER_LAYER : REF_CLIP_FLAT;
                c.precision = (ref_precision)prec;
                run_t r;
                if (!setup(&r, &mc, &c)) return;
                const double X = big ? 1.5e308 : 1e300;
                memset(r.m.params[0].data, 0, sizeof(double) * (size_t)r.m.params[0].numel);
                memset(r.m.params[1].data, 0, sizeof(double) * (size_t)r.m.params[1].numel);
                r.m.params[0].data[0] = 0.5;
                for (int e = 0; e < 4; e++) r.d.x[2 * 4 + e] = e == 0 ? X : 0;
                r.d.y[2] = 1;
                T_OK(ref_dpsgd_step(&r.o, &r.m, &r.st, &r.d, 1));
                const ref_dpsgd_step_out *o = &r.o;
                T_CHECK(o->b == 6 && o->ndropped == 0, "overflow X=%g: b %lld, %lld dropped (expected 6, 0)", X,
                        (long long)o->b, (long long)o->ndropped);
                double want = X * sqrt(2.0); /* inf for X = 1.5e308 */
                double tolr = prec ? 2 * U : 0; /* MPFR: the exact norm rounded once vs fl(X fl(sqrt 2)) */
                T_CHECK(big ? isinf(o->norm[2]) : fabs(o->norm[2] - want) <= tolr * want,
                        "overflow X=%g prec %d: norm %.17g, expected %.17g", X, prec, o->norm[2], want);
                int G = o->ngroups;
                for (int k = 0; k < G; k++) {
                    double n = o->group_norm[2 * G + k], cf = o->clip_factor[2 * G + k];
                    double wn = (style && k == 1) ? sqrt(2.0) : want; /* per-layer: weight, bias groups */
                    double R = r.st.groups.thresh[k];
                    T_CHECK(isinf(wn) ? isinf(n) && cf == 0 : fabs(n - wn) <= (tolr + 2 * U) * wn && cf > 0 &&
                                                                    fabs(cf - R / wn) <= 4 * U * (R / wn),
                            "overflow X=%g prec %d group %d: norm %.17g factor %.17g", X, prec, k, n, cf);
                }
                for (int p = 0; p < r.m.nparams; p++)
                    for (int64_t e = 0; e < r.m.params[p].numel; e++)
                        T_CHECK(isfinite(o->clipped_sum[p][e]) && isfinite(o->private_grad[p][e]),
                                "overflow X=%g: clipped sum not finite", X);
                if (!big && !prec) {
                    double cn = clipped_norm(&r, 2, -1);
                    T_CHECK(cn <= c.clip * (1 + clip_slack(16)), "overflow: clipped norm %.17g > C", cn);
                }
                teardown(&r);
            }
}

static void test_empty_batch(uint64_t seed) {
    ref_model_config mc;
    small_mlp(&mc);
    ref_dpsgd_config c;
    base_cfg(&c, seed);
    c.n = 4;
    c.q = 1e-9; /* P(non-empty batch) = 1 - (1 - 1e-9)^4 < 4e-9 */
    run_t r;
    if (!setup(&r, &mc, &c)) return;
    ref_model before;
    T_OK(ref_model_copy(&before, &r.m));
    T_OK(ref_dpsgd_step(&r.o, &r.m, &r.st, &r.d, 1));
    T_CHECK(r.o.b == 0, "batch size %lld (expected empty)", (long long)r.o.b);
    T_CHECK(r.st.t == 1, "the empty step is counted");
    int ok = 1, moved = 0;
    for (int p = 0; p < r.m.nparams; p++)
        for (int64_t e = 0; e < r.m.params[p].numel; e++) {
            ok &= r.o.clipped_sum[p][e] == 0 && r.o.noise[p][e] != 0 &&
                  r.o.private_grad[p][e] == r.o.noise[p][e] / (c.q * (double)c.n);
            moved += r.m.params[p].data[e] != before.params[p].data[e];
        }
    T_CHECK(ok, "empty batch: signal 0, noise added, divided by q N");
    T_CHECK(moved > 0, "empty batch still updates the parameters");
    dp_tensor_set s;
    T_OK(ref_dpsgd_export_set(&s, &mc, &c, &r.st.groups, &before, &r.m, &r.d, &r.o, NULL));
    const dp_tensor *t = dp_tset_find(&s, "per_sample.grad.layers.0.weight");
    T_CHECK(t && t->ndim == 3 && t->shape[0] == 0, "empty per-sample tensors have a leading 0");
    uint8_t *buf = NULL;
    size_t len = 0;
    T_OK(dp_st_serialize(&buf, &len, &s));
    dp_tensor_set back;
    T_OK(dp_st_parse(&back, buf, len));
    T_CHECK(back.n == s.n, "empty-batch export round trip");
    dp_tset_free(&back);
    free(buf);
    dp_tset_free(&s);
    ref_model_free(&before);
    teardown(&r);
}

static void test_nonfinite(uint64_t seed) {
    ref_model_config mc;
    small_mlp(&mc);
    ref_dpsgd_config c;
    base_cfg(&c, seed);
    c.q = 1.0;
    c.n = 5;
    run_t ref, bad;
    if (!setup(&ref, &mc, &c)) return;
    poison_ctx zero = {2, 2};
    ref.st.grad_fn = poison_grad;
    ref.st.grad_ctx = &zero;
    T_OK(ref_dpsgd_step(&ref.o, &ref.m, &ref.st, &ref.d, 1));
    for (int mode = 0; mode < 2; mode++) {
        if (!setup(&bad, &mc, &c)) return;
        poison_ctx pc = {2, mode};
        bad.st.grad_fn = poison_grad;
        bad.st.grad_ctx = &pc;
        T_OK(ref_dpsgd_step(&bad.o, &bad.m, &bad.st, &bad.d, 1));
        T_CHECK(bad.o.ndropped == 1 && bad.o.dropped[2] == 1 && bad.o.clip_factor[2] == 0, "example 2 dropped");
        int same = 1, finite = 1;
        for (int p = 0; p < bad.m.nparams; p++)
            for (int64_t e = 0; e < bad.m.params[p].numel; e++) {
                same &= bad.o.private_grad[p][e] == ref.o.private_grad[p][e];
                finite &= isfinite(bad.o.private_grad[p][e]) && isfinite(bad.m.params[p].data[e]);
            }
        T_CHECK(finite, "a non-finite example poisoned the sum (mode %d)", mode);
        T_CHECK(same, "dropped example != zero contribution (mode %d)", mode);
        teardown(&bad);
    }
    teardown(&ref);
}

/* ---- statistics ---- */

/* Upper tail of chi-square with k degrees of freedom: Q(k/2, x/2) = Gamma(k/2, x/2) / Gamma(k/2) (MPFR). */
static double chi2_sf(double x, int k) {
    mpfr_t a, z, g, gi;
    mpfr_inits2(128, a, z, g, gi, (mpfr_ptr)0);
    mpfr_set_d(a, k / 2.0, MPFR_RNDN);
    mpfr_set_d(z, x / 2.0, MPFR_RNDN);
    mpfr_gamma_inc(gi, a, z, MPFR_RNDN);
    mpfr_gamma(g, a, MPFR_RNDN);
    mpfr_div(gi, gi, g, MPFR_RNDN);
    double r = mpfr_get_d(gi, MPFR_RNDN);
    mpfr_clears(a, z, g, gi, (mpfr_ptr)0);
    return r;
}

/* Chi-square of observed batch sizes against Binomial(n, q), bins with expected count < 5
 * pooled into the tails; returns the p-value. */
static double batch_chi2(const int64_t *count, int64_t n, double q, int64_t trials) {
    double *pmf = calloc((size_t)n + 1, sizeof(double));
    for (int64_t k = 0; k <= n; k++)
        pmf[k] = exp(lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) + k * log(q) +
                     (n - k) * log1p(-q));
    double stat = 0, eo = 0, oo = 0;
    int bins = 0;
    for (int64_t k = 0; k <= n; k++) {
        eo += pmf[k] * trials;
        oo += count[k];
        if (eo >= 5) {
            /* close the bin when the rest of the tail would still hold >= 5 expected */
            double rest = 0;
            for (int64_t j = k + 1; j <= n; j++) rest += pmf[j] * trials;
            if (rest >= 5 || k == n) { stat += (oo - eo) * (oo - eo) / eo; bins++; eo = oo = 0; }
        }
    }
    if (eo > 0) { stat += (oo - eo) * (oo - eo) / eo; bins++; }
    free(pmf);
    return chi2_sf(stat, bins - 1);
}

/* Batch sizes over 4000 steps are Binomial(N, q). False-reject probability 1e-6 (p-value
 * threshold); negative control: the same counts tested against q' = 1.1 q must be rejected. */
static void test_poisson_chi2(uint64_t seed) {
    const int64_t n = 30, trials = 4000;
    const double q = 0.3;
    int64_t *idx = malloc(sizeof(int64_t) * n), count[31] = {0}, incl[30] = {0};
    dp_noise_key key = {seed * 2654435761ULL + 17};
    for (int64_t s = 1; s <= trials; s++) {
        int64_t b;
        T_OK(ref_dpsgd_poisson(idx, &b, key, s, q, n));
        count[b]++;
        for (int64_t j = 0; j < b; j++) incl[idx[j]]++;
        for (int64_t j = 1; j < b; j++) T_CHECK(idx[j] > idx[j - 1], "indices ascending");
    }
    double p = batch_chi2(count, n, q, trials), pneg = batch_chi2(count, n, 1.1 * q, trials);
    printf("Poisson batch sizes: chi-square p = %.4g (reject below 1e-6); negative control q' = 1.1 q: p = %.3g\n", p,
           pneg);
    T_CHECK(p > 1e-6, "batch sizes are not Binomial(%lld, %g): p = %.3g", (long long)n, q, p);
    T_CHECK(pneg < 1e-6, "negative control not rejected: p = %.3g", pneg);
    /* inclusion counts per example: chi-square over examples, each Binomial(trials, q) */
    double stat = 0;
    for (int j = 0; j < n; j++) stat += (incl[j] - trials * q) * (incl[j] - trials * q) / (trials * q * (1 - q));
    double pi = chi2_sf(stat, (int)n);
    printf("per-example inclusion: chi-square p = %.4g (reject below 1e-6)\n", pi);
    T_CHECK(pi > 1e-6, "per-example inclusion frequencies: p = %.3g", pi);
    /* negative control: a biased sampler (the same secret uniforms, threshold 1.1 q for the
     * first half of the examples) must be rejected by the same statistic */
    {
        int64_t bias[30] = {0};
        for (int64_t s = 1; s <= trials; s++) {
            dp_stream st;
            T_OK(dp_stream_secret(&st, key, DP_PURPOSE_SAMPLING, (uint32_t)s, 0));
            for (int64_t i = 0; i < n; i++) bias[i] += dp_rng_uniform(&st, (uint64_t)i) < (i < n / 2 ? 1.1 * q : q);
        }
        double sb = 0;
        for (int j = 0; j < n; j++) sb += (bias[j] - trials * q) * (bias[j] - trials * q) / (trials * q * (1 - q));
        double pb = chi2_sf(sb, (int)n);
        printf("per-example inclusion, negative control (q' = 1.1 q for half the examples): p = %.3g\n", pb);
        T_CHECK(pb < 1e-6, "negative control: biased per-example inclusion not rejected: p = %.3g", pb);
    }
    free(idx);
}

/* Noise-only run (all per-example gradients zero): every private-gradient coordinate is
 * N(0, (sigma C_total / (q N))^2). Over n coordinates the statistic (n-1) s^2 / v is
 * chi-square(n-1); two-sided test at total false-reject probability 1e-6 (normal
 * approximation of chi-square(n-1), n > 10^4, z = 4.892). Mean: |mean| / (sqrt(v/n)) < 4.892.
 * Negative control: the same samples tested against 1.10 v must be rejected (a 10% error is
 * about 14 standard deviations at n ~ 5e4, so the control fails to reject with probability < 1e-9). */
static void test_noise_variance(uint64_t seed) {
    for (int v = 0; v < 2; v++) {
        ref_model_config mc;
        ref_config_default(&mc, REF_LLAMA);
        ref_dpsgd_config c;
        base_cfg(&c, seed + 11);
        c.n = 40; c.q = 0.25; c.sigma = 2.0; c.clip = 0.5; c.steps = 2;
        if (v == 1) {
            c.style = REF_CLIP_GROUP;
            snprintf(c.groups, sizeof c.groups, "emb=tok_emb|lm_head:0.3;rest=*:0.6");
        }
        run_t r;
        memset(&r, 0, sizeof r);
        T_OK(ref_model_init(&r.m, &mc, c.seed));
        T_OK(ref_dataset_generate(&r.d, &mc, c.n, c.seed));
        T_OK(ref_dpsgd_init(&r.st, &c, &r.m));
        r.st.grad_fn = zero_grad;
        double var = pow(c.sigma * r.st.groups.c_total / (c.q * c.n), 2);
        double s1 = 0, s2 = 0;
        int64_t cnt = 0;
        for (int s = 1; s <= 2; s++) {
            T_OK(ref_dpsgd_step(&r.o, &r.m, &r.st, &r.d, s));
            for (int p = 0; p < r.m.nparams; p++)
                for (int64_t e = 0; e < r.m.params[p].numel; e++) {
                    double x = r.o.private_grad[p][e];
                    s1 += x; s2 += x * x; cnt++;
                }
        }
        double mean = s1 / cnt, s2v = (s2 - cnt * mean * mean) / (cnt - 1);
        const double z = 4.892; /* two-sided normal quantile for 1e-6 */
        double sd_rel = sqrt(2.0 / (cnt - 1));
        double zv = (s2v / var - 1) / sd_rel, zneg = (s2v / (1.10 * var) - 1) / sd_rel, zm = mean / sqrt(var / cnt);
        printf("noise-only (%s, C_total %.6g): n %lld, var %.6g vs %.6g (z = %.2f), mean z = %.2f; control z = %.2f\n",
               v ? "group" : "flat", r.st.groups.c_total, (long long)cnt, s2v, var, zv, zm, zneg);
        T_CHECK(fabs(zv) < z, "variance of the private gradient: z = %.2f", zv);
        T_CHECK(fabs(zm) < z, "mean of the private gradient: z = %.2f", zm);
        T_CHECK(fabs(zneg) >= z, "negative control (1.10 x variance) not rejected: z = %.2f", zneg);
        teardown(&r);
    }
}

/* ---- MPFR ---- */

/* |double - mpfr| bounds of docs/dpsgd.md "Double versus MPFR" for one coordinate:
 * A = sum_i |c_i g_i[e]|, S = clipped sum, Z = noise, P = private gradient (MPFR values),
 * n_max = elements of the largest group, G groups, B examples. */
static void check_mpfr(const run_t *rd, const run_t *rm, const ref_dpsgd_config *c, int expect_pass, int *viol) {
    const ref_clip_groups *g = &rd->st.groups;
    int64_t nmax = 0;
    for (int k = 0; k < g->ngroups; k++) {
        int64_t nk = 0;
        for (int p = 0; p < rd->m.nparams; p++) if (g->group_of[p] == k) nk += rd->m.params[p].numel;
        if (nk > nmax) nmax = nk;
    }
    nmax = nmax > rd->m.total ? nmax : rd->m.total;
    const double en = 2.5 * U + (double)nmax * U * U, ec = en + 2 * U, et = ec + U;
    const double ez = 2 * U + (c->style == REF_CLIP_FLAT ? 0 : 2.5 * U + g->ngroups * U * U);
    const double qn = c->q * (double)c->n;
    const int64_t B = rd->o.b;
    int bad = 0;
    for (int64_t i = 0; i < B * g->ngroups; i++) {
        bad += !(fabs(rd->o.group_norm[i] - rm->o.group_norm[i]) <= (en + U) * rm->o.group_norm[i]);
        bad += !(fabs(rd->o.clip_factor[i] - rm->o.clip_factor[i]) <= (ec + U) * rm->o.clip_factor[i]);
    }
    for (int p = 0; p < rd->m.nparams; p++) {
        int64_t ne = rd->m.params[p].numel;
        for (int64_t e = 0; e < ne; e++) {
            double A = 0;
            for (int64_t i = 0; i < B; i++)
                A += fabs(rm->o.clip_factor[i * g->ngroups + g->group_of[p]] * rm->o.grad[p][i * ne + e]);
            double S = rm->o.clipped_sum[p][e], Z = rm->o.noise[p][e], P = rm->o.private_grad[p][e];
            double bs = et * A + 3 * U * fabs(S) + 2 * B * U * U * A;
            double bz = (ez + U) * fabs(Z);
            double bp = (et * A + 2 * U * fabs(S) + 2 * B * U * U * A + ez * fabs(Z)) / qn * (1 + 3 * U) + 4 * U * fabs(P);
            bad += !(fabs(rd->o.clipped_sum[p][e] - S) <= bs);
            bad += !(fabs(rd->o.noise[p][e] - Z) <= bz);
            bad += !(fabs(rd->o.private_grad[p][e] - P) <= bp);
        }
    }
    *viol = bad;
    if (expect_pass) T_CHECK(bad == 0, "%d values outside the double-vs-MPFR bound", bad);
}

static void test_mpfr(uint64_t seed) {
    for (int v = 0; v < 3; v++) {
        ref_model_config mc;
        small_mlp(&mc);
        ref_dpsgd_config c;
        base_cfg(&c, seed + 21);
        c.n = 16;
        if (v == 1) c.clip_fn = REF_CLIPFN_AUTOMATIC;
        if (v == 2) { c.style = REF_CLIP_PER_LAYER; snprintf(c.groups, sizeof c.groups, "block"); }
        run_t rd, rm;
        if (!setup(&rd, &mc, &c)) return;
        c.precision = REF_PREC_MPFR;
        if (!setup(&rm, &mc, &c)) return;
        T_OK(ref_dpsgd_step(&rd.o, &rd.m, &rd.st, &rd.d, 1));
        T_OK(ref_dpsgd_step(&rm.o, &rm.m, &rm.st, &rm.d, 1));
        T_CHECK(rd.o.b == rm.o.b && rd.o.b > 0, "same batch");
        int viol = 0, differ = 0;
        check_mpfr(&rd, &rm, &c, 1, &viol);
        for (int p = 0; p < rd.m.nparams; p++)
            for (int64_t e = 0; e < rd.m.params[p].numel; e++) differ += rd.o.private_grad[p][e] != rm.o.private_grad[p][e];
        printf("MPFR vs double (variant %d): %d coordinates differ in the last bits, %d outside the bound\n", v, differ,
               viol);
        /* negative control: an MPFR run with C (1 + 1e-12) must break the bound */
        teardown(&rm);
        c.clip *= 1 + 1e-12;
        if (!setup(&rm, &mc, &c)) return;
        T_OK(ref_dpsgd_step(&rm.o, &rm.m, &rm.st, &rm.d, 1));
        check_mpfr(&rd, &rm, &c, 0, &viol);
        T_CHECK(viol > 0, "negative control: C perturbed by 1e-12 stays within the bound");
        teardown(&rm);
        teardown(&rd);
    }
}

/* ---- determinism of the export ---- */

static void serialize_run(uint8_t **buf, size_t *len, const ref_model_config *mc, const ref_dpsgd_config *c) {
    run_t r;
    if (!setup(&r, mc, c)) return;
    ref_model before;
    T_OK(ref_dpsgd_step(&r.o, &r.m, &r.st, &r.d, 1));
    T_OK(ref_model_copy(&before, &r.m));
    T_OK(ref_dpsgd_step(&r.o, &r.m, &r.st, &r.d, 2));
    dp_tensor_set s;
    T_OK(ref_dpsgd_export_set(&s, mc, c, &r.st.groups, &before, &r.m, &r.d, &r.o, NULL));
    T_OK(dp_st_serialize(buf, len, &s));
    dp_tset_free(&s);
    ref_model_free(&before);
    teardown(&r);
}

static void test_determinism(uint64_t seed) {
    ref_model_config mc;
    ref_config_default(&mc, REF_LLAMA);
    mc.dim = 16; mc.ffn = 24; mc.seq = 6; mc.vocab = 20; mc.heads = 2; mc.tied = 1;
    ref_dpsgd_config c;
    base_cfg(&c, seed);
    c.n = 10; c.q = 0.4; c.opt = REF_OPT_ADAMW;
    uint8_t *a = NULL, *b = NULL;
    size_t la = 0, lb = 0;
    serialize_run(&a, &la, &mc, &c);
    serialize_run(&b, &lb, &mc, &c);
    T_CHECK(la == lb && la > 0 && memcmp(a, b, la) == 0, "same seed and key: exports differ");
    free(b);
    c.key.k += 1;
    serialize_run(&b, &lb, &mc, &c);
    T_CHECK(!(la == lb && memcmp(a, b, la) == 0), "negative control: another key gives the same export");
    free(a);
    free(b);
}

/* ---- optimizers ---- */

static void test_optimizers(uint64_t seed) {
    ref_model_config mc;
    small_mlp(&mc);
    for (int o = 0; o < 2; o++) {
        ref_dpsgd_config c;
        base_cfg(&c, seed);
        c.opt = (ref_optimizer)o;
        c.lr = 0.05;
        c.momentum = 0.9;
        run_t r;
        if (!setup(&r, &mc, &c)) return;
        double **g = calloc((size_t)r.m.nparams, sizeof *g);
        for (int p = 0; p < r.m.nparams; p++) {
            g[p] = calloc((size_t)r.m.params[p].numel, sizeof(double));
            for (int64_t e = 0; e < r.m.params[p].numel; e++) g[p][e] = (double)((e % 7) - 3) * 0.25;
        }
        double th0 = r.m.params[0].data[5], g5 = g[0][5];
        T_OK(ref_dpsgd_apply_optimizer(&r.m, &r.st, g));
        double th1 = r.m.params[0].data[5];
        T_OK(ref_dpsgd_apply_optimizer(&r.m, &r.st, g));
        double th2 = r.m.params[0].data[5];
        if (o == 0) {
            /* SGD momentum: theta1 = theta0 - lr g; theta2 = theta1 - lr (0.9 g + g) */
            T_CHECK(th1 == th0 - c.lr * g5, "sgd step 1");
            T_CHECK(th2 == th1 - c.lr * (c.momentum * g5 + g5), "sgd momentum step 2");
        } else {
            /* AdamW with a constant gradient: m_hat = g and v_hat = g^2 exactly up to rounding, so each
             * step moves by lr sign(g) |g| / (|g| + eps) after decay (1 - lr wd); relative error a few u */
            double step = c.lr * fabs(g5) / (fabs(g5) + c.adam_eps) * (g5 > 0 ? 1 : -1);
            double w1 = th0 * (1 - c.lr * c.weight_decay) - step;
            double w2 = w1 * (1 - c.lr * c.weight_decay) - step;
            /* error of the bias corrections 1 - beta^t: pow and the subtraction each round once,
             * amplified by the cancellation beta^t / (1 - beta^t); the moments add ~8 roundings each */
#define EBC(b, t) (2 * U * (1 + pow(b, t) / (1 - pow(b, t))))
            double tol1 = c.lr * (EBC(c.beta1, 1) + EBC(c.beta2, 1) / 2 + 16 * U) + 4 * U * fabs(th0);
            double tol2 = tol1 + c.lr * (EBC(c.beta1, 2) + EBC(c.beta2, 2) / 2 + 16 * U) + 4 * U * fabs(w1);
            T_CLOSE(th1, w1, tol1, "adamw step 1");
            T_CLOSE(th2, w2, tol2, "adamw step 2");
            T_CHECK(fabs(th1 - (th0 - c.lr * g5)) > 1e-6, "negative control: adamw is not plain sgd");
        }
        for (int p = 0; p < r.m.nparams; p++) free(g[p]);
        free(g);
        teardown(&r);
    }
}

/* ---- groups and config validation ---- */

static void test_groups_and_checks(uint64_t seed) {
    ref_model_config mc;
    ref_config_default(&mc, REF_LLAMA);
    ref_model m;
    T_OK(ref_model_init(&m, &mc, (dp_seed){seed}));
    ref_dpsgd_config c;
    ref_dpsgd_config_default(&c);
    ref_clip_groups g;
    c.style = REF_CLIP_PER_LAYER;
    snprintf(c.groups, sizeof c.groups, "block");
    T_OK(ref_clip_groups_make(&g, &c, &m));
    T_CHECK(g.ngroups == 4 && strcmp(g.name[0], "tok_emb") == 0 && strcmp(g.name[2], "layers.1") == 0 &&
                strcmp(g.name[3], "head") == 0 && g.group_of[19] == 3 && g.group_of[20] == 3 && g.group_of[9] == 1 && g.group_of[10] == 2,
            "per-block groups");
    T_CHECK(g.thresh[0] == c.clip / 2.0, "C / sqrt(4)");
    ref_clip_groups_free(&g);
    snprintf(c.groups, sizeof c.groups, "block:1,2,2,4");
    T_OK(ref_clip_groups_make(&g, &c, &m));
    T_CHECK(g.thresh[3] == 4 && g.c_total == 5, "explicit block thresholds, C_total = 5");
    ref_clip_groups_free(&g);
    const char *bad_specs[] = {"block:1,2", "rows", "block:1,2,-2,4", NULL};
    for (int k = 0; bad_specs[k]; k++) {
        snprintf(c.groups, sizeof c.groups, "%s", bad_specs[k]);
        T_CHECK(ref_clip_groups_make(&g, &c, &m) == DP_ERR_INVALID, "per-layer spec '%s' rejected", bad_specs[k]);
    }
    c.style = REF_CLIP_GROUP;
    const char *bad_group[] = {"a=tok_emb:1", "a=*:1;b=zzz:1", "a=*:0", "a=*:nan", "a*:1", "a=*:1;a=*:2", NULL};
    for (int k = 0; bad_group[k]; k++) {
        snprintf(c.groups, sizeof c.groups, "%s", bad_group[k]);
        T_CHECK(ref_clip_groups_make(&g, &c, &m) != DP_OK, "group spec '%s' rejected", bad_group[k]);
    }
    snprintf(c.groups, sizeof c.groups, "attn=layers.*.w[qkvo]:0.5;rest=*:1");
    T_OK(ref_clip_groups_make(&g, &c, &m));
    T_CHECK(g.ngroups == 2 && g.group_of[2] == 0 && g.group_of[1] == 1 && g.group_of[0] == 1, "glob groups");
    ref_clip_groups_free(&g);
    ref_model_free(&m);

    ref_dpsgd_config_default(&c);
    T_OK(ref_dpsgd_config_check(&c));
    ref_dpsgd_config b = c; b.clip = 0; T_CHECK(ref_dpsgd_config_check(&b) == DP_ERR_INVALID, "C = 0");
    b = c; b.sigma = -1; T_CHECK(ref_dpsgd_config_check(&b) == DP_ERR_INVALID, "sigma < 0");
    b = c; b.q = 0; T_CHECK(ref_dpsgd_config_check(&b) == DP_ERR_INVALID, "q = 0");
    b = c; b.q = 1.0; T_OK(ref_dpsgd_config_check(&b));
    b = c; b.q = NAN; T_CHECK(ref_dpsgd_config_check(&b) == DP_ERR_INVALID, "q NaN");
    b = c; b.n = 0; T_CHECK(ref_dpsgd_config_check(&b) == DP_ERR_INVALID, "N = 0");
    b = c; b.steps = 0; T_CHECK(ref_dpsgd_config_check(&b) == DP_ERR_INVALID, "steps = 0");
    b = c; b.momentum = 1; T_CHECK(ref_dpsgd_config_check(&b) == DP_ERR_INVALID, "momentum 1");
}

int main(void) {
    uint64_t seed = t_seed(7);
    test_groups_and_checks(seed);
    test_clip_edges(seed);
    test_clip_bounds(seed);
    test_accumulation(seed);
    test_empty_batch(seed);
    test_nonfinite(seed);
    test_overflow(seed);
    test_optimizers(seed);
    test_determinism(seed);
    test_mpfr(seed);
    test_poisson_chi2(seed);
    test_noise_variance(seed);
    return t_finish();
}

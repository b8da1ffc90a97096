/* optimized/tests/test_spec_independent.c — the engine's own implementation of the
 * specification pieces (optimized/opt_spec.h) against the reference's, on random and
 * edge inputs (docs/engine.md "Independence from the reference"):
 *
 *   Poisson batches (DP-SGD and DP-ZO), clip factors, clipping groups (names,
 *   thresholds, membership, C_total, and which specs are rejected), DP-SGD and DP-ZO
 *   configuration checks (accept/reject), DP-ZO directions, noise, clipping, released
 *   scalars, public update and theta digest: EXACT equality (the spec pins every
 *   operation; a NaN equals a NaN);
 *   per-example norms: within the derived bound |a - b| <= 2 eps_n max(a, b), with
 *   eps_n = 2.5u + n u^2 (4.5u + n u^2 under the overflow rule), docs/dpsgd.md
 *   "Double versus MPFR" (each side's computed norm is within eps_n of the true one).
 *
 * Negative controls (each must be detected as a disagreement by the same comparison):
 * an inclusive "u <= q" sampler, a sampler reading lane 1 and one reading element i + 1;
 * an abadi factor written min(1, R/n) (wrong for a NaN norm) and automatic clipping
 * without gamma; groups with one parameter moved to another group and with thresholds
 * C/G instead of C/sqrt(G); a norm missing one tensor; a config check accepting
 * --momentum 1; DP-ZO directions on lane p | j << 8, Gaussian noise without sqrt(n),
 * an update without the division by n, a digest of big-endian bytes.
 * Deterministic given the printed seed (DPCERT_TEST_SEED); no statistical check. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "common/test.h"
#include "optimized/opt_spec.h"
#include "reference/dpsgd.h"
#include "reference/dpzo.h"

static uint64_t rng_state;
static uint64_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static double rnd01(void) { return (double)(rnd() >> 11) * 0x1p-53; }

static int same_double(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* ---------------------------------------------------------------- sampling */
typedef dp_status (*poisson_fn)(int64_t *, int64_t *, dp_noise_key, int64_t, double, int64_t);

static dp_status mut_inclusive(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n) {
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, key, DP_PURPOSE_SAMPLING, (uint32_t)step, 0));
    *b = 0;
    for (int64_t i = 0; i < n; i++)
        if (dp_rng_uniform(&s, (uint64_t)i) <= q) idx[(*b)++] = i;
    return DP_OK;
}
static dp_status mut_lane(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n) {
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, key, DP_PURPOSE_SAMPLING, (uint32_t)step, 1));
    *b = 0;
    for (int64_t i = 0; i < n; i++)
        if (dp_rng_uniform(&s, (uint64_t)i) < q) idx[(*b)++] = i;
    return DP_OK;
}
static dp_status mut_element(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n) {
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, key, DP_PURPOSE_SAMPLING, (uint32_t)step, 0));
    *b = 0;
    for (int64_t i = 0; i < n; i++)
        if (dp_rng_uniform(&s, (uint64_t)i + 1) < q) idx[(*b)++] = i;
    return DP_OK;
}

/* Cases on which a candidate sampler disagrees with the reference (both DP-SGD's and
 * DP-ZO's). The q values include exact drawn uniforms (where < and <= differ), 1 and tiny q. */
static int poisson_disagreements(poisson_fn cand, int ncases) {
    int bad = 0;
    enum { NMAX = 3000 };
    static int64_t a[NMAX], r1[NMAX], r2[NMAX];
    for (int c = 0; c < ncases; c++) {
        dp_noise_key key = {rnd()};
        int64_t step = 1 + (int64_t)(rnd() % 5), n = (int64_t)(rnd() % NMAX);
        if (c % 7 == 0) step = (int64_t)UINT32_MAX;
        double q = rnd01();
        if (c % 5 == 0 && n > 0) { /* q equal to a drawn uniform */
            dp_stream s;
            dp_stream_secret(&s, key, DP_PURPOSE_SAMPLING, (uint32_t)step, 0);
            q = dp_rng_uniform(&s, rnd() % (uint64_t)n);
        }
        if (c % 11 == 1) q = 1.0;
        if (c % 11 == 2) q = 1e-300;
        int64_t ba = -1, b1 = -2, b2 = -3;
        dp_status sa = cand(a, &ba, key, step, q, n);
        dp_status s1 = ref_dpsgd_poisson(r1, &b1, key, step, q, n);
        dp_status s2 = ref_dpzo_poisson(r2, &b2, key, step, q, n);
        int agree = sa == DP_OK && s1 == DP_OK && s2 == DP_OK && ba == b1 && ba == b2 &&
                    memcmp(a, r1, sizeof(int64_t) * (size_t)ba) == 0 && memcmp(a, r2, sizeof(int64_t) * (size_t)ba) == 0;
        bad += !agree;
    }
    return bad;
}

static void test_poisson(void) {
    T_CHECK(poisson_disagreements(opt_poisson, 400) == 0, "engine sampler differs from the reference");
    T_CHECK(poisson_disagreements(mut_inclusive, 400) > 0, "negative control: inclusive u <= q not detected");
    T_CHECK(poisson_disagreements(mut_lane, 50) > 0, "negative control: lane 1 not detected");
    T_CHECK(poisson_disagreements(mut_element, 50) > 0, "negative control: element i + 1 not detected");
    int64_t idx[4], b;
    dp_noise_key key = {1};
    T_CHECK(opt_poisson(idx, &b, key, 0, 0.5, 4) != DP_OK, "step 0 rejected");
    T_CHECK(opt_poisson(idx, &b, key, (int64_t)UINT32_MAX + 1, 0.5, 4) != DP_OK, "step 2^32 rejected");
}

/* ---------------------------------------------------------------- clip factors */
typedef double (*factor_fn)(ref_clip_fn, double, double, double);
static double mut_min(ref_clip_fn fn, double n, double r, double g) {
    return fn == REF_CLIPFN_ABADI ? fmin(1.0, r / n) : r / (n + g);
}
static double mut_nogamma(ref_clip_fn fn, double n, double r, double g) {
    return fn == REF_CLIPFN_ABADI ? (n <= r ? 1.0 : r / n) : r / n;
}
static int factor_disagreements(factor_fn cand) {
    const double edge[] = {0.0, -0.0, 1.0, 0.5, 2.0, 1e-300, 1e300, DBL_MAX, INFINITY, NAN, 5e-324};
    int bad = 0;
    for (int fn = 0; fn < 2; fn++)
        for (int c = 0; c < 2000; c++) {
            double r = c % 3 == 0 ? 1.0 : 0.01 + 10 * rnd01();
            double n = c < 11 ? edge[c] : c % 13 == 0 ? r : c % 17 == 0 ? nextafter(r, INFINITY) : 20 * rnd01();
            double g = c % 2 ? 0.01 : rnd01();
            bad += !same_double(cand((ref_clip_fn)fn, n, r, g), ref_clip_factor((ref_clip_fn)fn, n, r, g));
        }
    return bad;
}
static void test_clip_factor(void) {
    T_CHECK(factor_disagreements(opt_clip_factor) == 0, "engine clip factor differs");
    T_CHECK(factor_disagreements(mut_min) > 0, "negative control: min(1, R/n) not detected (NaN norm)");
    T_CHECK(factor_disagreements(mut_nogamma) > 0, "negative control: automatic without gamma not detected");
}

/* ---------------------------------------------------------------- models */
enum { NMODELS = 6 };
static dp_status model_make(ref_model *m, int which) {
    ref_model_config cfg;
    ref_config_default(&cfg, which < 3 ? REF_MLP : REF_LLAMA);
    if (which == 1) cfg.nhidden = 0;
    if (which == 2) { cfg.nhidden = 3; cfg.hidden[0] = 4; cfg.hidden[1] = 5; cfg.hidden[2] = 3; cfg.in = 3; }
    if (which == 4) cfg.tied = 1;
    if (which == 5) { cfg.layers = 3; cfg.dim = 16; cfg.ffn = 8; cfg.vocab = 12; cfg.seq = 4; }
    return ref_model_init(m, &cfg, (dp_seed){7});
}

/* ---------------------------------------------------------------- groups */
typedef dp_status (*groups_fn)(ref_clip_groups *, const ref_dpsgd_config *, const ref_model *);

static int groups_equal(const ref_clip_groups *a, const ref_clip_groups *b, int nparams) {
    if (a->ngroups != b->ngroups || a->c_total != b->c_total) return 0;
    for (int k = 0; k < a->ngroups; k++)
        if (strcmp(a->name[k], b->name[k]) != 0 || a->thresh[k] != b->thresh[k]) return 0;
    for (int p = 0; p < nparams; p++)
        if (a->group_of[p] != b->group_of[p]) return 0;
    return 1;
}

static dp_status mut_moved(ref_clip_groups *g, const ref_dpsgd_config *c, const ref_model *m) {
    DP_TRY(opt_clip_groups_make(g, c, m));
    if (g->ngroups > 1) g->group_of[m->nparams - 1] = 0; /* the last tensor joins the first group */
    return DP_OK;
}
static dp_status mut_thresh(ref_clip_groups *g, const ref_dpsgd_config *c, const ref_model *m) {
    DP_TRY(opt_clip_groups_make(g, c, m));
    if (c->style == REF_CLIP_PER_LAYER && !strchr(c->groups, ':'))
        for (int k = 0; k < g->ngroups; k++) g->thresh[k] = c->clip / (double)g->ngroups;
    return DP_OK;
}

static const struct { ref_clip_style style; const char *spec; } group_cases[] = {
    {REF_CLIP_FLAT, ""}, {REF_CLIP_FLAT, "tensor"}, {REF_CLIP_PER_LAYER, ""}, {REF_CLIP_PER_LAYER, "tensor"},
    {REF_CLIP_PER_LAYER, "block"}, {REF_CLIP_PER_LAYER, "block:1,2"}, {REF_CLIP_PER_LAYER, "block:0.5,0.25,2"},
    {REF_CLIP_PER_LAYER, "block:0.5,0.25,2,1,3"}, {REF_CLIP_PER_LAYER, "block:1,1,1,1,1,1"},
    {REF_CLIP_PER_LAYER, "tensor:1,2"}, {REF_CLIP_PER_LAYER, "tensor:1,-1"}, {REF_CLIP_PER_LAYER, "foo"},
    {REF_CLIP_PER_LAYER, ":1"}, {REF_CLIP_PER_LAYER, "blocks"}, {REF_CLIP_PER_LAYER, "block:"},
    {REF_CLIP_PER_LAYER, "block:1,x"}, {REF_CLIP_PER_LAYER, "block:1,inf,1"},
    {REF_CLIP_GROUP, "all=*:1"}, {REF_CLIP_GROUP, "w=*.weight|*.w*:0.5;rest=*:2"},
    {REF_CLIP_GROUP, "attn=layers.*.w[qkvo]:0.5;rest=*:1"}, {REF_CLIP_GROUP, "emb=tok_emb:1;rest=*:1"},
    {REF_CLIP_GROUP, "a=*:0"}, {REF_CLIP_GROUP, "a=*:1;a=*:2"}, {REF_CLIP_GROUP, "a=layers.*:1"},
    {REF_CLIP_GROUP, "a=*:1;b=nomatch:1"}, {REF_CLIP_GROUP, "a=*:1;"}, {REF_CLIP_GROUP, "=*:1"},
    {REF_CLIP_GROUP, "a*:1"}, {REF_CLIP_GROUP, "a=*"}, {REF_CLIP_GROUP, "a=*:x"}, {REF_CLIP_GROUP, "a=|*|:1"},
    {REF_CLIP_GROUP, "a=*:1;;b=*:1"}, {REF_CLIP_GROUP, "a:b=*:1"}, {REF_CLIP_GROUP, "x=layers.0*:1;y=*:3"},
};
#define NGROUP_CASES ((int)(sizeof group_cases / sizeof group_cases[0]))

static void config_for(ref_dpsgd_config *c, int k, double clip) {
    ref_dpsgd_config_default(c);
    c->style = group_cases[k].style;
    snprintf(c->groups, sizeof c->groups, "%s", group_cases[k].spec);
    c->clip = clip;
}

/* Model x case pairs on which the candidate disagrees (status or, when both succeed, groups). */
static int groups_disagreements(groups_fn cand, ref_model *models, int *nok) {
    int bad = 0;
    *nok = 0;
    for (int mi = 0; mi < NMODELS; mi++)
        for (int k = 0; k < NGROUP_CASES; k++) {
            ref_dpsgd_config c;
            config_for(&c, k, k % 2 ? 1.0 : 0.3 + rnd01());
            ref_clip_groups a, r;
            dp_status sa = cand(&a, &c, &models[mi]), sr = ref_clip_groups_make(&r, &c, &models[mi]);
            if ((sa == DP_OK) != (sr == DP_OK)) bad++;
            else if (sa == DP_OK) { bad += !groups_equal(&a, &r, models[mi].nparams); ++*nok; }
            if (sa == DP_OK) opt_clip_groups_free(&a);
            if (sr == DP_OK) ref_clip_groups_free(&r);
        }
    return bad;
}

static void test_groups(ref_model *models) {
    int nok = 0;
    T_CHECK(groups_disagreements(opt_clip_groups_make, models, &nok) == 0, "engine clipping groups differ");
    T_CHECK(nok >= NMODELS * 8, "only %d accepted model x spec pairs compared", nok);
    T_CHECK(groups_disagreements(mut_moved, models, &nok) > 0, "negative control: moved parameter not detected");
    T_CHECK(groups_disagreements(mut_thresh, models, &nok) > 0, "negative control: thresholds C/G not detected");
}

/* ---------------------------------------------------------------- norms */
typedef dp_status (*norms_fn)(double *, double *, const ref_model *, const ref_clip_groups *, double *const *, int);

static dp_status mut_missing(double *norm, double *gnorm, const ref_model *m, const ref_clip_groups *g,
                             double *const *gi, int finite) {
    ref_model less = *m;
    less.nparams = m->nparams - 1; /* the last tensor is left out */
    return opt_norms_double(norm, gnorm, &less, g, gi, finite);
}

/* Worst ratio |a - b| / (2 eps_n max(a, b)) over random examples (> 1: outside the bound;
 * a non-finite disagreement counts as infinite). kind: 0 ordinary, 1 sums of squares
 * overflowing (finite norms), 2 norms beyond DBL_MAX, 3 a NaN element (finite = 0). */
static double norms_worst(norms_fn cand, ref_model *models, int *exact, int *total) {
    const double u = 0x1p-53;
    double worst = 0;
    for (int mi = 0; mi < NMODELS; mi++) {
        ref_model *m = &models[mi];
        for (int k = 0; k < NGROUP_CASES; k++) {
            ref_dpsgd_config c;
            config_for(&c, k, 1.0);
            ref_clip_groups g;
            if (ref_clip_groups_make(&g, &c, m) != DP_OK) continue;
            double **gi = calloc((size_t)m->nparams, sizeof(double *));
            double *gn_a = calloc((size_t)g.ngroups, sizeof(double)), *gn_r = calloc((size_t)g.ngroups, sizeof(double));
            for (int p = 0; gi && p < m->nparams; p++) gi[p] = calloc((size_t)m->params[p].numel, sizeof(double));
            for (int kind = 0; kind < 4; kind++) {
                double scale = kind == 1 ? 1e300 : kind == 2 ? 1.5e308 : 1e-3 + rnd01();
                for (int p = 0; p < m->nparams; p++)
                    for (int64_t e = 0; e < m->params[p].numel; e++)
                        gi[p][e] = (rnd() % 5 == 0) ? 0.0 : scale * (2 * rnd01() - 1);
                if (kind == 3) gi[m->nparams / 2][0] = NAN;
                int finite = kind != 3;
                double na = 0, nr = 0;
                dp_status sa = cand(&na, gn_a, m, &g, gi, finite), sr = ref_norms_double(&nr, gn_r, m, &g, gi, finite);
                if (sa != DP_OK || sr != DP_OK) { worst = INFINITY; continue; }
                for (int j = 0; j <= g.ngroups; j++) {
                    double a = j < g.ngroups ? gn_a[j] : na, r = j < g.ngroups ? gn_r[j] : nr;
                    int64_t n = 0;
                    for (int p = 0; p < m->nparams; p++)
                        if (j == g.ngroups || g.group_of[p] == j) n += m->params[p].numel;
                    double eps = (kind == 1 ? 4.5 * u : 2.5 * u) + (double)n * u * u;
                    ++*total;
                    if (same_double(a, r)) { ++*exact; continue; }
                    double ratio = isfinite(a) && isfinite(r) ? fabs(a - r) / (2 * eps * fmax(a, r)) : INFINITY;
                    if (ratio > worst) worst = ratio;
                }
            }
            for (int p = 0; gi && p < m->nparams; p++) free(gi[p]);
            free(gi); free(gn_a); free(gn_r);
            ref_clip_groups_free(&g);
        }
    }
    return worst;
}

static void test_norms(ref_model *models) {
    int exact = 0, total = 0;
    double w = norms_worst(opt_norms_double, models, &exact, &total);
    printf("norms: %d of %d bit-identical, worst %.3g of the bound\n", exact, total, w);
    T_CHECK(w <= 1.0, "engine norms outside the derived bound (%.3g of it)", w);
    T_CHECK(total > 1000, "only %d norms compared", total);
    exact = total = 0;
    w = norms_worst(mut_missing, models, &exact, &total);
    T_CHECK(w > 1.0, "negative control: a norm missing one tensor not detected (%.3g of the bound)", w);
}

/* ---------------------------------------------------------------- config checks */
typedef dp_status (*dpsgd_check_fn)(const ref_dpsgd_config *);
static dp_status mut_momentum(const ref_dpsgd_config *c) {
    return c->momentum == 1.0 ? DP_OK : opt_dpsgd_config_check(c);
}

static const double edge_vals[] = {0.0, -0.0, 1.0, -1.0, 0.5, 1.5, 1e-300, 1e300, INFINITY, -INFINITY, NAN, 2.0};
#define NEDGE ((int)(sizeof edge_vals / sizeof edge_vals[0]))

static void random_dpsgd_config(ref_dpsgd_config *c) {
    ref_dpsgd_config_default(c);
    double *reals[] = {&c->q, &c->clip, &c->sigma, &c->gamma, &c->lr, &c->momentum, &c->beta1, &c->beta2,
                       &c->adam_eps, &c->weight_decay};
    int64_t *ints[] = {&c->n, &c->steps, &c->micro_batches};
    const int64_t iedge[] = {0, 1, -1, 2, (int64_t)UINT32_MAX, (int64_t)UINT32_MAX + 1};
    int which = (int)(rnd() % 15);
    if (which < 10) *reals[which] = edge_vals[rnd() % NEDGE];
    else if (which < 13) *ints[which - 10] = iedge[rnd() % 6];
    else if (which == 13) { c->style = (ref_clip_style)(rnd() % 4); snprintf(c->groups, sizeof c->groups, "%s", rnd() % 2 ? "a=*:1" : ""); }
    else { c->clip_fn = (ref_clip_fn)(rnd() % 3); c->opt = (ref_optimizer)(rnd() % 3); c->precision = (ref_precision)(rnd() % 3); }
}

static int dpsgd_check_disagreements(dpsgd_check_fn cand, int *nreject) {
    int bad = 0;
    *nreject = 0;
    for (int c = 0; c < 3000; c++) {
        ref_dpsgd_config cfg;
        random_dpsgd_config(&cfg);
        int ok_a = cand(&cfg) == DP_OK, ok_r = ref_dpsgd_config_check(&cfg) == DP_OK;
        bad += ok_a != ok_r;
        *nreject += !ok_r;
    }
    return bad;
}

typedef dp_status (*dpzo_check_fn)(const ref_dpzo_hparams *);
static void dpzo_default(ref_dpzo_hparams *hp) {
    memset(hp, 0, sizeof *hp);
    hp->n_data = 64; hp->q = 0.125; hp->steps = 3; hp->clip = 1; hp->sigma = 1; hp->mech = REF_DPZO_GAUSSIAN;
    hp->phi = 1e-3; hp->lr = 1e-3; hp->weight_decay = 0; hp->n_spsa = 1;
    hp->seed = (dp_seed){1}; hp->key = (dp_noise_key){2};
}
static void random_dpzo_hparams(ref_dpzo_hparams *hp) {
    dpzo_default(hp);
    double *reals[] = {&hp->q, &hp->clip, &hp->sigma, &hp->phi, &hp->lr, &hp->weight_decay};
    const double extreme[] = {1e-320, 1e308, 1e300, 1e-308, 0x1p-1022};
    int which = (int)(rnd() % 10);
    if (which < 6) *reals[which] = rnd() % 3 ? edge_vals[rnd() % NEDGE] : extreme[rnd() % 5];
    else if (which == 6) hp->n_data = (int64_t[]){0, 1, -5, 1000000, INT64_MAX / 2}[rnd() % 5];
    else if (which == 7) hp->steps = (int64_t[]){0, 1, (int64_t)UINT32_MAX, (int64_t)UINT32_MAX + 1}[rnd() % 4];
    else if (which == 8) hp->n_spsa = (int[]){0, 1, 256, 257, -1}[rnd() % 5];
    else hp->mech = (ref_dpzo_mech)(rnd() % 3);
    if (rnd() % 4 == 0) hp->mech = REF_DPZO_LAPLACE;
}
static dp_status mut_phi(const ref_dpzo_hparams *hp) { return hp->phi == 1e-320 ? DP_OK : opt_dpzo_check(hp); }
static int dpzo_check_disagreements(dpzo_check_fn cand, int *nreject) {
    int bad = 0;
    *nreject = 0;
    for (int c = 0; c < 3000; c++) {
        ref_dpzo_hparams hp;
        random_dpzo_hparams(&hp);
        int ok_a = cand(&hp) == DP_OK, ok_r = ref_dpzo_check(&hp) == DP_OK;
        bad += ok_a != ok_r;
        *nreject += !ok_r;
    }
    return bad;
}

static void test_checks(void) {
    int nrej = 0;
    T_CHECK(dpsgd_check_disagreements(opt_dpsgd_config_check, &nrej) == 0, "engine DP-SGD config check differs");
    T_CHECK(nrej > 300 && nrej < 2900, "DP-SGD check cases: %d of 3000 rejected (want a mix)", nrej);
    T_CHECK(dpsgd_check_disagreements(mut_momentum, &nrej) > 0, "negative control: --momentum 1 accepted not detected");
    T_CHECK(dpzo_check_disagreements(opt_dpzo_check, &nrej) == 0, "engine DP-ZO check differs");
    T_CHECK(nrej > 300 && nrej < 2900, "DP-ZO check cases: %d of 3000 rejected (want a mix)", nrej);
    T_CHECK(dpzo_check_disagreements(mut_phi, &nrej) > 0, "negative control: --phi 1e-320 accepted not detected");
}

/* ---------------------------------------------------------------- DP-ZO pieces */
typedef dp_status (*dir_fn)(double *, dp_seed, int64_t, int, int, int64_t);
static dp_status mut_dir_lane(double *z, dp_seed seed, int64_t step, int p, int j, int64_t numel) {
    dp_stream s;
    DP_TRY(dp_stream_public(&s, seed, DP_PURPOSE_DPZO_DIR, (uint32_t)step, (uint32_t)p | (uint32_t)j << 8));
    dp_rng_fill_gaussian(z, &s, 0, (size_t)numel);
    return DP_OK;
}
static int dir_disagreements(dir_fn cand) {
    int bad = 0;
    double a[300], r[300];
    for (int c = 0; c < 300; c++) {
        dp_seed seed = {rnd()};
        int64_t step = 1 + (int64_t)(rnd() % 4), numel = 1 + (int64_t)(rnd() % 300);
        int p = c % 9 == 0 ? REF_DPZO_MAX_PARAMS - 1 : (int)(rnd() % 40), j = c % 7 == 0 ? REF_DPZO_MAX_N - 1 : (int)(rnd() % 4);
        dp_status sa = cand(a, seed, step, p, j, numel), sr = ref_dpzo_direction(r, seed, step, p, j, numel);
        bad += sa != sr || (sa == DP_OK && memcmp(a, r, sizeof(double) * (size_t)numel) != 0);
    }
    return bad;
}

typedef dp_status (*noise_fn)(double *, const ref_dpzo_hparams *, int64_t);
static dp_status mut_noise(double *noise, const ref_dpzo_hparams *hp, int64_t step) {
    DP_TRY(opt_dpzo_noise(noise, hp, step));
    if (hp->mech == REF_DPZO_GAUSSIAN)
        for (int j = 0; j < hp->n_spsa; j++) noise[j] /= sqrt((double)hp->n_spsa);
    return DP_OK;
}
static int noise_scalar_disagreements(noise_fn cand) {
    int bad = 0;
    double na[REF_DPZO_MAX_N], sum[REF_DPZO_MAX_N], sa_[REF_DPZO_MAX_N];
    for (int c = 0; c < 200; c++) {
        ref_dpzo_hparams hp;
        dpzo_default(&hp);
        hp.key = (dp_noise_key){rnd()};
        hp.mech = c % 2 ? REF_DPZO_LAPLACE : REF_DPZO_GAUSSIAN;
        hp.n_spsa = c % 5 == 0 ? REF_DPZO_MAX_N : 1 + (int)(rnd() % 6);
        hp.sigma = c % 13 == 0 ? 0.0 : 0.1 + 3 * rnd01();
        hp.clip = 0.1 + rnd01();
        int64_t step = 1 + (int64_t)(rnd() % 100);
        if (cand(na, &hp, step) != DP_OK) { bad++; continue; }
        for (int j = 0; j < hp.n_spsa; j++) sum[j] = (2 * rnd01() - 1) * hp.clip * 10;
        if (opt_dpzo_scalars(sa_, &hp, sum, na, step) != DP_OK) { bad++; continue; }
        for (int j = 0; j < hp.n_spsa; j++) {
            double nr, sr;
            if (ref_dpzo_noise(&nr, &hp, step, j) != DP_OK || ref_dpzo_scalar_(&sr, &hp, sum[j], nr, step, j) != DP_OK) { bad++; break; }
            bad += !same_double(na[j], nr) || !same_double(sa_[j], sr);
        }
    }
    return bad;
}

typedef dp_status (*update_fn)(double *const *, const int64_t *, int, dp_seed, int64_t, const double *, int, double, double);
static dp_status mut_update(double *const *theta, const int64_t *numel, int np, dp_seed seed, int64_t step,
                            const double *s, int n, double lr, double wd) {
    double sc[REF_DPZO_MAX_N];
    for (int j = 0; j < n; j++) sc[j] = s[j] * n; /* u instead of u / n */
    return opt_dpzo_update(theta, numel, np, seed, step, sc, n, lr, wd);
}
typedef dp_status (*digest_fn)(char *, double *const *, const int64_t *, int);
static dp_status mut_digest(char hex[65], double *const *theta, const int64_t *numel, int np) {
    int64_t total = 0, k = 0;
    for (int p = 0; p < np; p++) total += numel[p];
    unsigned char *buf = malloc((size_t)total * 8 + 1);
    if (!buf) return DP_ERR_NOMEM;
    for (int p = 0; p < np; p++)
        for (int64_t e = 0; e < numel[p]; e++) {
            uint64_t bits;
            memcpy(&bits, &theta[p][e], 8);
            for (int b = 7; b >= 0; b--) buf[k++] = (unsigned char)(bits >> (8 * b)); /* big-endian */
        }
    dp_status st = dp_sha256_buf_hex(hex, buf, (size_t)k);
    free(buf);
    return st;
}
/* Update and digest of random thetas on every model: exact theta bits and equal digests. */
static int update_disagreements(update_fn upd, digest_fn dig, ref_model *models) {
    int bad = 0;
    for (int mi = 0; mi < NMODELS; mi++) {
        ref_model *m = &models[mi];
        int64_t numel[64];
        if (m->nparams > 64) { bad++; continue; }
        for (int p = 0; p < m->nparams; p++) numel[p] = m->params[p].numel;
        double **ta = opt_f64_arrays_alloc(numel, m->nparams), **tr = opt_f64_arrays_alloc(numel, m->nparams);
        if (!ta || !tr) { bad++; continue; }
        for (int rep = 0; rep < 3; rep++) {
            for (int p = 0; p < m->nparams; p++)
                for (int64_t e = 0; e < numel[p]; e++) ta[p][e] = tr[p][e] = 2 * rnd01() - 1;
            int n = rep == 0 ? 1 : 1 + (int)(rnd() % 5);
            double sc[8];
            for (int j = 0; j < n; j++) sc[j] = 4 * rnd01() - 2;
            dp_seed seed = {rnd()};
            double lr = rnd01(), wd = rep == 2 ? 0.1 * rnd01() : 0.0;
            dp_status sa = upd(ta, numel, m->nparams, seed, 1 + rep, sc, n, lr, wd);
            dp_status sr = ref_dpzo_update(tr, numel, m->nparams, seed, 1 + rep, sc, n, lr, wd);
            bad += sa != sr;
            for (int p = 0; p < m->nparams; p++) bad += memcmp(ta[p], tr[p], sizeof(double) * (size_t)numel[p]) != 0;
            char ha[65], hr[65];
            if (dig(ha, ta, numel, m->nparams) != DP_OK || ref_dpzo_theta_sha256(hr, tr, numel, m->nparams) != DP_OK) bad++;
            else bad += strcmp(ha, hr) != 0;
        }
        opt_f64_arrays_free(ta, m->nparams);
        opt_f64_arrays_free(tr, m->nparams);
    }
    return bad;
}

static void test_dpzo(ref_model *models) {
    T_CHECK(dir_disagreements(opt_dpzo_direction) == 0, "engine DP-ZO directions differ");
    T_CHECK(dir_disagreements(mut_dir_lane) > 0, "negative control: lane p | j << 8 not detected");
    T_CHECK(noise_scalar_disagreements(opt_dpzo_noise) == 0, "engine DP-ZO noise or scalars differ");
    T_CHECK(noise_scalar_disagreements(mut_noise) > 0, "negative control: Gaussian noise without sqrt(n) not detected");
    T_CHECK(update_disagreements(opt_dpzo_update, opt_theta_sha256, models) == 0, "engine DP-ZO update or digest differs");
    T_CHECK(update_disagreements(mut_update, opt_theta_sha256, models) > 0, "negative control: update without / n not detected");
    T_CHECK(update_disagreements(opt_dpzo_update, mut_digest, models) > 0, "negative control: big-endian digest not detected");
    int bad = 0;
    const double cs[] = {1.0, 0.5, 3.0, 1e-300};
    for (int k = 0; k < 4000; k++) {
        double c = cs[k % 4], d = k < 8 ? (double[]){0.0, -0.0, c, -c, nextafter(c, 0), -nextafter(c, 9), 1e308, -1e308}[k]
                                        : (2 * rnd01() - 1) * 3 * c;
        double a = opt_dpzo_clip(d, c), r = ref_dpzo_clip(d, c);
        bad += memcmp(&a, &r, sizeof a) != 0; /* bitwise: -0.0 stays -0.0 */
    }
    T_CHECK(bad == 0, "engine DP-ZO clip differs on %d inputs", bad);
    /* the noise of a step depends on nothing but (key, step, j): an update to step 0 is refused */
    ref_dpzo_hparams hp;
    dpzo_default(&hp);
    double z[2];
    T_CHECK(opt_dpzo_noise(z, &hp, 0) != DP_OK, "step 0 refused");
}

int main(void) {
    rng_state = t_seed(20261123);
    ref_model models[NMODELS];
    memset(models, 0, sizeof models);
    for (int i = 0; i < NMODELS; i++) T_OK(model_make(&models[i], i));
    test_poisson();
    test_clip_factor();
    test_groups(models);
    test_norms(models);
    test_checks();
    test_dpzo(models);
    for (int i = 0; i < NMODELS; i++) ref_model_free(&models[i]);
    return t_finish();
}

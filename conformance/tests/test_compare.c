/* conformance/tests/test_compare.c — conf_compare_sets / conf_compare_paths on
 * synthetic DP-SGD exports built here in double (a consistent step: per-example
 * gradients, norms, abadi clip factors, clipped sums, noise, private gradient, SGD
 * update, losses). Each perturbation must be caught (FAIL naming the tensor) and
 * each legitimate difference (f32 rounding of the candidate, a different summation
 * order) must pass. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/philox.h"
#include "common/rng.h"
#include "common/safetensors.h"
#include "common/test.h"
#include "conformance/compare/compare_int.h"
#include "conformance/compare/compare.h"
#include "conformance/conform/conform.h"

#define B 6
#define NW 12 /* w [3, 4] */
#define NB 4  /* b [4] */

typedef struct {
    double gw[B][NW], gb[B][NB], norm[B], cf[B], loss[B];
    double w[NW], b[NB], csw[NW], csb[NB], nw[NW], nb[NB], pgw[NW], pgb[NB], w2[NW], b2[NB];
    int64_t idx[B];
} step_t;

static const double C = 1.0, SIGMA = 0.7, QN = 4.0, LR = 0.1;

static void make_step(step_t *s, uint64_t seed, int clip_after_sum, int wrong_noise_lane, int realized_div) {
    dp_stream st;
    dp_stream_public(&st, (dp_seed){seed}, dp_purpose_from_name("test"), 1, 0);
    uint64_t k = 0;
    for (int i = 0; i < B; i++) s->idx[i] = 3 * i + 1;
    for (int e = 0; e < NW; e++) s->w[e] = 0.02 * dp_rng_gaussian(&st, k++);
    for (int e = 0; e < NB; e++) s->b[e] = 0.0;
    for (int i = 0; i < B; i++) {
        double ss = 0, sc = (i % 2) ? 3.0 : 0.2; /* half the examples are clipped */
        for (int e = 0; e < NW; e++) { s->gw[i][e] = sc * dp_rng_gaussian(&st, k++); ss += s->gw[i][e] * s->gw[i][e]; }
        for (int e = 0; e < NB; e++) { s->gb[i][e] = sc * dp_rng_gaussian(&st, k++); ss += s->gb[i][e] * s->gb[i][e]; }
        s->norm[i] = sqrt(ss);
        s->cf[i] = s->norm[i] <= C ? 1.0 : C / s->norm[i];
        s->loss[i] = 2.3 + 0.1 * dp_rng_gaussian(&st, k++);
    }
    double tot = 0;
    for (int e = 0; e < NW; e++) {
        s->csw[e] = 0;
        for (int i = 0; i < B; i++) s->csw[e] += s->cf[i] * s->gw[i][e];
    }
    for (int e = 0; e < NB; e++) {
        s->csb[e] = 0;
        for (int i = 0; i < B; i++) s->csb[e] += s->cf[i] * s->gb[i][e];
    }
    if (clip_after_sum) { /* the bug: clip the sum instead of each example */
        for (int e = 0; e < NW; e++) { double g = 0; for (int i = 0; i < B; i++) g += s->gw[i][e]; s->csw[e] = g; tot += g * g; }
        for (int e = 0; e < NB; e++) { double g = 0; for (int i = 0; i < B; i++) g += s->gb[i][e]; s->csb[e] = g; tot += g * g; }
        double f = sqrt(tot) <= C ? 1 : C / sqrt(tot);
        for (int e = 0; e < NW; e++) s->csw[e] *= f;
        for (int e = 0; e < NB; e++) s->csb[e] *= f;
    }
    dp_stream nz;
    dp_stream_secret(&nz, (dp_noise_key){seed ^ 0x5eedULL}, dp_purpose_from_name("noise"), 1, wrong_noise_lane ? 7 : 0);
    for (int e = 0; e < NW; e++) s->nw[e] = SIGMA * C * dp_rng_gaussian(&nz, (uint64_t)e);
    dp_stream_secret(&nz, (dp_noise_key){seed ^ 0x5eedULL}, dp_purpose_from_name("noise"), 1, 1);
    for (int e = 0; e < NB; e++) s->nb[e] = SIGMA * C * dp_rng_gaussian(&nz, (uint64_t)e);
    double d = realized_div ? (double)B : QN;
    for (int e = 0; e < NW; e++) { s->pgw[e] = (s->csw[e] + s->nw[e]) / d; s->w2[e] = s->w[e] - LR * s->pgw[e]; }
    for (int e = 0; e < NB; e++) { s->pgb[e] = (s->csb[e] + s->nb[e]) / d; s->b2[e] = s->b[e] - LR * s->pgb[e]; }
}

/* Build the export set; dt = storage dtype of the float tensors (F32 rounds like an f32 candidate). */
static void make_set(dp_tensor_set *ts, const step_t *s, dp_dtype dt, const char *skip) {
    dp_tset_init(ts);
    int64_t sb[1] = {B}, sw[2] = {3, 4}, sbias[1] = {NB}, sgw[3] = {B, 3, 4}, sgb[2] = {B, NB};
    struct { const char *name; const double *d; int nd; const int64_t *sh; } t[] = {
        {"params.w", s->w, 2, sw}, {"params.b", s->b, 1, sbias},
        {"per_sample.loss", s->loss, 1, sb}, {"per_sample.norm", s->norm, 1, sb},
        {"per_sample.clip_factor", s->cf, 1, sb},
        {"per_sample.grad.w", &s->gw[0][0], 3, sgw}, {"per_sample.grad.b", &s->gb[0][0], 2, sgb},
        {"step.clipped_sum.w", s->csw, 2, sw}, {"step.clipped_sum.b", s->csb, 1, sbias},
        {"step.noise.w", s->nw, 2, sw}, {"step.noise.b", s->nb, 1, sbias},
        {"step.private_grad.w", s->pgw, 2, sw}, {"step.private_grad.b", s->pgb, 1, sbias},
        {"params_after.w", s->w2, 2, sw}, {"params_after.b", s->b2, 1, sbias},
    };
    dp_tset_add_raw(ts, "batch.indices", DP_I64, s->idx, 1, sb);
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        if (skip && strcmp(skip, t[i].name) == 0) continue;
        dp_tensor x, y;
        dp_tensor_alloc(&x, DP_F64, t[i].nd, t[i].sh);
        memcpy(x.data, t[i].d, dp_tensor_nbytes(&x));
        if (dt != DP_F64) { dp_tensor_convert(&y, &x, dt); dp_tset_add(ts, t[i].name, &y); dp_tensor_free(&y); }
        else dp_tset_add(ts, t[i].name, &x);
        dp_tensor_free(&x);
    }
    dp_tset_set_meta(ts, "sigma", "0.7");
    dp_tset_set_meta(ts, "clip", "1");
    dp_tset_set_meta(ts, "step", "1");
}

static conf_status run_cmp(const dp_tensor_set *r, const dp_tensor_set *c, dp_dtype dt, conf_cmp_result *res) {
    conf_cmp_opts o;
    conf_cmp_opts_default(&o);
    o.cand_dtype = dt;
    conf_cmp_result_init(res);
    T_OK(conf_compare_sets(res, r, c, &o, ""));
    return res->status;
}

static const conf_tensor_result *find(const conf_cmp_result *r, const char *name) {
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->items[i].name, name) == 0) return &r->items[i];
    return NULL;
}

int main(void) {
    uint64_t seed = t_seed(20240601);
    step_t s, bug;
    make_step(&s, seed, 0, 0, 0);
    dp_tensor_set ref, cand;
    make_set(&ref, &s, DP_F64, NULL);
    conf_cmp_result r;

    /* identical: PASS with zero budget used, every mandatory tensor compared in order */
    make_set(&cand, &s, DP_F64, NULL);
    T_CHECK(run_cmp(&ref, &cand, DP_F64, &r) == CONF_PASS, "identical exports: %s", conf_status_name(r.status));
    T_CHECK(r.worst_frac == 0, "identical exports use %g of the budget", r.worst_frac);
    const char *order[] = {"batch.indices", "per_sample.norm", "per_sample.clip_factor", "step.clipped_sum.w",
                           "step.noise.w", "step.private_grad.w", "params_after.w", "per_sample.loss"};
    size_t last = 0;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        size_t at = r.n;
        for (size_t j = 0; j < r.n; j++)
            if (strcmp(r.items[j].name, order[i]) == 0) at = j;
        T_CHECK(at < r.n && at >= last, "%s compared out of order (at %zu, previous %zu)", order[i], at, last);
        if (at < r.n) last = at;
    }
    conf_cmp_result_free(&r);
    dp_tset_free(&cand);

    /* f32 candidate: rounding to f32 passes with --dtype f32, fails with f64 */
    make_set(&cand, &s, DP_F32, NULL);
    T_CHECK(run_cmp(&ref, &cand, DP_F32, &r) == CONF_PASS, "f32-rounded candidate under f32 rules: %s (%s)",
            conf_status_name(r.status), r.first_fail);
    T_CHECK(r.worst_frac > 0 && r.worst_frac <= 1, "f32 budget used %g", r.worst_frac);
    if (getenv("CONF_VERBOSE")) conf_cmp_print(&r, stdout, 0);
    conf_cmp_result_free(&r);
    T_CHECK(run_cmp(&ref, &cand, DP_F64, &r) == CONF_FAIL, "f32-rounded candidate under f64 rules must FAIL");
    conf_cmp_result_free(&r);
    dp_tset_free(&cand);

    /* a reordered sum (reverse order) changes the last bits only: PASS under f64 rules */
    {
        step_t s2 = s;
        for (int e = 0; e < NW; e++) { s2.csw[e] = 0; for (int i = B - 1; i >= 0; i--) s2.csw[e] += s.cf[i] * s.gw[i][e]; }
        make_set(&cand, &s2, DP_F64, NULL);
        T_CHECK(run_cmp(&ref, &cand, DP_F64, &r) == CONF_PASS, "reversed summation order: %s", conf_status_name(r.status));
        conf_cmp_result_free(&r);
        dp_tset_free(&cand);
    }

    /* injected bugs, each caught with a FAIL naming the tensor */
    struct { int cas, lane, div; const char *tensor; const char *what; } bugs[] = {
        {1, 0, 0, "step.clipped_sum.", "clip after sum"},
        {0, 1, 0, "step.noise.w", "noise from the wrong stream lane"},
        {0, 0, 1, "step.private_grad.", "realized batch size as divisor"},
    };
    for (size_t i = 0; i < sizeof bugs / sizeof bugs[0]; i++) {
        make_step(&bug, seed, bugs[i].cas, bugs[i].lane, bugs[i].div);
        make_set(&cand, &bug, DP_F64, NULL);
        T_CHECK(run_cmp(&ref, &cand, DP_F64, &r) == CONF_FAIL, "%s not caught", bugs[i].what);
        T_CHECK(strncmp(r.first_fail, bugs[i].tensor, strlen(bugs[i].tensor)) == 0, "%s: first FAIL is '%s', expected %s*",
                bugs[i].what, r.first_fail, bugs[i].tensor);
        conf_cmp_result_free(&r);
        dp_tset_free(&cand);
    }

    /* a missing tensor is a FAIL naming it */
    make_set(&cand, &s, DP_F64, "step.noise.b");
    T_CHECK(run_cmp(&ref, &cand, DP_F64, &r) == CONF_FAIL, "missing noise tensor not caught");
    const conf_tensor_result *t = find(&r, "step.noise.b");
    T_CHECK(t && t->status == CONF_FAIL && strstr(t->msg, "step.noise.b"), "missing tensor message: %s", t ? t->msg : "none");
    conf_cmp_result_free(&r);
    dp_tset_free(&cand);

    /* a wrong batch index is an exact-comparison FAIL */
    {
        step_t s2 = s;
        s2.idx[2] += 1;
        make_set(&cand, &s2, DP_F64, NULL);
        T_CHECK(run_cmp(&ref, &cand, DP_F64, &r) == CONF_FAIL && strcmp(r.first_fail, "batch.indices") == 0,
                "wrong batch index: first fail '%s'", r.first_fail);
        conf_cmp_result_free(&r);
        dp_tset_free(&cand);
    }

    /* noise shares: element-wise noise skipped, private gradient with the candidate's noise
       substituted passes; a wrong private gradient under substitution still fails */
    {
        step_t s2 = s;
        for (int e = 0; e < NW; e++) { s2.nw[e] = -s.nw[e]; s2.pgw[e] = (s.csw[e] + s2.nw[e]) / QN; s2.w2[e] = s.w[e] - LR * s2.pgw[e]; }
        make_set(&cand, &s2, DP_F64, NULL);
        conf_cmp_opts o;
        conf_cmp_opts_default(&o);
        o.noise_statistical = 1;
        conf_cmp_result_init(&r);
        T_OK(conf_compare_sets(&r, &ref, &cand, &o, ""));
        T_CHECK(r.status == CONF_PASS, "shares with substitution: %s (%s)", conf_status_name(r.status), r.first_fail);
        t = find(&r, "step.noise.w");
        T_CHECK(t && t->status == CONF_SKIPPED, "noise not skipped under shares");
        conf_cmp_result_free(&r);
        o.noise_statistical = 0;
        conf_cmp_result_init(&r);
        T_OK(conf_compare_sets(&r, &ref, &cand, &o, ""));
        T_CHECK(r.status == CONF_FAIL && strcmp(r.first_fail, "step.noise.w") == 0, "negated noise: first fail '%s'", r.first_fail);
        conf_cmp_result_free(&r);
        dp_tset_free(&cand);
        s2.pgw[3] *= 1.5;
        make_set(&cand, &s2, DP_F64, NULL);
        o.noise_statistical = 1;
        conf_cmp_result_init(&r);
        T_OK(conf_compare_sets(&r, &ref, &cand, &o, ""));
        T_CHECK(r.status == CONF_FAIL && strcmp(r.first_fail, "step.private_grad.w") == 0,
                "wrong private gradient under shares: first fail '%s'", r.first_fail);
        conf_cmp_result_free(&r);
        dp_tset_free(&cand);
    }

    /* noise shares recomputed element-wise from the reference's noise_key: the correct sum
       of R = 3 shares PASSes; negative controls: shares without the 1/sqrt(R) factor, full-scale
       noise on every rank (R x the single draw), and an unknown rank count FAIL at step.noise */
    {
        char kbuf[32];
        snprintf(kbuf, sizeof kbuf, "%llu", (unsigned long long)(seed ^ 0x5eedULL));
        dp_tset_set_meta(&ref, "noise_key", kbuf);
        const int R = 3;
        for (int mode = 0; mode < 4; mode++) {
            step_t s2 = s;
            for (int p = 0; p < 2; p++) {
                double *z = p ? s2.nb : s2.nw;
                const double *z0 = p ? s.nb : s.nw;
                int ne = p ? NB : NW;
                for (int e = 0; e < ne; e++) {
                    double sum = 0;
                    for (int r = 0; r < R; r++) {
                        double sd = mode == 1 ? SIGMA * C : SIGMA * C / sqrt((double)R);
                        sum += sd * dp_stream_gaussian(seed ^ 0x5eedULL, DP_PURPOSE_NOISE, 1,
                                                       (uint32_t)p | ((uint32_t)(r + 1) << 16), (uint64_t)e);
                    }
                    z[e] = mode == 2 ? R * z0[e] : sum;
                }
            }
            for (int e = 0; e < NW; e++) { s2.pgw[e] = (s.csw[e] + s2.nw[e]) / QN; s2.w2[e] = s.w[e] - LR * s2.pgw[e]; }
            for (int e = 0; e < NB; e++) { s2.pgb[e] = (s.csb[e] + s2.nb[e]) / QN; s2.b2[e] = s.b[e] - LR * s2.pgb[e]; }
            make_set(&cand, &s2, DP_F64, NULL);
            if (mode != 3) dp_tset_set_meta(&cand, "ranks", "3");
            conf_cmp_opts o;
            conf_cmp_opts_default(&o);
            o.noise_statistical = 1;
            conf_cmp_result_init(&r);
            T_OK(conf_compare_sets(&r, &ref, &cand, &o, ""));
            t = find(&r, "step.noise.w");
            if (mode == 0) {
                T_CHECK(r.status == CONF_PASS && t && t->status == CONF_PASS,
                        "correct shares: %s (%s), noise %s", conf_status_name(r.status), r.first_fail,
                        t ? conf_status_name(t->status) : "absent");
            } else {
                T_CHECK(r.status == CONF_FAIL && strcmp(r.first_fail, "step.noise.w") == 0,
                        "shares negative control %d: %s, first fail '%s'", mode, conf_status_name(r.status), r.first_fail);
            }
            conf_cmp_result_free(&r);
            if (mode == 3) { /* the rank count given as an option instead */
                o.noise_ranks = 3;
                conf_cmp_result_init(&r);
                T_OK(conf_compare_sets(&r, &ref, &cand, &o, ""));
                T_CHECK(r.status == CONF_PASS, "correct shares with --noise-ranks 3: %s (%s)", conf_status_name(r.status),
                        r.first_fail);
                conf_cmp_result_free(&r);
            }
            dp_tset_free(&cand);
        }
        dp_tset_set_meta(&ref, "noise_key", ""); /* not a key: later checks see no key */
    }

    /* a shape mismatch is a FAIL, not a crash */
    {
        dp_tensor_set c2;
        make_set(&c2, &s, DP_F64, "per_sample.norm");
        double z[3] = {1, 2, 3};
        int64_t sh[1] = {3};
        dp_tset_add_f64(&c2, "per_sample.norm", z, 1, sh);
        T_CHECK(run_cmp(&ref, &c2, DP_F64, &r) == CONF_FAIL && strcmp(r.first_fail, "per_sample.norm") == 0,
                "shape mismatch: '%s'", r.first_fail);
        conf_cmp_result_free(&r);
        dp_tset_free(&c2);
    }

    /* directory mode: two steps written to disk; the second step's candidate is missing */
    {
        mkdir("ref", 0755);
        mkdir("cand", 0755);
        T_OK(dp_st_write("ref/step-000001.safetensors", &ref));
        dp_tset_set_meta(&ref, "step", "2");
        T_OK(dp_st_write("ref/step-000002.safetensors", &ref));
        make_set(&cand, &s, DP_F32, NULL);
        T_OK(dp_st_write("cand/step-000001.safetensors", &cand));
        conf_cmp_opts o;
        conf_cmp_opts_default(&o);
        o.cand_dtype = DP_F32;
        conf_cmp_result_init(&r);
        T_OK(conf_compare_paths(&r, "ref", "cand", &o));
        T_CHECK(r.status == CONF_FAIL && strstr(r.first_fail, "step-000002/"), "missing step: first fail '%s'", r.first_fail);
        conf_cmp_result_free(&r);
        T_OK(dp_st_write("cand/step-000002.safetensors", &cand));
        conf_cmp_result_init(&r);
        T_OK(conf_compare_paths(&r, "ref", "cand", &o));
        T_CHECK(r.status != CONF_FAIL, "two f32 steps: %s (%s)", conf_status_name(r.status), r.first_fail);
        T_CHECK(find(&r, "step-000002/params.w") != NULL, "step 2 parameters not compared");
        conf_cmp_result_free(&r);
        /* a file and a directory: bad input */
        conf_cmp_result_init(&r);
        T_CHECK(conf_compare_paths(&r, "ref", "cand/step-000001.safetensors", &o) == DP_ERR_INVALID, "file vs dir accepted");
        T_CHECK(conf_compare_paths(&r, "nonexistent.safetensors", "cand/step-000001.safetensors", &o) != DP_OK,
                "missing file accepted");
        conf_cmp_result_free(&r);
        dp_tset_free(&cand);
    }
    /* clip coverage (conf_clip_mix_check): a reference that never clips, or clips everyone, or
     * clips only within the margin, is flagged; one clipped and one unclipped example in the same
     * step is not; automatic factors must spread and differ from 1; no factors: not applicable */
    {
        static const struct { const char *fn; double f[2][3]; int want; const char *what; } mc[] = {
            {"abadi", {{1, 1, 1}, {1, 1, 1}}, 0, "never clips"},
            {"abadi", {{0.5, 0.7, 0.9}, {0.8, 0.6, 0.5}}, 0, "always clips"},
            {"abadi", {{1, 1, 1}, {0.5, 0.5, 0.5}}, 0, "clipped and unclipped only in different steps"},
            {"abadi", {{1, 0.995, 1}, {1, 1, 1}}, 0, "clipped only within the margin"},
            {"abadi", {{1, 1, 1}, {1, 0.9, 1}}, 1, "one clipped and one unclipped in step 2"},
            {"automatic", {{1.14, 1.14, 1.14}, {1.14, 1.14, 1.14}}, 0, "automatic: one shared factor"},
            {"automatic", {{1.001, 1.004, 1.008}, {1, 1.002, 1.009}}, 0, "automatic: factors within the margin of 1"},
            {"automatic", {{0.5, 0.6, 0.55}, {0.5, 0.5, 0.5}}, 1, "automatic: spread factors"},
        };
        for (size_t i = 0; i < sizeof mc / sizeof mc[0]; i++) {
            char dir[64], p[128], msg[400] = "";
            snprintf(dir, sizeof dir, "mix%zu", i);
            mkdir(dir, 0755);
            for (int k = 0; k < 2; k++) {
                dp_tensor_set ts;
                dp_tset_init(&ts);
                int64_t sh = 3;
                T_OK(dp_tset_add_f64(&ts, k ? "per_sample.clip_factor.layers.0" : "per_sample.clip_factor.layers.1",
                                     mc[i].f[k], 1, &sh));
                T_OK(dp_tset_set_meta(&ts, "clip_fn", mc[i].fn));
                snprintf(p, sizeof p, "%s/step-%06d.safetensors", dir, k + 1);
                T_OK(dp_st_write(p, &ts));
                dp_tset_free(&ts);
            }
            int got = conf_clip_mix_check(msg, sizeof msg, dir);
            T_CHECK(got == mc[i].want, "clip coverage, %s: got %d, expected %d (%s)", mc[i].what, got, mc[i].want, msg);
            if (got == 0) T_CHECK(strstr(msg, "retune") != NULL, "clip coverage message: %s", msg);
        }
        /* DP-ZO: |l+ - l-| against C = 1 */
        static const double lp[2][3] = {{0.3, 0.9, 2.5}, {0.1, 0.2, 0.3}}, lm[2][3] = {{0.2, 0.1, 0.5}, {0.2, 0.1, 0.2}};
        for (int v = 0; v < 2; v++) {
            char dir[64], msg[400] = "";
            snprintf(dir, sizeof dir, "mixzo%d", v);
            mkdir(dir, 0755);
            dp_tensor_set ts;
            dp_tset_init(&ts);
            int64_t sh = 3;
            T_OK(dp_tset_add_f64(&ts, "per_sample.loss_plus", lp[v], 1, &sh));
            T_OK(dp_tset_add_f64(&ts, "per_sample.loss_minus", lm[v], 1, &sh));
            T_OK(dp_tset_set_meta(&ts, "clip", "1"));
            char p[128];
            snprintf(p, sizeof p, "%s/step-000001.safetensors", dir);
            T_OK(dp_st_write(p, &ts));
            dp_tset_free(&ts);
            int got = conf_clip_mix_check(msg, sizeof msg, dir);
            T_CHECK(got == (v == 0), "DP-ZO clip coverage %d: got %d (%s)", v, got, msg);
        }
        char msg[400] = "";
        T_CHECK(conf_clip_mix_check(msg, sizeof msg, "ref") == -1, "an export without clip factors: %s", msg);
    }
    dp_tset_free(&ref);
    /* a bound that is NaN or negative is a defect of the tolerance model, not a verdict (issue 29
     * item 13): the tensor is INCOMPLETE naming the element, never FAIL with "inf%" */
    {
        int64_t shape[1] = {3};
        dp_tensor a, b;
        T_OK(dp_tensor_alloc(&a, DP_F64, 1, shape));
        T_OK(dp_tensor_alloc(&b, DP_F64, 1, shape));
        double *x = a.data, *y = b.data;
        for (int i = 0; i < 3; i++) { x[i] = i; y[i] = i + 1e-9; }
        const double nanb[3] = {1e-6, NAN, 1e-6}, negb[3] = {1e-6, 1e-6, -1e-6}, okb[3] = {1e-6, 1e-6, 1e-6};
        conf_cmp_result r;
        conf_cmp_result_init(&r);
        T_OK(conf_cmp_elems(&r, "", "t", &a, &b, NULL, nanb, 0.5));
        T_CHECK(r.incomplete == 1 && r.n == 1 && r.items[0].status == CONF_SKIPPED && strstr(r.incomplete_why, "element 1"),
                "NaN bound: INCOMPLETE naming element 1 (%d, %s)", r.incomplete, r.incomplete_why);
        conf_cmp_result_free(&r);
        conf_cmp_result_init(&r);
        T_OK(conf_cmp_elems(&r, "", "t", &a, &b, NULL, negb, 0.5));
        T_CHECK(r.incomplete == 1 && r.items[0].status != CONF_FAIL && strstr(r.incomplete_why, "element 2"),
                "negative bound: INCOMPLETE (%s)", r.incomplete_why);
        conf_cmp_result_free(&r);
        conf_cmp_result_init(&r); /* control: a finite bound compares */
        T_OK(conf_cmp_elems(&r, "", "t", &a, &b, NULL, okb, 0.5));
        T_CHECK(r.incomplete == 0 && r.items[0].status == CONF_PASS, "finite bound: PASS");
        conf_cmp_result_free(&r);
        /* a NaN bound where it decides nothing (a dropped example: NaN on both sides; equal values)
         * is no defect: PASS (conformance/tests/test_compare_nofalse.c's dropped examples) */
        x[1] = y[1] = NAN;
        x[2] = y[2] = 2;
        const double dropb[3] = {1e-6, NAN, NAN};
        conf_cmp_result_init(&r);
        T_OK(conf_cmp_elems(&r, "", "t", &a, &b, NULL, dropb, 0.5));
        T_CHECK(r.incomplete == 0 && r.items[0].status == CONF_PASS, "NaN bound that decides nothing: PASS (%s)",
                r.incomplete_why);
        conf_cmp_result_free(&r);
        y[0] = NAN; /* the candidate NaN where the reference is finite: FAIL, whatever the bound */
        conf_cmp_result_init(&r);
        T_OK(conf_cmp_elems(&r, "", "t", &a, &b, NULL, dropb, 0.5));
        T_CHECK(r.incomplete == 0 && r.items[0].status == CONF_FAIL, "a NaN candidate value: FAIL");
        conf_cmp_result_free(&r);
        dp_tensor_free(&a);
        dp_tensor_free(&b);
    }
    return t_finish();
}

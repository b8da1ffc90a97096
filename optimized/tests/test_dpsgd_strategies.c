/* optimized/tests/test_dpsgd_strategies.c — every strategy, clipping style and clip
 * function of the engine against the exact reference (ref_dpsgd_step), in process, on
 * the mlp, the llama and the tied llama, with micro-batches and an empty batch; the llamas
 * also under the CP layout (one-rank CP group: the CP norm source and state layout).
 *
 * Compared per step: batch indices (exact), per-example losses, norms, group norms,
 * clip factors, per-sample gradients, clipped sums, noise (exact: same Philox element,
 * same scale, added to zero), private gradients, parameters after the update.
 * Tolerance (docs/engine.md "Test tolerances"): per tensor,
 *     max_i |opt_i - ref_i| <= K * gamma_m * max(max_i |ref_i|, tiny)
 * with gamma_m = m u / (1 - m u), u = 2^-53 (f64), m = the number of parameters of the
 * model (an upper bound on the length of any chain of dependent roundings in one
 * step), K = 16 (the amplification of the tanh/softmax/RMSNorm layers, all 1-Lipschitz
 * up to the constants bounded in docs/engine.md). A negative control (the injected
 * clip-after-sum bug) must break the same comparison. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "optimized/dpsgd.h"
#include "reference/dpsgd.h"

/* Crafted inputs (docs/engine.md "Dropped and overflowing examples"): 0 none; 1 example 3
 * has a NaN input (mlp) or uses the only token whose embedding row is NaN (llama): NaN
 * loss and gradient, dropped; 2 / 3 (mlp without hidden layers): example 2 has input
 * [X, 0, ...] and the weights make its gradient rows (X, -X): X = 1e300 (squares
 * overflow, finite norm X sqrt 2) and X = 1.5e308 (norm > DBL_MAX: inf, c = 0). */
static int g_craft = 0;
/* Context parallelism in one process (docs/longshield.md: --cp 1 with a --cp-* option runs
 * the CP layout and the CP norm source on a one-rank CP group): 0 off; 1 all-gather
 * attention, input-stationary; 2 ring attention, output-stationary. */
static int g_cp = 0;

static void craft(ref_model *m, ref_dataset *d) {
    if (g_craft == 1 && d->kind == REF_MLP) d->x[3 * d->in] = NAN;
    if (g_craft == 1 && d->kind == REF_LLAMA) {
        int v = m->cfg.vocab - 1;
        for (int64_t i = 0; i < d->n * d->seq; i++)
            if (d->tokens[i] == v) d->tokens[i] = 0;
        d->tokens[3 * d->seq + 1 < d->n * d->seq ? 3 * d->seq + (d->seq > 1) : 0] = v;
        for (int e = 0; e < m->cfg.dim; e++) m->params[0].data[(int64_t)v * m->cfg.dim + e] = NAN;
    }
    if (g_craft >= 2) {
        memset(m->params[0].data, 0, sizeof(double) * (size_t)m->params[0].numel);
        m->params[0].data[0] = 0.5;
        for (int e = 0; e < d->in; e++) d->x[2 * d->in + e] = e ? 0 : g_craft == 2 ? 1e300 : 1.5e308;
        d->y[2] = 1;
    }
}

static double g_worst = 0; /* worst fraction of the budget used */
static int64_t g_clipped = 0, g_unclipped = 0, g_examples = 0; /* coverage of the abadi branch */

/* returns the fraction of the tolerance used (> 1: fail) */
static double cmp_vec(const double *a, const double *r, int64_t n, double gam) {
    double mx = 0, err = 0;
    for (int64_t i = 0; i < n; i++) { /* NaN = NaN and inf = inf (same sign) agree exactly */
        if ((isnan(r[i]) && isnan(a[i])) || (isinf(r[i]) && a[i] == r[i])) continue;
        if (fabs(r[i]) > mx) mx = fabs(r[i]);
    }
    double tol = 16.0 * gam * (mx > 1e-300 ? mx : 1e-300);
    for (int64_t i = 0; i < n; i++) {
        if ((isnan(r[i]) && isnan(a[i])) || (isinf(r[i]) && a[i] == r[i])) continue;
        double e = fabs(a[i] - r[i]);
        if (!(e <= err)) err = isnan(e) ? INFINITY : e;
    }
    return n ? err / tol : 0.0;
}

typedef struct {
    const char *what;
    double frac;
} worst_t;

static void note(worst_t *w, const char *what, double f) {
    if (f > w->frac || isnan(f)) { w->frac = isnan(f) ? INFINITY : f; w->what = what; }
}

/* Compare one step; returns the worst fraction and the tensor it came from. */
static worst_t compare_step(const ref_dpsgd_step_out *o, const ref_dpsgd_step_out *r, const ref_model *mo,
                            const ref_model *mr, double gam, int *index_ok) {
    worst_t w = {"", 0};
    *index_ok = o->b == r->b;
    for (int64_t i = 0; *index_ok && i < r->b; i++) *index_ok = o->indices[i] == r->indices[i];
    if (!*index_ok) return w;
    int64_t b = r->b;
    int G = r->ngroups;
    note(&w, "per_sample.loss", cmp_vec(o->loss, r->loss, b, gam));
    note(&w, "per_sample.norm", cmp_vec(o->norm, r->norm, b, gam));
    note(&w, "per_sample.group_norm", cmp_vec(o->group_norm, r->group_norm, b * G, gam));
    note(&w, "per_sample.clip_factor", cmp_vec(o->clip_factor, r->clip_factor, b * G, gam));
    for (int p = 0; p < mr->nparams; p++) {
        int64_t n = mr->params[p].numel;
        if (o->grad) note(&w, "per_sample.grad", cmp_vec(o->grad[p], r->grad[p], b * n, gam));
        note(&w, "step.clipped_sum", cmp_vec(o->clipped_sum[p], r->clipped_sum[p], n, gam));
        note(&w, "step.noise", cmp_vec(o->noise[p], r->noise[p], n, 0.0 + 1e-300)); /* exact */
        note(&w, "step.private_grad", cmp_vec(o->private_grad[p], r->private_grad[p], n, gam));
        note(&w, "params_after", cmp_vec(mo->params[p].data, mr->params[p].data, n, gam));
    }
    return w;
}

typedef struct {
    const char *name;
    ref_model_config mc;
} model_case;

static int run_case(const model_case *mcase, ref_clip_style style, const char *groups, ref_clip_fn fn,
                    opt_strategy strat, int64_t micro, int threads, opt_bug bug, uint64_t seed, double q,
                    int64_t steps, ref_optimizer optz, worst_t *worst_out) {
    ref_dpsgd_config c;
    ref_dpsgd_config_default(&c);
    c.n = 24; c.q = q; c.steps = steps; c.clip = 0.05; c.sigma = 0.7;
    c.style = style; snprintf(c.groups, sizeof c.groups, "%s", groups);
    c.clip_fn = fn; c.micro_batches = micro;
    c.seed.k = seed; c.key.k = seed ^ 0x5eedULL; c.opt = optz;
    if (optz == REF_OPT_SGD) c.momentum = 0.5;
    ref_model m, mref, mopt;
    ref_dataset d;
    T_OK(ref_model_init(&m, &mcase->mc, c.seed));
    T_OK(ref_dataset_generate(&d, &mcase->mc, c.n, c.seed));
    craft(&m, &d);
    T_OK(ref_model_copy(&mref, &m));
    T_OK(ref_model_copy(&mopt, &m));
    ref_dpsgd_state rs;
    T_OK(ref_dpsgd_init(&rs, &c, &mref));
    opt_backend_config bc = {"host", DP_F64, threads, 0};
    opt_backend *be = NULL;
    T_OK(opt_backend_create(&be, &bc));
    opt_dp_options oo = {.strategy = strat, .mixed_rule = OPT_MIXED_FLOP, .noise_mode = OPT_NOISE_SINGLE, .bug = bug, .keep_per_sample = 1,
                         .cp = 1, .cp_path = g_cp > 0, .cp_ring = g_cp == 2, .cp_output = g_cp == 2};
    opt_dpsgd os;
    T_OK(opt_dpsgd_init(&os, be, &c, &oo, &m));
    ref_dpsgd_step_out ro, oo_;
    memset(&ro, 0, sizeof ro); memset(&oo_, 0, sizeof oo_);
    double gam = (double)m.total * ldexp(1.0, -53);
    gam = gam / (1 - gam);
    worst_t worst = {"", 0};
    int ok = 1;
    for (int64_t s = 1; s <= steps; s++) {
        T_OK(ref_dpsgd_step(&ro, &mref, &rs, &d, s));
        T_OK(opt_dpsgd_step(&oo_, &os, &d, s));
        double *pp[256];
        for (int p = 0; p < mopt.nparams; p++) pp[p] = mopt.params[p].data;
        T_OK(opt_model_get_params(&os.om, pp));
        int iok;
        worst_t w = compare_step(&oo_, &ro, &mopt, &mref, gam, &iok);
        if (!iok) { ok = 0; worst.what = "batch.indices"; worst.frac = INFINITY; }
        g_examples += ro.b;
        for (int64_t i = 0; fn == REF_CLIPFN_ABADI && i < ro.b * ro.ngroups; i++) {
            if (ro.clip_factor[i] < 1) g_clipped++;
            else g_unclipped++;
        }
        if (w.frac > worst.frac) worst = w;
    }
    *worst_out = worst;
    ref_dpsgd_step_free(&ro); ref_dpsgd_step_free(&oo_);
    opt_dpsgd_free(&os);
    opt_backend_destroy(be);
    ref_dpsgd_free(&rs);
    ref_model_free(&m); ref_model_free(&mref); ref_model_free(&mopt);
    ref_dataset_free(&d);
    return ok && worst.frac <= 1.0;
}

int main(void) {
    uint64_t seed = t_seed(11);
    model_case models[3];
    models[0].name = "mlp";
    ref_config_default(&models[0].mc, REF_MLP);
    models[0].mc.in = 7; models[0].mc.hidden[0] = 9; models[0].mc.hidden[1] = 5; models[0].mc.classes = 4;
    models[1].name = "llama";
    ref_config_default(&models[1].mc, REF_LLAMA);
    models[1].mc.vocab = 13; models[1].mc.dim = 8; models[1].mc.layers = 2; models[1].mc.heads = 2;
    models[1].mc.ffn = 12; models[1].mc.seq = 5;
    models[2] = models[1];
    models[2].name = "llama-tied";
    models[2].mc.tied = 1; models[2].mc.layers = 1; models[2].mc.heads = 1; models[2].mc.seq = 2;

    const char *group_spec[3] = {"w=*.weight:0.04;b=*.bias:0.03",
                                 "emb=tok_emb|lm_head:0.05;attn=*.w[qkvo]:0.03;rest=*:0.04",
                                 "emb=tok_emb:0.05;rest=*:0.04"};
    struct { ref_clip_style st; int grp; const char *spec; } styles[4] = {
        {REF_CLIP_FLAT, 0, ""}, {REF_CLIP_PER_LAYER, 0, ""}, {REF_CLIP_PER_LAYER, 0, "block"}, {REF_CLIP_GROUP, 1, NULL}};
    int ncases = 0;
    for (int mi = 0; mi < 3; mi++)
        for (int si = 0; si < 4; si++)
            for (int fi = 0; fi < 2; fi++)
                for (int k = 0; k < OPT_STRAT_COUNT; k++) {
                    const char *spec = styles[si].grp ? group_spec[mi] : styles[si].spec;
                    worst_t w;
                    int64_t micro = (k + si) % 3 == 0 ? 2 : 1;
                    int ok = run_case(&models[mi], styles[si].st, spec, (ref_clip_fn)fi, (opt_strategy)k, micro,
                                      1 + (k == 1), OPT_BUG_NONE, seed + (uint64_t)mi, 0.3, 2,
                                      fi ? REF_OPT_ADAMW : REF_OPT_SGD, &w);
                    T_CHECK(ok, "%s %s%s%s %s %s micro %lld: worst %s at %.3g of its tolerance", models[mi].name,
                            si == 0 ? "flat" : si == 3 ? "group" : "per-layer", spec[0] ? ":" : "", spec,
                            fi ? "automatic" : "abadi", opt_strategy_names[k], (long long)micro, w.what, w.frac);
                    if (w.frac > g_worst) g_worst = w.frac;
                    ncases++;
                }
    printf("%d cases, %lld examples; abadi factors: %lld clipped, %lld not; worst fraction of tolerance used: %.3g\n",
           ncases, (long long)g_examples, (long long)g_clipped, (long long)g_unclipped, g_worst);
    /* the cases must exercise both branches of the clip function */
    T_CHECK(g_clipped > 0 && g_unclipped > 0, "clip coverage: %lld clipped, %lld unclipped", (long long)g_clipped,
            (long long)g_unclipped);

    /* empty Poisson batches (q tiny): signal 0, noise still added, update still taken */
    for (int k = 0; k < OPT_STRAT_COUNT; k++) {
        worst_t w;
        int ok = run_case(&models[1], REF_CLIP_FLAT, "", REF_CLIPFN_ABADI, (opt_strategy)k, 1, 1, OPT_BUG_NONE, seed,
                          1e-9, 1, REF_OPT_SGD, &w);
        T_CHECK(ok, "empty batch, %s: worst %s at %.3g", opt_strategy_names[k], w.what, w.frac);
    }

    /* crafted examples: NaN gradients (dropped: an exact 0, never 0 * NaN) and overflowing
     * sums of squares (finite or infinite norms, kept), every strategy against the reference */
    {
        model_case m0;
        m0.name = "mlp-nohidden";
        ref_config_default(&m0.mc, REF_MLP);
        m0.mc.in = 4; m0.mc.nhidden = 0; m0.mc.classes = 3;
        for (int cr = 1; cr <= 3; cr++)
            for (int mi = 0; mi < 3; mi++) {
                if (cr >= 2 && mi > 0) continue;
                if (cr == 1 && mi == 2) continue; /* tied: the NaN row would reach every example's logits */
                const model_case *mc = cr >= 2 ? &m0 : &models[mi];
                for (int si = 0; si < 2; si++)
                    for (int fi = 0; fi < 2; fi++)
                        for (int k = 0; k < OPT_STRAT_COUNT; k++) {
                            worst_t w;
                            g_craft = cr;
                            int ok = run_case(mc, si ? REF_CLIP_PER_LAYER : REF_CLIP_FLAT, "", (ref_clip_fn)fi,
                                              (opt_strategy)k, 1 + (k == 2), 1, OPT_BUG_NONE, seed, 1.0, 1,
                                              REF_OPT_SGD, &w);
                            g_craft = 0;
                            T_CHECK(ok, "crafted %s on %s %s %s %s: worst %s at %.3g of its tolerance",
                                    cr == 1 ? "NaN example" : cr == 2 ? "overflow (finite norm)" : "overflow (inf norm)",
                                    mc->name, si ? "per-layer" : "flat", fi ? "automatic" : "abadi",
                                    opt_strategy_names[k], w.what, w.frac);
                        }
            }
    }

    /* the same pipeline under the CP layout and norm source (one-rank CP group, both
     * attentions and patterns): every strategy and clipping style on the llamas, and a
     * NaN example (dropped: an exact 0) */
    for (int mi = 1; mi < 3; mi++)
        for (int si = 0; si < 4; si++)
            for (int k = 0; k < OPT_STRAT_COUNT; k++) {
                const char *spec = styles[si].grp ? group_spec[mi] : styles[si].spec;
                worst_t w;
                g_cp = 1 + (k + si) % 2;
                g_craft = mi == 1 && si < 2; /* (the tied model's NaN row reaches every example) */
                int ok = run_case(&models[mi], styles[si].st, spec, (ref_clip_fn)(si % 2), (opt_strategy)k, 1 + (k % 2),
                                  1, OPT_BUG_NONE, seed + 7, 0.4, 2, si % 2 ? REF_OPT_ADAMW : REF_OPT_SGD, &w);
                T_CHECK(ok, "CP layout (%s) %s %s%s%s %s%s: worst %s at %.3g of its tolerance",
                        g_cp == 1 ? "allgather, input" : "ring, output", models[mi].name,
                        si == 0 ? "flat" : si == 3 ? "group" : "per-layer", spec[0] ? ":" : "", spec,
                        opt_strategy_names[k], g_craft ? ", NaN example" : "", w.what, w.frac);
                g_cp = 0;
                g_craft = 0;
            }

    /* negative controls: each injected bug must be caught by the same comparison */
    for (int bug = OPT_BUG_CLIP_AFTER_SUM; bug <= OPT_BUG_REALIZED_DIVISOR; bug++) {
        if (bug == OPT_BUG_NOISE_EVERY_RANK) continue; /* identical to single mode on one rank: MPI test */
        worst_t w;
        int ok = run_case(&models[0], REF_CLIP_FLAT, "", REF_CLIPFN_ABADI, OPT_STRAT_GRAD_SAMPLE, 1, 1, (opt_bug)bug,
                          seed, 0.3, 1, REF_OPT_SGD, &w);
        T_CHECK(!ok, "negative control: injected bug %s was not detected", opt_bug_names[bug]);
        printf("negative control %s: caught at %s (%.3g of tolerance)\n", opt_bug_names[bug], w.what, w.frac);
    }
    return t_finish();
}

/* attacks/audit_release.c — the releases under audit, one instance per thread
 * (docs/audits.md "Releases"): the reference (reference/dpsgd.h, reference/dpzo.h) and the
 * engine through its public API (opt_backend_create, opt_dpsgd_init/step, opt_dpzo_init/step).
 * Each trial is K steps (1..K; K = 1 for DP-ZO and candidates) from theta_0 with the trial's
 * noise key; lr = 0, so the model never moves and trials are independent. The statistic is
 *   DP-SGD: (q |D_side|) sum_t <G_t, dir>   (G_t the private gradients: the sum space, where
 *           the canary shifts the mean by K min(||g_c||, C));
 *   DP-ZO:  sign * (q |D_side|) 2 phi s_0   (the released scalar in the sum space). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/audit.h"
#include "common/alloc.h"
#include "attacks/audit_candidate.h"
#include "optimized/dpsgd.h"
#include "optimized/dpzo.h"
#include "reference/dpsgd.h"
#include "reference/dpzo.h"

/* Planted bugs that are a change of configuration: the release runs with (sigma', C', key')
 * while the claim keeps (sigma, C). no-clip: C' = 1e6 scale C with sigma' C' = sigma C, so
 * the noise is right and nothing is ever clipped. */
void audit_plant_params(double *sigma, double *clip, dp_noise_key *key, const audit_setup *s) {
    const audit_config *c = &s->cfg;
    *sigma = c->sigma;
    *clip = c->clip;
    switch (c->plant) {
    case AUDIT_PLANT_HALF_NOISE: *sigma = c->sigma / 2; break;
    case AUDIT_PLANT_NO_CLIP: *clip = 1e6 * c->canary_scale * c->clip; *sigma = c->sigma * c->clip / *clip; break;
    case AUDIT_PLANT_PUBLIC_SEED_NOISE: key->k = c->seed.k; break; /* THE BUG: noise from the public seed */
    default: break;
    }
}

static double project(double *const *g, const ref_model *m, const double *dir) {
    double acc = 0;
    int64_t off = 0;
    for (int p = 0; p < m->nparams; p++) {
        for (int64_t e = 0; e < m->params[p].numel; e++) acc += g[p][e] * dir[off + e];
        off += m->params[p].numel;
    }
    return acc;
}

static void dpsgd_cfg(ref_dpsgd_config *rc, const audit_setup *s, int side, dp_noise_key key) {
    const audit_config *c = &s->cfg;
    ref_dpsgd_config_default(rc);
    rc->n = side ? c->n + 1 : c->n;
    rc->q = c->q;
    rc->steps = s->cfg.steps;
    rc->lr = 0.0;
    rc->seed = c->seed;
    rc->key = key;
    rc->key_given = 1;
    audit_plant_params(&rc->sigma, &rc->clip, &rc->key, s);
}

/* ------------------------------------------------------------ reference DP-SGD ---- */
typedef struct {
    const audit_setup *s;
    ref_model m; /* this thread's copy of theta_0 (lr = 0: never changes) */
    ref_dpsgd_state st[2];
    ref_dpsgd_step_out out;
    double **gp; /* gradient canary viewed per parameter */
} ref_sgd_ctx;

static dp_status canary_hook(double *loss, double *const *grads, const ref_model *m, const ref_dataset *d, int64_t i,
                             void *ctx) {
    const audit_setup *s = ctx;
    if (d == &s->d1 && i == s->cfg.n && s->canary_grad) {
        int64_t off = 0;
        for (int p = 0; p < m->nparams; p++) {
            memcpy(grads[p], s->canary_grad + off, (size_t)m->params[p].numel * sizeof(double));
            off += m->params[p].numel;
        }
        *loss = 0.0;
        return DP_OK;
    }
    return ref_example_grad(loss, grads, m, d, i);
}

static dp_status ref_sgd_run(double *stat, audit_release *r, int side, dp_noise_key key) {
    ref_sgd_ctx *x = r->ctx;
    const audit_setup *s = r->s;
    const ref_dataset *d = side ? &s->d1 : &s->d0;
    double scale = s->cfg.q * (double)d->n;
    double acc = 0;
    ref_dpsgd_state *st = &x->st[side];
    dpsgd_cfg(&st->cfg, s, side, key);
    for (int64_t t = 1; t <= s->cfg.steps; t++) { /* lr = 0: every step releases at theta_0 */
        if (s->cfg.plant == AUDIT_PLANT_CLIP_AFTER_SUM) {
            double *g = NULL;
            DP_TRY(audit_plant_cas_release(&g, s, d, key, t));
            for (int64_t k = 0; k < s->m0.total; k++) acc += g[k] * s->dir[k];
            dp_free(g);
            continue;
        }
        DP_TRY(ref_dpsgd_step(&x->out, &x->m, st, d, t));
        acc += project(x->out.private_grad, &x->m, s->dir);
    }
    *stat = scale * acc;
    return DP_OK;
}

static void ref_sgd_destroy(audit_release *r) {
    ref_sgd_ctx *x = r->ctx;
    if (!x) return;
    ref_dpsgd_free(&x->st[0]);
    ref_dpsgd_free(&x->st[1]);
    ref_dpsgd_step_free(&x->out);
    ref_model_free(&x->m);
    dp_free(x);
    r->ctx = NULL;
}

static dp_status ref_sgd_make(audit_release *r, const audit_setup *s) {
    ref_sgd_ctx *x = audit_release_ctx(r, sizeof *x, ref_sgd_run, ref_sgd_destroy);
    if (!x) return DP_ERR_NOMEM;
    x->s = s;
    DP_TRY(ref_model_copy(&x->m, &s->m0));
    for (int side = 0; side < 2; side++) {
        ref_dpsgd_config rc;
        dpsgd_cfg(&rc, s, side, (dp_noise_key){0});
        DP_TRY(ref_dpsgd_init(&x->st[side], &rc, &s->m0));
        x->st[side].grad_fn = canary_hook;
        x->st[side].grad_ctx = (void *)s;
    }
    return DP_OK;
}

/* ------------------------------------------------------------- engine DP-SGD ---- */
typedef struct {
    opt_backend *be;
    ref_dpsgd_step_out out;
} opt_sgd_ctx;

static dp_status opt_sgd_run(double *stat, audit_release *r, int side, dp_noise_key key) {
    opt_sgd_ctx *x = r->ctx;
    const audit_setup *s = r->s;
    const ref_dataset *d = side ? &s->d1 : &s->d0;
    ref_dpsgd_config rc;
    dpsgd_cfg(&rc, s, side, key);
    opt_dp_options o = {.strategy = (opt_strategy)s->cfg.strategy};
    opt_dpsgd e;
    DP_TRY(opt_dpsgd_init(&e, x->be, &rc, &o, &s->m0));
    dp_status st = DP_OK;
    double acc = 0;
    for (int64_t t = 1; st == DP_OK && t <= s->cfg.steps; t++) {
        st = opt_dpsgd_step(&x->out, &e, d, t);
        if (st == DP_OK) acc += project(x->out.private_grad, &s->m0, s->dir);
    }
    if (st == DP_OK) *stat = s->cfg.q * (double)d->n * acc;
    opt_dpsgd_free(&e);
    return st;
}

static void opt_sgd_destroy(audit_release *r) {
    opt_sgd_ctx *x = r->ctx;
    if (!x) return;
    ref_dpsgd_step_free(&x->out);
    if (x->be) opt_backend_destroy(x->be);
    dp_free(x);
    r->ctx = NULL;
}

static dp_status backend_make(opt_backend **be, const audit_setup *s) {
    int cuda = opt_backend_is_cuda(s->cfg.backend);
    opt_backend_config bc = {.name = s->cfg.backend, .dtype = cuda ? DP_F32 : DP_F64, .threads = 1, .use_mpi = 0};
    return opt_backend_create(be, &bc);
}

static dp_status opt_sgd_make(audit_release *r, const audit_setup *s) {
    opt_sgd_ctx *x = audit_release_ctx(r, sizeof *x, opt_sgd_run, opt_sgd_destroy);
    if (!x) return DP_ERR_NOMEM;
    return backend_make(&x->be, s);
}

/* ------------------------------------------------------------------ DP-ZO ---- */
typedef struct {
    opt_backend *be;           /* engine only */
    ref_model m;               /* reference: theta (never updated: release only) */
    ref_dpzo_model_ctx mctx[2];
    ref_dpzo_problem pb[2];
    ref_dpzo_step_out out;
} zo_ctx;

static void zo_hparams(ref_dpzo_hparams *hp, const audit_setup *s, int side, dp_noise_key key) {
    const audit_config *c = &s->cfg;
    memset(hp, 0, sizeof *hp);
    hp->n_data = side ? c->n + 1 : c->n;
    hp->q = c->q;
    hp->steps = 1;
    hp->mech = REF_DPZO_GAUSSIAN;
    hp->phi = c->phi;
    hp->lr = 0.0;
    hp->n_spsa = 1;
    hp->seed = c->seed;
    hp->key = key;
    audit_plant_params(&hp->sigma, &hp->clip, &hp->key, s);
}

static dp_status zo_run(double *stat, audit_release *r, int side, dp_noise_key key) {
    zo_ctx *x = r->ctx;
    const audit_setup *s = r->s;
    ref_dpzo_hparams hp;
    zo_hparams(&hp, s, side, key);
    dp_status st;
    if (x->be) {
        opt_dpzo e;
        DP_TRY(opt_dpzo_init(&e, x->be, &hp, &s->m0));
        st = opt_dpzo_step(&x->out, &e, side ? &s->d1 : &s->d0, 1, 0);
        opt_dpzo_free(&e);
    } else {
        st = ref_dpzo_release(&x->out, &x->pb[side], &hp, 1);
    }
    if (st == DP_OK) *stat = s->sign * x->out.scalar[0] * ref_dpzo_denominator(&hp);
    return st;
}

static void zo_destroy(audit_release *r) {
    zo_ctx *x = r->ctx;
    if (!x) return;
    ref_dpzo_step_out_free(&x->out);
    ref_dpzo_problem_free(&x->pb[0]);
    ref_dpzo_problem_free(&x->pb[1]);
    ref_model_free(&x->m);
    if (x->be) opt_backend_destroy(x->be);
    dp_free(x);
    r->ctx = NULL;
}

static dp_status zo_make(audit_release *r, const audit_setup *s, int engine) {
    zo_ctx *x = audit_release_ctx(r, sizeof *x, zo_run, zo_destroy);
    if (!x) return DP_ERR_NOMEM;
    DP_TRY(ref_dpzo_step_out_alloc(&x->out, s->cfg.n + 1, 1));
    if (engine) return backend_make(&x->be, s);
    DP_TRY(ref_model_copy(&x->m, &s->m0));
    DP_TRY(ref_dpzo_problem_model(&x->pb[0], &x->mctx[0], &x->m, &s->d0));
    return ref_dpzo_problem_model(&x->pb[1], &x->mctx[1], &x->m, &s->d1);
}

void *audit_release_ctx(audit_release *r, size_t size,
                        dp_status (*run)(double *, struct audit_release *, int, dp_noise_key),
                        void (*destroy)(struct audit_release *)) {
    void *x = dp_calloc(1, size);
    if (!x) return NULL;
    r->ctx = x;
    r->run = run;
    r->destroy = destroy;
    return x;
}

dp_status audit_release_make(audit_release *r, const audit_setup *s, int tid) {
    memset(r, 0, sizeof *r);
    r->s = s;
    dp_status st;
    if (s->cfg.impl == AUDIT_IMPL_CANDIDATE) st = audit_candidate_make(r, s, tid);
    else if (s->cfg.algo == AUDIT_ALGO_DPZO) st = zo_make(r, s, s->cfg.impl == AUDIT_IMPL_OPTIMIZED);
    else if (s->cfg.impl == AUDIT_IMPL_OPTIMIZED) st = opt_sgd_make(r, s);
    else st = ref_sgd_make(r, s);
    if (st != DP_OK && r->destroy) r->destroy(r);
    return st;
}

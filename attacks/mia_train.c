/* attacks/mia_train.c — training the target/shadow models of the membership-inference
 * runs with the engine (host backend; opt_dpsgd_init/step, opt_dpzo_init/step, parameters
 * read back with opt_model_get_params), threaded across models: model r of run k draws
 * its noise key from the MIA key (AUDIT_NOISE stream 1000 + k, element r), so results do
 * not depend on the thread count. Losses on the whole population come from the reference
 * forward pass (ref_example_loss) at the trained parameters. */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "attacks/audit_candidate.h"
#include "attacks/mia.h"
#include "reference/dpsgd.h"
#include "reference/dpzo.h"
#include "optimized/dpsgd.h"
#include "optimized/dpzo.h"

#define MIA_NAME_(n, s) s,
const char *const mia_attack_names[] = {MIA_ATTACKS(MIA_NAME_) NULL};
#undef MIA_NAME_
const double mia_fpr_targets[MIA_NFPR] = {1e-3, 1e-2};

void mia_config_default(mia_config *c) {
    memset(c, 0, sizeof *c);
    ref_config_default(&c->mc, REF_MLP);
    c->mc.nhidden = 1;
    c->mc.hidden[0] = 64;
    c->mc.classes = 4;
    c->pop = 256;
    c->models = MIA_MODELS_CI;
    c->steps = 300;
    c->q = 0.25;
    c->lr = 0.5;
    c->momentum = 0.9;
    c->clip = 1.0;
    c->delta = 1e-5;
    c->eps[0] = 1.0;
    c->eps[1] = 8.0;
    c->neps = 2;
    c->dpzo = 1;
    c->zo_phi = 1e-3;
    c->zo_lr = 1e-2;
    c->zo_steps = 300;
    c->alpha = 1e-3;
    c->confidence = 0.95;
    c->threads = 2;
    c->timeout_s = 120;
}

dp_status mia_config_check(const mia_config *c) {
    DP_TRY(ref_config_check(&c->mc));
    if (c->mc.kind != REF_MLP) return dp_error(DP_ERR_INVALID, "--model: membership inference runs on the mlp");
    if (c->data && (c->data->n != c->pop || c->data->in != c->mc.in))
        return dp_error(DP_ERR_INVALID, "--dataset %s: %lld examples of %d features, the run expects %lld of %d",
                        c->data_name ? c->data_name : "", (long long)c->data->n, c->data->in, (long long)c->pop, c->mc.in);
    for (int64_t i = 0; c->data && i < c->pop; i++)
        if (c->data->y[i] < 0 || c->data->y[i] >= c->mc.classes)
            return dp_error(DP_ERR_INVALID, "--dataset: label %d of example %lld outside [0, %d)", c->data->y[i],
                            (long long)i, c->mc.classes);
    if (c->pop < 8) return dp_error(DP_ERR_INVALID, "--population must be >= 8 (got %lld)", (long long)c->pop);
    if (c->models < 4 || c->models % 2 || c->models > 1024)
        return dp_error(DP_ERR_INVALID, "--models must be even and in [4, 1024] (got %lld)", (long long)c->models);
    if (c->steps < 1) return dp_error(DP_ERR_INVALID, "--steps must be >= 1 (got %lld)", (long long)c->steps);
    if (c->zo_steps < 1) return dp_error(DP_ERR_INVALID, "--zo-steps must be >= 1 (got %lld)", (long long)c->zo_steps);
    DP_TRY(dp_check_range("--q", c->q, 0, 0, 1, 1));
    DP_TRY(dp_check_min("--lr", c->lr, 0, 1));
    DP_TRY(dp_check_range("--momentum", c->momentum, 0, 1, 1, 0));
    DP_TRY(dp_check_min("--clip", c->clip, 0, 0));
    DP_TRY(dp_check_range("--delta", c->delta, 0, 0, 1, 0));
    DP_TRY(dp_check_range("--alpha", c->alpha, 0, 0, 1, 0));
    DP_TRY(dp_check_range("--confidence", c->confidence, 0, 0, 1, 0));
    DP_TRY(dp_check_min("--zo-phi", c->zo_phi, 0, 0));
    DP_TRY(dp_check_min("--zo-lr", c->zo_lr, 0, 1));
    if (c->neps < 0 || c->neps > MIA_MAX_EPS) return dp_error(DP_ERR_INVALID, "--epsilons: at most %d values", MIA_MAX_EPS);
    for (int k = 0; k < c->neps; k++) DP_TRY(dp_check_min("--epsilons", c->eps[k], 0, 0));
    if (c->dpzo && c->neps == 0) return dp_error(DP_ERR_INVALID, "--dpzo needs at least one value in --epsilons");
    if (c->threads < 1 || c->threads > 256) return dp_error(DP_ERR_INVALID, "--threads must be in [1, 256]");
    if (c->candidate) {
        if (c->reference) return dp_error(DP_ERR_INVALID, "--candidate and --impl reference exclude each other");
        if (c->dpzo)
            return dp_error(DP_ERR_INVALID, "--candidate: the certification protocol has no DP-ZO step (use --no-dpzo)");
        if (c->plant_no_noise) return dp_error(DP_ERR_INVALID, "--plant is not available with --candidate");
        if (!c->work) return dp_error(DP_ERR_INVALID, "--candidate needs a work directory");
        DP_TRY(dp_check_min("--timeout", c->timeout_s, 0, 0));
    }
    return DP_OK;
}

/* One run's training description. */
typedef struct {
    mia_run_kind kind;
    double sigma, clip;
    int index;
} run_desc;

typedef struct {
    audit_worker base;
    const mia_config *c;
    const ref_dataset *pop;
    const ref_model *m0;
    const unsigned char *in;   /* [R][pop] */
    const run_desc *runs;
    int nruns;
    double *loss;              /* [nruns][R][pop] */
    double *acc;               /* [nruns][R] */
    atomic_llong *done;
} mia_worker;

static dp_status subset(ref_dataset *d, const ref_dataset *p, const unsigned char *in) {
    memset(d, 0, sizeof *d);
    d->kind = REF_MLP;
    d->in = p->in;
    for (int64_t i = 0; i < p->n; i++) d->n += in[i];
    if (d->n == 0) return dp_error(DP_ERR_INVALID, "a model with no member (population too small)");
    d->x = dp_malloc((size_t)d->n * (size_t)d->in * sizeof *d->x);
    d->y = dp_malloc((size_t)d->n * sizeof *d->y);
    if (!d->x || !d->y) return DP_ERR_NOMEM;
    for (int64_t i = 0, k = 0; i < p->n; i++) {
        if (!in[i]) continue;
        memcpy(d->x + k * d->in, p->x + i * p->in, (size_t)p->in * sizeof *d->x);
        d->y[k++] = p->y[i];
    }
    return DP_OK;
}

/* The reference's training (--impl reference): m (reset to theta_0) is trained in place. */
static dp_status train_reference(ref_model *m, const mia_worker *w, const ref_dpsgd_config *rc,
                                 const ref_dpzo_hparams *hp, const ref_dataset *dm) {
    for (int p = 0; p < m->nparams; p++)
        memcpy(m->params[p].data, w->m0->params[p].data, (size_t)m->params[p].numel * sizeof(double));
    dp_status st = DP_OK;
    if (hp) {
        ref_dpzo_problem pb;
        ref_dpzo_model_ctx ctx;
        ref_dpzo_step_out out = {0};
        DP_TRY(ref_dpzo_problem_model(&pb, &ctx, m, dm));
        st = ref_dpzo_step_out_alloc(&out, dm->n, 1);
        for (int64_t t = 1; st == DP_OK && t <= hp->steps; t++) st = ref_dpzo_step(&out, &pb, hp, t);
        ref_dpzo_step_out_free(&out);
        ref_dpzo_problem_free(&pb);
        return st;
    }
    ref_dpsgd_state ds;
    ref_dpsgd_step_out out = {0};
    DP_TRY(ref_dpsgd_init(&ds, rc, m));
    for (int64_t t = 1; st == DP_OK && t <= rc->steps; t++) st = ref_dpsgd_step(&out, m, &ds, dm, t);
    ref_dpsgd_step_free(&out);
    ref_dpsgd_free(&ds);
    return st;
}

/* The candidate's training (--candidate): m (reset to theta_0) is trained in place. Step t:
 * the reference's Poisson batch of the model's secret key (ref_dpsgd_poisson), a step
 * vector with the current parameters, the candidate's private gradient, the reference's SGD
 * update (ref_dpsgd_apply_optimizer). The candidate draws its own noise. */
static dp_status train_candidate(ref_model *m, const mia_worker *w, const ref_dpsgd_config *rc,
                                 const ref_dataset *dm) {
    const mia_config *c = w->c;
    for (int p = 0; p < m->nparams; p++)
        memcpy(m->params[p].data, w->m0->params[p].data, (size_t)m->params[p].numel * sizeof(double));
    char in[4400], out[4400]; /* c->work: at most DP_MAX_DIR_LEN bytes (dp_mkdir_p) */
    snprintf(in, sizeof in, "%s/mia-step-%d.safetensors", c->work, w->base.tid);
    snprintf(out, sizeof out, "%s/mia-out-%d.safetensors", c->work, w->base.tid);
    ref_dpsgd_state ds = {0};
    audit_cand_io io = {0};
    double **g = NULL;
    int64_t *idx = dp_malloc((size_t)dm->n * sizeof *idx), b = 0;
    ref_dataset bt = *dm;
    bt.x = dp_malloc((size_t)(dm->n * dm->in) * sizeof *bt.x);
    bt.y = dp_malloc((size_t)dm->n * sizeof *bt.y);
    dp_status st = (idx && bt.x && bt.y) ? DP_OK : DP_ERR_NOMEM;
    if (st == DP_OK) st = audit_cand_io_init(&io, m, c->timeout_s);
    if (st == DP_OK && c->candidate_persistent) { /* one process trains this model, step after step */
        char tag[32];
        snprintf(tag, sizeof tag, "candidate-%d", w->base.tid);
        st = audit_cand_io_persistent(&io, c->candidate, c->work, tag);
    }
    if (st == DP_OK) st = audit_flat_buffers(&g, m);
    if (st == DP_OK) st = ref_dpsgd_init(&ds, rc, m);
    for (int64_t t = 1; st == DP_OK && t <= rc->steps; t++) {
        if (atomic_load(w->base.stop)) break;
        st = ref_dpsgd_poisson(idx, &b, rc->key, t, rc->q, dm->n);
        bt.n = b;
        for (int64_t k = 0; st == DP_OK && k < b; k++) {
            memcpy(bt.x + k * dm->in, dm->x + idx[k] * dm->in, (size_t)dm->in * sizeof *bt.x);
            bt.y[k] = dm->y[idx[k]];
        }
        if (st == DP_OK)
            st = audit_step_vector_write(in, &c->mc, m, &bt, rc->clip, rc->sigma, rc->q * (double)dm->n, "mia-step");
        if (st == DP_OK) st = audit_cand_private_grad(g, &io, c->candidate, in, out, m);
        if (st == DP_OK) st = ref_dpsgd_apply_optimizer(m, &ds, g);
        if (st == DP_OK && c->progress && w->base.tid == 0 && t % 50 == 0) /* a model takes rc->steps calls */
            fprintf(stderr, "mia: candidate step %lld/%lld of this model\n", (long long)t, (long long)rc->steps);
    }
    unlink(in);
    if (g) dp_free(g[0]);
    dp_free(g);
    audit_cand_io_free(&io);
    ref_dpsgd_free(&ds);
    dp_free(idx); dp_free(bt.x); dp_free(bt.y);
    return st;
}

/* Train model r of run `rd`: m receives the trained parameters. */
static dp_status train(ref_model *m, double **params, const mia_worker *w, opt_backend *be, const run_desc *rd,
                       int64_t r, const ref_dataset *dm) {
    const mia_config *c = w->c;
    dp_stream ks;
    DP_TRY(dp_stream_secret(&ks, c->key, DP_PURPOSE_AUDIT_NOISE, 1000u + (uint32_t)rd->index, 0));
    dp_noise_key key = {dp_rng_u64(&ks, (uint64_t)r)};
    dp_status st = DP_OK;
    if (rd->kind == MIA_RUN_DPZO) {
        ref_dpzo_hparams hp = {.n_data = dm->n, .q = c->q, .steps = c->zo_steps, .clip = rd->clip,
                               .sigma = c->plant_no_noise ? 0.0 : rd->sigma,
                               .mech = REF_DPZO_GAUSSIAN, .phi = c->zo_phi, .lr = c->zo_lr, .n_spsa = 1,
                               .seed = c->seed, .key = key};
        if (c->reference) return train_reference(m, w, NULL, &hp, dm);
        opt_dpzo z;
        ref_dpzo_step_out out = {0};
        DP_TRY(opt_dpzo_init(&z, be, &hp, w->m0));
        st = ref_dpzo_step_out_alloc(&out, dm->n, 1);
        for (int64_t t = 1; st == DP_OK && t <= c->zo_steps; t++) st = opt_dpzo_step(&out, &z, dm, t, 0);
        for (int p = 0; st == DP_OK && p < w->m0->nparams; p++)
            memcpy(params[p], z.theta[p], (size_t)w->m0->params[p].numel * sizeof(double));
        ref_dpzo_step_out_free(&out);
        opt_dpzo_free(&z);
        return st;
    }
    ref_dpsgd_config rc;
    ref_dpsgd_config_default(&rc);
    rc.n = dm->n;
    rc.q = c->q;
    rc.steps = c->steps;
    rc.clip = rd->clip;
    rc.sigma = (c->plant_no_noise && rd->kind != MIA_RUN_NONDP) ? 0.0 : rd->sigma; /* the planted bug */
    rc.lr = c->lr;
    rc.momentum = c->momentum;
    rc.seed = c->seed;
    rc.key = key;
    if (c->reference) return train_reference(m, w, &rc, NULL, dm);
    if (c->candidate) return train_candidate(m, w, &rc, dm);
    opt_dp_options o = {.strategy = OPT_STRAT_GRAD_SAMPLE};
    opt_dpsgd s;
    ref_dpsgd_step_out out = {0};
    DP_TRY(opt_dpsgd_init(&s, be, &rc, &o, w->m0));
    for (int64_t t = 1; st == DP_OK && t <= c->steps; t++) st = opt_dpsgd_step(&out, &s, dm, t);
    if (st == DP_OK) st = opt_model_get_params(&s.om, params);
    ref_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    return st;
}

static void *mia_work(void *arg) {
    mia_worker *w = arg;
    const mia_config *c = w->c;
    int64_t R = c->models, P = c->pop, tot = (int64_t)w->nruns * R;
    opt_backend *be = NULL;
    opt_backend_config bc = {.name = "host", .dtype = DP_F64, .threads = 1, .use_mpi = 0};
    ref_model m = {0};
    w->base.st = opt_backend_create(&be, &bc);
    if (w->base.st == DP_OK) w->base.st = ref_model_copy(&m, w->m0);
    double **params = NULL;
    if (w->base.st == DP_OK) {
        params = dp_calloc((size_t)m.nparams, sizeof *params);
        if (!params) w->base.st = DP_ERR_NOMEM;
        for (int p = 0; w->base.st == DP_OK && p < m.nparams; p++) params[p] = m.params[p].data;
    }
    for (int64_t j = w->base.tid; w->base.st == DP_OK && j < tot; j += w->base.nth) {
        if (atomic_load(w->base.stop)) break;
        const run_desc *rd = &w->runs[j / R];
        int64_t r = j % R;
        ref_dataset dm;
        w->base.st = subset(&dm, w->pop, w->in + r * P);
        if (w->base.st == DP_OK) w->base.st = train(&m, params, w, be, rd, r, &dm);
        if (w->base.st == DP_OK && atomic_load(w->base.stop)) break;
        double *loss = w->loss + j * P;
        int64_t correct = 0, nm = 0;
        for (int64_t i = 0; w->base.st == DP_OK && i < P; i++) {
            w->base.st = ref_example_loss(&loss[i], &m, NULL, w->pop, i);
            if (w->base.st == DP_OK && !isfinite(loss[i]))
                w->base.st = dp_error(DP_ERR_NUMERIC, "run %d model %lld: loss of example %lld is not finite", rd->index,
                                 (long long)r, (long long)i);
            if (w->in[r * P + i]) { nm++; correct += loss[i] < log(2.0); } /* p_y > 1/2: predicted */
        }
        w->acc[j] = nm ? (double)correct / (double)nm : 0;
        ref_dataset_free(&dm);
        long long d = atomic_fetch_add(w->done, 1) + 1;
        if (c->progress && w->base.tid == 0) fprintf(stderr, "mia: %lld/%lld models trained\n", d, (long long)tot);
    }
    if (w->base.st != DP_OK) audit_worker_fail(&w->base);
    dp_free(params);
    ref_model_free(&m);
    if (be) opt_backend_destroy(be);
    return NULL;
}

/* Balanced membership: example x joins the R/2 models of smallest u(x, r). */
static dp_status membership(unsigned char *in, const mia_config *c) {
    int64_t R = c->models, P = c->pop;
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, c->key, DP_PURPOSE_AUDIT_NOISE, 999, 0));
    double *u = dp_malloc((size_t)R * sizeof *u), *v = dp_malloc((size_t)R * sizeof *v);
    if (!u || !v) { dp_free(u); dp_free(v); return DP_ERR_NOMEM; }
    for (int64_t x = 0; x < P; x++) {
        for (int64_t r = 0; r < R; r++) u[r] = v[r] = dp_rng_uniform(&s, (uint64_t)(x * R + r));
        qsort(v, (size_t)R, sizeof *v, audit_cmp_double);
        double med = v[R / 2 - 1];
        for (int64_t r = 0; r < R; r++) in[r * P + x] = u[r] <= med;
    }
    dp_free(u); dp_free(v);
    return DP_OK;
}

dp_status mia_train_all(double *loss, double *acc, unsigned char *in, double *sigma_out, double *eps_out,
                        mia_run_kind *kind_out, int *nruns_out, double *seconds, const mia_config *c);
dp_status mia_train_all(double *loss, double *acc, unsigned char *in, double *sigma_out, double *eps_out,
                        mia_run_kind *kind_out, int *nruns_out, double *seconds, const mia_config *c) {
    run_desc runs[MIA_MAX_EPS + 2];
    int nr = 0;
    runs[nr++] = (run_desc){MIA_RUN_NONDP, 0.0, 1e12, 0}; /* no noise, no clipping: plain SGD */
    acct_schedule sch = {.n = 1};
    for (int k = 0; k < c->neps; k++) {
        sch.seg[0] = (acct_segment){ACCT_GAUSSIAN, c->q, 1.0, c->steps};
        double sg, e;
        DP_TRY(acct_calibrate(&sg, &e, &sch, ACCT_PLD, c->eps[k], c->delta, 1e-3, NULL, 0));
        eps_out[nr] = e;
        runs[nr] = (run_desc){MIA_RUN_DPSGD, sg, c->clip, nr};
        nr++;
    }
    if (c->dpzo) {
        double emax = c->eps[0], sg, e;
        for (int k = 1; k < c->neps; k++) emax = c->eps[k] > emax ? c->eps[k] : emax;
        sch.seg[0] = (acct_segment){ACCT_GAUSSIAN, c->q, 1.0, c->zo_steps};
        DP_TRY(acct_calibrate(&sg, &e, &sch, ACCT_PLD, emax, c->delta, 1e-3, NULL, 0));
        eps_out[nr] = e;
        runs[nr] = (run_desc){MIA_RUN_DPZO, sg, c->clip, nr};
        nr++;
    }
    eps_out[0] = INFINITY;
    for (int k = 0; k < nr; k++) { sigma_out[k] = runs[k].sigma; kind_out[k] = runs[k].kind; }
    *nruns_out = nr;
    ref_dataset pop;
    ref_model m0;
    DP_TRY(membership(in, c));
    if (c->data) pop = *c->data; /* borrowed */
    else DP_TRY(ref_dataset_generate(&pop, &c->mc, c->pop, c->seed));
    dp_status st = ref_model_init(&m0, &c->mc, c->seed);
    if (st != DP_OK) { if (!c->data) ref_dataset_free(&pop); return st; }
    int nth = c->threads;
    mia_worker *w = dp_calloc((size_t)nth, sizeof *w);
    atomic_llong done = 0;
    if (!w) st = DP_ERR_NOMEM;
    for (int t = 0; st == DP_OK && t < nth; t++)
        w[t] = (mia_worker){.c = c, .pop = &pop, .m0 = &m0, .in = in, .runs = runs, .nruns = nr, .loss = loss,
                            .acc = acc, .done = &done};
    if (st == DP_OK) st = audit_pool_run(mia_work, w, sizeof *w, nth, seconds);
    dp_free(w);
    ref_model_free(&m0);
    if (!c->data) ref_dataset_free(&pop);
    return st;
}

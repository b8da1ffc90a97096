/* reference/dpzo_cmd.c — `dpcert reference dpzo ...`: the exact DP-ZO reference on
 * the reference models, with per-step safetensors exports, the update log, replay
 * from the log, and the in-place (Algorithm 2) drift measurement. docs/dpzo.md. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <errno.h>

#include "common/fsutil.h"
#include "common/cli.h"
#include "common/safetensors.h"
#include "common/tensor.h"
#include "reference/dpzo.h"

#define CMD "reference dpzo"

/* ---------------------------------------------------------------- options */

void ref_dpzo_cli_init(ref_dpzo_cli *c) {
    memset(c, 0, sizeof *c);
    ref_model_cli_init(&c->m, 0);
    c->n_spsa = 1;
}

#define REF_DPZO_OWN_NOPTS (REF_DPZO_NOPTS - REF_MODEL_NOPTS)

dp_status ref_dpzo_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, ref_dpzo_cli *c) {
    const dp_opt mine[REF_DPZO_OWN_NOPTS] = {
        {"--q", DP_OPT_DOUBLE, &c->q, &c->seen_q, "Poisson sampling rate in (0, 1]"},
        {"--steps", DP_OPT_INT, &c->steps, &c->seen_steps, "K steps (numbered 1..K)"},
        {"--clip", DP_OPT_DOUBLE, &c->clip, &c->seen_clip, "C > 0: loss differences are clipped to [-C, C]"},
        {"--sigma", DP_OPT_DOUBLE, &c->sigma, &c->seen_sigma, "noise multiplier >= 0"},
        {"--noise", DP_OPT_STRING, &c->noise, &c->seen_noise, "gaussian (default) | laplace"},
        {"--phi", DP_OPT_DOUBLE, &c->phi, &c->seen_phi, "perturbation scale > 0"},
        {"--lr", DP_OPT_DOUBLE, &c->lr, &c->seen_lr, "learning rate >= 0"},
        {"--weight-decay", DP_OPT_DOUBLE, &c->wd, &c->seen_wd, "weight decay >= 0 (0)"},
        {"--n-spsa", DP_OPT_INT, &c->n_spsa, &c->seen_n_spsa, "directions per step (1)"},
        {"--seed", DP_OPT_STRING, &c->seed, &c->seen_seed, "public seed (init, data, directions)"},
        {"--noise-key", DP_OPT_STRING, &c->noise_key, &c->seen_key, "secret noise key (noise, sampling); random if absent"},
        {"--reveal-noise-key", DP_OPT_FLAG, &c->reveal_key, NULL,
         "print the fresh random noise key on stderr and export it (the run becomes reproducible)"},
    };
    if (*n + REF_DPZO_NOPTS > cap) return dp_error(DP_ERR_INTERNAL, "option table too small");
    DP_TRY(ref_model_cli_add_opts(opts, n, cap, &c->m, "N examples generated from the seed (required without --data)"));
    for (size_t k = 0; k < REF_DPZO_OWN_NOPTS; k++) opts[(*n)++] = mine[k];
    return DP_OK;
}

const char *ref_dpzo_mech_name(ref_dpzo_mech mech) {
    return mech == REF_DPZO_LAPLACE ? "laplace" : "gaussian";
}

dp_status ref_dpzo_cli_finish(ref_model_config *mc, ref_dpzo_hparams *hp, const ref_dpzo_cli *o) {
    DP_TRY(ref_model_cli_finish(mc, &o->m));
    static const char *const req[] = {"--dataset-size", "--q", "--steps", "--clip", "--sigma", "--phi", "--lr", "--seed"};
    const int seen[] = {o->m.seen_n || o->m.seen_data, o->seen_q, o->seen_steps, o->seen_clip, o->seen_sigma,
                        o->seen_phi, o->seen_lr, o->seen_seed};
    for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
        if (!seen[k]) return dp_error(DP_ERR_USAGE, "missing required option %s", req[k]);
    memset(hp, 0, sizeof *hp);
    static const char *const mechs[] = {"gaussian", "laplace", NULL};
    int mech = 0;
    if (o->seen_noise) DP_TRY(dp_parse_choice(&mech, "--noise", o->noise, mechs));
    hp->mech = (ref_dpzo_mech)mech;
    /* with --data and no --dataset-size, N = 1 stands in until ref_dpzo_cli_dataset sets the
     * file's count and checks again */
    hp->n_data = o->m.seen_n ? o->m.n : 1;
    hp->q = o->q;
    hp->steps = o->steps;
    hp->clip = o->clip;
    hp->sigma = o->sigma;
    hp->phi = o->phi;
    hp->lr = o->lr;
    hp->weight_decay = o->seen_wd ? o->wd : 0.0;
    if (o->n_spsa < 1 || o->n_spsa > REF_DPZO_MAX_N)
        return dp_error(DP_ERR_INVALID, "--n-spsa must be in [1, %d] (got %" PRId64 ")", REF_DPZO_MAX_N, o->n_spsa);
    hp->n_spsa = (int)o->n_spsa;
    DP_TRY(dp_parse_u64(&hp->seed.k, "--seed", o->seed));
    if (o->seen_key) DP_TRY(dp_parse_u64(&hp->key.k, "--noise-key", o->noise_key));
    else DP_TRY(dp_noise_key_random(&hp->key));
    return ref_dpzo_check(hp);
}

dp_status ref_dpzo_cli_dataset(ref_dataset *d, ref_dpzo_hparams *hp, const ref_model_config *mc,
                               const ref_dpzo_cli *c) {
    DP_TRY(ref_model_cli_dataset(d, &hp->n_data, mc, &c->m, hp->seed));
    dp_status st = ref_dpzo_check(hp);
    if (st != DP_OK) ref_dataset_free(d);
    return st;
}

/* ---------------------------------------------------------------- exports */

static dp_status meta_num(dp_tensor_set *s, const char *k, double v) {
    char b[64];
    snprintf(b, sizeof b, "%.17g", v);
    return dp_tset_set_meta(s, k, b);
}
static dp_status meta_int(dp_tensor_set *s, const char *k, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    return dp_tset_set_meta(s, k, b);
}

static dp_status meta_model(dp_tensor_set *s, const ref_model_config *c) {
    DP_TRY(dp_tset_set_meta(s, "model", c->kind == REF_MLP ? "mlp" : "llama"));
    if (c->kind == REF_MLP) {
        char b[256] = "";
        for (int k = 0; k < c->nhidden; k++) {
            size_t l = strlen(b);
            snprintf(b + l, sizeof b - l, "%s%d", k ? "," : "", c->hidden[k]);
        }
        DP_TRY(meta_int(s, "in", c->in));
        DP_TRY(dp_tset_set_meta(s, "hidden", b));
        DP_TRY(meta_int(s, "classes", c->classes));
    } else {
        DP_TRY(meta_int(s, "vocab", c->vocab));
        DP_TRY(meta_int(s, "dim", c->dim));
        DP_TRY(meta_int(s, "layers", c->layers));
        DP_TRY(meta_int(s, "heads", c->heads));
        DP_TRY(meta_int(s, "ffn", c->ffn));
        DP_TRY(meta_int(s, "seq", c->seq));
        DP_TRY(meta_int(s, "tied", c->tied));
        DP_TRY(meta_num(s, "rope_theta", c->rope_theta));
        DP_TRY(meta_num(s, "norm_eps", c->norm_eps));
    }
    return DP_OK;
}

static dp_status meta_hparams(dp_tensor_set *s, const ref_dpzo_hparams *hp, int key_given, int data_file, int64_t step) {
    DP_TRY(dp_tset_set_meta(s, "algorithm", "dpzo"));
    DP_TRY(meta_int(s, "step", step));
    DP_TRY(meta_int(s, "dataset_size", hp->n_data));
    DP_TRY(dp_tset_set_meta(s, "data", data_file ? "file" : "generated"));
    DP_TRY(meta_num(s, "q", hp->q));
    DP_TRY(meta_int(s, "steps", hp->steps));
    DP_TRY(meta_num(s, "clip", hp->clip));
    DP_TRY(meta_num(s, "sigma", hp->sigma));
    DP_TRY(dp_tset_set_meta(s, "noise", hp->mech == REF_DPZO_GAUSSIAN ? "gaussian" : "laplace"));
    DP_TRY(meta_num(s, "phi", hp->phi));
    DP_TRY(meta_num(s, "lr", hp->lr));
    DP_TRY(meta_num(s, "weight_decay", hp->weight_decay));
    DP_TRY(meta_int(s, "n_spsa", hp->n_spsa));
    DP_TRY(meta_num(s, "batch_expected", hp->q * (double)hp->n_data));
    DP_TRY(meta_num(s, "denominator", ref_dpzo_denominator(hp)));
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, hp->seed.k);
    DP_TRY(dp_tset_set_meta(s, "seed", b));
    if (key_given) {
        snprintf(b, sizeof b, "%" PRIu64, hp->key.k);
        DP_TRY(dp_tset_set_meta(s, "noise_key", b));
    }
    return DP_OK;
}

/* params.<name> / params_after.<name> */
static dp_status add_params(dp_tensor_set *s, const char *prefix, const ref_model *m, double *const *theta) {
    char name[128];
    for (int p = 0; p < m->nparams; p++) {
        snprintf(name, sizeof name, "%s.%s", prefix, m->params[p].name);
        DP_TRY(dp_tset_add_f64(s, name, theta[p], m->params[p].ndim, m->params[p].shape));
    }
    return DP_OK;
}

/* dpzo.z.<name>: [shape] for n == 1, [n, shape] for n > 1 (regenerated from the seed). */
static dp_status add_directions(dp_tensor_set *s, const ref_model *m, dp_seed seed, int64_t step, int n) {
    char name[128];
    for (int p = 0; p < m->nparams; p++) {
        const ref_param *P = &m->params[p];
        int64_t shape[DP_MAX_DIMS];
        int nd = P->ndim;
        if (n > 1) {
            if (nd + 1 > DP_MAX_DIMS)
                return dp_error(DP_ERR_NOT_SUPPORTED, "cannot stack %d directions of the %d-d parameter %s", n, nd, P->name);
            shape[0] = n;
            for (int d = 0; d < nd; d++) shape[d + 1] = P->shape[d];
            nd++;
        } else {
            for (int d = 0; d < nd; d++) shape[d] = P->shape[d];
        }
        double *z = dp_calloc((size_t)n * (size_t)P->numel, sizeof(double)); /* [n, numel] */
        if (!z) return DP_ERR_NOMEM;
        dp_status st = DP_OK;
        for (int j = 0; st == DP_OK && j < n; j++)
            st = ref_dpzo_direction(z + (size_t)j * (size_t)P->numel, seed, step, p, j, P->numel);
        snprintf(name, sizeof name, "dpzo.z.%s", P->name);
        if (st == DP_OK) st = dp_tset_add_f64(s, name, z, nd, shape);
        free(z);
        DP_TRY(st);
    }
    return DP_OK;
}

/* step.noise / step.scalar: a scalar for n == 1, [n] otherwise. */
static dp_status add_vec(dp_tensor_set *s, const char *name, const double *v, int n) {
    if (n == 1) return dp_tset_add_scalar_f64(s, name, v[0]);
    int64_t shape[1] = {n};
    return dp_tset_add_f64(s, name, v, 1, shape);
}

static dp_status add_per_sample(dp_tensor_set *s, const char *name, const double *v, int n, int64_t b) {
    static const double empty = 0.0; /* a valid pointer for a [0] tensor */
    int64_t shape[2] = {n, b};
    if (n == 1) return dp_tset_add_f64(s, name, b ? v : &empty, 1, shape + 1);
    return dp_tset_add_f64(s, name, b ? v : &empty, 2, shape);
}

dp_status ref_dpzo_export_set(dp_tensor_set *ts, const ref_model *m, const ref_dpzo_hparams *hp, int key_given,
                              int data_file, double *const *before, double *const *after, const ref_dpzo_step_out *o) {
    static const int64_t empty_idx = 0; /* a valid pointer for a [0] tensor */
    int64_t bshape[1] = {o->b};
    const int n = hp->n_spsa;
    dp_tset_init(ts);
    dp_status st = add_params(ts, "params", m, before);
    if (st == DP_OK) st = add_directions(ts, m, hp->seed, o->step, n);
    if (st == DP_OK) st = dp_tset_add_raw(ts, "batch.indices", DP_I64, o->b ? o->idx : &empty_idx, 1, bshape);
    if (st == DP_OK) st = add_per_sample(ts, "per_sample.loss_plus", o->loss_plus, n, o->b);
    if (st == DP_OK) st = add_per_sample(ts, "per_sample.loss_minus", o->loss_minus, n, o->b);
    if (st == DP_OK) st = add_per_sample(ts, "per_sample.diff_clipped", o->diff_clipped, n, o->b);
    if (st == DP_OK) st = add_vec(ts, "step.noise", o->noise, n);
    if (st == DP_OK) st = add_vec(ts, "step.scalar", o->scalar, n);
    if (st == DP_OK) st = add_params(ts, "params_after", m, after);
    if (st == DP_OK) st = meta_hparams(ts, hp, key_given, data_file, o->step);
    if (st == DP_OK) st = meta_int(ts, "dropped", o->ndropped);
    if (st != DP_OK) dp_tset_free(ts);
    return st;
}

dp_status ref_dpzo_export_write(const char *dir, int64_t step, const dp_tensor_set *ts) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/step-%06" PRId64 ".safetensors", dir, step) >= sizeof path)
        return dp_error(DP_ERR_INVALID, "--export: directory name too long");
    return dp_st_write(path, ts);
}

static dp_status make_dir(const char *dir) {
    return dp_mkdir_p("--export", dir);
}

double **ref_dpzo_arrays_alloc(const int64_t *numel, int nparams) {
    double **a = dp_calloc((size_t)(nparams > 0 ? nparams : 1), sizeof *a);
    if (!a) return NULL;
    for (int p = 0; p < nparams; p++)
        if (!(a[p] = dp_calloc((size_t)(numel[p] > 0 ? numel[p] : 1), sizeof(double)))) {
            ref_dpzo_arrays_free(a, p);
            return NULL;
        }
    return a;
}

void ref_dpzo_arrays_free(double **a, int nparams) {
    if (!a) return;
    for (int p = 0; p < nparams; p++) free(a[p]);
    free(a);
}

static double max_abs_diff_inplace(const ref_dpzo_inplace *ip, double *const *theta) {
    double m = 0.0;
    for (int p = 0; p < ip->nparams; p++)
        for (int64_t e = 0; e < ip->numel[p]; e++) {
            double d = fabs(ref_dpzo_inplace_get(ip, p, e) - theta[p][e]);
            if (d > m) m = d;
        }
    return m;
}

static void print_scalars(const double *s, int n) {
    for (int j = 0; j < n; j++) printf("%s%.10e", j ? "," : "", s[j]);
}

void ref_dpzo_print_step(const ref_dpzo_step_out *o) {
    printf("step %" PRId64 " batch %" PRId64 " scalar ", o->step, o->b);
    print_scalars(o->scalar, o->n);
    if (isnan(o->loss)) printf(" loss n/a");
    else printf(" loss %.10e", o->loss);
    if (o->ndropped) printf(" dropped %" PRId64, o->ndropped);
    printf("\n");
}

typedef struct {
    ref_dpzo_cli z;
    const char *export_dir, *log, *replay, *inplace;
} opts_t;

static dp_status run_replay(const opts_t *oo, const ref_model_config *cfg) {
    const ref_dpzo_cli *o = &oo->z;
    static const char *const forbidden[] = {"--data", "--dataset-size", "--q", "--steps", "--clip", "--sigma", "--noise", "--phi",
                                            "--noise-key", "--log", "--inplace"};
    const int seen[] = {o->m.seen_data, o->m.seen_n, o->seen_q, o->seen_steps, o->seen_clip, o->seen_sigma,
                        o->seen_noise, o->seen_phi, o->seen_key, oo->log != NULL, oo->inplace != NULL};
    for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
        if (seen[k]) return dp_error(DP_ERR_USAGE, "%s is not used with --replay (the log holds the released scalars)", forbidden[k]);
    ref_dpzo_log log;
    DP_TRY(ref_dpzo_log_read(&log, oo->replay));
    dp_status st = DP_OK;
    uint64_t seed = 0;
    if (o->seen_seed && dp_parse_u64(&seed, "--seed", o->seed) == DP_OK && seed != log.seed.k)
        st = dp_error(DP_ERR_INVALID, "--seed %" PRIu64 " differs from the log's seed %" PRIu64, seed, log.seed.k);
    else if (o->seen_seed && dp_parse_u64(&seed, "--seed", o->seed) != DP_OK) st = DP_ERR_INVALID;
    if (st == DP_OK && o->seen_lr && o->lr != log.lr) st = dp_error(DP_ERR_INVALID, "--lr %g differs from the log's %g", o->lr, log.lr);
    if (st == DP_OK && o->seen_wd && o->wd != log.weight_decay)
        st = dp_error(DP_ERR_INVALID, "--weight-decay %g differs from the log's %g", o->wd, log.weight_decay);
    if (st == DP_OK && o->seen_n_spsa && o->n_spsa != log.n_spsa)
        st = dp_error(DP_ERR_INVALID, "--n-spsa %" PRId64 " differs from the log's %d", o->n_spsa, log.n_spsa);
    char desc[512];
    if (st == DP_OK) st = ref_dpzo_model_desc(desc, sizeof desc, cfg);
    if (st == DP_OK && strcmp(desc, log.model) != 0)
        st = dp_error(DP_ERR_INVALID, "the model flags give '%s' but the log '%s' was written for '%s'", desc, oo->replay,
                      log.model);
    ref_model m;
    memset(&m, 0, sizeof m);
    if (st == DP_OK) st = ref_model_init(&m, cfg, log.seed);
    if (st == DP_OK && m.total != log.total_params)
        st = dp_error(DP_ERR_INVALID, "the model has %" PRId64 " parameters but the log was written for %" PRId64
                      " (model flags differ)", m.total, log.total_params);
    double **theta = st == DP_OK ? dp_calloc((size_t)m.nparams, sizeof *theta) : NULL;
    int64_t *numel = st == DP_OK ? dp_calloc((size_t)m.nparams, sizeof *numel) : NULL;
    if (st == DP_OK && (!theta || !numel)) st = DP_ERR_NOMEM;
    for (int p = 0; st == DP_OK && p < m.nparams; p++) { theta[p] = m.params[p].data; numel[p] = m.params[p].numel; }
    char hex0[65];
    if (st == DP_OK) st = ref_dpzo_theta_sha256(hex0, theta, numel, m.nparams);
    if (st == DP_OK && strcmp(hex0, log.theta0) != 0)
        st = dp_error(DP_ERR_INVALID, "theta_0 (SHA-256 %s) differs from the log's theta_0 (%s): another model "
                      "initialisation than the log's run", hex0, log.theta0);
    if (st == DP_OK && oo->export_dir) st = make_dir(oo->export_dir);
    for (int64_t k = 0; st == DP_OK && k < log.nsteps; k++) {
        int64_t t = log.step[k];
        const double *s = log.scalar + (size_t)k * (size_t)log.n_spsa;
        dp_tensor_set ts;
        dp_tset_init(&ts);
        if (oo->export_dir) {
            st = add_params(&ts, "params", &m, theta);
            if (st == DP_OK) st = add_directions(&ts, &m, log.seed, t, log.n_spsa);
            if (st == DP_OK) st = add_vec(&ts, "step.scalar", s, log.n_spsa);
        }
        if (st == DP_OK) st = ref_dpzo_update(theta, numel, m.nparams, log.seed, t, s, log.n_spsa, log.lr, log.weight_decay);
        if (st == DP_OK && oo->export_dir) {
            char b[32];
            st = add_params(&ts, "params_after", &m, theta);
            if (st == DP_OK) st = dp_tset_set_meta(&ts, "algorithm", "dpzo-replay");
            if (st == DP_OK) st = meta_int(&ts, "step", t);
            if (st == DP_OK) st = meta_model(&ts, cfg);
            snprintf(b, sizeof b, "%" PRIu64, log.seed.k);
            if (st == DP_OK) st = dp_tset_set_meta(&ts, "seed", b);
            if (st == DP_OK) st = meta_num(&ts, "lr", log.lr);
            if (st == DP_OK) st = meta_num(&ts, "weight_decay", log.weight_decay);
            if (st == DP_OK) st = meta_int(&ts, "n_spsa", log.n_spsa);
            if (st == DP_OK) st = ref_dpzo_export_write(oo->export_dir, t, &ts);
        }
        dp_tset_free(&ts);
        if (st == DP_OK) {
            printf("replay step %" PRId64 " scalar ", t);
            print_scalars(s, log.n_spsa);
            printf("\n");
        }
    }
    char hex[65];
    if (st == DP_OK) st = ref_dpzo_theta_sha256(hex, theta, numel, m.nparams);
    if (st == DP_OK) printf("theta_T sha256 %s (after %" PRId64 " steps)\n", hex, log.nsteps);
    free(theta);
    free(numel);
    ref_model_free(&m);
    ref_dpzo_log_free(&log);
    return st;
}

static dp_status run_train(const opts_t *o, const ref_model_config *cfg, ref_dpzo_hparams hp) {
    int inplace = -1;
    if (o->inplace) {
        static const char *const dts[] = {"f32", "bf16", NULL};
        DP_TRY(dp_parse_choice(&inplace, "--inplace", o->inplace, dts));
    }

    ref_model m;
    ref_dataset d;
    memset(&d, 0, sizeof d);
    DP_TRY(ref_model_init(&m, cfg, hp.seed));
    dp_status st = ref_dpzo_cli_dataset(&d, &hp, cfg, &o->z);
    ref_dpzo_model_ctx ctx;
    ref_dpzo_problem pb;
    memset(&pb, 0, sizeof pb);
    ref_dpzo_step_out out, out2;
    memset(&out, 0, sizeof out);
    memset(&out2, 0, sizeof out2);
    ref_dpzo_inplace ip;
    memset(&ip, 0, sizeof ip);
    FILE *logf = NULL;
    dp_afile logaf = {0}; /* the update log is written atomically (temp + rename) */
    double **before = NULL;
    if (st == DP_OK) st = ref_dpzo_problem_model(&pb, &ctx, &m, &d);
    if (st == DP_OK) st = ref_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa);
    if (st == DP_OK && inplace >= 0) st = ref_dpzo_step_out_alloc(&out2, hp.n_data, hp.n_spsa);
    if (st == DP_OK && inplace >= 0) st = ref_dpzo_inplace_init(&ip, (ref_dpzo_store)inplace, &pb);
    if (st == DP_OK && o->export_dir) {
        st = make_dir(o->export_dir);
        if (st == DP_OK && !(before = ref_dpzo_arrays_alloc(pb.numel, pb.nparams))) st = DP_ERR_NOMEM;
    }
    if (st == DP_OK && o->log) {
        st = dp_afile_open(&logaf, "--log", o->log);
        logf = logaf.f;
        char hex0[65];
        if (st == DP_OK) st = ref_dpzo_theta_sha256(hex0, pb.theta, pb.numel, pb.nparams);
        if (st == DP_OK) st = ref_dpzo_log_header(logf, &hp, cfg, hex0, m.total);
    }
    if (st == DP_OK)
        printf("dpzo: model %s, %" PRId64 " parameters, N=%" PRId64 ", q=%g (expected batch %g), K=%" PRId64
               ", C=%g, sigma=%g (%s), phi=%g, lr=%g, weight decay=%g, n-spsa=%d, seed=%" PRIu64 "\n",
               cfg->kind == REF_MLP ? "mlp" : "llama", m.total, hp.n_data, hp.q, hp.q * (double)hp.n_data, hp.steps,
               hp.clip, hp.sigma, ref_dpzo_mech_name(hp.mech), hp.phi, hp.lr, hp.weight_decay, hp.n_spsa, hp.seed.k);
    for (int64_t t = 1; st == DP_OK && t <= hp.steps; t++) {
        if (before)
            for (int p = 0; p < m.nparams; p++) memcpy(before[p], pb.theta[p], (size_t)pb.numel[p] * sizeof(double));
        double rdrift = 0.0;
        int64_t viol = 0;
        if (inplace >= 0) st = ref_dpzo_inplace_step(&out2, &rdrift, &viol, &ip, &pb, &hp, t, NULL);
        if (st == DP_OK) st = ref_dpzo_step(&out, &pb, &hp, t);
        if (st == DP_OK && before) {
            dp_tensor_set ts;
            st = ref_dpzo_export_set(&ts, &m, &hp, REF_DPZO_KEY_EXPORTED(&o->z), o->z.m.seen_data, before, pb.theta,
                                     &out);
            if (st == DP_OK) st = meta_model(&ts, cfg);
            if (st == DP_OK) st = ref_dpzo_export_write(o->export_dir, t, &ts);
            dp_tset_free(&ts);
        }
        if (st == DP_OK && logf) st = ref_dpzo_log_step(logf, &hp, t, out.scalar);
        if (st != DP_OK) break;
        ref_dpzo_print_step(&out);
        if (inplace >= 0)
            printf("  inplace %s: restore drift %.3e (%" PRId64 " elements beyond the bound), |theta_inplace - theta| max %.3e\n",
                   inplace ? "bf16" : "f32", rdrift, viol, max_abs_diff_inplace(&ip, pb.theta));
    }
    if (st == DP_OK) {
        char hex[65];
        st = ref_dpzo_theta_sha256(hex, pb.theta, pb.numel, pb.nparams);
        if (st == DP_OK) printf("theta_T sha256 %s (after %" PRId64 " steps)\n", hex, hp.steps);
        if (st == DP_OK && hp.mech == REF_DPZO_LAPLACE) {
            double e0 = ref_dpzo_laplace_eps0(hp.q, hp.sigma);
            printf("pure DP (Laplace): epsilon_0 = log(1 + q (e^(1/sigma) - 1)) = %.17g per step; "
                   "T epsilon_0 = %.17g over T = %" PRId64 " steps (basic composition)\n", e0, (double)hp.steps * e0, hp.steps);
            double di = ref_dpzo_laplace_delta_impl(hp.q, hp.sigma, hp.n_spsa);
            printf("implemented sampler (Laplace): the epsilon_0 above holds for the ideal continuous Laplace; dpcert's "
                   "sampler (inversion of a 52-bit uniform, docs/rng.md) outputs |x| <= 52 ln 2 = 36.04365338911715 scale "
                   "units, so each step is (epsilon_0, delta_impl)-DP with delta_impl <= q n 2^-53 e^(1/sigma) = "
                   "q n 0.5 e^-(52 ln 2 - 1/sigma) = %.17g (T delta_impl = %.17g); floating-point porosity (Mironov 2012) "
                   "is not covered\n", di, (double)hp.steps * di);
        }
    }
    if (logf && st == DP_OK) st = ref_dpzo_log_end(logf, logaf.tmp, hp.steps);
    if (logf && st == DP_OK) st = dp_afile_commit(&logaf);
    else dp_afile_abort(&logaf);
    ref_dpzo_arrays_free(before, m.nparams);
    ref_dpzo_inplace_free(&ip);
    ref_dpzo_step_out_free(&out);
    ref_dpzo_step_out_free(&out2);
    ref_dpzo_problem_free(&pb);
    ref_dataset_free(&d);
    ref_model_free(&m);
    return st;
}

static dp_status run(int argc, char **argv) {
    opts_t o;
    memset(&o, 0, sizeof o);
    ref_dpzo_cli_init(&o.z);
    dp_opt opts[REF_DPZO_NOPTS + 4];
    size_t n = 0;
    DP_TRY(ref_dpzo_cli_add_opts(opts, &n, REF_DPZO_NOPTS + 4, &o.z));
    opts[n++] = (dp_opt){"--export", DP_OPT_STRING, &o.export_dir, NULL, "DIR: write DIR/step-NNNNNN.safetensors"};
    opts[n++] = (dp_opt){"--log", DP_OPT_STRING, &o.log, NULL, "FILE: append (step seed, released scalars) per step"};
    opts[n++] = (dp_opt){"--replay", DP_OPT_STRING, &o.replay, NULL, "FILE: rebuild theta_T from an update log, without data"};
    opts[n++] = (dp_opt){"--inplace", DP_OPT_STRING, &o.inplace, NULL,
                         "f32 | bf16: also run Algorithm 2 in place and report its drift"};
    int help = 0;
    DP_TRY(dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, &help));
    if (help) {
        printf("usage: dpcert reference dpzo --model mlp|llama [model flags] (--dataset-size N | --data FILE) --q Q\n"
               "       --steps K --clip C --sigma S [--noise gaussian|laplace] --phi PHI --lr LR [--n-spsa n] --seed SEED\n"
               "       [--noise-key KEY] [--weight-decay WD] [--export DIR] [--log FILE] [--inplace f32|bf16]\n"
               "   or: dpcert reference dpzo --model ... [model flags] --replay LOG [--export DIR]\n"
               "DP-ZO (docs/dpzo.md): one line per step (step, batch size, released scalar(s), loss).\n");
        dp_opts_print_help(opts, n);
        return DP_OK;
    }
    ref_model_config cfg;
    if (o.replay) {
        DP_TRY(ref_model_cli_finish(&cfg, &o.z.m));
        return run_replay(&o, &cfg);
    }
    ref_dpzo_hparams hp;
    DP_TRY(ref_dpzo_cli_finish(&cfg, &hp, &o.z));
    if (o.z.reveal_key && !o.z.seen_key) dp_cli_reveal_noise_key("reference dpzo", hp.key.k);
    return run_train(&o, &cfg, hp);
}

int dp_cmd_reference_dpzo(int argc, char **argv) {
    dp_status st = run(argc, argv);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    return 0;
}

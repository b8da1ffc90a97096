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

typedef struct {
    const char *model, *hidden, *noise, *noise_key, *export_dir, *log, *replay, *inplace, *seed;
    int64_t in, classes, vocab, dim, layers, heads, ffn, seq, dataset_size, steps, n_spsa;
    int tied;
    double q, clip, sigma, phi, lr, wd;
    int seen_in, seen_hidden, seen_classes, seen_vocab, seen_dim, seen_layers, seen_heads, seen_ffn, seen_seq,
        seen_tied, seen_n, seen_q, seen_steps, seen_clip, seen_sigma, seen_noise, seen_phi, seen_lr, seen_wd,
        seen_n_spsa, seen_seed, seen_key, seen_model;
} opts_t;

static dp_status fits_int(int *out, const char *what, int64_t v) {
    if (v < -1000000000 || v > 1000000000) return dp_error(DP_ERR_INVALID, "%s: %" PRId64 " is out of range", what, v);
    *out = (int)v;
    return DP_OK;
}

/* Model flags with the names of `reference dpsgd`. */
static dp_status build_config(ref_model_config *cfg, const opts_t *o) {
    static const char *const kinds[] = {"mlp", "llama", NULL};
    int kind = 0;
    if (!o->seen_model) return dp_error(DP_ERR_USAGE, "missing required option --model mlp|llama");
    DP_TRY(dp_parse_choice(&kind, "--model", o->model, kinds));
    ref_config_default(cfg, (ref_model_kind)kind);
    const char *mlp_only = o->seen_in ? "--in" : o->seen_hidden ? "--hidden" : o->seen_classes ? "--classes" : NULL;
    const char *llama_only = o->seen_vocab ? "--vocab" : o->seen_dim ? "--dim" : o->seen_layers ? "--layers"
                           : o->seen_heads ? "--heads" : o->seen_ffn ? "--ffn" : o->seen_seq ? "--seq"
                           : o->seen_tied ? "--tied" : NULL;
    if (kind == REF_MLP && llama_only) return dp_error(DP_ERR_USAGE, "%s applies to --model llama only", llama_only);
    if (kind == REF_LLAMA && mlp_only) return dp_error(DP_ERR_USAGE, "%s applies to --model mlp only", mlp_only);
    if (o->seen_in) DP_TRY(fits_int(&cfg->in, "--in", o->in));
    if (o->seen_classes) DP_TRY(fits_int(&cfg->classes, "--classes", o->classes));
    if (o->seen_hidden) {
        int64_t h[REF_MAX_HIDDEN];
        size_t nh = 0;
        DP_TRY(dp_parse_i64_list(h, REF_MAX_HIDDEN, &nh, "--hidden", o->hidden));
        cfg->nhidden = (int)nh;
        for (size_t k = 0; k < nh; k++) DP_TRY(fits_int(&cfg->hidden[k], "--hidden", h[k]));
    }
    if (o->seen_vocab) DP_TRY(fits_int(&cfg->vocab, "--vocab", o->vocab));
    if (o->seen_dim) DP_TRY(fits_int(&cfg->dim, "--dim", o->dim));
    if (o->seen_layers) DP_TRY(fits_int(&cfg->layers, "--layers", o->layers));
    if (o->seen_heads) DP_TRY(fits_int(&cfg->heads, "--heads", o->heads));
    if (o->seen_ffn) DP_TRY(fits_int(&cfg->ffn, "--ffn", o->ffn));
    if (o->seen_seq) DP_TRY(fits_int(&cfg->seq, "--seq", o->seq));
    cfg->tied = o->tied;
    return ref_config_check(cfg);
}

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

static dp_status meta_hparams(dp_tensor_set *s, const ref_dpzo_hparams *hp, int key_given, int64_t step) {
    DP_TRY(dp_tset_set_meta(s, "algorithm", "dpzo"));
    DP_TRY(meta_int(s, "step", step));
    DP_TRY(meta_int(s, "dataset_size", hp->n_data));
    DP_TRY(dp_tset_set_meta(s, "data", "generated"));
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

static dp_status step_path(char *path, size_t len, const char *dir, int64_t step) {
    if ((size_t)snprintf(path, len, "%s/step-%06" PRId64 ".safetensors", dir, step) >= len)
        return dp_error(DP_ERR_INVALID, "--export: directory name too long");
    return DP_OK;
}

static dp_status make_dir(const char *dir) {
    return dp_mkdir_p("--export", dir);
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

static dp_status run_replay(const opts_t *o, const ref_model_config *cfg) {
    static const char *const forbidden[] = {"--dataset-size", "--q", "--steps", "--clip", "--sigma", "--noise", "--phi",
                                            "--noise-key", "--log", "--inplace"};
    const int seen[] = {o->seen_n, o->seen_q, o->seen_steps, o->seen_clip, o->seen_sigma, o->seen_noise, o->seen_phi,
                        o->seen_key, o->log != NULL, o->inplace != NULL};
    for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
        if (seen[k]) return dp_error(DP_ERR_USAGE, "%s is not used with --replay (the log holds the released scalars)", forbidden[k]);
    ref_dpzo_log log;
    DP_TRY(ref_dpzo_log_read(&log, o->replay));
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
    if (st == DP_OK && o->export_dir) st = make_dir(o->export_dir);
    for (int64_t k = 0; st == DP_OK && k < log.nsteps; k++) {
        int64_t t = log.step[k];
        const double *s = log.scalar + (size_t)k * (size_t)log.n_spsa;
        dp_tensor_set ts;
        dp_tset_init(&ts);
        if (o->export_dir) {
            st = add_params(&ts, "params", &m, theta);
            if (st == DP_OK) st = add_directions(&ts, &m, log.seed, t, log.n_spsa);
            if (st == DP_OK) st = add_vec(&ts, "step.scalar", s, log.n_spsa);
        }
        if (st == DP_OK) st = ref_dpzo_update(theta, numel, m.nparams, log.seed, t, s, log.n_spsa, log.lr, log.weight_decay);
        if (st == DP_OK && o->export_dir) {
            char path[4096], b[32];
            st = add_params(&ts, "params_after", &m, theta);
            if (st == DP_OK) st = dp_tset_set_meta(&ts, "algorithm", "dpzo-replay");
            if (st == DP_OK) st = meta_int(&ts, "step", t);
            if (st == DP_OK) st = meta_model(&ts, cfg);
            snprintf(b, sizeof b, "%" PRIu64, log.seed.k);
            if (st == DP_OK) st = dp_tset_set_meta(&ts, "seed", b);
            if (st == DP_OK) st = meta_num(&ts, "lr", log.lr);
            if (st == DP_OK) st = meta_num(&ts, "weight_decay", log.weight_decay);
            if (st == DP_OK) st = meta_int(&ts, "n_spsa", log.n_spsa);
            if (st == DP_OK) st = step_path(path, sizeof path, o->export_dir, t);
            if (st == DP_OK) st = dp_st_write(path, &ts);
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

static dp_status run_train(const opts_t *o, const ref_model_config *cfg) {
    static const char *const req[] = {"--dataset-size", "--q", "--steps", "--clip", "--sigma", "--phi", "--lr", "--seed"};
    const int seen[] = {o->seen_n, o->seen_q, o->seen_steps, o->seen_clip, o->seen_sigma, o->seen_phi, o->seen_lr, o->seen_seed};
    for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
        if (!seen[k]) return dp_error(DP_ERR_USAGE, "missing required option %s", req[k]);
    ref_dpzo_hparams hp;
    memset(&hp, 0, sizeof hp);
    static const char *const mechs[] = {"gaussian", "laplace", NULL};
    int mech = 0;
    if (o->seen_noise) DP_TRY(dp_parse_choice(&mech, "--noise", o->noise, mechs));
    hp.mech = (ref_dpzo_mech)mech;
    hp.n_data = o->dataset_size;
    hp.q = o->q;
    hp.steps = o->steps;
    hp.clip = o->clip;
    hp.sigma = o->sigma;
    hp.phi = o->phi;
    hp.lr = o->lr;
    hp.weight_decay = o->seen_wd ? o->wd : 0.0;
    if (o->n_spsa < 1 || o->n_spsa > REF_DPZO_MAX_N)
        return dp_error(DP_ERR_INVALID, "--n-spsa must be in [1, %d] (got %" PRId64 ")", REF_DPZO_MAX_N, o->n_spsa);
    hp.n_spsa = (int)o->n_spsa;
    DP_TRY(dp_parse_u64(&hp.seed.k, "--seed", o->seed));
    if (o->seen_key) DP_TRY(dp_parse_u64(&hp.key.k, "--noise-key", o->noise_key));
    else DP_TRY(dp_noise_key_random(&hp.key));
    DP_TRY(ref_dpzo_check(&hp));
    int inplace = -1;
    if (o->inplace) {
        static const char *const dts[] = {"f32", "bf16", NULL};
        DP_TRY(dp_parse_choice(&inplace, "--inplace", o->inplace, dts));
    }

    ref_model m;
    ref_dataset d;
    memset(&d, 0, sizeof d);
    DP_TRY(ref_model_init(&m, cfg, hp.seed));
    dp_status st = ref_dataset_generate(&d, cfg, hp.n_data, hp.seed);
    ref_dpzo_model_ctx ctx;
    ref_dpzo_problem pb;
    memset(&pb, 0, sizeof pb);
    ref_dpzo_step_out out, out2;
    memset(&out, 0, sizeof out);
    memset(&out2, 0, sizeof out2);
    ref_dpzo_inplace ip;
    memset(&ip, 0, sizeof ip);
    FILE *logf = NULL;
    double **before = NULL;
    if (st == DP_OK) st = ref_dpzo_problem_model(&pb, &ctx, &m, &d);
    if (st == DP_OK) st = ref_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa);
    if (st == DP_OK && inplace >= 0) st = ref_dpzo_step_out_alloc(&out2, hp.n_data, hp.n_spsa);
    if (st == DP_OK && inplace >= 0) st = ref_dpzo_inplace_init(&ip, (ref_dpzo_store)inplace, &pb);
    if (st == DP_OK && o->export_dir) {
        st = make_dir(o->export_dir);
        before = dp_calloc((size_t)m.nparams, sizeof *before);
        if (!before) st = DP_ERR_NOMEM;
        for (int p = 0; st == DP_OK && p < m.nparams; p++)
            if (!(before[p] = dp_calloc((size_t)m.params[p].numel, sizeof(double)))) st = DP_ERR_NOMEM;
    }
    if (st == DP_OK && o->log) {
        logf = fopen(o->log, "w");
        if (!logf) st = dp_error(DP_ERR_IO, "--log: cannot open '%s' for writing", o->log);
        if (st == DP_OK) st = ref_dpzo_log_header(logf, &hp, m.total);
    }
    if (st == DP_OK)
        printf("dpzo: model %s, %" PRId64 " parameters, N=%" PRId64 ", q=%g (expected batch %g), K=%" PRId64
               ", C=%g, sigma=%g (%s), phi=%g, lr=%g, weight decay=%g, n-spsa=%d, seed=%" PRIu64 "\n",
               cfg->kind == REF_MLP ? "mlp" : "llama", m.total, hp.n_data, hp.q, hp.q * (double)hp.n_data, hp.steps,
               hp.clip, hp.sigma, mechs[mech], hp.phi, hp.lr, hp.weight_decay, hp.n_spsa, hp.seed.k);
    for (int64_t t = 1; st == DP_OK && t <= hp.steps; t++) {
        if (before)
            for (int p = 0; p < m.nparams; p++) memcpy(before[p], pb.theta[p], (size_t)pb.numel[p] * sizeof(double));
        double rdrift = 0.0;
        int64_t viol = 0;
        if (inplace >= 0) st = ref_dpzo_inplace_step(&out2, &rdrift, &viol, &ip, &pb, &hp, t, NULL);
        if (st == DP_OK) st = ref_dpzo_step(&out, &pb, &hp, t);
        if (st == DP_OK && before) {
            dp_tensor_set ts;
            dp_tset_init(&ts);
            char path[4096];
            int64_t bshape[1] = {out.b};
            static const int64_t empty_idx = 0;
            st = add_params(&ts, "params", &m, before);
            if (st == DP_OK) st = add_directions(&ts, &m, hp.seed, t, hp.n_spsa);
            if (st == DP_OK) st = dp_tset_add_raw(&ts, "batch.indices", DP_I64, out.b ? out.idx : &empty_idx, 1, bshape);
            if (st == DP_OK) st = add_per_sample(&ts, "per_sample.loss_plus", out.loss_plus, hp.n_spsa, out.b);
            if (st == DP_OK) st = add_per_sample(&ts, "per_sample.loss_minus", out.loss_minus, hp.n_spsa, out.b);
            if (st == DP_OK) st = add_per_sample(&ts, "per_sample.diff_clipped", out.diff_clipped, hp.n_spsa, out.b);
            if (st == DP_OK) st = add_vec(&ts, "step.noise", out.noise, hp.n_spsa);
            if (st == DP_OK) st = add_vec(&ts, "step.scalar", out.scalar, hp.n_spsa);
            if (st == DP_OK) st = add_params(&ts, "params_after", &m, pb.theta);
            if (st == DP_OK) st = meta_hparams(&ts, &hp, o->seen_key, t);
            if (st == DP_OK) st = meta_model(&ts, cfg);
            if (st == DP_OK) st = step_path(path, sizeof path, o->export_dir, t);
            if (st == DP_OK) st = dp_st_write(path, &ts);
            dp_tset_free(&ts);
        }
        if (st == DP_OK && logf) st = ref_dpzo_log_step(logf, &hp, t, out.scalar);
        if (st != DP_OK) break;
        printf("step %" PRId64 " batch %" PRId64 " scalar ", t, out.b);
        print_scalars(out.scalar, hp.n_spsa);
        if (out.b) printf(" loss %.10e\n", out.loss);
        else printf(" loss n/a\n");
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
        }
    }
    if (logf && fclose(logf) != 0 && st == DP_OK) st = dp_error(DP_ERR_IO, "--log: writing '%s' failed", o->log);
    if (before) for (int p = 0; p < m.nparams; p++) free(before[p]);
    free(before);
    ref_dpzo_inplace_free(&ip);
    ref_dpzo_step_out_free(&out);
    ref_dpzo_step_out_free(&out2);
    ref_dpzo_problem_free(&pb);
    ref_dataset_free(&d);
    ref_model_free(&m);
    return st;
}

int dp_cmd_reference_dpzo(int argc, char **argv) {
    opts_t o;
    memset(&o, 0, sizeof o);
    o.n_spsa = 1;
    const dp_opt opts[] = {
        {"--model", DP_OPT_STRING, &o.model, &o.seen_model, "mlp | llama"},
        {"--in", DP_OPT_INT, &o.in, &o.seen_in, "mlp input size (16)"},
        {"--hidden", DP_OPT_STRING, &o.hidden, &o.seen_hidden, "mlp hidden widths, comma-separated (32,32)"},
        {"--classes", DP_OPT_INT, &o.classes, &o.seen_classes, "mlp classes (10)"},
        {"--vocab", DP_OPT_INT, &o.vocab, &o.seen_vocab, "llama vocabulary (64)"},
        {"--dim", DP_OPT_INT, &o.dim, &o.seen_dim, "llama model dimension (32)"},
        {"--layers", DP_OPT_INT, &o.layers, &o.seen_layers, "llama layers (2)"},
        {"--heads", DP_OPT_INT, &o.heads, &o.seen_heads, "llama heads (4)"},
        {"--ffn", DP_OPT_INT, &o.ffn, &o.seen_ffn, "llama feed-forward width (64)"},
        {"--seq", DP_OPT_INT, &o.seq, &o.seen_seq, "llama sequence length (16)"},
        {"--tied", DP_OPT_FLAG, &o.tied, &o.seen_tied, "llama: tie lm_head to tok_emb"},
        {"--dataset-size", DP_OPT_INT, &o.dataset_size, &o.seen_n, "N examples (generated from the seed)"},
        {"--q", DP_OPT_DOUBLE, &o.q, &o.seen_q, "Poisson sampling rate in (0, 1]"},
        {"--steps", DP_OPT_INT, &o.steps, &o.seen_steps, "K steps (numbered 1..K)"},
        {"--clip", DP_OPT_DOUBLE, &o.clip, &o.seen_clip, "C > 0: loss differences are clipped to [-C, C]"},
        {"--sigma", DP_OPT_DOUBLE, &o.sigma, &o.seen_sigma, "noise multiplier >= 0"},
        {"--noise", DP_OPT_STRING, &o.noise, &o.seen_noise, "gaussian (default) | laplace"},
        {"--phi", DP_OPT_DOUBLE, &o.phi, &o.seen_phi, "perturbation scale > 0"},
        {"--lr", DP_OPT_DOUBLE, &o.lr, &o.seen_lr, "learning rate >= 0"},
        {"--weight-decay", DP_OPT_DOUBLE, &o.wd, &o.seen_wd, "weight decay >= 0 (0)"},
        {"--n-spsa", DP_OPT_INT, &o.n_spsa, &o.seen_n_spsa, "directions per step (1)"},
        {"--seed", DP_OPT_STRING, &o.seed, &o.seen_seed, "public seed (init, data, directions)"},
        {"--noise-key", DP_OPT_STRING, &o.noise_key, &o.seen_key, "secret noise key (noise, sampling); random if absent"},
        {"--export", DP_OPT_STRING, &o.export_dir, NULL, "DIR: write DIR/step-NNNNNN.safetensors"},
        {"--log", DP_OPT_STRING, &o.log, NULL, "FILE: append (step seed, released scalars) per step"},
        {"--replay", DP_OPT_STRING, &o.replay, NULL, "FILE: rebuild theta_T from an update log, without data"},
        {"--inplace", DP_OPT_STRING, &o.inplace, NULL, "f32 | bf16: also run Algorithm 2 in place and report its drift"},
    };
    int help = 0;
    dp_status st = dp_opts_parse(opts, sizeof opts / sizeof opts[0], argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    if (help) {
        printf("usage: dpcert reference dpzo --model mlp|llama [model flags] --dataset-size N --q Q --steps K --clip C\n"
               "       --sigma S [--noise gaussian|laplace] --phi PHI --lr LR [--n-spsa n] --seed SEED [--noise-key KEY]\n"
               "       [--weight-decay WD] [--export DIR] [--log FILE] [--inplace f32|bf16]\n"
               "   or: dpcert reference dpzo --model ... [model flags] --replay LOG [--export DIR]\n"
               "DP-ZO (docs/dpzo.md): one line per step (step, batch size, released scalar(s), loss).\n");
        dp_opts_print_help(opts, sizeof opts / sizeof opts[0]);
        return 0;
    }
    ref_model_config cfg;
    st = build_config(&cfg, &o);
    if (st == DP_OK) st = o.replay ? run_replay(&o, &cfg) : run_train(&o, &cfg);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    return 0;
}

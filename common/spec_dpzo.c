/* common/spec_dpzo.c — DP-ZO's neutral plumbing (common/spec_dpzo.h): the step output,
 * the option table and its parsing, the export set and writer (docs/dpzo.md "Exports"),
 * the per-step log line. */
#include "common/spec_dpzo.h"
#include "common/alloc.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "common/tensor.h"

/* ---- step output ---- */
dp_status dp_dpzo_step_out_alloc(dp_dpzo_step_out *o, int64_t n_data, int n) {
    memset(o, 0, sizeof *o);
    size_t nb = (size_t)n * (size_t)n_data;
    o->idx = dp_calloc((size_t)n_data, sizeof *o->idx);
    o->loss_plus = dp_calloc(nb, sizeof(double));
    o->loss_minus = dp_calloc(nb, sizeof(double));
    o->diff_clipped = dp_calloc(nb, sizeof(double));
    o->sum = dp_calloc((size_t)n, sizeof(double));
    o->noise = dp_calloc((size_t)n, sizeof(double));
    o->scalar = dp_calloc((size_t)n, sizeof(double));
    o->n = n;
    o->cap_n_data = n_data;
    if (!o->idx || !o->loss_plus || !o->loss_minus || !o->diff_clipped || !o->sum || !o->noise || !o->scalar) {
        dp_dpzo_step_out_free(o);
        return DP_ERR_NOMEM;
    }
    return DP_OK;
}

void dp_dpzo_step_out_free(dp_dpzo_step_out *o) {
    dp_free(o->idx); dp_free(o->loss_plus); dp_free(o->loss_minus); dp_free(o->diff_clipped);
    dp_free(o->sum); dp_free(o->noise); dp_free(o->scalar);
    memset(o, 0, sizeof *o);
}

/* ---------------------------------------------------------------- options */

void dp_dpzo_cli_init(dp_dpzo_cli *c) {
    memset(c, 0, sizeof *c);
    dp_model_cli_init(&c->m, 0);
    c->n_spsa = 1;
}

#define DP_DPZO_OWN_NOPTS (DP_DPZO_NOPTS - DP_MODEL_NOPTS)

dp_status dp_dpzo_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, dp_dpzo_cli *c) {
    const dp_opt mine[DP_DPZO_OWN_NOPTS] = {
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
    if (*n + DP_DPZO_NOPTS > cap) return dp_error(DP_ERR_INTERNAL, "option table too small");
    DP_TRY(dp_model_cli_add_opts(opts, n, cap, &c->m, "N examples generated from the seed (required without --data)"));
    for (size_t k = 0; k < DP_DPZO_OWN_NOPTS; k++) opts[(*n)++] = mine[k];
    return DP_OK;
}

const char *dp_dpzo_mech_name(dp_dpzo_mech mech) {
    return mech == DP_DPZO_LAPLACE ? "laplace" : "gaussian";
}

dp_status dp_dpzo_cli_finish(dp_model_config *mc, dp_dpzo_hparams *hp, const dp_dpzo_cli *o, dp_dpzo_check_fn check) {
    DP_TRY(dp_model_cli_finish(mc, &o->m));
    static const char *const req[] = {"--dataset-size", "--q", "--steps", "--clip", "--sigma", "--phi", "--lr", "--seed"};
    const int seen[] = {o->m.seen_n || o->m.seen_data, o->seen_q, o->seen_steps, o->seen_clip, o->seen_sigma,
                        o->seen_phi, o->seen_lr, o->seen_seed};
    for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
        if (!seen[k]) return dp_error(DP_ERR_USAGE, "missing required option %s", req[k]);
    memset(hp, 0, sizeof *hp);
    static const char *const mechs[] = {"gaussian", "laplace", NULL};
    int mech = 0;
    if (o->seen_noise) DP_TRY(dp_parse_choice(&mech, "--noise", o->noise, mechs));
    hp->mech = (dp_dpzo_mech)mech;
    /* with --data and no --dataset-size, N = 1 stands in until dp_dpzo_cli_dataset sets the
     * file's count and checks again */
    hp->n_data = o->m.seen_n ? o->m.n : 1;
    hp->q = o->q;
    hp->steps = o->steps;
    hp->clip = o->clip;
    hp->sigma = o->sigma;
    hp->phi = o->phi;
    hp->lr = o->lr;
    hp->weight_decay = o->seen_wd ? o->wd : 0.0;
    if (o->n_spsa < 1 || o->n_spsa > DP_DPZO_MAX_N)
        return dp_error(DP_ERR_INVALID, "--n-spsa must be in [1, %d] (got %" PRId64 ")", DP_DPZO_MAX_N, o->n_spsa);
    hp->n_spsa = (int)o->n_spsa;
    DP_TRY(dp_parse_u64(&hp->seed.k, "--seed", o->seed));
    if (o->seen_key) DP_TRY(dp_parse_u64(&hp->key.k, "--noise-key", o->noise_key));
    else DP_TRY(dp_noise_key_random(&hp->key));
    return check(hp);
}

dp_status dp_dpzo_cli_dataset(dp_dataset *d, dp_dpzo_hparams *hp, const dp_model_config *mc,
                              const dp_dpzo_cli *c, dp_dpzo_check_fn check) {
    DP_TRY(dp_model_cli_dataset(d, &hp->n_data, mc, &c->m, hp->seed));
    dp_status st = check(hp);
    if (st != DP_OK) dp_dataset_free(d);
    return st;
}

/* ---------------------------------------------------------------- exports */

dp_status dp_dpzo_meta_num(dp_tensor_set *s, const char *k, double v) {
    char b[64];
    snprintf(b, sizeof b, "%.17g", v);
    return dp_tset_set_meta(s, k, b);
}
dp_status dp_dpzo_meta_int(dp_tensor_set *s, const char *k, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    return dp_tset_set_meta(s, k, b);
}

dp_status dp_dpzo_meta_model(dp_tensor_set *s, const dp_model_config *c) {
    DP_TRY(dp_tset_set_meta(s, "model", c->kind == DP_MLP ? "mlp" : "llama"));
    if (c->kind == DP_MLP) {
        char b[256] = "";
        for (int k = 0; k < c->nhidden; k++) {
            size_t l = strlen(b);
            snprintf(b + l, sizeof b - l, "%s%d", k ? "," : "", c->hidden[k]);
        }
        DP_TRY(dp_dpzo_meta_int(s, "in", c->in));
        DP_TRY(dp_tset_set_meta(s, "hidden", b));
        DP_TRY(dp_dpzo_meta_int(s, "classes", c->classes));
    } else {
        DP_TRY(dp_dpzo_meta_int(s, "vocab", c->vocab));
        DP_TRY(dp_dpzo_meta_int(s, "dim", c->dim));
        DP_TRY(dp_dpzo_meta_int(s, "layers", c->layers));
        DP_TRY(dp_dpzo_meta_int(s, "heads", c->heads));
        DP_TRY(dp_dpzo_meta_int(s, "ffn", c->ffn));
        DP_TRY(dp_dpzo_meta_int(s, "seq", c->seq));
        DP_TRY(dp_dpzo_meta_int(s, "tied", c->tied));
        DP_TRY(dp_dpzo_meta_num(s, "rope_theta", c->rope_theta));
        DP_TRY(dp_dpzo_meta_num(s, "norm_eps", c->norm_eps));
    }
    return DP_OK;
}

static dp_status meta_hparams(dp_tensor_set *s, const dp_dpzo_hparams *hp, int key_given, int data_file, int64_t step) {
    DP_TRY(dp_tset_set_meta(s, "algorithm", "dpzo"));
    DP_TRY(dp_dpzo_meta_int(s, "step", step));
    DP_TRY(dp_dpzo_meta_int(s, "dataset_size", hp->n_data));
    DP_TRY(dp_tset_set_meta(s, "data", data_file ? "file" : "generated"));
    DP_TRY(dp_dpzo_meta_num(s, "q", hp->q));
    DP_TRY(dp_dpzo_meta_int(s, "steps", hp->steps));
    DP_TRY(dp_dpzo_meta_num(s, "clip", hp->clip));
    DP_TRY(dp_dpzo_meta_num(s, "sigma", hp->sigma));
    DP_TRY(dp_tset_set_meta(s, "noise", hp->mech == DP_DPZO_GAUSSIAN ? "gaussian" : "laplace"));
    DP_TRY(dp_dpzo_meta_num(s, "phi", hp->phi));
    DP_TRY(dp_dpzo_meta_num(s, "lr", hp->lr));
    DP_TRY(dp_dpzo_meta_num(s, "weight_decay", hp->weight_decay));
    DP_TRY(dp_dpzo_meta_int(s, "n_spsa", hp->n_spsa));
    DP_TRY(dp_dpzo_meta_num(s, "batch_expected", hp->q * (double)hp->n_data));
    DP_TRY(dp_dpzo_meta_num(s, "denominator", ((hp->q * (double)hp->n_data) * 2.0) * hp->phi)); /* docs/dpzo.md step 2.6 */
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
dp_status dp_dpzo_export_params(dp_tensor_set *s, const char *prefix, const dp_model *m, double *const *theta) {
    char name[128];
    for (int p = 0; p < m->nparams; p++) {
        snprintf(name, sizeof name, "%s.%s", prefix, m->params[p].name);
        DP_TRY(dp_tset_add_f64(s, name, theta[p], m->params[p].ndim, m->params[p].shape));
    }
    return DP_OK;
}

/* dpzo.z.<name>: [shape] for n == 1, [n, shape] for n > 1 (generated by `dir` from the seed). */
dp_status dp_dpzo_export_directions(dp_tensor_set *s, const dp_model *m, dp_seed seed, int64_t step, int n, dp_dpzo_dir_fn dir) {
    char name[128];
    for (int p = 0; p < m->nparams; p++) {
        const dp_param *P = &m->params[p];
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
            st = dir(z + (size_t)j * (size_t)P->numel, seed, step, p, j, P->numel);
        snprintf(name, sizeof name, "dpzo.z.%s", P->name);
        if (st == DP_OK) st = dp_tset_add_f64(s, name, z, nd, shape);
        dp_free(z);
        DP_TRY(st);
    }
    return DP_OK;
}

/* step.noise / step.scalar: a scalar for n == 1, [n] otherwise. */
dp_status dp_dpzo_export_vec(dp_tensor_set *s, const char *name, const double *v, int n) {
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

dp_status dp_dpzo_export_set(dp_tensor_set *ts, const dp_model *m, const dp_dpzo_hparams *hp, int key_given,
                             int data_file, double *const *before, double *const *after, const dp_dpzo_step_out *o,
                             dp_dpzo_dir_fn dir) {
    static const int64_t empty_idx = 0; /* a valid pointer for a [0] tensor */
    int64_t bshape[1] = {o->b};
    const int n = hp->n_spsa;
    dp_tset_init(ts);
    dp_status st = dp_dpzo_export_params(ts, "params", m, before);
    if (st == DP_OK) st = dp_dpzo_export_directions(ts, m, hp->seed, o->step, n, dir);
    if (st == DP_OK) st = dp_tset_add_raw(ts, "batch.indices", DP_I64, o->b ? o->idx : &empty_idx, 1, bshape);
    if (st == DP_OK) st = add_per_sample(ts, "per_sample.loss_plus", o->loss_plus, n, o->b);
    if (st == DP_OK) st = add_per_sample(ts, "per_sample.loss_minus", o->loss_minus, n, o->b);
    if (st == DP_OK) st = add_per_sample(ts, "per_sample.diff_clipped", o->diff_clipped, n, o->b);
    if (st == DP_OK) st = dp_dpzo_export_vec(ts, "step.noise", o->noise, n);
    if (st == DP_OK) st = dp_dpzo_export_vec(ts, "step.scalar", o->scalar, n);
    if (st == DP_OK) st = dp_dpzo_export_params(ts, "params_after", m, after);
    if (st == DP_OK) st = meta_hparams(ts, hp, key_given, data_file, o->step);
    if (st == DP_OK) st = dp_dpzo_meta_int(ts, "dropped", o->ndropped);
    if (st != DP_OK) dp_tset_free(ts);
    return st;
}

dp_status dp_dpzo_export_write(const char *dir, int64_t step, const dp_tensor_set *ts) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/step-%06" PRId64 ".safetensors", dir, step) >= sizeof path)
        return dp_error(DP_ERR_INVALID, "--export: directory name too long");
    return dp_st_write(path, ts);
}

void dp_dpzo_print_scalars(const double *s, int n) {
    for (int j = 0; j < n; j++) printf("%s%.10e", j ? "," : "", s[j]);
}

void dp_dpzo_print_step(const dp_dpzo_step_out *o) {
    printf("step %" PRId64 " batch %" PRId64 " scalar ", o->step, o->b);
    dp_dpzo_print_scalars(o->scalar, o->n);
    if (isnan(o->loss)) printf(" loss n/a");
    else printf(" loss %.10e", o->loss);
    if (o->ndropped) printf(" dropped %" PRId64, o->ndropped);
    printf("\n");
}

/* common/spec_dpsgd.c — DP-SGD's neutral plumbing (common/spec_dpsgd.h): configuration
 * defaults, the step output's release, the option table and its parsing, the export set
 * and writer (docs/dpsgd.md "Exports"), the per-step log line. */
#include "common/spec_dpsgd.h"
#include "common/alloc.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/safetensors.h"
#include "common/version.h"

/* ---------------------------------------------------------------- config and step output */

void dp_dpsgd_config_default(dp_dpsgd_config *c) {
    memset(c, 0, sizeof *c);
    c->n = 64;
    c->q = 0.125;
    c->steps = 1;
    c->clip = 1.0;
    c->sigma = 1.0;
    c->style = DP_CLIP_FLAT;
    c->clip_fn = DP_CLIPFN_ABADI;
    c->gamma = 0.01;
    c->micro_batches = 1;
    c->opt = DP_OPT_SGD;
    c->lr = 0.1;
    c->momentum = 0.0;
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->adam_eps = 1e-8;
    c->weight_decay = 0.01;
    c->precision = DP_PREC_DOUBLE;
}

static void free_arrays(double **a, int n) {
    if (!a) return;
    for (int p = 0; p < n; p++) dp_free(a[p]);
    dp_free(a);
}

void dp_dpsgd_step_free(dp_dpsgd_step_out *o) {
    if (!o) return;
    dp_free(o->indices); dp_free(o->loss); dp_free(o->norm); dp_free(o->group_norm); dp_free(o->clip_factor); dp_free(o->dropped);
    free_arrays(o->grad, o->nparams);
    free_arrays(o->clipped_sum, o->nparams);
    free_arrays(o->noise, o->nparams);
    free_arrays(o->private_grad, o->nparams);
    memset(o, 0, sizeof *o);
}

/* ---------------------------------------------------------------- options */

void dp_dpsgd_cli_init(dp_dpsgd_cli *cli) {
    memset(cli, 0, sizeof *cli);
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    dp_model_cli_init(&cli->m, c.n);
    cli->clipping = "flat";
    cli->clip_fn = "abadi";
    cli->optimizer = "sgd";
    cli->precision = "double";
    cli->q = c.q;
    cli->steps = c.steps;
    cli->clip = c.clip;
    cli->sigma = c.sigma;
    cli->gamma = c.gamma;
    cli->micro_batches = c.micro_batches;
    cli->lr = c.lr;
    cli->momentum = c.momentum;
    cli->beta1 = c.beta1;
    cli->beta2 = c.beta2;
    cli->adam_eps = c.adam_eps;
    cli->weight_decay = c.weight_decay;
    cli->seed = 0;
}

#define DP_DPSGD_OWN_NOPTS (DP_DPSGD_NOPTS - DP_MODEL_NOPTS)

dp_status dp_dpsgd_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, dp_dpsgd_cli *c) {
    const dp_opt mine[DP_DPSGD_OWN_NOPTS] = {
        {"--q", DP_OPT_DOUBLE, &c->q, NULL, "Poisson sampling rate in (0, 1] (0.125)"},
        {"--steps", DP_OPT_INT, &c->steps, NULL, "logical steps K (1)"},
        {"--clip", DP_OPT_DOUBLE, &c->clip, NULL, "clipping threshold C > 0 (1)"},
        {"--sigma", DP_OPT_DOUBLE, &c->sigma, NULL, "noise multiplier >= 0 (1)"},
        {"--clipping", DP_OPT_STRING, &c->clipping, NULL, "flat | per-layer | group (flat)"},
        {"--groups", DP_OPT_STRING, &c->groups, &c->seen_groups,
         "per-layer: tensor|block[:R1,...]; group: NAME=GLOB[|GLOB]:R;..."},
        {"--clip-fn", DP_OPT_STRING, &c->clip_fn, NULL, "abadi | automatic (abadi)"},
        {"--gamma", DP_OPT_DOUBLE, &c->gamma, &c->seen_gamma, "automatic clipping constant (0.01)"},
        {"--micro-batches", DP_OPT_INT, &c->micro_batches, NULL, "micro-batches per logical step k (1)"},
        {"--optimizer", DP_OPT_STRING, &c->optimizer, NULL, "sgd | adamw (sgd)"},
        {"--lr", DP_OPT_DOUBLE, &c->lr, NULL, "learning rate (0.1)"},
        {"--momentum", DP_OPT_DOUBLE, &c->momentum, &c->seen_momentum, "sgd momentum in [0, 1) (0)"},
        {"--beta1", DP_OPT_DOUBLE, &c->beta1, &c->seen_beta1, "adamw beta1 (0.9)"},
        {"--beta2", DP_OPT_DOUBLE, &c->beta2, &c->seen_beta2, "adamw beta2 (0.999)"},
        {"--adam-eps", DP_OPT_DOUBLE, &c->adam_eps, &c->seen_adam_eps, "adamw epsilon (1e-8)"},
        {"--weight-decay", DP_OPT_DOUBLE, &c->weight_decay, &c->seen_wd, "adamw decoupled weight decay (0.01)"},
        {"--seed", DP_OPT_U64, &c->seed, NULL, "public seed: init and data (0)"},
        {"--noise-key", DP_OPT_U64, &c->key, &c->seen_key, "secret noise key (default: fresh random, not exported)"},
        {"--reveal-noise-key", DP_OPT_FLAG, &c->reveal_key, NULL,
         "print the fresh random noise key on stderr and export it (the run becomes reproducible)"},
    };
    if (*n + DP_DPSGD_NOPTS > cap) return dp_error(DP_ERR_INTERNAL, "option table too small");
    DP_TRY(dp_model_cli_add_opts(opts, n, cap, &c->m, "N examples generated from the seed (64)"));
    for (size_t k = 0; k < DP_DPSGD_OWN_NOPTS; k++) opts[(*n)++] = mine[k];
    return DP_OK;
}

dp_status dp_dpsgd_cli_finish(dp_model_config *mc, dp_dpsgd_config *c, const dp_dpsgd_cli *o, dp_dpsgd_check_fn check) {
    static const char *const styles[] = {"flat", "per-layer", "group", NULL};
#define DP_CLIPFN_NAME_(ID, name) name,
    static const char *const fns[] = {DP_CLIP_FNS(DP_CLIPFN_NAME_) NULL};
#undef DP_CLIPFN_NAME_
    static const char *const optims[] = {"sgd", "adamw", NULL};
    static const char *const precs[] = {"double", "mpfr", NULL};
    int v = 0;
    DP_TRY(dp_model_cli_finish(mc, &o->m));

    dp_dpsgd_config_default(c);
    c->n = o->m.n; /* with --data: replaced by the file's count in dp_dpsgd_cli_dataset */
    c->q = o->q;
    c->steps = o->steps;
    c->clip = o->clip;
    c->sigma = o->sigma;
    DP_TRY(dp_parse_choice(&v, "--clipping", o->clipping, styles));
    c->style = (dp_clip_style)v;
    if (o->seen_groups) {
        if (strlen(o->groups) >= DP_MAX_SPEC) return dp_error(DP_ERR_INVALID, "--groups: spec too long");
        snprintf(c->groups, sizeof c->groups, "%s", o->groups);
    }
    DP_TRY(dp_parse_choice(&v, "--clip-fn", o->clip_fn, fns));
    c->clip_fn = (dp_clip_fn)v;
    if (o->seen_gamma && c->clip_fn != DP_CLIPFN_AUTOMATIC)
        return dp_error(DP_ERR_USAGE, "--gamma applies to --clip-fn automatic only");
    c->gamma = o->gamma;
    c->micro_batches = o->micro_batches;
    DP_TRY(dp_parse_choice(&v, "--optimizer", o->optimizer, optims));
    c->opt = (dp_optimizer)v;
    if (c->opt == DP_OPT_SGD && (o->seen_beta1 || o->seen_beta2 || o->seen_adam_eps || o->seen_wd))
        return dp_error(DP_ERR_USAGE, "--beta1, --beta2, --adam-eps and --weight-decay apply to --optimizer adamw only");
    if (c->opt == DP_OPT_ADAMW && o->seen_momentum)
        return dp_error(DP_ERR_USAGE, "--momentum applies to --optimizer sgd only");
    c->lr = o->lr;
    c->momentum = o->momentum;
    c->beta1 = o->beta1;
    c->beta2 = o->beta2;
    c->adam_eps = o->adam_eps;
    c->weight_decay = o->weight_decay;
    DP_TRY(dp_parse_choice(&v, "--precision", o->precision ? o->precision : "double", precs));
    c->precision = (dp_precision)v;
    c->seed.k = o->seed;
    if (o->seen_key) { c->key.k = o->key; c->key_given = 1; }
    else { DP_TRY(dp_noise_key_random(&c->key)); c->key_given = o->reveal_key; }
    return check(c);
}

dp_status dp_dpsgd_cli_dataset(dp_dataset *d, const dp_model_config *mc, dp_dpsgd_config *c,
                               const dp_dpsgd_cli *cli, dp_dpsgd_check_fn check) {
    DP_TRY(dp_model_cli_dataset(d, &c->n, mc, &cli->m, c->seed));
    if (!cli->m.seen_data) return DP_OK;
    dp_status st = check(c);
    if (st != DP_OK) dp_dataset_free(d);
    return st;
}

/* ---------------------------------------------------------------- exports */

static dp_status meta(dp_tensor_set *s, const char *k, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static dp_status meta(dp_tensor_set *s, const char *k, const char *fmt, ...) {
    char buf[DP_MAX_SPEC + 64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return dp_tset_set_meta(s, k, buf);
}

static dp_status add_params(dp_tensor_set *s, const char *prefix, const dp_model *m) {
    char nm[DP_MAX_NAME + 32];
    for (int p = 0; p < m->nparams; p++) {
        snprintf(nm, sizeof nm, "%s%s", prefix, m->params[p].name);
        DP_TRY(dp_tset_add_f64(s, nm, m->params[p].data, m->params[p].ndim, m->params[p].shape));
    }
    return DP_OK;
}

static dp_status add_metadata(dp_tensor_set *s, const dp_model_config *mc, const dp_dpsgd_config *c,
                              const dp_clip_groups *g, const dp_dpsgd_step_out *o) {
    static const char *const styles[] = {"flat", "per-layer", "group"};
    DP_TRY(meta(s, "format", "dpcert.dpsgd.step.v1"));
    DP_TRY(meta(s, "dpcert_version", "%s", DPCERT_VERSION));
    DP_TRY(meta(s, "algorithm", "dpsgd"));
    DP_TRY(meta(s, "model", "%s", mc->kind == DP_MLP ? "mlp" : "llama"));
    if (mc->kind == DP_MLP) {
        char h[256] = "";
        size_t len = 0;
        for (int i = 0; i < mc->nhidden; i++)
            len += (size_t)snprintf(h + len, sizeof h - len, "%s%d", i ? "," : "", mc->hidden[i]);
        DP_TRY(meta(s, "in", "%d", mc->in));
        DP_TRY(meta(s, "hidden", "%s", mc->nhidden ? h : "none"));
        DP_TRY(meta(s, "classes", "%d", mc->classes));
    } else {
        DP_TRY(meta(s, "vocab", "%d", mc->vocab));
        DP_TRY(meta(s, "dim", "%d", mc->dim));
        DP_TRY(meta(s, "layers", "%d", mc->layers));
        DP_TRY(meta(s, "heads", "%d", mc->heads));
        DP_TRY(meta(s, "ffn", "%d", mc->ffn));
        DP_TRY(meta(s, "seq", "%d", mc->seq));
        DP_TRY(meta(s, "tied", "%d", mc->tied));
        DP_TRY(meta(s, "rope_theta", "%.17g", mc->rope_theta));
        DP_TRY(meta(s, "norm_eps", "%.17g", mc->norm_eps));
    }
    DP_TRY(meta(s, "dataset_size", "%lld", (long long)c->n));
    DP_TRY(meta(s, "q", "%.17g", c->q));
    DP_TRY(meta(s, "steps", "%lld", (long long)c->steps));
    DP_TRY(meta(s, "clip", "%.17g", c->clip));
    DP_TRY(meta(s, "sigma", "%.17g", c->sigma));
    DP_TRY(meta(s, "clipping", "%s", styles[c->style]));
    if (c->groups[0]) DP_TRY(meta(s, "groups", "%s", c->groups));
    if (g) {
        char buf[DP_MAX_SPEC + 64];
        size_t len = 0;
        for (int k = 0; k < g->ngroups && len < sizeof buf - 1; k++)
            len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%s:%.17g", k ? ";" : "", g->name[k], g->thresh[k]);
        DP_TRY(meta(s, "group_thresholds", "%s", buf));
        DP_TRY(meta(s, "c_total", "%.17g", g->c_total));
    }
    DP_TRY(meta(s, "clip_fn", "%s", c->clip_fn == DP_CLIPFN_ABADI ? "abadi" : "automatic"));
    if (c->clip_fn == DP_CLIPFN_AUTOMATIC) DP_TRY(meta(s, "gamma", "%.17g", c->gamma));
    DP_TRY(meta(s, "micro_batches", "%lld", (long long)c->micro_batches));
    DP_TRY(meta(s, "optimizer", "%s", c->opt == DP_OPT_SGD ? "sgd" : "adamw"));
    DP_TRY(meta(s, "lr", "%.17g", c->lr));
    if (c->opt == DP_OPT_SGD) DP_TRY(meta(s, "momentum", "%.17g", c->momentum));
    else {
        DP_TRY(meta(s, "beta1", "%.17g", c->beta1));
        DP_TRY(meta(s, "beta2", "%.17g", c->beta2));
        DP_TRY(meta(s, "adam_eps", "%.17g", c->adam_eps));
        DP_TRY(meta(s, "weight_decay", "%.17g", c->weight_decay));
    }
    DP_TRY(meta(s, "precision", "%s", c->precision == DP_PREC_MPFR ? "mpfr" : "double"));
    DP_TRY(meta(s, "seed", "%" PRIu64, c->seed.k));
    if (c->key_given) DP_TRY(meta(s, "noise_key", "%" PRIu64, c->key.k));
    DP_TRY(meta(s, "step", "%lld", (long long)o->step));
    DP_TRY(meta(s, "expected_batch_size", "%.17g", c->q * (double)c->n));
    DP_TRY(meta(s, "batch_size", "%lld", (long long)o->b));
    DP_TRY(meta(s, "dropped", "%lld", (long long)o->ndropped));
    return DP_OK;
}

static dp_status export_body(dp_tensor_set *s, const dp_model_config *mc, const dp_dpsgd_config *c,
                             const dp_clip_groups *g, const dp_model *before, const dp_model *after,
                             const dp_dataset *d, const dp_dpsgd_step_out *o, const char *const *extra) {
    const int64_t b = o->b;
    const int G = o->ngroups;
    char nm[DP_MAX_NAME + 64];
    DP_TRY(add_params(s, "params.", before));
    int64_t shp[DP_MAX_DIMS] = {b};
    DP_TRY(dp_tset_add_raw(s, "batch.indices", DP_I64, o->indices, 1, shp));
    if (mc->kind == DP_LLAMA) {
        int32_t *tok = dp_calloc((size_t)(b > 0 ? b : 1) * (size_t)mc->seq, sizeof(int32_t)); /* [b, T] */
        if (!tok) return DP_ERR_NOMEM;
        for (int64_t i = 0; i < b; i++)
            memcpy(tok + i * mc->seq, d->tokens + o->indices[i] * mc->seq, (size_t)mc->seq * sizeof(int32_t));
        int64_t ts[2] = {b, mc->seq};
        dp_status st = dp_tset_add_raw(s, "batch.tokens", DP_I32, tok, 2, ts);
        dp_free(tok);
        DP_TRY(st);
    } else {
        double *x = dp_calloc((size_t)(b > 0 ? b : 1) * (size_t)mc->in, sizeof(double)); /* [b, in] */
        int32_t *y = dp_calloc((size_t)(b > 0 ? b : 1), sizeof(int32_t));               /* [b] */
        if (!x || !y) { dp_free(x); dp_free(y); return DP_ERR_NOMEM; }
        for (int64_t i = 0; i < b; i++) {
            memcpy(x + i * mc->in, d->x + o->indices[i] * mc->in, (size_t)mc->in * sizeof(double));
            y[i] = d->y[o->indices[i]];
        }
        int64_t xs[2] = {b, mc->in};
        dp_status st = dp_tset_add_raw(s, "batch.x", DP_F64, x, 2, xs);
        if (st == DP_OK) st = dp_tset_add_raw(s, "batch.y", DP_I32, y, 1, shp);
        dp_free(x);
        dp_free(y);
        DP_TRY(st);
    }
    DP_TRY(dp_tset_add_f64(s, "per_sample.loss", o->loss, 1, shp));
    DP_TRY(dp_tset_add_f64(s, "per_sample.norm", o->norm, 1, shp));
    double *col = dp_calloc((size_t)(b > 0 ? b : 1), sizeof(double)); /* [b] */
    if (!col) return DP_ERR_NOMEM;
    dp_status st = DP_OK;
    if (c->style == DP_CLIP_FLAT) {
        st = dp_tset_add_f64(s, "per_sample.clip_factor", o->clip_factor, 1, shp);
    } else {
        for (int k = 0; k < G && st == DP_OK; k++) {
            for (int64_t i = 0; i < b; i++) col[i] = o->group_norm[i * G + k];
            snprintf(nm, sizeof nm, "per_sample.norm.%s", g->name[k]);
            st = dp_tset_add_f64(s, nm, col, 1, shp);
        }
        for (int k = 0; k < G && st == DP_OK; k++) {
            for (int64_t i = 0; i < b; i++) col[i] = o->clip_factor[i * G + k];
            snprintf(nm, sizeof nm, "per_sample.clip_factor.%s", g->name[k]);
            st = dp_tset_add_f64(s, nm, col, 1, shp);
        }
    }
    dp_free(col);
    DP_TRY(st);
    for (int p = 0; p < before->nparams; p++) {
        const dp_param *P = &before->params[p];
        int64_t gs[DP_MAX_DIMS] = {b, P->shape[0], P->shape[1]};
        snprintf(nm, sizeof nm, "per_sample.grad.%s", P->name);
        DP_TRY(dp_tset_add_f64(s, nm, o->grad[p], 1 + P->ndim, gs));
    }
    static const char *const kinds[3] = {"step.clipped_sum.", "step.noise.", "step.private_grad."};
    for (int k = 0; k < 3; k++)
        for (int p = 0; p < before->nparams; p++) {
            const dp_param *P = &before->params[p];
            double *v = k == 0 ? o->clipped_sum[p] : k == 1 ? o->noise[p] : o->private_grad[p];
            snprintf(nm, sizeof nm, "%s%s", kinds[k], P->name);
            DP_TRY(dp_tset_add_f64(s, nm, v, P->ndim, P->shape));
        }
    DP_TRY(add_params(s, "params_after.", after));
    DP_TRY(add_metadata(s, mc, c, g, o));
    for (int k = 0; extra && extra[k] && extra[k + 1]; k += 2) DP_TRY(dp_tset_set_meta(s, extra[k], extra[k + 1]));
    return DP_OK;
}

dp_status dp_dpsgd_export_set(dp_tensor_set *s, const dp_model_config *mc, const dp_dpsgd_config *c,
                               const dp_clip_groups *g, const dp_model *before, const dp_model *after,
                               const dp_dataset *d, const dp_dpsgd_step_out *o, const char *const *extra) {
    dp_tset_init(s);
    dp_status st = export_body(s, mc, c, g, before, after, d, o, extra);
    if (st != DP_OK) dp_tset_free(s);
    return st;
}

dp_status dp_dpsgd_export_write(const char *dir, const dp_model_config *mc, const dp_dpsgd_config *c,
                                 const dp_clip_groups *g, const dp_model *before, const dp_model *after,
                                 const dp_dataset *d, const dp_dpsgd_step_out *o, const char *const *extra) {
    dp_tensor_set s;
    DP_TRY(dp_dpsgd_export_set(&s, mc, c, g, before, after, d, o, extra));
    size_t len = strlen(dir) + 40;
    char *path = dp_malloc(len);
    if (!path) { dp_tset_free(&s); return DP_ERR_NOMEM; }
    snprintf(path, len, "%s/step-%06lld.safetensors", dir, (long long)o->step);
    dp_status st = dp_st_write(path, &s);
    dp_free(path);
    dp_tset_free(&s);
    return st;
}

/* ---------------------------------------------------------------- the command */

void dp_dpsgd_print_step(const dp_dpsgd_step_out *o) {
    printf("step %lld batch %lld", (long long)o->step, (long long)o->b);
    if (isnan(o->mean_loss)) printf(" loss -");
    else printf(" loss %.6f", o->mean_loss);
    if (isnan(o->mean_clip)) printf(" mean_clip -");
    else printf(" mean_clip %.6f", o->mean_clip);
    if (o->ndropped) printf(" dropped %lld", (long long)o->ndropped);
    printf("\n");
}

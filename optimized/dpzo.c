/* optimized/dpzo.c — DP-ZO on the engine, data-parallel (docs/engine.md "DP-ZO"),
 * and `dpcert train dpzo`. */
#include "optimized/dpzo.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "optimized/train.h"

static double **alloc_like(const int64_t *numel, int np) {
    double **a = calloc((size_t)np, sizeof(double *));
    if (!a) return NULL;
    for (int p = 0; p < np; p++)
        if (!(a[p] = calloc((size_t)(numel[p] > 0 ? numel[p] : 1), sizeof(double)))) {
            for (int q = 0; q < p; q++) free(a[q]);
            free(a);
            return NULL;
        }
    return a;
}
static void free_like(double **a, int np) {
    if (!a) return;
    for (int p = 0; p < np; p++) free(a[p]);
    free(a);
}

dp_status opt_dpzo_init(opt_dpzo *s, opt_backend *be, const ref_dpzo_hparams *hp, const ref_model *m) {
    memset(s, 0, sizeof *s);
    DP_TRY(ref_dpzo_check(hp));
    if (m->nparams > REF_DPZO_MAX_PARAMS) return dp_error(DP_ERR_INVALID, "too many parameter tensors for DP-ZO lanes");
    s->be = be;
    s->hp = *hp;
    s->nparams = m->nparams;
    s->numel = calloc((size_t)m->nparams, sizeof(int64_t));
    if (!s->numel) return dp_error(DP_ERR_NOMEM, "out of memory");
    for (int p = 0; p < m->nparams; p++) s->numel[p] = m->params[p].numel;
    s->theta = alloc_like(s->numel, s->nparams);
    s->work = alloc_like(s->numel, s->nparams);
    s->z = alloc_like(s->numel, s->nparams);
    if (!s->theta || !s->work || !s->z) { opt_dpzo_free(s); return dp_error(DP_ERR_NOMEM, "out of memory"); }
    for (int p = 0; p < m->nparams; p++) memcpy(s->theta[p], m->params[p].data, sizeof(double) * (size_t)s->numel[p]);
    dp_status st = opt_model_create(&s->om, be, m);
    if (st != DP_OK) { opt_dpzo_free(s); return st; }
    return DP_OK;
}

void opt_dpzo_free(opt_dpzo *s) {
    if (s->om.be) opt_model_free(&s->om);
    free_like(s->theta, s->nparams); free_like(s->work, s->nparams); free_like(s->z, s->nparams);
    free(s->numel);
    memset(s, 0, sizeof *s);
}

/* Losses of the share idx[0..nl) at theta + sign phi z (z of the current direction). */
static dp_status share_losses(double *out, opt_dpzo *s, const ref_dataset *d, const int64_t *idx, int64_t nl,
                              double sign) {
    for (int p = 0; p < s->nparams; p++)
        for (int64_t e = 0; e < s->numel[p]; e++)
            s->work[p][e] = sign > 0 ? s->theta[p][e] + s->hp.phi * s->z[p][e] : s->theta[p][e] - s->hp.phi * s->z[p][e];
    DP_TRY(opt_model_set_params(&s->om, s->work));
    return opt_forward_loss(out, &s->om, d, idx, nl);
}

dp_status opt_dpzo_step(ref_dpzo_step_out *out, opt_dpzo *s, const ref_dataset *d, int64_t step, int gather) {
    const ref_dpzo_hparams *hp = &s->hp;
    opt_backend *be = s->be;
    const int n = hp->n_spsa, R = be->comm.size, rank = be->comm.rank;
    if (out->cap_n_data < hp->n_data || out->n != n)
        return dp_error(DP_ERR_INTERNAL, "DP-ZO step output allocated for the wrong sizes");
    if (step < 1 || step > (int64_t)UINT32_MAX) return dp_error(DP_ERR_INVALID, "step %" PRId64 " out of range", step);
    out->step = step;
    DP_TRY(ref_dpzo_poisson(out->idx, &out->b, hp->key, step, hp->q, hp->n_data)); /* global */
    int64_t b = out->b, lo, hi;
    opt_rank_share(&lo, &hi, b, rank, R);
    int64_t nl = hi - lo;
    double *lp = calloc((size_t)(n * nl + 1), sizeof(double)), *lm = calloc((size_t)(n * nl + 1), sizeof(double));
    double *dc = calloc((size_t)(n * nl + 1), sizeof(double));
    double *red = calloc((size_t)(n + 1), sizeof(double)); /* [n clipped sums, loss sum] */
    dp_status st = (lp && lm && dc && red) ? DP_OK : dp_error(DP_ERR_NOMEM, "out of memory");
    for (int j = 0; st == DP_OK && j < n; j++) {
        for (int p = 0; st == DP_OK && p < s->nparams; p++)
            st = ref_dpzo_direction(s->z[p], hp->seed, step, p, j, s->numel[p]); /* public DPZO_DIR stream */
        if (st == DP_OK && nl > 0) st = share_losses(lp + j * nl, s, d, out->idx + lo, nl, +1.0);
        if (st == DP_OK && nl > 0) st = share_losses(lm + j * nl, s, d, out->idx + lo, nl, -1.0);
        double sum = 0;
        for (int64_t k = 0; st == DP_OK && k < nl; k++) {
            double df = lp[j * nl + k] - lm[j * nl + k];
            if (isnan(df))
                st = dp_error(DP_ERR_NUMERIC, "step %" PRId64 ", direction %d: loss difference of example %" PRId64
                              " is NaN", step, j, out->idx[lo + k]);
            dc[j * nl + k] = ref_dpzo_clip(df, hp->clip);
            sum += dc[j * nl + k];
            red[n] += 0.5 * (lp[j * nl + k] + lm[j * nl + k]);
        }
        red[j] = sum;
    }
    /* the one all-reduce of the step: n + 1 doubles, through the backend's host-byte
     * gather (f64 whatever --dtype is), summed in rank order */
    if (st == DP_OK && R > 1) {
        void *all = NULL;
        size_t len = 0;
        st = OPT_CALL(be, allgatherv_bytes, &all, &len, red, sizeof(double) * (size_t)(n + 1));
        if (st == DP_OK && len != sizeof(double) * (size_t)(R * (n + 1)))
            st = dp_error(DP_ERR_INTERNAL, "DP-ZO all-reduce: %zu bytes gathered", len);
        const double *a = all;
        for (int j = 0; st == DP_OK && j <= n; j++) {
            double acc = a[j];
            for (int r = 1; r < R; r++) acc += a[r * (n + 1) + j];
            red[j] = acc;
        }
        free(all);
    }
    for (int j = 0; st == DP_OK && j < n; j++) {
        out->sum[j] = red[j];
        st = ref_dpzo_noise(&out->noise[j], hp, step, j); /* the single draw, same on every rank */
        out->scalar[j] = (out->sum[j] + out->noise[j]) / ref_dpzo_denominator(hp);
    }
    out->loss = b ? red[n] / ((double)b * (double)n) : NAN;
    /* per-example arrays [n][b] in global order (exports) */
    if (st == DP_OK && gather) {
        double *arrs[3] = {lp, lm, dc}, *dst[3] = {out->loss_plus, out->loss_minus, out->diff_clipped};
        for (int a = 0; st == DP_OK && a < 3; a++)
            for (int j = 0; st == DP_OK && j < n; j++) {
                void *g = NULL;
                size_t len = 0;
                st = OPT_CALL(be, allgatherv_bytes, &g, &len, arrs[a] + j * nl, sizeof(double) * (size_t)nl);
                if (st == DP_OK && len != sizeof(double) * (size_t)b) st = dp_error(DP_ERR_INTERNAL, "DP-ZO gather size");
                if (st == DP_OK && b) memcpy(dst[a] + (size_t)j * (size_t)b, g, len);
                free(g);
            }
    }
    /* the public update, identical on every rank */
    if (st == DP_OK)
        st = ref_dpzo_update(s->theta, s->numel, s->nparams, hp->seed, step, out->scalar, n, hp->lr, hp->weight_decay);
    free(lp); free(lm); free(dc); free(red);
    return st;
}

/* ---------------------------------------------------------------- the command */
typedef struct {
    const char *model, *hidden, *noise, *noise_key, *seed;
    int64_t in, classes, vocab, dim, layers, heads, ffn, seq, dataset_size, steps, n_spsa;
    int tied;
    double q, clip, sigma, phi, lr, wd;
    int seen_in, seen_hidden, seen_classes, seen_vocab, seen_dim, seen_layers, seen_heads, seen_ffn, seen_seq,
        seen_tied, seen_n, seen_q, seen_steps, seen_clip, seen_sigma, seen_noise, seen_phi, seen_lr, seen_wd,
        seen_n_spsa, seen_seed, seen_key, seen_model;
} zo_opts;

static dp_status fits_int(int *out, const char *what, int64_t v) {
    if (v < -1000000000 || v > 1000000000) return dp_error(DP_ERR_INVALID, "%s: %" PRId64 " is out of range", what, v);
    *out = (int)v;
    return DP_OK;
}

/* Model flags exactly as `dpcert reference dpzo`. */
static dp_status zo_model(ref_model_config *cfg, const zo_opts *o) {
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

/* The export of one step: the tensor names and metadata keys of `reference dpzo`
 * (docs/dpzo.md) plus the engine's keys. */
static dp_status zo_export(const char *dir, const ref_model *m, const ref_model_config *cfg, const ref_dpzo_hparams *hp,
                           int key_given, double *const *before, double *const *after, const ref_dpzo_step_out *o,
                           const char *const *extra) {
    dp_tensor_set ts;
    dp_tset_init(&ts);
    char name[256];
    dp_status st = DP_OK;
    const int n = hp->n_spsa;
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        snprintf(name, sizeof name, "params.%s", m->params[p].name);
        st = dp_tset_add_f64(&ts, name, before[p], m->params[p].ndim, m->params[p].shape);
    }
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        const ref_param *P = &m->params[p];
        int64_t shape[DP_MAX_DIMS];
        int nd = P->ndim;
        if (n > 1) {
            if (nd + 1 > DP_MAX_DIMS) { st = dp_error(DP_ERR_NOT_SUPPORTED, "cannot stack directions of %s", P->name); break; }
            shape[0] = n;
            for (int k = 0; k < nd; k++) shape[k + 1] = P->shape[k];
            nd++;
        } else {
            for (int k = 0; k < nd; k++) shape[k] = P->shape[k];
        }
        double *z = calloc((size_t)n * (size_t)P->numel, sizeof(double)); /* [n, numel] */
        if (!z) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
        for (int j = 0; st == DP_OK && j < n; j++)
            st = ref_dpzo_direction(z + (size_t)j * (size_t)P->numel, hp->seed, o->step, p, j, P->numel);
        snprintf(name, sizeof name, "dpzo.z.%s", P->name);
        if (st == DP_OK) st = dp_tset_add_f64(&ts, name, z, nd, shape);
        free(z);
    }
    static const int64_t empty_idx = 0;
    static const double empty = 0.0;
    int64_t bshape[2] = {n, o->b};
    if (st == DP_OK) st = dp_tset_add_raw(&ts, "batch.indices", DP_I64, o->b ? o->idx : &empty_idx, 1, bshape + 1);
    const char *pn[3] = {"per_sample.loss_plus", "per_sample.loss_minus", "per_sample.diff_clipped"};
    const double *pv[3] = {o->loss_plus, o->loss_minus, o->diff_clipped};
    for (int a = 0; st == DP_OK && a < 3; a++)
        st = n == 1 ? dp_tset_add_f64(&ts, pn[a], o->b ? pv[a] : &empty, 1, bshape + 1)
                    : dp_tset_add_f64(&ts, pn[a], o->b ? pv[a] : &empty, 2, bshape);
    int64_t nshape[1] = {n};
    if (st == DP_OK)
        st = n == 1 ? dp_tset_add_scalar_f64(&ts, "step.noise", o->noise[0]) : dp_tset_add_f64(&ts, "step.noise", o->noise, 1, nshape);
    if (st == DP_OK)
        st = n == 1 ? dp_tset_add_scalar_f64(&ts, "step.scalar", o->scalar[0]) : dp_tset_add_f64(&ts, "step.scalar", o->scalar, 1, nshape);
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        snprintf(name, sizeof name, "params_after.%s", m->params[p].name);
        st = dp_tset_add_f64(&ts, name, after[p], m->params[p].ndim, m->params[p].shape);
    }
    /* metadata: the reference's keys, then the engine's */
    if (st == DP_OK) st = dp_tset_set_meta(&ts, "algorithm", "dpzo");
    if (st == DP_OK) st = meta_int(&ts, "step", o->step);
    if (st == DP_OK) st = meta_int(&ts, "dataset_size", hp->n_data);
    if (st == DP_OK) st = dp_tset_set_meta(&ts, "data", "generated");
    if (st == DP_OK) st = meta_num(&ts, "q", hp->q);
    if (st == DP_OK) st = meta_int(&ts, "steps", hp->steps);
    if (st == DP_OK) st = meta_num(&ts, "clip", hp->clip);
    if (st == DP_OK) st = meta_num(&ts, "sigma", hp->sigma);
    if (st == DP_OK) st = dp_tset_set_meta(&ts, "noise", hp->mech == REF_DPZO_GAUSSIAN ? "gaussian" : "laplace");
    if (st == DP_OK) st = meta_num(&ts, "phi", hp->phi);
    if (st == DP_OK) st = meta_num(&ts, "lr", hp->lr);
    if (st == DP_OK) st = meta_num(&ts, "weight_decay", hp->weight_decay);
    if (st == DP_OK) st = meta_int(&ts, "n_spsa", hp->n_spsa);
    if (st == DP_OK) st = meta_num(&ts, "batch_expected", hp->q * (double)hp->n_data);
    if (st == DP_OK) st = meta_num(&ts, "denominator", ref_dpzo_denominator(hp));
    char b[32];
    snprintf(b, sizeof b, "%" PRIu64, hp->seed.k);
    if (st == DP_OK) st = dp_tset_set_meta(&ts, "seed", b);
    if (st == DP_OK && key_given) {
        snprintf(b, sizeof b, "%" PRIu64, hp->key.k);
        st = dp_tset_set_meta(&ts, "noise_key", b);
    }
    if (st == DP_OK) st = dp_tset_set_meta(&ts, "model", cfg->kind == REF_MLP ? "mlp" : "llama");
    for (int k = 0; st == DP_OK && extra[k] && extra[k + 1]; k += 2) st = dp_tset_set_meta(&ts, extra[k], extra[k + 1]);
    char path[4096];
    if (st == DP_OK && (size_t)snprintf(path, sizeof path, "%s/step-%06" PRId64 ".safetensors", dir, o->step) >= sizeof path)
        st = dp_error(DP_ERR_INVALID, "--export: directory name too long");
    if (st == DP_OK) st = dp_st_write(path, &ts);
    dp_tset_free(&ts);
    return st;
}

dp_status opt_dpzo_run_cmd(int argc, char **argv, int *help, int *use_mpi) {
    zo_opts o;
    memset(&o, 0, sizeof o);
    o.n_spsa = 1;
    opt_train_cli t;
    opt_train_cli_init(&t);
    dp_opt opts[40] = {
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
    };
    size_t nopts = 23;
    opt_train_add_opts(opts, &nopts, &t);
    DP_TRY(dp_opts_parse(opts, nopts, argc, argv, NULL, 0, NULL, help));
    if (*help) {
        printf("usage: dpcert train dpzo --impl optimized --backend host|cuda --model mlp|llama [model flags]\n"
               "       --dataset-size N --q Q --steps K --clip C --sigma S [--noise gaussian|laplace] --phi PHI --lr LR\n"
               "       [--n-spsa n] --seed SEED [--noise-key KEY] [--weight-decay WD] [--export DIR]\n"
               "DP-ZO on the engine, data-parallel under mpirun (docs/engine.md): one line per step as\n"
               "'dpcert reference dpzo'.\n\n");
        dp_opts_print_help(opts, nopts);
        return DP_OK;
    }
    opt_backend_config bc;
    opt_dp_options eo;
    DP_TRY(opt_train_parse(&bc, &eo, &t, 1));
    ref_model_config cfg;
    DP_TRY(zo_model(&cfg, &o));
    static const char *const req[] = {"--dataset-size", "--q", "--steps", "--clip", "--sigma", "--phi", "--lr", "--seed"};
    const int seen[] = {o.seen_n, o.seen_q, o.seen_steps, o.seen_clip, o.seen_sigma, o.seen_phi, o.seen_lr, o.seen_seed};
    for (size_t k = 0; k < sizeof seen / sizeof seen[0]; k++)
        if (!seen[k]) return dp_error(DP_ERR_USAGE, "missing required option %s", req[k]);
    ref_dpzo_hparams hp;
    memset(&hp, 0, sizeof hp);
    static const char *const mechs[] = {"gaussian", "laplace", NULL};
    int mech = 0;
    if (o.seen_noise) DP_TRY(dp_parse_choice(&mech, "--noise", o.noise, mechs));
    hp.mech = (ref_dpzo_mech)mech;
    hp.n_data = o.dataset_size; hp.q = o.q; hp.steps = o.steps; hp.clip = o.clip; hp.sigma = o.sigma;
    hp.phi = o.phi; hp.lr = o.lr; hp.weight_decay = o.seen_wd ? o.wd : 0.0;
    if (o.n_spsa < 1 || o.n_spsa > REF_DPZO_MAX_N)
        return dp_error(DP_ERR_INVALID, "--n-spsa must be in [1, %d] (got %" PRId64 ")", REF_DPZO_MAX_N, o.n_spsa);
    hp.n_spsa = (int)o.n_spsa;
    DP_TRY(dp_parse_u64(&hp.seed.k, "--seed", o.seed));
    if (o.seen_key) DP_TRY(dp_parse_u64(&hp.key.k, "--noise-key", o.noise_key));
    else DP_TRY(dp_noise_key_random(&hp.key));
    DP_TRY(ref_dpzo_check(&hp));
    DP_TRY(opt_check_backend_built(&bc));
    DP_TRY(opt_mpi_start(use_mpi));
    bc.use_mpi = *use_mpi;
    DP_TRY(opt_share_key(&hp.key, *use_mpi));
    opt_backend *be = NULL;
    DP_TRY(opt_backend_create(&be, &bc));
    int rank = be->comm.rank;
    ref_model m;
    ref_dataset d;
    memset(&m, 0, sizeof m); memset(&d, 0, sizeof d);
    opt_dpzo s;
    memset(&s, 0, sizeof s);
    ref_dpzo_step_out out;
    memset(&out, 0, sizeof out);
    double **before = NULL;
    dp_status st = ref_model_init(&m, &cfg, hp.seed);
    if (st == DP_OK) st = ref_dataset_generate(&d, &cfg, hp.n_data, hp.seed);
    if (st == DP_OK) st = opt_dpzo_init(&s, be, &hp, &m);
    if (st == DP_OK) st = ref_dpzo_step_out_alloc(&out, hp.n_data, hp.n_spsa);
    if (st == DP_OK && t.seen_export) {
        if (rank == 0) st = opt_make_dir(t.export_dir);
        before = alloc_like(s.numel, s.nparams);
        if (!before && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "out of memory");
    }
    char nranks[32], nthreads[32];
    snprintf(nranks, sizeof nranks, "%d", be->comm.size);
    snprintf(nthreads, sizeof nthreads, "%d", be->threads);
    const char *extra[] = {"impl", "optimized", "backend", be->name, "dtype", bc.dtype == DP_F64 ? "f64" : "f32",
                           "ranks", nranks, "threads", nthreads, NULL};
    if (st == DP_OK && rank == 0)
        printf("dpzo (optimized, %s backend, %d rank%s): model %s, %" PRId64 " parameters, N=%" PRId64 ", q=%g, K=%" PRId64
               ", C=%g, sigma=%g (%s), phi=%g, lr=%g, n-spsa=%d, seed=%" PRIu64 "\n",
               be->name, be->comm.size, be->comm.size > 1 ? "s" : "", cfg.kind == REF_MLP ? "mlp" : "llama", m.total,
               hp.n_data, hp.q, hp.steps, hp.clip, hp.sigma, mechs[mech], hp.phi, hp.lr, hp.n_spsa, hp.seed.k);
    for (int64_t step = 1; st == DP_OK && step <= hp.steps; step++) {
        if (before)
            for (int p = 0; p < s.nparams; p++) memcpy(before[p], s.theta[p], sizeof(double) * (size_t)s.numel[p]);
        st = opt_dpzo_step(&out, &s, &d, step, t.seen_export);
        if (st != DP_OK || rank != 0) continue;
        if (before) st = zo_export(t.export_dir, &m, &cfg, &hp, o.seen_key, before, s.theta, &out, extra);
        printf("step %" PRId64 " batch %" PRId64 " scalar ", step, out.b);
        for (int j = 0; j < hp.n_spsa; j++) printf("%s%.10e", j ? "," : "", out.scalar[j]);
        if (out.b) printf(" loss %.10e\n", out.loss);
        else printf(" loss n/a\n");
        fflush(stdout);
    }
    if (st == DP_OK && rank == 0) {
        char hex[65];
        st = ref_dpzo_theta_sha256(hex, s.theta, s.numel, s.nparams);
        if (st == DP_OK) printf("theta_T sha256 %s (after %" PRId64 " steps)\n", hex, hp.steps);
    }
    free_like(before, s.nparams);
    ref_dpzo_step_out_free(&out);
    opt_dpzo_free(&s);
    ref_dataset_free(&d);
    ref_model_free(&m);
    opt_backend_destroy(be);
    return st;
}

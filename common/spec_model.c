/* common/spec_model.c — model configurations, parameter layout and initialisation,
 * datasets (generated and loaded): common/spec_model.h, docs/models.md. */
#include "common/spec_model.h"
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"

/* Largest size accepted for any single dimension of a config (keeps every
 * int64 product far from overflow and every RNG lane/stream id in range). */
#define DP_MODEL_MAX_DIM 65536
#define DP_MODEL_MAX_LAYERS 256

void dp_model_config_default(dp_model_config *cfg, dp_model_kind kind) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->in = 16;
    cfg->nhidden = 2;
    cfg->hidden[0] = 32;
    cfg->hidden[1] = 32;
    cfg->classes = 10;
    cfg->vocab = 64;
    cfg->dim = 32;
    cfg->layers = 2;
    cfg->heads = 4;
    cfg->ffn = 64;
    cfg->seq = 16;
    cfg->tied = 0;
    cfg->rope_theta = 10000.0;
    cfg->norm_eps = 1e-5;
}

static dp_status check_size(const char *what, int v, int lo) {
    if (v < lo || v > DP_MODEL_MAX_DIM)
        return dp_error(DP_ERR_INVALID, "model %s must be in [%d, %d] (got %d)", what, lo, DP_MODEL_MAX_DIM, v);
    return DP_OK;
}

dp_status dp_model_config_check(const dp_model_config *cfg) {
    if (cfg->kind == DP_MLP) {
        DP_TRY(check_size("input size (--in)", cfg->in, 1));
        if (cfg->nhidden < 0 || cfg->nhidden > DP_MAX_HIDDEN)
            return dp_error(DP_ERR_INVALID, "mlp: number of hidden layers must be in [0, %d] (got %d)",
                            DP_MAX_HIDDEN, cfg->nhidden);
        for (int i = 0; i < cfg->nhidden; i++) DP_TRY(check_size("hidden width (--hidden)", cfg->hidden[i], 1));
        DP_TRY(check_size("number of classes (--classes)", cfg->classes, 2));
        return DP_OK;
    }
    if (cfg->kind != DP_LLAMA) return dp_error(DP_ERR_INVALID, "unknown model kind %d", (int)cfg->kind);
    DP_TRY(check_size("vocab (--vocab)", cfg->vocab, 2));
    DP_TRY(check_size("dim (--dim)", cfg->dim, 2));
    if (cfg->layers < 1 || cfg->layers > DP_MODEL_MAX_LAYERS)
        return dp_error(DP_ERR_INVALID, "model layers (--layers) must be in [1, %d] (got %d)", DP_MODEL_MAX_LAYERS,
                        cfg->layers);
    DP_TRY(check_size("heads (--heads)", cfg->heads, 1));
    DP_TRY(check_size("ffn (--ffn)", cfg->ffn, 1));
    DP_TRY(check_size("sequence length (--seq)", cfg->seq, 2));
    if (cfg->dim % cfg->heads != 0)
        return dp_error(DP_ERR_INVALID, "--heads %d does not divide --dim %d", cfg->heads, cfg->dim);
    if ((cfg->dim / cfg->heads) % 2 != 0)
        return dp_error(DP_ERR_INVALID, "head dim %d (= dim %d / heads %d) must be even for rotary embeddings",
                        cfg->dim / cfg->heads, cfg->dim, cfg->heads);
    if (cfg->tied != 0 && cfg->tied != 1) return dp_error(DP_ERR_INVALID, "tied must be 0 or 1 (got %d)", cfg->tied);
    if (!(isfinite(cfg->rope_theta) && cfg->rope_theta > 0))
        return dp_error(DP_ERR_INVALID, "rope theta must be finite and > 0 (got %g)", cfg->rope_theta);
    if (!(isfinite(cfg->norm_eps) && cfg->norm_eps > 0))
        return dp_error(DP_ERR_INVALID, "norm eps must be finite and > 0 (got %g)", cfg->norm_eps);
    return DP_OK;
}

/* ---------------------------------------------------------------- parameters */

/* init kind of a parameter: 0 = N(0, 0.02^2) from the INIT stream, 1 = ones, 2 = zeros */
enum { INIT_NORMAL = 0, INIT_ONES = 1, INIT_ZEROS = 2 };

static dp_status add_param(dp_model *m, int *cap, int *kinds, const char *name, int ndim, int64_t d0, int64_t d1,
                           int kind) {
    if (m->nparams >= *cap) return dp_error(DP_ERR_INTERNAL, "parameter table overflow");
    dp_param *p = &m->params[m->nparams];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim > 1 ? d1 : 0;
    p->numel = ndim > 1 ? d0 * d1 : d0;
    p->data = dp_calloc((size_t)p->numel, sizeof(double));
    if (!p->data) return DP_ERR_NOMEM;
    kinds[m->nparams] = kind;
    m->nparams++;
    m->total += p->numel;
    return DP_OK;
}

/* Builds the parameter table in canonical order (docs/models.md) and fills kinds[]. */
static dp_status build_params(dp_model *m, int *kinds, int cap) {
    const dp_model_config *c = &m->cfg;
    char nm[DP_MAX_NAME];
    if (c->kind == DP_MLP) {
        int prev = c->in;
        for (int i = 0; i <= c->nhidden; i++) {
            int out = i < c->nhidden ? c->hidden[i] : c->classes;
            snprintf(nm, sizeof nm, "layers.%d.weight", i);
            DP_TRY(add_param(m, &cap, kinds, nm, 2, out, prev, INIT_NORMAL)); /* [out, in] */
            snprintf(nm, sizeof nm, "layers.%d.bias", i);
            DP_TRY(add_param(m, &cap, kinds, nm, 1, out, 0, INIT_ZEROS)); /* [out] */
            prev = out;
        }
        return DP_OK;
    }
    int V = c->vocab, D = c->dim, F = c->ffn;
    DP_TRY(add_param(m, &cap, kinds, "tok_emb", 2, V, D, INIT_NORMAL)); /* [V, D] */
    static const char *const lnames[9] = {"attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down"};
    for (int l = 0; l < c->layers; l++) {
        for (int j = 0; j < 9; j++) {
            snprintf(nm, sizeof nm, "layers.%d.%s", l, lnames[j]);
            if (j == 0 || j == 5) DP_TRY(add_param(m, &cap, kinds, nm, 1, D, 0, INIT_ONES)); /* [D] */
            else if (j <= 4) DP_TRY(add_param(m, &cap, kinds, nm, 2, D, D, INIT_NORMAL));    /* [D, D] */
            else if (j <= 7) DP_TRY(add_param(m, &cap, kinds, nm, 2, F, D, INIT_NORMAL));    /* [F, D] */
            else DP_TRY(add_param(m, &cap, kinds, nm, 2, D, F, INIT_NORMAL));                /* [D, F] */
        }
    }
    DP_TRY(add_param(m, &cap, kinds, "final_norm", 1, D, 0, INIT_ONES)); /* [D] */
    if (!c->tied) DP_TRY(add_param(m, &cap, kinds, "lm_head", 2, V, D, INIT_NORMAL)); /* [V, D] */
    return DP_OK;
}

static int param_count(const dp_model_config *c) {
    return c->kind == DP_MLP ? 2 * (c->nhidden + 1) : 1 + 9 * c->layers + 1 + (c->tied ? 0 : 1);
}

dp_status dp_model_init(dp_model *m, const dp_model_config *cfg, dp_seed seed) {
    memset(m, 0, sizeof *m);
    DP_TRY(dp_model_config_check(cfg));
    m->cfg = *cfg;
    int cap = param_count(cfg);
    m->params = dp_calloc((size_t)cap, sizeof(dp_param));
    int *kinds = dp_calloc((size_t)cap, sizeof(int));
    if (!m->params || !kinds) { dp_free(kinds); dp_model_free(m); return DP_ERR_NOMEM; }
    dp_status st = build_params(m, kinds, cap);
    /* INIT stream: stream = parameter index p, lane 0, element = flat index e;
     * value = 0.02 * Gaussian element e. Gains are 1 and biases 0 (no draws). */
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        dp_param *P = &m->params[p];
        if (kinds[p] == INIT_ONES) {
            for (int64_t e = 0; e < P->numel; e++) P->data[e] = 1.0;
        } else if (kinds[p] == INIT_NORMAL) {
            dp_stream s;
            st = dp_stream_public(&s, seed, DP_PURPOSE_INIT, (uint32_t)p, 0);
            /* the same values as dp_rng_gaussian element by element, a pair per draw */
            if (st == DP_OK) dp_rng_fill_gaussian(P->data, &s, 0, (size_t)P->numel);
            for (int64_t e = 0; st == DP_OK && e < P->numel; e++) P->data[e] = 0.02 * P->data[e];
        }
    }
    dp_free(kinds);
    if (st != DP_OK) dp_model_free(m);
    return st;
}

dp_status dp_model_copy(dp_model *out, const dp_model *in) {
    memset(out, 0, sizeof *out);
    out->cfg = in->cfg;
    out->params = dp_calloc((size_t)(in->nparams > 0 ? in->nparams : 1), sizeof(dp_param));
    if (!out->params) return DP_ERR_NOMEM;
    for (int p = 0; p < in->nparams; p++) {
        out->params[p] = in->params[p];
        out->params[p].data = dp_malloc((size_t)in->params[p].numel * sizeof(double));
        if (!out->params[p].data) { out->nparams = p; dp_model_free(out); return DP_ERR_NOMEM; }
        memcpy(out->params[p].data, in->params[p].data, (size_t)in->params[p].numel * sizeof(double));
        out->nparams = p + 1;
    }
    out->total = in->total;
    return DP_OK;
}

void dp_model_free(dp_model *m) {
    if (!m) return;
    if (m->params)
        for (int p = 0; p < m->nparams; p++) dp_free(m->params[p].data);
    dp_free(m->params);
    memset(m, 0, sizeof *m);
}

int dp_model_find(const dp_model *m, const char *name) {
    for (int p = 0; p < m->nparams; p++)
        if (strcmp(m->params[p].name, name) == 0) return p;
    return -1;
}

/* ---------------------------------------------------------------- datasets */

dp_status dp_dataset_generate(dp_dataset *d, const dp_model_config *cfg, int64_t n, dp_seed seed) {
    memset(d, 0, sizeof *d);
    DP_TRY(dp_model_config_check(cfg));
    if (n < 1 || n > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "dataset size must be in [1, 2^32 - 1] (got %lld)", (long long)n);
    /* element limit (docs/models.md "Datasets"): N * T (llama) or N * in (mlp) <= 2^31 */
    int64_t per = cfg->kind == DP_LLAMA ? cfg->seq : cfg->in;
    if (n > DP_MAX_DATA_ELEMS / per)
        return dp_error(DP_ERR_INVALID, "--dataset-size %lld too large: the generated dataset would hold %lld x %lld = "
                        "%.4g elements, more than the limit 2^31", (long long)n, (long long)n, (long long)per,
                        (double)n * (double)per);
    d->kind = cfg->kind;
    d->n = n;
    /* DATA stream: stream = example index i. llama: token t = below(lane 0, element t, V).
     * mlp: x_j = Gaussian(lane 0, element j); y = below(lane 1, element 0, classes). */
    if (cfg->kind == DP_LLAMA) {
        d->seq = cfg->seq;
        d->tokens = dp_malloc((size_t)n * (size_t)cfg->seq * sizeof(int32_t)); /* [n, T] */
        if (!d->tokens) return DP_ERR_NOMEM;
        for (int64_t i = 0; i < n; i++) {
            dp_stream s;
            DP_TRY(dp_stream_public(&s, seed, DP_PURPOSE_DATA, (uint32_t)i, 0));
            for (int t = 0; t < cfg->seq; t++)
                d->tokens[i * cfg->seq + t] = (int32_t)dp_rng_below(&s, (uint64_t)t, (uint64_t)cfg->vocab);
        }
    } else {
        d->in = cfg->in;
        d->x = dp_malloc((size_t)n * (size_t)cfg->in * sizeof(double)); /* [n, in] */
        d->y = dp_malloc((size_t)n * sizeof(int32_t));                  /* [n] */
        if (!d->x || !d->y) { dp_dataset_free(d); return DP_ERR_NOMEM; }
        for (int64_t i = 0; i < n; i++) {
            dp_stream sx, sy;
            DP_TRY(dp_stream_public(&sx, seed, DP_PURPOSE_DATA, (uint32_t)i, 0));
            DP_TRY(dp_stream_public(&sy, seed, DP_PURPOSE_DATA, (uint32_t)i, 1));
            for (int j = 0; j < cfg->in; j++) d->x[i * cfg->in + j] = dp_rng_gaussian(&sx, (uint64_t)j);
            d->y[i] = (int32_t)dp_rng_below(&sy, 0, (uint64_t)cfg->classes);
        }
    }
    return DP_OK;
}

static dp_status load_int_tensor(int32_t *out, const dp_tensor *t, int64_t n, int64_t hi, const char *path,
                                 const char *name) {
    for (int64_t e = 0; e < n; e++) {
        int64_t v = t->dtype == DP_I32 ? ((const int32_t *)t->data)[e] : ((const int64_t *)t->data)[e];
        if (v < 0 || v >= hi)
            return dp_error(DP_ERR_INVALID, "%s: %s element %lld = %lld is outside [0, %lld)", path, name,
                            (long long)e, (long long)v, (long long)hi);
        out[e] = (int32_t)v;
    }
    return DP_OK;
}

static dp_status load_from_set(dp_dataset *d, const dp_model_config *cfg, const dp_tensor_set *s,
                               const char *path) {
    if (cfg->kind == DP_LLAMA) {
        const dp_tensor *t = dp_tset_find(s, "tokens");
        if (!t) return dp_error(DP_ERR_FORMAT, "%s: no tensor 'tokens' (llama datasets hold tokens [N, T])", path);
        if (t->dtype != DP_I32 && t->dtype != DP_I64)
            return dp_error(DP_ERR_FORMAT, "%s: 'tokens' must be I32 or I64 (got %s)", path, dp_dtype_name(t->dtype));
        if (t->ndim != 2 || t->shape[0] < 1 || t->shape[1] != cfg->seq)
            return dp_error(DP_ERR_FORMAT, "%s: 'tokens' must have shape [N >= 1, %d]", path, cfg->seq);
        if (t->shape[0] > (int64_t)UINT32_MAX) return dp_error(DP_ERR_FORMAT, "%s: too many examples", path);
        d->n = t->shape[0];
        d->seq = cfg->seq;
        d->tokens = dp_malloc((size_t)d->n * (size_t)d->seq * sizeof(int32_t));
        if (!d->tokens) return DP_ERR_NOMEM;
        return load_int_tensor(d->tokens, t, d->n * d->seq, cfg->vocab, path, "tokens");
    }
    const dp_tensor *x = dp_tset_find(s, "x"), *y = dp_tset_find(s, "y");
    if (!x || !y) return dp_error(DP_ERR_FORMAT, "%s: mlp datasets need tensors 'x' [N, in] and 'y' [N]", path);
    if (x->dtype != DP_F64 && x->dtype != DP_F32)
        return dp_error(DP_ERR_FORMAT, "%s: 'x' must be F64 or F32 (got %s)", path, dp_dtype_name(x->dtype));
    if (y->dtype != DP_I32 && y->dtype != DP_I64)
        return dp_error(DP_ERR_FORMAT, "%s: 'y' must be I32 or I64 (got %s)", path, dp_dtype_name(y->dtype));
    if (x->ndim != 2 || x->shape[0] < 1 || x->shape[1] != cfg->in)
        return dp_error(DP_ERR_FORMAT, "%s: 'x' must have shape [N >= 1, %d]", path, cfg->in);
    if (y->ndim != 1 || y->shape[0] != x->shape[0])
        return dp_error(DP_ERR_FORMAT, "%s: 'y' must have shape [%lld]", path, (long long)x->shape[0]);
    if (x->shape[0] > (int64_t)UINT32_MAX) return dp_error(DP_ERR_FORMAT, "%s: too many examples", path);
    d->n = x->shape[0];
    d->in = cfg->in;
    d->x = dp_malloc((size_t)d->n * (size_t)d->in * sizeof(double));
    d->y = dp_malloc((size_t)d->n * sizeof(int32_t));
    if (!d->x || !d->y) return DP_ERR_NOMEM;
    for (int64_t e = 0; e < d->n * d->in; e++) {
        double v = dp_tensor_get(x, e);
        if (!isfinite(v))
            return dp_error(DP_ERR_INVALID, "%s: 'x' element %lld is not finite", path, (long long)e);
        d->x[e] = v;
    }
    return load_int_tensor(d->y, y, d->n, cfg->classes, path, "y");
}

dp_status dp_dataset_load(dp_dataset *d, const dp_model_config *cfg, const char *path) {
    memset(d, 0, sizeof *d);
    DP_TRY(dp_model_config_check(cfg));
    dp_tensor_set s;
    DP_TRY(dp_st_read(&s, path));
    d->kind = cfg->kind;
    dp_status st = load_from_set(d, cfg, &s, path);
    dp_tset_free(&s);
    if (st != DP_OK) dp_dataset_free(d);
    return st;
}

void dp_dataset_free(dp_dataset *d) {
    if (!d) return;
    dp_free(d->tokens);
    dp_free(d->x);
    dp_free(d->y);
    memset(d, 0, sizeof *d);
}

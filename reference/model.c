/* reference/model.c — the exact CPU reference models (docs/models.md).
 *
 * Plain C11, double precision, textbook loops. One forward and one backward pass
 * per example; nothing is batched, fused or reordered. Tensor shapes are given in
 * comments as [rows, cols] (row-major). */
#include "reference/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"

/* Largest size accepted for any single dimension of a config (keeps every
 * int64 product far from overflow and every RNG lane/stream id in range). */
#define REF_MAX_DIM 65536
#define REF_MAX_LAYERS 256

void ref_config_default(ref_model_config *cfg, ref_model_kind kind) {
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
    if (v < lo || v > REF_MAX_DIM)
        return dp_error(DP_ERR_INVALID, "model %s must be in [%d, %d] (got %d)", what, lo, REF_MAX_DIM, v);
    return DP_OK;
}

dp_status ref_config_check(const ref_model_config *cfg) {
    if (cfg->kind == REF_MLP) {
        DP_TRY(check_size("input size (--in)", cfg->in, 1));
        if (cfg->nhidden < 0 || cfg->nhidden > REF_MAX_HIDDEN)
            return dp_error(DP_ERR_INVALID, "mlp: number of hidden layers must be in [0, %d] (got %d)",
                            REF_MAX_HIDDEN, cfg->nhidden);
        for (int i = 0; i < cfg->nhidden; i++) DP_TRY(check_size("hidden width (--hidden)", cfg->hidden[i], 1));
        DP_TRY(check_size("number of classes (--classes)", cfg->classes, 2));
        return DP_OK;
    }
    if (cfg->kind != REF_LLAMA) return dp_error(DP_ERR_INVALID, "unknown model kind %d", (int)cfg->kind);
    DP_TRY(check_size("vocab (--vocab)", cfg->vocab, 2));
    DP_TRY(check_size("dim (--dim)", cfg->dim, 2));
    if (cfg->layers < 1 || cfg->layers > REF_MAX_LAYERS)
        return dp_error(DP_ERR_INVALID, "model layers (--layers) must be in [1, %d] (got %d)", REF_MAX_LAYERS,
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

static dp_status add_param(ref_model *m, int *cap, int *kinds, const char *name, int ndim, int64_t d0, int64_t d1,
                           int kind) {
    if (m->nparams >= *cap) return dp_error(DP_ERR_INTERNAL, "parameter table overflow");
    ref_param *p = &m->params[m->nparams];
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
static dp_status build_params(ref_model *m, int *kinds, int cap) {
    const ref_model_config *c = &m->cfg;
    char nm[REF_MAX_NAME];
    if (c->kind == REF_MLP) {
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

static int param_count(const ref_model_config *c) {
    return c->kind == REF_MLP ? 2 * (c->nhidden + 1) : 1 + 9 * c->layers + 1 + (c->tied ? 0 : 1);
}

dp_status ref_model_init(ref_model *m, const ref_model_config *cfg, dp_seed seed) {
    memset(m, 0, sizeof *m);
    DP_TRY(ref_config_check(cfg));
    m->cfg = *cfg;
    int cap = param_count(cfg);
    m->params = dp_calloc((size_t)cap, sizeof(ref_param));
    int *kinds = dp_calloc((size_t)cap, sizeof(int));
    if (!m->params || !kinds) { free(kinds); ref_model_free(m); return DP_ERR_NOMEM; }
    dp_status st = build_params(m, kinds, cap);
    /* INIT stream: stream = parameter index p, lane 0, element = flat index e;
     * value = 0.02 * Gaussian element e. Gains are 1 and biases 0 (no draws). */
    for (int p = 0; st == DP_OK && p < m->nparams; p++) {
        ref_param *P = &m->params[p];
        if (kinds[p] == INIT_ONES) {
            for (int64_t e = 0; e < P->numel; e++) P->data[e] = 1.0;
        } else if (kinds[p] == INIT_NORMAL) {
            dp_stream s;
            st = dp_stream_public(&s, seed, DP_PURPOSE_INIT, (uint32_t)p, 0);
            for (int64_t e = 0; st == DP_OK && e < P->numel; e++) P->data[e] = 0.02 * dp_rng_gaussian(&s, (uint64_t)e);
        }
    }
    free(kinds);
    if (st != DP_OK) ref_model_free(m);
    return st;
}

dp_status ref_model_copy(ref_model *out, const ref_model *in) {
    memset(out, 0, sizeof *out);
    out->cfg = in->cfg;
    out->params = dp_calloc((size_t)(in->nparams > 0 ? in->nparams : 1), sizeof(ref_param));
    if (!out->params) return DP_ERR_NOMEM;
    for (int p = 0; p < in->nparams; p++) {
        out->params[p] = in->params[p];
        out->params[p].data = dp_malloc((size_t)in->params[p].numel * sizeof(double));
        if (!out->params[p].data) { out->nparams = p; ref_model_free(out); return DP_ERR_NOMEM; }
        memcpy(out->params[p].data, in->params[p].data, (size_t)in->params[p].numel * sizeof(double));
        out->nparams = p + 1;
    }
    out->total = in->total;
    return DP_OK;
}

void ref_model_free(ref_model *m) {
    if (!m) return;
    if (m->params)
        for (int p = 0; p < m->nparams; p++) free(m->params[p].data);
    free(m->params);
    memset(m, 0, sizeof *m);
}

int ref_model_find(const ref_model *m, const char *name) {
    for (int p = 0; p < m->nparams; p++)
        if (strcmp(m->params[p].name, name) == 0) return p;
    return -1;
}

/* ---------------------------------------------------------------- datasets */

dp_status ref_dataset_generate(ref_dataset *d, const ref_model_config *cfg, int64_t n, dp_seed seed) {
    memset(d, 0, sizeof *d);
    DP_TRY(ref_config_check(cfg));
    if (n < 1 || n > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "dataset size must be in [1, 2^32 - 1] (got %lld)", (long long)n);
    /* element limit (docs/models.md "Datasets"): N * T (llama) or N * in (mlp) <= 2^31 */
    int64_t per = cfg->kind == REF_LLAMA ? cfg->seq : cfg->in;
    if (n > REF_MAX_DATA_ELEMS / per)
        return dp_error(DP_ERR_INVALID, "--dataset-size %lld too large: the generated dataset would hold %lld x %lld = "
                        "%.4g elements, more than the limit 2^31", (long long)n, (long long)n, (long long)per,
                        (double)n * (double)per);
    d->kind = cfg->kind;
    d->n = n;
    /* DATA stream: stream = example index i. llama: token t = below(lane 0, element t, V).
     * mlp: x_j = Gaussian(lane 0, element j); y = below(lane 1, element 0, classes). */
    if (cfg->kind == REF_LLAMA) {
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
        if (!d->x || !d->y) { ref_dataset_free(d); return DP_ERR_NOMEM; }
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

static dp_status load_from_set(ref_dataset *d, const ref_model_config *cfg, const dp_tensor_set *s,
                               const char *path) {
    if (cfg->kind == REF_LLAMA) {
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

dp_status ref_dataset_load(ref_dataset *d, const ref_model_config *cfg, const char *path) {
    memset(d, 0, sizeof *d);
    DP_TRY(ref_config_check(cfg));
    dp_tensor_set s;
    DP_TRY(dp_st_read(&s, path));
    d->kind = cfg->kind;
    dp_status st = load_from_set(d, cfg, &s, path);
    dp_tset_free(&s);
    if (st != DP_OK) ref_dataset_free(d);
    return st;
}

void ref_dataset_free(ref_dataset *d) {
    if (!d) return;
    free(d->tokens);
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

static dp_status check_example(const ref_model *m, const ref_dataset *d, int64_t i) {
    if (d->kind != m->cfg.kind) return dp_error(DP_ERR_INVALID, "dataset kind does not match the model");
    if (i < 0 || i >= d->n) return dp_error(DP_ERR_INVALID, "example index %lld outside [0, %lld)", (long long)i,
                                            (long long)d->n);
    if (m->cfg.kind == REF_LLAMA && d->seq != m->cfg.seq)
        return dp_error(DP_ERR_INVALID, "dataset sequence length %d != model --seq %d", d->seq, m->cfg.seq);
    if (m->cfg.kind == REF_MLP && d->in != m->cfg.in)
        return dp_error(DP_ERR_INVALID, "dataset input size %d != model --in %d", d->in, m->cfg.in);
    return DP_OK;
}

/* ---------------------------------------------------------------- mlp */

/* Forward and (if G != NULL) backward of the mlp on one example.
 * P[2i] = W_i [out_i, in_i], P[2i+1] = b_i [out_i]; G likewise (overwritten). */
static dp_status mlp_example(double *loss, double *const *G, const ref_model_config *c, double *const *P,
                             const double *x, int y) {
    int L = c->nhidden; /* hidden layers; L + 1 linear layers */
    int width[REF_MAX_HIDDEN + 2];
    width[0] = c->in;
    for (int i = 0; i < L; i++) width[i + 1] = c->hidden[i];
    width[L + 1] = c->classes;
    int64_t tot = 0;
    for (int i = 0; i <= L + 1; i++) tot += width[i];
    /* act[i] = h_i: act[0] = x, act[i+1] = tanh(W_i h_i + b_i) for i < L, act[L+1] = logits */
    double *buf = dp_calloc((size_t)(2 * tot), sizeof(double));
    if (!buf) return DP_ERR_NOMEM;
    double *act[REF_MAX_HIDDEN + 2] = {0}, *dact[REF_MAX_HIDDEN + 2] = {0};
    int64_t off = 0;
    for (int i = 0; i <= L + 1; i++) { act[i] = buf + off; dact[i] = buf + tot + off; off += width[i]; }
    memcpy(act[0], x, (size_t)c->in * sizeof(double));
    for (int i = 0; i <= L; i++) {
        const double *W = P[2 * i], *b = P[2 * i + 1]; /* [out, in], [out] */
        for (int o = 0; o < width[i + 1]; o++) {
            double z = b[o];
            for (int k = 0; k < width[i]; k++) z += W[o * width[i] + k] * act[i][k];
            act[i + 1][o] = i < L ? tanh(z) : z;
        }
    }
    /* softmax cross-entropy: loss = logsumexp(z) - z_y */
    const double *z = act[L + 1];
    int K = c->classes;
    double mx = z[0];
    for (int k = 1; k < K; k++) if (z[k] > mx) mx = z[k];
    double se = 0;
    for (int k = 0; k < K; k++) se += exp(z[k] - mx);
    double lse = mx + log(se);
    *loss = lse - z[y];
    if (G) {
        for (int k = 0; k < K; k++) dact[L + 1][k] = exp(z[k] - lse) - (k == y ? 1.0 : 0.0); /* [K] */
        for (int i = L; i >= 0; i--) {
            const double *W = P[2 * i];
            double *dW = G[2 * i], *db = G[2 * i + 1];
            int in = width[i], out = width[i + 1];
            /* dz = dact[i+1] (logits) or dact[i+1] * (1 - tanh^2) (hidden) */
            for (int o = 0; o < out; o++) {
                double dz = dact[i + 1][o];
                if (i < L) dz *= 1.0 - act[i + 1][o] * act[i + 1][o];
                db[o] = dz;
                for (int k = 0; k < in; k++) dW[o * in + k] = dz * act[i][k];
                dact[i + 1][o] = dz; /* keep dz for the input gradient below */
            }
            if (i > 0)
                for (int k = 0; k < in; k++) {
                    double s = 0;
                    for (int o = 0; o < out; o++) s += W[o * in + k] * dact[i + 1][o];
                    dact[i][k] = s;
                }
        }
    }
    free(buf);
    return DP_OK;
}

/* ---------------------------------------------------------------- llama */

/* rmsnorm forward on one row: out[d] = x[d] * r * g[d], r = 1/sqrt(mean(x^2) + eps); returns r. */
static double rms_fwd(double *out, const double *x, const double *g, int D, double eps) {
    double ss = 0;
    for (int d = 0; d < D; d++) ss += x[d] * x[d];
    double r = 1.0 / sqrt(ss / D + eps);
    for (int d = 0; d < D; d++) out[d] = x[d] * r * g[d];
    return r;
}

/* rmsnorm backward on one row: dx[d] += r g[d] dy[d] - x[d] r^3 / D * sum_e dy[e] g[e] x[e];
 * dg[d] += dy[d] x[d] r. */
static void rms_bwd(double *dx, double *dg, const double *dy, const double *x, const double *g, double r, int D) {
    double s = 0;
    for (int e = 0; e < D; e++) s += dy[e] * g[e] * x[e];
    for (int d = 0; d < D; d++) {
        dx[d] += r * g[d] * dy[d] - x[d] * r * r * r / D * s;
        dg[d] += dy[d] * x[d] * r;
    }
}

/* out[t, o] = sum_k in[t, k] W[o, k]  (out = in W^T); in [T, K], W [O, K], out [T, O] */
static void matmul_t(double *out, const double *in, const double *W, int T, int K, int O) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < O; o++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += in[t * K + k] * W[o * K + k];
            out[t * O + o] = s;
        }
}

/* Backward of out = in W^T: din[t, k] += sum_o dout[t, o] W[o, k]; dW[o, k] += sum_t dout[t, o] in[t, k]. */
static void matmul_t_bwd(double *din, double *dW, const double *dout, const double *in, const double *W, int T,
                         int K, int O) {
    for (int t = 0; t < T; t++)
        for (int o = 0; o < O; o++) {
            double g = dout[t * O + o];
            for (int k = 0; k < K; k++) {
                if (din) din[t * K + k] += g * W[o * K + k];
                dW[o * K + k] += g * in[t * K + k];
            }
        }
}

/* Rotary embedding in place on x [T, D] (H heads of hd): for head h, pair i, position t,
 * angle = t * theta^(-2i/hd): (x0, x1) <- (x0 cos - x1 sin, x0 sin + x1 cos).
 * inverse != 0 applies the transpose rotation (used by the backward pass). */
static void rope(double *x, int T, int D, int H, double theta, int inverse) {
    int hd = D / H;
    for (int t = 0; t < T; t++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < hd / 2; i++) {
                double ang = (double)t * pow(theta, -2.0 * i / hd);
                double cs = cos(ang), sn = inverse ? -sin(ang) : sin(ang);
                double *p = x + t * D + h * hd + 2 * i;
                double x0 = p[0], x1 = p[1];
                p[0] = x0 * cs - x1 * sn;
                p[1] = x0 * sn + x1 * cs;
            }
}

static double silu(double x) { return x / (1.0 + exp(-x)); }

/* Per-layer activations kept for the backward pass. */
typedef struct {
    double *hin, *a, *r1, *q, *k, *v, *p, *y, *h1, *m, *r2, *gt, *up, *act;
} llama_cache;

/* Parameter pointer layout: P[0] tok_emb [V, D]; layer l at 1 + 9 l:
 * attn_norm [D], wq, wk, wv, wo [D, D], mlp_norm [D], w_gate, w_up [F, D], w_down [D, F];
 * P[1 + 9 L] final_norm [D]; P[2 + 9 L] lm_head [V, D] when untied. */
static dp_status llama_example(double *loss, double *const *G, const ref_model_config *c, double *const *P,
                               const int32_t *x) {
    const int V = c->vocab, D = c->dim, L = c->layers, H = c->heads, F = c->ffn, T = c->seq, hd = D / H;
    const double eps = c->norm_eps;
    const double *Wout = c->tied ? P[0] : P[2 + 9 * L];
    double *dWout = G ? (c->tied ? G[0] : G[2 + 9 * L]) : NULL;
    /* one arena: per layer 9 [T, D] + 3 [T, F] + 2 [T] + [H, T, T]; final 2 [T, D] + [T] + [T, V]; grads 4 [T, D] + 3 [T, F] + [H, T, T] */
    size_t per_layer = (size_t)9 * T * D + (size_t)3 * T * F + 2 * (size_t)T + (size_t)H * T * T;
    size_t total = per_layer * L + (size_t)3 * T * D + T + (size_t)T * V + (size_t)8 * T * D + (size_t)3 * T * F +
                   (size_t)H * T * T;
    double *arena = dp_calloc(total, sizeof(double));
    llama_cache *lc = dp_calloc((size_t)L, sizeof(llama_cache));
    if (!arena || !lc) { free(arena); free(lc); return DP_ERR_NOMEM; }
    double *cur = arena;
#define TAKE(n) (cur += (n), cur - (n))
    for (int l = 0; l < L; l++) {
        llama_cache *C = &lc[l];
        C->hin = TAKE(T * D); C->a = TAKE(T * D); C->q = TAKE(T * D); C->k = TAKE(T * D); C->v = TAKE(T * D);
        C->y = TAKE(T * D); C->h1 = TAKE(T * D); C->m = TAKE(T * D); (void)TAKE(T * D);
        C->gt = TAKE(T * F); C->up = TAKE(T * F); C->act = TAKE(T * F);
        C->r1 = TAKE(T); C->r2 = TAKE(T); C->p = TAKE(H * T * T);
    }
    double *hfin = TAKE(T * D), *nf = TAKE(T * D), *rf = TAKE(T), *probs = TAKE(T * V), *tmp = TAKE(T * D);
    (void)tmp;

    /* ---- forward ---- */
    double *h = hfin; /* residual stream [T, D]; built in hfin then copied into each layer's hin */
    for (int t = 0; t < T; t++) memcpy(h + t * D, P[0] + (size_t)x[t] * D, (size_t)D * sizeof(double));
    const double scale = 1.0 / sqrt((double)hd);
    for (int l = 0; l < L; l++) {
        llama_cache *C = &lc[l];
        double *const *W = P + 1 + 9 * l;
        memcpy(C->hin, h, (size_t)T * D * sizeof(double));
        for (int t = 0; t < T; t++) C->r1[t] = rms_fwd(C->a + t * D, C->hin + t * D, W[0], D, eps); /* a [T, D] */
        matmul_t(C->q, C->a, W[1], T, D, D); /* q [T, D] */
        matmul_t(C->k, C->a, W[2], T, D, D); /* k [T, D] */
        matmul_t(C->v, C->a, W[3], T, D, D); /* v [T, D] */
        rope(C->q, T, D, H, c->rope_theta, 0);
        rope(C->k, T, D, H, c->rope_theta, 0);
        /* p [H, T, T]: causal softmax of q k^T / sqrt(hd); y [T, D] = p v per head */
        for (int hh = 0; hh < H; hh++)
            for (int t = 0; t < T; t++) {
                double *pr = C->p + ((size_t)hh * T + t) * T;
                double mx = -INFINITY;
                for (int u = 0; u <= t; u++) {
                    double s = 0;
                    for (int j = 0; j < hd; j++) s += C->q[t * D + hh * hd + j] * C->k[u * D + hh * hd + j];
                    pr[u] = s * scale;
                    if (pr[u] > mx) mx = pr[u];
                }
                double se = 0;
                for (int u = 0; u <= t; u++) { pr[u] = exp(pr[u] - mx); se += pr[u]; }
                for (int u = 0; u <= t; u++) pr[u] /= se;
                for (int j = 0; j < hd; j++) {
                    double s = 0;
                    for (int u = 0; u <= t; u++) s += pr[u] * C->v[u * D + hh * hd + j];
                    C->y[t * D + hh * hd + j] = s;
                }
            }
        /* h1 = hin + y Wo^T */
        matmul_t(C->h1, C->y, W[4], T, D, D);
        for (int e = 0; e < T * D; e++) C->h1[e] += C->hin[e];
        for (int t = 0; t < T; t++) C->r2[t] = rms_fwd(C->m + t * D, C->h1 + t * D, W[5], D, eps); /* m [T, D] */
        matmul_t(C->gt, C->m, W[6], T, D, F); /* gate [T, F] */
        matmul_t(C->up, C->m, W[7], T, D, F); /* up [T, F] */
        for (int e = 0; e < T * F; e++) C->act[e] = silu(C->gt[e]) * C->up[e];
        /* h = h1 + act Wdown^T */
        matmul_t(h, C->act, W[8], T, F, D);
        for (int e = 0; e < T * D; e++) h[e] += C->h1[e];
    }
    /* h is hfin [T, D]; nf = rmsnorm(hfin) * final_norm; logits [T, V] = nf lm_head^T */
    const double *gfin = P[1 + 9 * L];
    for (int t = 0; t < T; t++) rf[t] = rms_fwd(nf + t * D, hfin + t * D, gfin, D, eps);
    matmul_t(probs, nf, Wout, T, D, V);
    double lsum = 0;
    for (int t = 0; t < T - 1; t++) {
        double *z = probs + t * V;
        double mx = z[0];
        for (int v = 1; v < V; v++) if (z[v] > mx) mx = z[v];
        double se = 0;
        for (int v = 0; v < V; v++) se += exp(z[v] - mx);
        double lse = mx + log(se);
        lsum += lse - z[x[t + 1]];
        for (int v = 0; v < V; v++) z[v] = exp(z[v] - lse); /* probs */
    }
    *loss = lsum / (T - 1);

    if (G) {
        double *dh = TAKE(T * D), *dnf = TAKE(T * D), *dy = TAKE(T * D), *dq = TAKE(T * D), *dk = TAKE(T * D),
               *dv = TAKE(T * D), *da = TAKE(T * D), *dm = TAKE(T * D);
        double *dact = TAKE(T * F), *dgt = TAKE(T * F), *dup = TAKE(T * F), *dp = TAKE(H * T * T);
        (void)dp;
        /* dlogits [T, V] = (probs - onehot(x_{t+1})) / (T - 1) for t < T - 1, 0 for t = T - 1 */
        for (int v = 0; v < V; v++) probs[(T - 1) * V + v] = 0;
        for (int t = 0; t < T - 1; t++) {
            for (int v = 0; v < V; v++) probs[t * V + v] /= (T - 1);
            probs[t * V + x[t + 1]] -= 1.0 / (T - 1);
        }
        matmul_t_bwd(dnf, dWout, probs, nf, Wout, T, D, V);
        for (int t = 0; t < T; t++) rms_bwd(dh + t * D, G[1 + 9 * L], dnf + t * D, hfin + t * D, gfin, rf[t], D);
        for (int l = L - 1; l >= 0; l--) {
            llama_cache *C = &lc[l];
            double *const *W = P + 1 + 9 * l;
            double *const *dW = G + 1 + 9 * l;
            /* MLP block: h = h1 + act Wdown^T; dh flows to h1 unchanged plus through the block */
            memset(dact, 0, (size_t)T * F * sizeof(double));
            matmul_t_bwd(dact, dW[8], dh, C->act, W[8], T, F, D);
            for (int e = 0; e < T * F; e++) {
                double g = C->gt[e], s = 1.0 / (1.0 + exp(-g));
                dup[e] = dact[e] * g * s;                              /* d/d up   = silu(g) */
                dgt[e] = dact[e] * C->up[e] * s * (1.0 + g * (1.0 - s)); /* d/d gate = up silu'(g) */
            }
            memset(dm, 0, (size_t)T * D * sizeof(double));
            matmul_t_bwd(dm, dW[6], dgt, C->m, W[6], T, D, F);
            matmul_t_bwd(dm, dW[7], dup, C->m, W[7], T, D, F);
            for (int t = 0; t < T; t++) rms_bwd(dh + t * D, dW[5], dm + t * D, C->h1 + t * D, W[5], C->r2[t], D);
            /* now dh = d loss / d h1. Attention block: h1 = hin + y Wo^T */
            memset(dy, 0, (size_t)T * D * sizeof(double));
            matmul_t_bwd(dy, dW[4], dh, C->y, W[4], T, D, D);
            memset(dq, 0, (size_t)T * D * sizeof(double));
            memset(dk, 0, (size_t)T * D * sizeof(double));
            memset(dv, 0, (size_t)T * D * sizeof(double));
            for (int hh = 0; hh < H; hh++)
                for (int t = 0; t < T; t++) {
                    const double *pr = C->p + ((size_t)hh * T + t) * T;
                    double *dpr = dp + ((size_t)hh * T + t) * T;
                    /* dp[u] = dy_t . v_u ; dv_u += p[u] dy_t */
                    double dot = 0;
                    for (int u = 0; u <= t; u++) {
                        double s = 0;
                        for (int j = 0; j < hd; j++) {
                            s += dy[t * D + hh * hd + j] * C->v[u * D + hh * hd + j];
                            dv[u * D + hh * hd + j] += pr[u] * dy[t * D + hh * hd + j];
                        }
                        dpr[u] = s;
                        dot += pr[u] * s;
                    }
                    /* softmax backward: ds[u] = p[u] (dp[u] - sum_w p[w] dp[w]); score = q.k * scale */
                    for (int u = 0; u <= t; u++) {
                        double ds = pr[u] * (dpr[u] - dot) * scale;
                        for (int j = 0; j < hd; j++) {
                            dq[t * D + hh * hd + j] += ds * C->k[u * D + hh * hd + j];
                            dk[u * D + hh * hd + j] += ds * C->q[t * D + hh * hd + j];
                        }
                    }
                }
            /* back through the rotation (its transpose), then through the projections */
            rope(dq, T, D, H, c->rope_theta, 1);
            rope(dk, T, D, H, c->rope_theta, 1);
            memset(da, 0, (size_t)T * D * sizeof(double));
            matmul_t_bwd(da, dW[1], dq, C->a, W[1], T, D, D);
            matmul_t_bwd(da, dW[2], dk, C->a, W[2], T, D, D);
            matmul_t_bwd(da, dW[3], dv, C->a, W[3], T, D, D);
            for (int t = 0; t < T; t++) rms_bwd(dh + t * D, dW[0], da + t * D, C->hin + t * D, W[0], C->r1[t], D);
            /* dh = d loss / d hin */
        }
        /* embedding: dtok_emb[x_t] += dh[t] (tied: added to the lm_head use already in G[0]) */
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) G[0][(size_t)x[t] * D + d] += dh[t * D + d];
    }
#undef TAKE
    free(arena);
    free(lc);
    return DP_OK;
}

/* ---------------------------------------------------------------- public entry points */

static dp_status example(double *loss, double *const *G, const ref_model *m, double *const *params,
                         const ref_dataset *d, int64_t i) {
    DP_TRY(check_example(m, d, i));
    double *stackp[64];
    double **P = m->nparams <= 64 ? stackp : dp_malloc((size_t)m->nparams * sizeof(double *));
    if (!P) return DP_ERR_NOMEM;
    for (int p = 0; p < m->nparams; p++) P[p] = params ? params[p] : m->params[p].data;
    dp_status st;
    if (m->cfg.kind == REF_MLP)
        st = mlp_example(loss, G, &m->cfg, P, d->x + i * d->in, d->y[i]);
    else
        st = llama_example(loss, G, &m->cfg, P, d->tokens + i * d->seq);
    if (P != stackp) free(P);
    return st;
}

dp_status ref_example_loss(double *loss, const ref_model *m, double *const *params, const ref_dataset *d,
                           int64_t i) {
    return example(loss, NULL, m, params, d, i);
}

dp_status ref_example_grad(double *loss, double *const *grads, const ref_model *m, const ref_dataset *d, int64_t i) {
    for (int p = 0; p < m->nparams; p++) memset(grads[p], 0, (size_t)m->params[p].numel * sizeof(double));
    return example(loss, grads, m, NULL, d, i);
}

/* reference/model.c — the exact CPU reference models (docs/models.md).
 *
 * Plain C11, double precision, textbook loops. One forward and one backward pass
 * per example; nothing is batched, fused or reordered. Tensor shapes are given in
 * comments as [rows, cols] (row-major). */
#include "reference/model.h"
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"

/* ---------------------------------------------------------------- examples */

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
    dp_free(buf);
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

/* Over 150 lines (one reason): the reference's forward and backward of one example in one
 * textbook loop order, read against docs/models.md line by line. */
/* Over 150 lines (one reason): the whole llama example, forward then backward, in one
 * readable pass like llm.c's reference, so that the spec reads top to bottom. */
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
    if (!arena || !lc) { dp_free(arena); dp_free(lc); return DP_ERR_NOMEM; }
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
    dp_free(arena);
    dp_free(lc);
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
    if (P != stackp) dp_free(P);
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

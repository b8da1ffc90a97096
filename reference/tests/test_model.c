/* reference/tests/test_model.c — the reference models (docs/models.md):
 *  - the init / data contract (names, order, shapes, stream values);
 *  - finite-difference check of every element of every parameter tensor of both
 *    models (tied and untied llama), tolerance derived in docs/models.md
 *    ("Finite-difference tolerance"), with a negative control (a gradient off by
 *    0.1% must fail the same check);
 *  - sum over examples of per-example gradients = gradient of the summed loss
 *    (directional central differences);
 *  - tied versus untied-and-summed (bitwise on sequences without repeated tokens);
 *  - loading datasets from safetensors, and bad configs / files rejected. */
#include <float.h>
#include <string.h>

#include "common/safetensors.h"
#include "common/test.h"
#include "reference/model.h"

static const double U = DBL_EPSILON / 2; /* unit roundoff */

static double **alloc_grads(const ref_model *m) {
    double **g = calloc((size_t)m->nparams, sizeof *g);
    for (int p = 0; p < m->nparams; p++) g[p] = calloc((size_t)m->params[p].numel, sizeof(double));
    return g;
}
static void free_grads(double **g, const ref_model *m) {
    for (int p = 0; p < m->nparams; p++) free(g[p]);
    free(g);
}

/* Forward flop count of one example (an upper bound on the number of rounded
 * operations on any path to the loss), used by the rounding term of the tolerance. */
static double forward_flops(const ref_model_config *c) {
    if (c->kind == REF_MLP) {
        double f = 0, prev = c->in;
        for (int i = 0; i <= c->nhidden; i++) {
            double out = i < c->nhidden ? c->hidden[i] : c->classes;
            f += 2 * out * prev + 30 * out;
            prev = out;
        }
        return f + 30 * c->classes;
    }
    double T = c->seq, D = c->dim, F = c->ffn, V = c->vocab;
    return c->layers * (8 * T * D * D + 4 * T * T * D + 6 * T * D * F + 60 * T * D + 30 * T * F) + 2 * T * D * V +
           30 * T * V;
}

static double loss_at(ref_model *m, const ref_dataset *d, int64_t i) {
    double l = NAN;
    T_OK(ref_example_loss(&l, m, NULL, d, i));
    return l;
}

/* Central differences on every element of every parameter tensor of example i.
 * D(h) = (L(θ + h e) - L(θ - h e)) / (2h). Error of D(h): truncation h^2/6 |L'''| + rounding
 * δ/h, δ = n_f u max(1, |L|) (γ bound over the n_f forward operations). The truncation term
 * is estimated by Richardson: D(2h) - D(h) ≈ (h^2/2) L''', so h^2/6 |L'''| ≈ |D(2h) - D(h)| / 3;
 * tol = 2 (|D(2h) - D(h)| / 3 + 3 δ / h) (factor 2 for the neglected O(h^4) terms and for the
 * rounding inside the Richardson estimate; 3 δ / h covers the rounding of D(h) and of D(2h)).
 * scale != 1 multiplies the analytic gradient (the negative control). Returns the number of
 * elements outside tolerance; *checked counts elements. */
static int fd_check(ref_model *m, const ref_dataset *d, int64_t i, double h, double scale, int64_t *checked,
                    int verbose) {
    double **g = alloc_grads(m);
    double l0;
    T_OK(ref_example_grad(&l0, g, m, d, i));
    double delta = forward_flops(&m->cfg) * U * fmax(1.0, fabs(l0));
    int bad = 0;
    for (int p = 0; p < m->nparams; p++) {
        double worst = 0;
        for (int64_t e = 0; e < m->params[p].numel; e++) {
            double *w = &m->params[p].data[e], w0 = *w;
            *w = w0 + h;  double lp1 = loss_at(m, d, i);
            *w = w0 - h;  double lm1 = loss_at(m, d, i);
            *w = w0 + 2 * h; double lp2 = loss_at(m, d, i);
            *w = w0 - 2 * h; double lm2 = loss_at(m, d, i);
            *w = w0;
            double d1 = (lp1 - lm1) / (2 * h), d2 = (lp2 - lm2) / (4 * h);
            double tol = 2 * (fabs(d2 - d1) / 3 + 3 * delta / h);
            double err = fabs(d1 - scale * g[p][e]);
            if (err / tol > worst) worst = err / tol;
            if (!(err <= tol)) {
                bad++;
                if (verbose && bad <= 5)
                    fprintf(stderr, "  fd mismatch %s[%lld]: fd %.12g analytic %.12g tol %.3g\n", m->params[p].name,
                            (long long)e, d1, g[p][e], tol);
            }
            (*checked)++;
        }
        if (verbose) printf("  %-22s numel %5lld  max err/tol %.3f\n", m->params[p].name,
                            (long long)m->params[p].numel, worst);
    }
    free_grads(g, m);
    return bad;
}

static void small_llama(ref_model_config *c, int tied) {
    ref_config_default(c, REF_LLAMA);
    c->vocab = 11; c->dim = 8; c->layers = 2; c->heads = 2; c->ffn = 12; c->seq = 6; c->tied = tied;
}
static void small_mlp(ref_model_config *c) {
    ref_config_default(c, REF_MLP);
    c->in = 5; c->nhidden = 2; c->hidden[0] = 7; c->hidden[1] = 4; c->classes = 3;
}

/* Larger weights than the 0.02 init so that every nonlinearity is exercised. */
static void scale_weights(ref_model *m, double f, dp_seed seed) {
    for (int p = 0; p < m->nparams; p++) {
        dp_stream s;
        dp_stream_public(&s, seed, DP_PURPOSE_TEST, (uint32_t)p, 7);
        for (int64_t e = 0; e < m->params[p].numel; e++) {
            double *w = &m->params[p].data[e];
            /* matrices scaled up, gains/biases perturbed away from 1/0 */
            if (m->params[p].ndim == 2) *w *= f;
            else *w += 0.3 * dp_rng_gaussian(&s, (uint64_t)e);
        }
    }
}


/* An independent, differently written forward pass of the llama (docs/models.md), per
 * position, with rope angles t * exp(-(2i/hd) ln theta), softmax without max subtraction
 * and rmsnorm as x / sqrt(mean + eps) * g. `theta` is a parameter so that the negative
 * control can use a wrong one. */
static double naive_llama_loss(const ref_model *m, const int32_t *x, double theta) {
    const ref_model_config *c = &m->cfg;
    const int V = c->vocab, D = c->dim, L = c->layers, H = c->heads, F = c->ffn, T = c->seq, hd = D / H;
    const double *E = m->params[0].data, *Wout = c->tied ? E : m->params[2 + 9 * L].data;
    double *h = calloc((size_t)T * D, sizeof(double)), *K = calloc((size_t)T * D, sizeof(double)),
           *Vv = calloc((size_t)T * D, sizeof(double)), *Q = calloc((size_t)T * D, sizeof(double));
    double a[256], o[256], f1[512], f2[512], y[256];
    for (int t = 0; t < T; t++) for (int d = 0; d < D; d++) h[t * D + d] = E[x[t] * D + d];
    for (int l = 0; l < L; l++) {
        double **W = calloc(9, sizeof(double *));
        for (int j = 0; j < 9; j++) W[j] = m->params[1 + 9 * l + j].data;
        for (int t = 0; t < T; t++) { /* q, k, v of every position */
            double ms = 0;
            for (int d = 0; d < D; d++) ms += h[t * D + d] * h[t * D + d] / D;
            for (int d = 0; d < D; d++) a[d] = h[t * D + d] / sqrt(ms + c->norm_eps) * W[0][d];
            for (int r = 0; r < D; r++) {
                double sq = 0, sk = 0, sv = 0;
                for (int d = 0; d < D; d++) { sq += W[1][r * D + d] * a[d]; sk += W[2][r * D + d] * a[d]; sv += W[3][r * D + d] * a[d]; }
                Q[t * D + r] = sq; K[t * D + r] = sk; Vv[t * D + r] = sv;
            }
            for (int hh = 0; hh < H; hh++)
                for (int i = 0; i < hd / 2; i++) {
                    double ang = t * exp(-(2.0 * i / hd) * log(theta));
                    int j0 = hh * hd + 2 * i;
                    double q0 = Q[t * D + j0], q1 = Q[t * D + j0 + 1], k0 = K[t * D + j0], k1 = K[t * D + j0 + 1];
                    Q[t * D + j0] = cos(ang) * q0 - sin(ang) * q1; Q[t * D + j0 + 1] = sin(ang) * q0 + cos(ang) * q1;
                    K[t * D + j0] = cos(ang) * k0 - sin(ang) * k1; K[t * D + j0 + 1] = sin(ang) * k0 + cos(ang) * k1;
                }
        }
        for (int t = 0; t < T; t++) {
            for (int hh = 0; hh < H; hh++) {
                double w[64], z = 0;
                for (int u = 0; u <= t; u++) {
                    double s = 0;
                    for (int j = 0; j < hd; j++) s += Q[t * D + hh * hd + j] * K[u * D + hh * hd + j];
                    w[u] = exp(s / sqrt((double)hd));
                    z += w[u];
                }
                for (int j = 0; j < hd; j++) {
                    double s = 0;
                    for (int u = 0; u <= t; u++) s += w[u] / z * Vv[u * D + hh * hd + j];
                    o[hh * hd + j] = s;
                }
            }
            for (int r = 0; r < D; r++) { double s = 0; for (int d = 0; d < D; d++) s += W[4][r * D + d] * o[d]; y[r] = s; }
            for (int r = 0; r < D; r++) h[t * D + r] += y[r];
        }
        for (int t = 0; t < T; t++) {
            double ms = 0;
            for (int d = 0; d < D; d++) ms += h[t * D + d] * h[t * D + d] / D;
            for (int d = 0; d < D; d++) a[d] = h[t * D + d] / sqrt(ms + c->norm_eps) * W[5][d];
            for (int r = 0; r < F; r++) {
                double g = 0, u = 0;
                for (int d = 0; d < D; d++) { g += W[6][r * D + d] * a[d]; u += W[7][r * D + d] * a[d]; }
                f1[r] = g / (1 + exp(-g)) * u;
            }
            for (int r = 0; r < D; r++) { double s = 0; for (int f = 0; f < F; f++) s += W[8][r * F + f] * f1[f]; f2[r] = s; }
            for (int r = 0; r < D; r++) h[t * D + r] += f2[r];
        }
        free(W);
    }
    const double *gf = m->params[1 + 9 * L].data;
    double loss = 0;
    for (int t = 0; t < T - 1; t++) {
        double ms = 0, z = 0, lt = 0;
        for (int d = 0; d < D; d++) ms += h[t * D + d] * h[t * D + d] / D;
        for (int d = 0; d < D; d++) a[d] = h[t * D + d] / sqrt(ms + c->norm_eps) * gf[d];
        for (int v = 0; v < V; v++) {
            double s = 0;
            for (int d = 0; d < D; d++) s += Wout[v * D + d] * a[d];
            z += exp(s);
            if (v == x[t + 1]) lt = s;
        }
        loss += (log(z) - lt) / (T - 1);
    }
    free(h); free(K); free(Vv); free(Q);
    return loss;
}

/* The reference loss against the independent forward above: |diff| <= 2 n_f u max(1, |L|)
 * (both evaluations within the γ bound); negative control: theta = 5000 instead of 10000
 * (wrong rotary frequencies) must be detected. */
static void test_independent_forward(uint64_t seed) {
    for (int tied = 0; tied < 2; tied++) {
        ref_model_config c;
        small_llama(&c, tied);
        ref_model m;
        ref_dataset d;
        T_OK(ref_model_init(&m, &c, (dp_seed){seed}));
        T_OK(ref_dataset_generate(&d, &c, 2, (dp_seed){seed + 1}));
        scale_weights(&m, 15.0, (dp_seed){seed + 2});
        for (int i = 0; i < 2; i++) {
            double l = loss_at(&m, &d, i), ln = naive_llama_loss(&m, d.tokens + i * c.seq, c.rope_theta);
            double tol = 2 * forward_flops(&c) * U * fmax(1.0, fabs(l));
            T_CHECK(fabs(l - ln) <= tol, "reference loss %.17g vs independent forward %.17g (tol %.3g, tied %d, example %d)",
                    l, ln, tol, tied, i);
            double lw = naive_llama_loss(&m, d.tokens + i * c.seq, 5000.0);
            T_CHECK(fabs(l - lw) > tol, "negative control: theta 5000 not detected (%.3g vs tol %.3g)", fabs(l - lw), tol);
            printf("independent forward (tied %d, ex %d): %.15g vs %.15g (tol %.2g), wrong theta off by %.3g\n", tied, i,
                   l, ln, tol, fabs(l - lw));
        }
        ref_model_free(&m);
        ref_dataset_free(&d);
    }
}

static void test_fd(uint64_t seed) {
    const double h = 1e-4; /* near (3 δ / |L'''|)^(1/3) for δ ~ 1e-11 */
    for (int which = 0; which < 3; which++) {
        ref_model_config c;
        if (which == 0) small_mlp(&c); else small_llama(&c, which == 2);
        ref_model m;
        ref_dataset d;
        T_OK(ref_model_init(&m, &c, (dp_seed){seed}));
        T_OK(ref_dataset_generate(&d, &c, 3, (dp_seed){seed + 1}));
        scale_weights(&m, which == 0 ? 40.0 : 15.0, (dp_seed){seed + 2});
        printf("finite differences: %s%s (h = %g)\n", which == 0 ? "mlp" : "llama", which == 2 ? " tied" : "", h);
        int64_t n = 0;
        int bad = fd_check(&m, &d, 1, h, 1.0, &n, 1);
        T_CHECK(bad == 0, "%d of %lld elements outside the finite-difference tolerance", bad, (long long)n);
        T_CHECK(n == m.total, "checked %lld of %lld elements", (long long)n, (long long)m.total);
        /* negative control: the analytic gradient off by 0.1% must be caught */
        int64_t n2 = 0;
        int bad2 = fd_check(&m, &d, 1, h, 1.001, &n2, 0);
        T_CHECK(bad2 > n2 / 4, "negative control: a 0.1%% gradient error was caught on only %d of %lld elements",
                bad2, (long long)n2);
        printf("  negative control (gradient x 1.001): %d of %lld elements flagged\n", bad2, (long long)n2);
        ref_model_free(&m);
        ref_dataset_free(&d);
    }
}

/* Sum of per-example gradients = gradient of the summed loss: along random directions v,
 * (S(θ + h v) - S(θ - h v)) / (2h) vs sum_i <g_i, v>, S = sum_i L_i; tolerance as in fd_check
 * with δ scaled by the number of examples. Also: ref_example_grad overwrites (calling it twice
 * gives the same bits). */
static void test_sum_of_grads(uint64_t seed) {
    for (int which = 0; which < 2; which++) {
        ref_model_config c;
        if (which == 0) small_mlp(&c); else small_llama(&c, 1);
        ref_model m;
        ref_dataset d;
        const int B = 4;
        T_OK(ref_model_init(&m, &c, (dp_seed){seed}));
        T_OK(ref_dataset_generate(&d, &c, B, (dp_seed){seed + 1}));
        scale_weights(&m, which == 0 ? 40.0 : 15.0, (dp_seed){seed + 2});
        double **g = alloc_grads(&m), **g2 = alloc_grads(&m), **sum = alloc_grads(&m);
        double lsum = 0;
        for (int i = 0; i < B; i++) {
            double l, l2;
            T_OK(ref_example_grad(&l, g, &m, &d, i));
            T_OK(ref_example_grad(&l2, g2, &m, &d, i));
            int same = l == l2;
            for (int p = 0; p < m.nparams; p++) {
                same &= memcmp(g[p], g2[p], (size_t)m.params[p].numel * sizeof(double)) == 0;
                for (int64_t e = 0; e < m.params[p].numel; e++) sum[p][e] += g[p][e];
            }
            T_CHECK(same, "ref_example_grad is not deterministic / does not overwrite (example %d)", i);
            lsum += l;
        }
        const double h = 1e-4;
        double delta = B * forward_flops(&c) * U * fmax(1.0, fabs(lsum));
        for (int dir = 0; dir < 3; dir++) {
            /* v: a Gaussian direction of unit norm from the TEST stream */
            double dot = 0, vn = 0;
            double **v = alloc_grads(&m);
            for (int p = 0; p < m.nparams; p++) {
                dp_stream s;
                dp_stream_public(&s, (dp_seed){seed + 3}, DP_PURPOSE_TEST, (uint32_t)dir, (uint32_t)p);
                for (int64_t e = 0; e < m.params[p].numel; e++) { v[p][e] = dp_rng_gaussian(&s, (uint64_t)e); vn += v[p][e] * v[p][e]; }
            }
            vn = sqrt(vn);
            for (int p = 0; p < m.nparams; p++)
                for (int64_t e = 0; e < m.params[p].numel; e++) { v[p][e] /= vn; dot += sum[p][e] * v[p][e]; }
            double S[4]; /* at +h, -h, +2h, -2h */
            const double steps[4] = {h, -h, 2 * h, -2 * h};
            for (int k = 0; k < 4; k++) {
                ref_model mm;
                T_OK(ref_model_copy(&mm, &m));
                for (int p = 0; p < m.nparams; p++)
                    for (int64_t e = 0; e < m.params[p].numel; e++) mm.params[p].data[e] += steps[k] * v[p][e];
                S[k] = 0;
                for (int i = 0; i < B; i++) S[k] += loss_at(&mm, &d, i);
                ref_model_free(&mm);
            }
            double d1 = (S[0] - S[1]) / (2 * h), d2 = (S[2] - S[3]) / (4 * h);
            double tol = 2 * (fabs(d2 - d1) / 3 + 3 * delta / h);
            T_CLOSE(d1, dot, tol, "directional derivative of the summed loss vs sum of per-example gradients");
            T_CHECK(fabs(d1 - 1.001 * dot) > tol, "negative control: 0.1%% off must exceed tol %.3g", tol);
            printf("  %s direction %d: fd %.12g  sum<g_i,v> %.12g  tol %.3g\n", which ? "llama" : "mlp", dir, d1, dot,
                   tol);
            free_grads(v, &m);
        }
        free_grads(g, &m); free_grads(g2, &m); free_grads(sum, &m);
        ref_model_free(&m);
        ref_dataset_free(&d);
    }
}

/* Tied vs untied-and-summed: an untied model whose lm_head equals tok_emb computes the same
 * loss, and (lm_head grad + tok_emb grad) equals the tied tok_emb grad. With no token repeated
 * in the sequence each embedding row receives one embedding term, so both sums are the same
 * floating-point operations: bitwise equality. */
static void test_tied(uint64_t seed) {
    ref_model_config ct, cu;
    small_llama(&ct, 1);
    small_llama(&cu, 0);
    ref_model mt, mu;
    T_OK(ref_model_init(&mt, &ct, (dp_seed){seed}));
    T_OK(ref_model_init(&mu, &cu, (dp_seed){seed}));
    scale_weights(&mt, 15.0, (dp_seed){seed + 2});
    int ie = ref_model_find(&mu, "tok_emb"), ih = ref_model_find(&mu, "lm_head");
    T_CHECK(ie == 0 && ih == mu.nparams - 1 && ref_model_find(&mt, "lm_head") < 0, "parameter layout");
    T_CHECK(mt.nparams == mu.nparams - 1, "tied model has one parameter less");
    for (int p = 0; p < mt.nparams; p++)
        memcpy(mu.params[p].data, mt.params[p].data, (size_t)mt.params[p].numel * sizeof(double));
    memcpy(mu.params[ih].data, mt.params[0].data, (size_t)mt.params[0].numel * sizeof(double));
    int32_t toks[6] = {3, 7, 1, 10, 0, 5}; /* distinct tokens */
    ref_dataset d = {.kind = REF_LLAMA, .n = 1, .seq = 6, .tokens = toks};
    double **gt = alloc_grads(&mt), **gu = alloc_grads(&mu);
    double lt, lu;
    T_OK(ref_example_grad(&lt, gt, &mt, &d, 0));
    T_OK(ref_example_grad(&lu, gu, &mu, &d, 0));
    T_CHECK(lt == lu, "tied loss %.17g != untied loss %.17g", lt, lu);
    int same = 1;
    for (int p = 1; p < mt.nparams; p++)
        same &= memcmp(gt[p], gu[p], (size_t)mt.params[p].numel * sizeof(double)) == 0;
    T_CHECK(same, "gradients of non-embedding parameters differ between tied and untied");
    int64_t mism = 0;
    for (int64_t e = 0; e < mt.params[0].numel; e++)
        if (gt[0][e] != gu[ih][e] + gu[ie][e]) mism++;
    T_CHECK(mism == 0, "tied tok_emb grad != untied lm_head + tok_emb grads at %lld elements", (long long)mism);
    /* negative control: the lm_head part alone is not the tied gradient */
    int64_t diff = 0;
    for (int64_t e = 0; e < mt.params[0].numel; e++) diff += gt[0][e] != gu[ih][e];
    T_CHECK(diff > 0, "negative control: lm_head grad alone equals the tied grad");
    free_grads(gt, &mt); free_grads(gu, &mu);
    ref_model_free(&mt); ref_model_free(&mu);
}

/* The init and data contract of docs/models.md, value by value. */
static void test_contract(uint64_t seed) {
    ref_model_config c;
    ref_config_default(&c, REF_LLAMA);
    T_CHECK(c.vocab == 64 && c.dim == 32 && c.layers == 2 && c.heads == 4 && c.ffn == 64 && c.seq == 16 && !c.tied,
            "default llama config");
    ref_model m;
    T_OK(ref_model_init(&m, &c, (dp_seed){seed}));
    T_CHECK(m.nparams == 1 + 9 * 2 + 2, "llama parameter count %d", m.nparams);
    static const char *names[] = {"tok_emb", "layers.0.attn_norm", "layers.0.wq", "layers.0.wk", "layers.0.wv",
                                  "layers.0.wo", "layers.0.mlp_norm", "layers.0.w_gate", "layers.0.w_up",
                                  "layers.0.w_down", "layers.1.attn_norm"};
    for (int p = 0; p < 11; p++) T_CHECK(strcmp(m.params[p].name, names[p]) == 0, "param %d is %s", p, m.params[p].name);
    T_CHECK(strcmp(m.params[19].name, "final_norm") == 0 && strcmp(m.params[20].name, "lm_head") == 0, "tail names");
    T_CHECK(m.params[7].shape[0] == 64 && m.params[7].shape[1] == 32 && m.params[9].shape[0] == 32 &&
                m.params[9].shape[1] == 64, "w_gate [F, D], w_down [D, F]");
    int64_t tot = 0;
    for (int p = 0; p < m.nparams; p++) tot += m.params[p].numel;
    T_CHECK(tot == m.total && tot == 64 * 32 * 2 + 2 * (2 * 32 + 4 * 32 * 32 + 3 * 64 * 32) + 32, "total %lld",
            (long long)tot);
    /* values: parameter p element e = 0.02 * gaussian(INIT, stream p, lane 0, element e) */
    int ok = 1;
    for (int p = 0; p < m.nparams; p++)
        for (int64_t e = 0; e < m.params[p].numel; e++) {
            double want = m.params[p].ndim == 1 ? 1.0
                        : 0.02 * dp_stream_gaussian(seed, DP_PURPOSE_INIT, (uint32_t)p, 0, (uint64_t)e);
            ok &= m.params[p].data[e] == want;
        }
    T_CHECK(ok, "llama init values differ from the INIT stream contract");
    ref_dataset d;
    T_OK(ref_dataset_generate(&d, &c, 5, (dp_seed){seed}));
    ok = 1;
    for (int i = 0; i < 5; i++)
        for (int t = 0; t < 16; t++) {
            uint64_t w = dp_stream_u64(seed, DP_PURPOSE_DATA, (uint32_t)i, 0, (uint64_t)t);
            ok &= d.tokens[i * 16 + t] == (int32_t)(((unsigned __int128)w * 64) >> 64);
        }
    T_CHECK(ok, "llama tokens differ from the DATA stream contract");
    ref_dataset_free(&d);
    ref_model_free(&m);

    ref_config_default(&c, REF_MLP);
    T_OK(ref_model_init(&m, &c, (dp_seed){seed}));
    T_CHECK(m.nparams == 6 && strcmp(m.params[5].name, "layers.2.bias") == 0 && m.params[0].shape[0] == 32 &&
                m.params[0].shape[1] == 16 && m.params[4].shape[0] == 10, "mlp layout");
    ok = 1;
    for (int p = 0; p < m.nparams; p++)
        for (int64_t e = 0; e < m.params[p].numel; e++) {
            double want = m.params[p].ndim == 1 ? 0.0
                        : 0.02 * dp_stream_gaussian(seed, DP_PURPOSE_INIT, (uint32_t)p, 0, (uint64_t)e);
            ok &= m.params[p].data[e] == want;
        }
    T_CHECK(ok, "mlp init values differ from the INIT stream contract");
    T_OK(ref_dataset_generate(&d, &c, 4, (dp_seed){seed}));
    ok = 1;
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 16; j++) ok &= d.x[i * 16 + j] == dp_stream_gaussian(seed, DP_PURPOSE_DATA, (uint32_t)i, 0, (uint64_t)j);
        uint64_t w = dp_stream_u64(seed, DP_PURPOSE_DATA, (uint32_t)i, 1, 0);
        ok &= d.y[i] == (int32_t)(((unsigned __int128)w * 10) >> 64);
    }
    T_CHECK(ok, "mlp data differ from the DATA stream contract");
    /* a loss at init is close to log(classes) (logits are tiny) */
    double l;
    T_OK(ref_example_loss(&l, &m, NULL, &d, 0));
    T_CLOSE(l, log(10.0), 0.05, "mlp loss at init");
    ref_dataset_free(&d);
    ref_model_free(&m);
}

static void test_load_and_errors(uint64_t seed) {
    ref_model_config c;
    small_llama(&c, 0);
    ref_dataset d, d2;
    T_OK(ref_dataset_generate(&d, &c, 3, (dp_seed){seed}));
    dp_tensor_set s;
    dp_tset_init(&s);
    int64_t shp[2] = {3, c.seq};
    T_OK(dp_tset_add_raw(&s, "tokens", DP_I32, d.tokens, 2, shp));
    T_OK(dp_st_write("ds_llama.safetensors", &s));
    T_OK(ref_dataset_load(&d2, &c, "ds_llama.safetensors"));
    T_CHECK(d2.n == 3 && memcmp(d2.tokens, d.tokens, sizeof(int32_t) * 3 * c.seq) == 0, "llama dataset round trip");
    ref_dataset_free(&d2);
    /* out-of-range token is rejected */
    d.tokens[4] = c.vocab;
    dp_tset_free(&s);
    dp_tset_init(&s);
    T_OK(dp_tset_add_raw(&s, "tokens", DP_I32, d.tokens, 2, shp));
    T_OK(dp_st_write("ds_bad.safetensors", &s));
    T_CHECK(ref_dataset_load(&d2, &c, "ds_bad.safetensors") == DP_ERR_INVALID, "token >= vocab rejected");
    T_CHECK(ref_dataset_load(&d2, &c, "no_such_file.safetensors") != DP_OK, "missing file rejected");
    dp_tset_free(&s);
    ref_dataset_free(&d);

    small_mlp(&c);
    T_OK(ref_dataset_generate(&d, &c, 2, (dp_seed){seed}));
    dp_tset_init(&s);
    int64_t sx[2] = {2, c.in}, sy[1] = {2};
    T_OK(dp_tset_add_raw(&s, "x", DP_F64, d.x, 2, sx));
    T_OK(dp_tset_add_raw(&s, "y", DP_I32, d.y, 1, sy));
    T_OK(dp_st_write("ds_mlp.safetensors", &s));
    T_OK(ref_dataset_load(&d2, &c, "ds_mlp.safetensors"));
    T_CHECK(d2.n == 2 && memcmp(d2.x, d.x, sizeof(double) * 2 * c.in) == 0 && d2.y[1] == d.y[1], "mlp round trip");
    ref_dataset_free(&d2);
    dp_tset_free(&s);
    d.x[3] = NAN;
    dp_tset_init(&s);
    T_OK(dp_tset_add_raw(&s, "x", DP_F64, d.x, 2, sx));
    T_OK(dp_tset_add_raw(&s, "y", DP_I32, d.y, 1, sy));
    T_OK(dp_st_write("ds_nan.safetensors", &s));
    T_CHECK(ref_dataset_load(&d2, &c, "ds_nan.safetensors") == DP_ERR_INVALID, "NaN input rejected");
    dp_tset_free(&s);
    ref_dataset_free(&d);

    ref_config_default(&c, REF_LLAMA);
    c.heads = 5;
    T_CHECK(ref_config_check(&c) == DP_ERR_INVALID, "heads not dividing dim rejected");
    printf("  message: %s\n", dp_last_error());
    c.heads = 16; /* head dim 2: fine */
    T_OK(ref_config_check(&c));
    c.heads = 32; /* head dim 1: odd */
    T_CHECK(ref_config_check(&c) == DP_ERR_INVALID, "odd head dim rejected");
    ref_config_default(&c, REF_LLAMA);
    c.seq = 1;
    T_CHECK(ref_config_check(&c) == DP_ERR_INVALID, "seq 1 rejected");
    ref_config_default(&c, REF_MLP);
    c.classes = 1;
    T_CHECK(ref_config_check(&c) == DP_ERR_INVALID, "one class rejected");
    ref_model m;
    ref_config_default(&c, REF_MLP);
    T_OK(ref_model_init(&m, &c, (dp_seed){seed}));
    T_OK(ref_dataset_generate(&d, &c, 2, (dp_seed){seed}));
    double l;
    T_CHECK(ref_example_loss(&l, &m, NULL, &d, 2) == DP_ERR_INVALID, "example index out of range rejected");
    ref_dataset_free(&d);
    ref_model_free(&m);
}

int main(void) {
    uint64_t seed = t_seed(20261121);
    test_contract(seed);
    test_load_and_errors(seed);
    test_tied(seed);
    test_independent_forward(seed);
    test_sum_of_grads(seed);
    test_fd(seed);
    return t_finish();
}

/* optimized/host/host_kern.h — the host backend's kernels, written once and
 * instantiated for double and float by host_backend.c:
 *     #define R double / float      the element type
 *     #define K(name) name##_f64    the instance suffix
 * Every reduction accumulates in R in a fixed order (documented per kernel); work is
 * split across threads only over independent outputs (rows of C, examples), so
 * results do not depend on the thread count. Shapes as in optimized/backend.h. */

/* ---- GEMM ---- */
typedef struct {
    R *C; const R *A, *B;
    int ta, tb; int64_t M, N, K_, batch, sA, sB, sC;
    R alpha, beta;
    R *scratch; int64_t sstride; /* per-thread scratch: K + N elements */
} K(gemm_job);

/* Element (i, k) of op(A_b), (k, j) of op(B_b). */
static void K(gemm_rows)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(gemm_job) *g = arg;
    /* work items: (b, i) pairs, item = b*M + i. Each C[i, j] is accumulated over k in
     * increasing order, in one accumulator (acc[j] below when tb = 0). */
    R *buf = g->scratch + tid * g->sstride;
    R *abuf = buf, *acc = buf + g->K_;
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / g->M, i = it % g->M;
        const R *A = g->A + b * g->sA, *B = g->B + b * g->sB;
        R *C = g->C + b * g->sC + i * g->N;
        const R *arow; /* row i of op(A) [K] */
        if (!g->ta) arow = A + i * g->K_;
        else {
            for (int64_t k = 0; k < g->K_; k++) abuf[k] = A[k * g->M + i];
            arow = abuf;
        }
        if (g->tb) {
            for (int64_t j = 0; j < g->N; j++) {
                const R *brow = B + j * g->K_;
                R s = 0;
                for (int64_t k = 0; k < g->K_; k++) s += arow[k] * brow[k];
                acc[j] = s;
            }
        } else {
            for (int64_t j = 0; j < g->N; j++) acc[j] = 0;
            for (int64_t k = 0; k < g->K_; k++) {
                R a = arow[k];
                const R *brow = B + k * g->N;
                for (int64_t j = 0; j < g->N; j++) acc[j] += a * brow[j];
            }
        }
        for (int64_t j = 0; j < g->N; j++) {
            R v = g->alpha * acc[j];
            C[j] = g->beta == 0 ? v : v + g->beta * C[j];
        }
    }
}

static dp_status K(gemm)(void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M,
                         int64_t N, int64_t Kd, double alpha, double beta, int64_t batch, int64_t sA,
                         int64_t sB, int64_t sC) {
    if (M < 0 || N < 0 || Kd < 0 || batch < 0) return dp_error(DP_ERR_INVALID, "gemm: negative size");
    int64_t stride = Kd + N + 1;
    R *scratch = host_scratch(ctx, sizeof(R) * (size_t)stride);
    if (!scratch) return dp_error(DP_ERR_NOMEM, "gemm: out of memory");
    K(gemm_job) g = {(R *)C, (const R *)A, (const R *)B, ta, tb, M, N, Kd, batch, sA, sB, sC, (R)alpha, (R)beta,
                     scratch, stride};
    host_parallel(ctx, K(gemm_rows), &g, batch * M, N * Kd);
    free(scratch);
    return DP_OK;
}

static dp_status K(add_bias)(void *ctx, void *y_, const void *b_, int64_t rows, int64_t n) {
    R *y = y_; const R *b = b_;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < n; j++) y[r * n + j] += b[j];
    return DP_OK;
}

/* out[g, j] = (out[g, j] +) sum over r in order 0..per-1 */
static dp_status K(sum_rows)(void *ctx, void *out_, const void *x_, int accumulate, int64_t groups,
                             int64_t per, int64_t n) {
    R *out = out_; const R *x = x_;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t j = 0; j < n; j++) {
            R acc = accumulate ? out[g * n + j] : 0;
            for (int64_t r = 0; r < per; r++) acc += x[(g * per + r) * n + j];
            out[g * n + j] = acc;
        }
    return DP_OK;
}

static dp_status K(axpby)(void *ctx, void *y_, const void *x_, double alpha, double beta, int64_t n) {
    R *y = y_; const R *x = x_; R a = (R)alpha, b = (R)beta;
    for (int64_t i = 0; i < n; i++) y[i] = a * x[i] + (b == 0 ? 0 : b * y[i]);
    return DP_OK;
}

static dp_status K(add)(void *ctx, void *y_, const void *a_, const void *b_, int64_t n) {
    R *y = y_; const R *a = a_, *b = b_;
    for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i];
    return DP_OK;
}

static dp_status K(mul)(void *ctx, void *y_, const void *x_, int64_t n) {
    R *y = y_; const R *x = x_;
    for (int64_t i = 0; i < n; i++) y[i] *= x[i];
    return DP_OK;
}

/* ---- pointwise activations ---- */
static dp_status K(tanh_fwd)(void *ctx, void *y_, const void *x_, int64_t n) {
    R *y = y_; const R *x = x_;
    for (int64_t i = 0; i < n; i++) y[i] = (R)tanh((double)x[i]);
    return DP_OK;
}
static dp_status K(tanh_bwd)(void *ctx, void *dx_, const void *dy_, const void *y_, int64_t n) {
    R *dx = dx_; const R *dy = dy_, *y = y_;
    for (int64_t i = 0; i < n; i++) dx[i] = dy[i] * (1 - y[i] * y[i]);
    return DP_OK;
}
static R K(sigmoid)(R a) { return (R)(1.0 / (1.0 + exp(-(double)a))); }
static dp_status K(silu_fwd)(void *ctx, void *y_, const void *x_, int64_t n) {
    R *y = y_; const R *x = x_;
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * K(sigmoid)(x[i]);
    return DP_OK;
}
/* d silu / da = s (1 + a (1 - s)), s = sigmoid(a) */
static dp_status K(silu_bwd)(void *ctx, void *dx_, const void *dy_, const void *x_, int64_t n) {
    R *dx = dx_; const R *dy = dy_, *x = x_;
    for (int64_t i = 0; i < n; i++) {
        R s = K(sigmoid)(x[i]);
        dx[i] = dy[i] * (s * (1 + x[i] * (1 - s)));
    }
    return DP_OK;
}
static dp_status K(swiglu_fwd)(void *ctx, void *h_, const void *a_, const void *b_, int64_t n) {
    R *h = h_; const R *a = a_, *b = b_;
    for (int64_t i = 0; i < n; i++) h[i] = a[i] * K(sigmoid)(a[i]) * b[i];
    return DP_OK;
}
static dp_status K(swiglu_bwd)(void *ctx, void *da_, void *db_, const void *dh_, const void *a_,
                               const void *b_, int64_t n) {
    R *da = da_, *db = db_; const R *dh = dh_, *a = a_, *b = b_;
    for (int64_t i = 0; i < n; i++) {
        R s = K(sigmoid)(a[i]);
        R silu = a[i] * s;
        R dbi = dh[i] * silu;
        da[i] = dh[i] * b[i] * (s * (1 + a[i] * (1 - s)));
        db[i] = dbi;
    }
    return DP_OK;
}

/* ---- RMSNorm ---- */
static dp_status K(rmsnorm_fwd)(void *ctx, void *y_, void *rstd_, const void *x_, const void *g_, double eps,
                                int64_t rows, int64_t D) {
    R *y = y_, *rs = rstd_; const R *x = x_, *g = g_;
    for (int64_t r = 0; r < rows; r++) {
        const R *xr = x + r * D;
        R ss = 0;
        for (int64_t j = 0; j < D; j++) ss += xr[j] * xr[j];
        R s = (R)(1.0 / sqrt((double)(ss / (R)D) + eps));
        rs[r] = s;
        for (int64_t j = 0; j < D; j++) y[r * D + j] = xr[j] * s * g[j];
    }
    return DP_OK;
}
/* y = x s g, s = (mean x^2 + eps)^-1/2:
 * dx_j = s g_j dy_j - x_j s^3 / D * sum_k dy_k g_k x_k */
static dp_status K(rmsnorm_bwd)(void *ctx, void *dx_, void *dg_, const void *dy_, const void *x_,
                                const void *rstd_, const void *g_, int64_t rows, int64_t D) {
    R *dx = dx_, *dg = dg_; const R *dy = dy_, *x = x_, *rs = rstd_, *g = g_;
    for (int64_t r = 0; r < rows; r++) {
        const R *xr = x + r * D, *dyr = dy + r * D;
        R s = rs[r], dot = 0;
        for (int64_t k = 0; k < D; k++) dot += dyr[k] * g[k] * xr[k];
        R coef = s * s * s * dot / (R)D;
        for (int64_t j = 0; j < D; j++) {
            if (dx) dx[r * D + j] = s * g[j] * dyr[j] - xr[j] * coef;
            if (dg) dg[r * D + j] = dyr[j] * xr[j] * s;
        }
    }
    return DP_OK;
}

/* ---- rotary ---- */
/* positions t0 + t (t0 = 0 but for ring attention's shards, host_kern_ring.h) */
static dp_status K(rope_apply)(R *y, const R *x, double theta, int64_t B, int64_t T, int64_t H, int64_t hd,
                               double sign, int64_t t0) {
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t i = 0; i < hd / 2; i++) {
                double ang = (double)(t0 + t) * pow(theta, -2.0 * (double)i / (double)hd);
                R c = (R)cos(ang), s = (R)(sign * sin(ang));
                for (int64_t h = 0; h < H; h++) {
                    int64_t o = ((b * T + t) * H + h) * hd + 2 * i;
                    R x0 = x[o], x1 = x[o + 1];
                    y[o] = x0 * c - x1 * s;
                    y[o + 1] = x0 * s + x1 * c;
                }
            }
    return DP_OK;
}
static dp_status K(rope_fwd)(void *ctx, void *y, const void *x, double theta, int64_t B, int64_t T, int64_t H,
                             int64_t hd) {
    if (hd % 2) return dp_error(DP_ERR_INVALID, "rope: head dim %lld is odd", (long long)hd);
    return K(rope_apply)(y, x, theta, B, T, H, hd, 1.0, 0);
}
static dp_status K(rope_bwd)(void *ctx, void *dx, const void *dy, double theta, int64_t B, int64_t T, int64_t H,
                             int64_t hd) {
    if (hd % 2) return dp_error(DP_ERR_INVALID, "rope: head dim %lld is odd", (long long)hd);
    return K(rope_apply)(dx, dy, theta, B, T, H, hd, -1.0, 0);
}

/* ---- causal attention ---- */
typedef struct {
    R *out, *probs; const R *q, *k, *v; int64_t T, H, hd;
    R *dq, *dk, *dv; const R *dout;
    R *scratch; /* per-thread: T elements (backward) */
} K(attn_job);

static void K(attn_fwd_bh)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(attn_job) *a = arg;
    int64_t T = a->T, H = a->H, hd = a->hd;
    R scale = (R)(1.0 / sqrt((double)hd));
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / H, h = it % H;
        R *P = a->probs + it * T * T;
        for (int64_t t = 0; t < T; t++) {
            const R *qt = a->q + ((b * T + t) * H + h) * hd;
            R mx = -INFINITY;
            for (int64_t s = 0; s <= t; s++) {
                const R *ks = a->k + ((b * T + s) * H + h) * hd;
                R dot = 0;
                for (int64_t e = 0; e < hd; e++) dot += qt[e] * ks[e];
                P[t * T + s] = dot * scale;
                if (P[t * T + s] > mx) mx = P[t * T + s];
            }
            R z = 0;
            for (int64_t s = 0; s <= t; s++) {
                P[t * T + s] = (R)exp((double)(P[t * T + s] - mx));
                z += P[t * T + s];
            }
            for (int64_t s = 0; s <= t; s++) P[t * T + s] /= z;
            for (int64_t s = t + 1; s < T; s++) P[t * T + s] = 0;
            R *ot = a->out + ((b * T + t) * H + h) * hd;
            for (int64_t e = 0; e < hd; e++) {
                R acc = 0;
                for (int64_t s = 0; s <= t; s++) acc += P[t * T + s] * a->v[((b * T + s) * H + h) * hd + e];
                ot[e] = acc;
            }
        }
    }
}
static dp_status K(attn_fwd)(void *ctx, void *out, void *probs, const void *q, const void *k, const void *v,
                             int64_t B, int64_t T, int64_t H, int64_t hd) {
    K(attn_job) a = {out, probs, q, k, v, T, H, hd, NULL, NULL, NULL, NULL, NULL};
    host_parallel(ctx, K(attn_fwd_bh), &a, B * H, T * T * hd);
    return DP_OK;
}
/* dP[t,s] = dout_t . v_s; dS = P * (dP - sum_s P dP); dq_t = scale sum_s dS k_s;
 * dk_s = scale sum_t dS q_t; dv_s = sum_t P[t,s] dout_t.  (b, h) slices are
 * independent; q/k/v rows of one (b, h) are written only by that item. */
static void K(attn_bwd_bh)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(attn_job) *a = arg;
    int64_t T = a->T, H = a->H, hd = a->hd;
    R scale = (R)(1.0 / sqrt((double)hd));
    R *dS = a->scratch + tid * (T + 1);
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / H, h = it % H;
        const R *P = a->probs + it * T * T;
#define IX(t) (((b * T + (t)) * H + h) * hd)
        for (int64_t t = 0; t < T; t++) {
            for (int64_t e = 0; e < hd; e++) { a->dq[IX(t) + e] = 0; a->dk[IX(t) + e] = 0; a->dv[IX(t) + e] = 0; }
        }
        for (int64_t t = 0; t < T; t++) {
            const R *dot_ = a->dout + IX(t);
            R sum = 0;
            for (int64_t s = 0; s <= t; s++) {
                R dp = 0;
                for (int64_t e = 0; e < hd; e++) dp += dot_[e] * a->v[IX(s) + e];
                dS[s] = dp;
                sum += P[t * T + s] * dp;
            }
            for (int64_t s = 0; s <= t; s++) dS[s] = P[t * T + s] * (dS[s] - sum);
            for (int64_t s = 0; s <= t; s++) {
                for (int64_t e = 0; e < hd; e++) {
                    a->dq[IX(t) + e] += scale * dS[s] * a->k[IX(s) + e];
                    a->dk[IX(s) + e] += scale * dS[s] * a->q[IX(t) + e];
                    a->dv[IX(s) + e] += P[t * T + s] * dot_[e];
                }
            }
        }
#undef IX
    }
}
static dp_status K(attn_bwd)(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q,
                             const void *k, const void *v, const void *probs, int64_t B, int64_t T, int64_t H,
                             int64_t hd) {
    R *scratch = host_scratch(ctx, sizeof(R) * (size_t)(T + 1));
    if (!scratch) return dp_error(DP_ERR_NOMEM, "attn_bwd: out of memory");
    K(attn_job) a = {NULL, (R *)probs, q, k, v, T, H, hd, dq, dk, dv, dout, scratch};
    host_parallel(ctx, K(attn_bwd_bh), &a, B * H, T * T * hd);
    free(scratch);
    return DP_OK;
}

/* ---- cross-entropy ---- */
static dp_status K(xent_fwd)(void *ctx, void *loss_, const void *z_, const int32_t *y, const void *w_,
                             int64_t rows, int64_t V) {
    R *loss = loss_; const R *z = z_, *w = w_;
    for (int64_t r = 0; r < rows; r++) {
        if (y[r] < 0) { loss[r] = 0; continue; }
        if (y[r] >= V) return dp_error(DP_ERR_INVALID, "xent: label %d out of range [0, %lld)", y[r], (long long)V);
        const R *zr = z + r * V;
        R mx = zr[0];
        for (int64_t j = 1; j < V; j++) if (zr[j] > mx) mx = zr[j];
        R s = 0;
        for (int64_t j = 0; j < V; j++) s += (R)exp((double)(zr[j] - mx));
        loss[r] = w[r] * (mx + (R)log((double)s) - zr[y[r]]);
    }
    return DP_OK;
}
static dp_status K(xent_bwd)(void *ctx, void *dz_, const void *z_, const int32_t *y, const void *w_, int64_t rows,
                             int64_t V) {
    R *dz = dz_; const R *z = z_, *w = w_;
    for (int64_t r = 0; r < rows; r++) {
        R *d = dz + r * V;
        if (y[r] < 0) { for (int64_t j = 0; j < V; j++) d[j] = 0; continue; }
        if (y[r] >= V) return dp_error(DP_ERR_INVALID, "xent: label %d out of range [0, %lld)", y[r], (long long)V);
        const R *zr = z + r * V;
        R mx = zr[0];
        for (int64_t j = 1; j < V; j++) if (zr[j] > mx) mx = zr[j];
        R s = 0;
        for (int64_t j = 0; j < V; j++) { d[j] = (R)exp((double)(zr[j] - mx)); s += d[j]; }
        for (int64_t j = 0; j < V; j++) d[j] = w[r] * (d[j] / s - (j == y[r] ? 1 : 0));
    }
    return DP_OK;
}

/* ---- embedding ---- */
static dp_status K(embed_fwd)(void *ctx, void *out_, const void *tab_, const int32_t *ids, int64_t rows, int64_t V,
                              int64_t D) {
    R *out = out_; const R *tab = tab_;
    for (int64_t r = 0; r < rows; r++) {
        if (ids[r] < 0 || ids[r] >= V)
            return dp_error(DP_ERR_INVALID, "embedding: token %d out of range [0, %lld)", ids[r], (long long)V);
        memcpy(out + r * D, tab + (int64_t)ids[r] * D, sizeof(R) * (size_t)D);
    }
    return DP_OK;
}
static dp_status K(embed_bwd)(void *ctx, void *dt_, const void *dy_, const int32_t *ids, int64_t rows, int64_t per,
                              int64_t V, int64_t D) {
    R *dt = dt_; const R *dy = dy_;
    if (per <= 0) return dp_error(DP_ERR_INVALID, "embed_bwd: per must be >= 1");
    for (int64_t r = 0; r < rows; r++) {
        if (ids[r] < 0 || ids[r] >= V)
            return dp_error(DP_ERR_INVALID, "embedding: token %d out of range [0, %lld)", ids[r], (long long)V);
        R *o = dt + ((r / per) * V + ids[r]) * D;
        for (int64_t j = 0; j < D; j++) o[j] += dy[r * D + j];
    }
    return DP_OK;
}

/* ---- DP operations ---- */
static dp_status K(sqnorm_rows)(void *ctx, void *sq_, const void *g_, int64_t B, int64_t n) {
    R *sq = sq_; const R *g = g_;
    for (int64_t b = 0; b < B; b++) {
        R acc = 0;
        for (int64_t j = 0; j < n; j++) acc += g[b * n + j] * g[b * n + j];
        sq[b] += acc;
    }
    return DP_OK;
}

typedef struct { R *sq; const R *A, *G; int64_t T, d, p; R *scratch; } K(ghost_job);
/* per example: Ga[t,s] = A_t . A_s, Gg[t,s] = G_t . G_s; sq += sum_{t,s} Ga Gg (row-major t, s order) */
static void K(ghost_ex)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(ghost_job) *j = arg;
    int64_t T = j->T;
    R *ga = j->scratch + tid * (2 * T * T + 1), *gg = ga + T * T;
    for (int64_t b = lo; b < hi; b++) {
        const R *A = j->A + b * T * j->d, *G = j->G + b * T * j->p;
        for (int64_t t = 0; t < T; t++)
            for (int64_t s = 0; s < T; s++) {
                R x = 0, y = 0;
                for (int64_t e = 0; e < j->d; e++) x += A[t * j->d + e] * A[s * j->d + e];
                for (int64_t e = 0; e < j->p; e++) y += G[t * j->p + e] * G[s * j->p + e];
                ga[t * T + s] = x; gg[t * T + s] = y;
            }
        R acc = 0;
        for (int64_t i = 0; i < T * T; i++) acc += ga[i] * gg[i];
        j->sq[b] += acc;
    }
}
static dp_status K(ghost_sqnorm)(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T,
                                 int64_t d, int64_t p) {
    R *scratch = host_scratch(ctx, sizeof(R) * (size_t)(2 * T * T + 1));
    if (!scratch) return dp_error(DP_ERR_NOMEM, "ghost_sqnorm: out of memory");
    K(ghost_job) j = {sq, A, G, T, d, p, scratch};
    host_parallel(ctx, K(ghost_ex), &j, B, T * T * (d + p));
    free(scratch);
    return DP_OK;
}

static R K(clipfn)(R sq, double C, opt_clip_fn fn, double gamma) {
    double n = sqrt((double)sq);
    if (fn == OPT_CLIP_AUTOMATIC) return (R)(C / (n + gamma));
    return (R)(n > C ? C / n : 1.0);
}
static dp_status K(clip_factors)(void *ctx, void *c_, const void *sq_, double C, opt_clip_fn fn, double gamma,
                                 int64_t B) {
    R *c = c_; const R *sq = sq_;
    for (int64_t b = 0; b < B; b++) c[b] = K(clipfn)(sq[b], C, fn, gamma);
    return DP_OK;
}

/* sum[j] += sum_b c[b] g[b,j], b in order 0..B-1 */
static dp_status K(clip_accum)(void *ctx, void *sum_, const void *g_, const void *c_, int64_t B, int64_t n) {
    R *sum = sum_; const R *g = g_, *c = c_;
    for (int64_t j = 0; j < n; j++) {
        R acc = sum[j];
        for (int64_t b = 0; b < B; b++) acc += c[b] * g[b * n + j];
        sum[j] = acc;
    }
    return DP_OK;
}

typedef struct { R *dW; const R *A, *G, *c; int64_t B, T, d, p; } K(bk_job);
/* dW[i, e] += sum over rows r = b*T + t in order of (c_b G[r,i]) A[r,e] */
static void K(bk_rows)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(bk_job) *j = arg;
    int64_t rows = j->B * j->T;
    for (int64_t i = lo; i < hi; i++)
        for (int64_t e = 0; e < j->d; e++) {
            R acc = 0;
            for (int64_t r = 0; r < rows; r++) acc += (j->c[r / j->T] * j->G[r * j->p + i]) * j->A[r * j->d + e];
            j->dW[i * j->d + e] += acc;
        }
}
/* Same terms and order as bk_rows, as one GEMM: Gc[r, i] = c_b G[r, i] (exact per-term
 * products as above), then dW += Gc^T A accumulated over r in order (beta = 1 adds the
 * old dW last, the same single rounding as dW[i,e] += acc). */
static dp_status K(bk_gemm)(void *ctx, void *dW, const void *A, const void *G_, const void *c_, int64_t B, int64_t T,
                            int64_t d, int64_t p) {
    const R *G = G_, *c = c_;
    int64_t rows = B * T;
    R *Gc = malloc(sizeof(R) * (size_t)(rows * p + 1));
    if (!Gc) { /* fall back to the scratch-free loop (same bits) */
        K(bk_job) j = {dW, A, G, c, B, T, d, p};
        host_parallel(ctx, K(bk_rows), &j, p, B * T * d);
        return DP_OK;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < p; i++) Gc[r * p + i] = c[r / T] * G[r * p + i];
    dp_status st = K(gemm)(ctx, dW, Gc, A, 1, 0, p, d, rows, 1.0, 1.0, 1, 0, 0, 0);
    free(Gc);
    return st;
}

/* one block g_b[i, e] = sum_t G[b,t,i] A[b,t,e] (t order) into blk [p, d]; returns ||g_b||^2 */
static R K(block)(R *blk, const R *A, const R *G, int64_t b, int64_t T, int64_t d, int64_t p) {
    R sq = 0;
    for (int64_t i = 0; i < p; i++)
        for (int64_t e = 0; e < d; e++) {
            R acc = 0;
            for (int64_t t = 0; t < T; t++) acc += G[(b * T + t) * p + i] * A[(b * T + t) * d + e];
            blk[i * d + e] = acc;
            sq += acc * acc;
        }
    return sq;
}
static dp_status K(fused_clip_accum)(void *ctx, void *dW_, void *sq_out_, void *c_out_, const void *A_, const void *G_,
                                     const void *extra_, double C, opt_clip_fn fn, double gamma, int64_t B, int64_t T,
                                     int64_t d, int64_t p) {
    R *dW = dW_, *sq_out = sq_out_, *c_out = c_out_; const R *A = A_, *G = G_, *extra = extra_;
    R *blk = malloc(sizeof(R) * (size_t)(p * d > 0 ? p * d : 1));
    if (!blk) return dp_error(DP_ERR_NOMEM, "fused_clip_accum: out of memory");
    for (int64_t b = 0; b < B; b++) {
        R sq = K(block)(blk, A, G, b, T, d, p);
        if (extra) sq += extra[b];
        R c = K(clipfn)(sq, C, fn, gamma);
        for (int64_t i = 0; i < p * d; i++) dW[i] += c * blk[i];
        if (sq_out) sq_out[b] = sq;
        if (c_out) c_out[b] = c;
    }
    free(blk);
    return DP_OK;
}
static dp_status K(fused_sqnorm)(void *ctx, void *sq_, const void *A, const void *G, int64_t B, int64_t T, int64_t d,
                                 int64_t p) {
    R *sq = sq_;
    R *blk = malloc(sizeof(R) * (size_t)(p * d > 0 ? p * d : 1));
    if (!blk) return dp_error(DP_ERR_NOMEM, "fused_sqnorm: out of memory");
    for (int64_t b = 0; b < B; b++) sq[b] += K(block)(blk, A, G, b, T, d, p);
    free(blk);
    return DP_OK;
}

static dp_status K(noise_add)(void *ctx, void *x_, dp_noise_key key, uint32_t stream, uint32_t lane, double std,
                              uint64_t offset, int64_t n) {
    R *x = x_;
    if (lane >= (1u << 24)) return dp_error(DP_ERR_INVALID, "noise: lane %u >= 2^24", lane);
    for (int64_t j = 0; j < n; j++)
        x[j] = (R)((double)x[j] + std * dp_stream_gaussian(key.k, DP_PURPOSE_NOISE, stream, lane, offset + (uint64_t)j));
    return DP_OK;
}

/* ---- optimizers ---- */
static dp_status K(sgd_momentum)(void *ctx, void *p_, void *buf_, const void *g_, double lr, double mu, double wd,
                                 int64_t t, int64_t n) {
    R *p = p_, *buf = buf_; const R *g = g_;
    for (int64_t i = 0; i < n; i++) {
        R gi = wd != 0 ? g[i] + (R)wd * p[i] : g[i];
        buf[i] = (R)mu * buf[i] + gi;
        p[i] = p[i] - (R)lr * buf[i];
    }
    return DP_OK;
}
static dp_status K(adamw)(void *ctx, void *p_, void *m_, void *v_, const void *g_, double lr, double b1, double b2,
                          double eps, double wd, int64_t t, int64_t n) {
    R *p = p_, *m = m_, *v = v_; const R *g = g_;
    const double bc1 = 1.0 - pow(b1, (double)t), bc2 = 1.0 - pow(b2, (double)t);
    const R decay = (R)(1.0 - lr * wd), step = (R)(lr / bc1), sbc2 = (R)sqrt(bc2);
    for (int64_t i = 0; i < n; i++) {
        R gr = g[i];
        p[i] = p[i] * decay;
        m[i] = (R)b1 * m[i] + (R)(1.0 - b1) * gr;
        v[i] = (R)b2 * v[i] + (R)(1.0 - b2) * (gr * gr);
        R denom = (R)sqrt((double)v[i]) / sbc2 + (R)eps;
        p[i] = p[i] - step * (m[i] / denom);
    }
    return DP_OK;
}

static dp_status K(div_scalar)(void *ctx, void *y_, const void *x_, double s, int64_t n) {
    R *y = y_; const R *x = x_; R d = (R)s;
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / d;
    return DP_OK;
}

static dp_status K(upload_f64)(void *ctx, void *dst_, const double *src, int64_t n) {
    R *dst = dst_;
    for (int64_t i = 0; i < n; i++) dst[i] = (R)src[i];
    return DP_OK;
}
static dp_status K(download_f64)(void *ctx, double *dst, const void *src_, int64_t n) {
    const R *src = src_;
    for (int64_t i = 0; i < n; i++) dst[i] = (double)src[i];
    return DP_OK;
}

static void K(fill_ops)(opt_backend_ops *o) {
    o->upload_f64 = K(upload_f64); o->download_f64 = K(download_f64);
    o->gemm = K(gemm); o->add_bias = K(add_bias); o->sum_rows = K(sum_rows); o->axpby = K(axpby); o->add = K(add); o->div_scalar = K(div_scalar);
    o->tanh_fwd = K(tanh_fwd); o->tanh_bwd = K(tanh_bwd); o->silu_fwd = K(silu_fwd); o->silu_bwd = K(silu_bwd);
    o->swiglu_fwd = K(swiglu_fwd); o->swiglu_bwd = K(swiglu_bwd);
    o->rmsnorm_fwd = K(rmsnorm_fwd); o->rmsnorm_bwd = K(rmsnorm_bwd);
    o->rope_fwd = K(rope_fwd); o->rope_bwd = K(rope_bwd); o->attn_fwd = K(attn_fwd); o->attn_bwd = K(attn_bwd);
    o->xent_fwd = K(xent_fwd); o->xent_bwd = K(xent_bwd); o->embed_fwd = K(embed_fwd); o->embed_bwd = K(embed_bwd);
    o->sqnorm_rows = K(sqnorm_rows); o->ghost_sqnorm = K(ghost_sqnorm); o->clip_factors = K(clip_factors);
    o->mul = K(mul); o->clip_accum = K(clip_accum); o->bk_gemm = K(bk_gemm);
    o->fused_clip_accum = K(fused_clip_accum); o->fused_sqnorm = K(fused_sqnorm); o->noise_add = K(noise_add);
    o->sgd_momentum = K(sgd_momentum); o->adamw = K(adamw);
}

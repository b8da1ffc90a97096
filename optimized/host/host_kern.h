/* optimized/host/host_kern.h — the host backend's kernels, written once and
 * instantiated for double and float by host_backend.c:
 *     #define R double / float      the element type
 *     #define K(name) name##_f64    the instance suffix
 * Every reduction accumulates in R in a fixed order (documented per kernel); work is
 * split across threads only over independent outputs (rows of C, examples), so
 * results do not depend on the thread count. Shapes as in optimized/backend.h. */

/* ---- GEMM (host_gemm.h: packed, register-blocked, one k-ordered accumulator per C
 * element; output tiles split across threads) ---- */
static dp_status K(gemm)(void *ctx, void *C, const void *A, const void *B, int ta, int tb, int64_t M,
                         int64_t N, int64_t Kd, double alpha, double beta, int64_t batch, int64_t sA,
                         int64_t sB, int64_t sC) {
    opt_hgemm_problem p = {.C = C, .A = A, .B = B, .ta = ta, .tb = tb, .M = M, .N = N, .K = Kd, .alpha = alpha,
                           .beta = beta, .batch = batch, .sA = sA, .sB = sB, .sC = sC, .kdiv = 1};
    return host_gemm_run(ctx, &p);
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
/* SwiGLU element-wise passes, split across threads in ranges of elements (each element
 * is computed on its own; aliasing of outputs and inputs at the same index is allowed) */
typedef struct { R *da, *db; const R *dh, *a, *b; } K(swiglu_job);
static void K(swiglu_fwd_range)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(swiglu_job) *j = arg;
    for (int64_t i = lo; i < hi; i++) j->da[i] = j->a[i] * K(sigmoid)(j->a[i]) * j->b[i];
}
static dp_status K(swiglu_fwd)(void *ctx, void *h_, const void *a_, const void *b_, int64_t n) {
    K(swiglu_job) j = {h_, NULL, NULL, a_, b_};
    host_parallel(ctx, K(swiglu_fwd_range), &j, n, 30);
    return DP_OK;
}
static void K(swiglu_bwd_range)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(swiglu_job) *j = arg;
    for (int64_t i = lo; i < hi; i++) {
        const R *a = j->a, *b = j->b, *dh = j->dh;
        R s = K(sigmoid)(a[i]);
        R silu = a[i] * s;
        R dbi = dh[i] * silu;
        j->da[i] = dh[i] * b[i] * (s * (1 + a[i] * (1 - s)));
        j->db[i] = dbi;
    }
}
static dp_status K(swiglu_bwd)(void *ctx, void *da_, void *db_, const void *dh_, const void *a_,
                               const void *b_, int64_t n) {
    K(swiglu_job) j = {da_, db_, dh_, a_, b_};
    host_parallel(ctx, K(swiglu_bwd_range), &j, n, 40);
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
/* Positions t0 + t (t0 = 0 but for ring attention's shards, host_kern_ring.h). The
 * (cos, sin) of every (t, i) are computed once per call (the same expressions as per
 * element, so the same values) and applied to every example and head. */
static dp_status K(rope_apply)(R *y, const R *x, double theta, int64_t B, int64_t T, int64_t H, int64_t hd,
                               double sign, int64_t t0) {
    int64_t hh = hd / 2;
    R *cs = dp_malloc(sizeof(R) * (size_t)(2 * T * hh + 1));
    if (!cs) return dp_error(DP_ERR_NOMEM, "rope: out of memory");
    for (int64_t t = 0; t < T; t++)
        for (int64_t i = 0; i < hh; i++) {
            double ang = (double)(t0 + t) * pow(theta, -2.0 * (double)i / (double)hd);
            cs[2 * (t * hh + i)] = (R)cos(ang);
            cs[2 * (t * hh + i) + 1] = (R)(sign * sin(ang));
        }
    for (int64_t b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t i = 0; i < hh; i++) {
                    R c = cs[2 * (t * hh + i)], s = cs[2 * (t * hh + i) + 1];
                    int64_t o = ((b * T + t) * H + h) * hd + 2 * i;
                    R x0 = x[o], x1 = x[o + 1];
                    y[o] = x0 * c - x1 * s;
                    y[o + 1] = x0 * s + x1 * c;
                }
    dp_free(cs);
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
    void *ctx;
    R *out, *probs; const R *q, *k, *v; int64_t T, H, hd;
    R *dq, *dk, *dv; const R *dout;
    R *scratch; /* per-thread: T*T elements (backward: dP, then c) */
} K(attn_job);

/* One block C = alpha op(A) op(B) of the host GEMM on the calling thread (tid's
 * workspace), rows strided by lda, ldb, ldc (0: dense); sym and tri as in host_gemm.h. */
static void K(gemm1)(void *ctx, int tid, R *C, const R *A, const R *B, int ta, int tb, int64_t M, int64_t N,
                     int64_t Kd, R alpha, int64_t lda, int64_t ldb, int64_t ldc, int sym, opt_hgemm_tri tri) {
    opt_hgemm_problem pr = {.C = C, .A = A, .B = B, .ta = ta, .tb = tb, .M = M, .N = N, .K = Kd, .alpha = alpha,
                            .beta = 0.0, .batch = 1, .kdiv = 1, .lda = lda, .ldb = ldb, .ldc = ldc, .sym = sym,
                            .tri = tri};
    K(opt_hgemm_run)(&pr, 0, opt_hgemm_tiles(&pr), host_gemm_ws(ctx, tid));
}

/* Per (b, h): scores P[t, s] = scale (q_t . k_s) (one GEMM over the head's strided
 * rows; the e-ordered dot of each entry, entries s > t computed and discarded); the
 * softmax over s <= t; out_t[e] = sum_{s <= t} P[t, s] v_s[e] in s order (one GEMM
 * P V whose op(A) is lower triangular: the terms s > t are never added). */
static void K(attn_fwd_bh)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(attn_job) *a = arg;
    int64_t T = a->T, H = a->H, hd = a->hd;
    R scale = (R)(1.0 / sqrt((double)hd));
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / H, h = it % H;
        R *P = a->probs + it * T * T;
        const R *qh = a->q + (b * T * H + h) * hd, *kh = a->k + (b * T * H + h) * hd;
        K(gemm1)(a->ctx, tid, P, qh, kh, 0, 1, T, T, hd, scale, H * hd, H * hd, T, 0, OPT_HGEMM_TRI_NONE);
        for (int64_t t = 0; t < T; t++) {
            R mx = -INFINITY;
            for (int64_t s = 0; s <= t; s++)
                if (P[t * T + s] > mx) mx = P[t * T + s];
            R z = 0;
            for (int64_t s = 0; s <= t; s++) {
                P[t * T + s] = (R)exp((double)(P[t * T + s] - mx));
                z += P[t * T + s];
            }
            for (int64_t s = 0; s <= t; s++) P[t * T + s] /= z;
            for (int64_t s = t + 1; s < T; s++) P[t * T + s] = 0;
        }
        K(gemm1)(a->ctx, tid, a->out + (b * T * H + h) * hd, P, a->v + (b * T * H + h) * hd, 0, 0, T, hd, T, 1, T,
                 H * hd, H * hd, 0, OPT_HGEMM_TRI_LOWER);
    }
}
static dp_status K(attn_fwd)(void *ctx, void *out, void *probs, const void *q, const void *k, const void *v,
                             int64_t B, int64_t T, int64_t H, int64_t hd) {
    DP_TRY(host_gemm_ws_ready(ctx));
    K(attn_job) a = {ctx, out, probs, q, k, v, T, H, hd, NULL, NULL, NULL, NULL, NULL};
    host_parallel(ctx, K(attn_fwd_bh), &a, B * H, T * T * hd);
    return DP_OK;
}
/* dP[t,s] = dout_t . v_s (one GEMM, as the scores); dS = P * (dP - sum_s P dP) and
 * c[t,s] = scale dS[t,s] (s <= t, in place of dP; 0 above the diagonal, never added);
 * dq_t = sum_{s <= t} c[t,s] k_s in s order (GEMM c K, lower triangular);
 * dk_s = sum_{t >= s} c[t,s] q_t and dv_s = sum_{t >= s} P[t,s] dout_t in t order (GEMMs
 * c^T Q and P^T dout, upper triangular): each element the same accumulator, in the same
 * order, as the scalar loop "for t: for s <= t: dq_t += c k_s; dk_s += c q_t;
 * dv_s += P dout_t". (b, h) slices are independent; q/k/v rows of one (b, h) are
 * written only by that item. */
static void K(attn_bwd_bh)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(attn_job) *a = arg;
    int64_t T = a->T, H = a->H, hd = a->hd;
    R scale = (R)(1.0 / sqrt((double)hd));
    R *dP = a->scratch + tid * T * T;
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / H, h = it % H, o = (b * T * H + h) * hd, ld = H * hd;
        const R *P = a->probs + it * T * T;
        K(gemm1)(a->ctx, tid, dP, a->dout + o, a->v + o, 0, 1, T, T, hd, 1, ld, ld, T, 0, OPT_HGEMM_TRI_NONE);
        for (int64_t t = 0; t < T; t++) {
            R sum = 0, *row = dP + t * T;
            const R *pr = P + t * T;
            for (int64_t s = 0; s <= t; s++) sum += pr[s] * row[s];
            for (int64_t s = 0; s <= t; s++) row[s] = scale * (pr[s] * (row[s] - sum));
            for (int64_t s = t + 1; s < T; s++) row[s] = 0;
        }
        K(gemm1)(a->ctx, tid, a->dq + o, dP, a->k + o, 0, 0, T, hd, T, 1, T, ld, ld, 0, OPT_HGEMM_TRI_LOWER);
        K(gemm1)(a->ctx, tid, a->dk + o, dP, a->q + o, 1, 0, T, hd, T, 1, T, ld, ld, 0, OPT_HGEMM_TRI_UPPER);
        K(gemm1)(a->ctx, tid, a->dv + o, P, a->dout + o, 1, 0, T, hd, T, 1, T, ld, ld, 0, OPT_HGEMM_TRI_UPPER);
    }
}
static dp_status K(attn_bwd)(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q,
                             const void *k, const void *v, const void *probs, int64_t B, int64_t T, int64_t H,
                             int64_t hd) {
    DP_TRY(host_gemm_ws_ready(ctx));
    R *scratch = host_scratch(ctx, sizeof(R) * (size_t)(T * T + 1));
    if (!scratch) return dp_error(DP_ERR_NOMEM, "attn_bwd: out of memory");
    K(attn_job) a = {ctx, NULL, (R *)probs, q, k, v, T, H, hd, dq, dk, dv, dout, scratch};
    host_parallel(ctx, K(attn_bwd_bh), &a, B * H, T * T * hd);
    dp_free(scratch);
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
/* sq[b] += sum_j g[b,j]^2 in j order; examples split across threads */
typedef struct { R *sq; const R *g; int64_t n; } K(sqnorm_job);
static void K(sqnorm_range)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(sqnorm_job) *j = arg;
    for (int64_t b = lo; b < hi; b++) {
        const R *g = j->g + b * j->n;
        R acc = 0;
        for (int64_t i = 0; i < j->n; i++) acc += g[i] * g[i];
        j->sq[b] += acc;
    }
}
static dp_status K(sqnorm_rows)(void *ctx, void *sq_, const void *g_, int64_t B, int64_t n) {
    K(sqnorm_job) j = {sq_, g_, n};
    host_parallel(ctx, K(sqnorm_range), &j, B, n);
    return DP_OK;
}

typedef struct { void *ctx; R *sq; const R *A, *G; int64_t T, d, p; R *scratch; } K(ghost_job);
/* per example: Ga[t,s] = A_t . A_s, Gg[t,s] = G_t . G_s (symmetric GEMMs: the lower
 * half computed, mirrored); sq += sum_{t,s} Ga Gg (row-major t, s order) */
static void K(ghost_ex)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(ghost_job) *j = arg;
    int64_t T = j->T;
    R *ga = j->scratch + tid * (2 * T * T + 1), *gg = ga + T * T;
    for (int64_t b = lo; b < hi; b++) {
        const R *A = j->A + b * T * j->d, *G = j->G + b * T * j->p;
        K(gemm1)(j->ctx, tid, ga, A, A, 0, 1, T, T, j->d, 1, 0, 0, 0, 1, OPT_HGEMM_TRI_NONE);
        K(gemm1)(j->ctx, tid, gg, G, G, 0, 1, T, T, j->p, 1, 0, 0, 0, 1, OPT_HGEMM_TRI_NONE);
        R acc = 0;
        for (int64_t i = 0; i < T * T; i++) acc += ga[i] * gg[i];
        j->sq[b] += acc;
    }
}
static dp_status K(ghost_sqnorm)(void *ctx, void *sq, const void *A, const void *G, int64_t B, int64_t T,
                                 int64_t d, int64_t p) {
    DP_TRY(host_gemm_ws_ready(ctx));
    R *scratch = host_scratch(ctx, sizeof(R) * (size_t)(2 * T * T + 1));
    if (!scratch) return dp_error(DP_ERR_NOMEM, "ghost_sqnorm: out of memory");
    K(ghost_job) j = {ctx, sq, A, G, T, d, p, scratch};
    host_parallel(ctx, K(ghost_ex), &j, B, T * T * (d + p));
    dp_free(scratch);
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

/* sum[j] += sum_b c[b] g[b,j], b in order 0..B-1 (per element: sum[j] + c_0 g_0 + c_1 g_1
 * ...), as row updates vectorised over j, element ranges split across threads */
typedef struct { R *sum; const R *g, *c; int64_t B, n; } K(clip_accum_job);
static void K(clip_accum_range)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(clip_accum_job) *j = arg;
    const int64_t blk = 4096; /* elements per cache block */
    for (int64_t j0 = lo * blk; j0 < hi * blk && j0 < j->n; j0 += blk) {
        int64_t m = j->n - j0 < blk ? j->n - j0 : blk;
        for (int64_t b = 0; b < j->B; b++) K(opt_hgemm_axpy)(j->sum + j0, j->c[b], j->g + b * j->n + j0, m);
    }
}
static dp_status K(clip_accum)(void *ctx, void *sum, const void *g, const void *c, int64_t B, int64_t n) {
    K(clip_accum_job) j = {sum, g, c, B, n};
    host_parallel(ctx, K(clip_accum_range), &j, (n + 4095) / 4096, 4096 * B);
    return DP_OK;
}

/* dW[i, e] += sum over rows r = b*T + t in order of (c_b G[r,i]) A[r,e]: one GEMM
 * dW = 1 (Gc)^T A + 1 dW over the B*T rows, where the packing forms each term's factor
 * c_b G[r,i] (the same rounded product as an explicit Gc) and beta = 1 adds the old dW
 * last (the same single rounding as dW[i,e] += acc). */
static dp_status K(bk_gemm)(void *ctx, void *dW, const void *A, const void *G, const void *c, int64_t B, int64_t T,
                            int64_t d, int64_t p) {
    opt_hgemm_problem pr = {.C = dW, .A = G, .B = A, .ta = 1, .tb = 0, .M = p, .N = d, .K = B * T, .alpha = 1.0,
                            .beta = 1.0, .batch = 1, .kscale = c, .kdiv = T > 0 ? T : 1};
    return host_gemm_run(ctx, &pr);
}

/* one block g_b[i, e] = sum_t G[b,t,i] A[b,t,e] (t order) into blk [p, d] (the host
 * GEMM on thread tid); returns ||g_b||^2 summed in (i, e) order */
static R K(block)(void *ctx, int tid, R *blk, const R *A, const R *G, int64_t b, int64_t T, int64_t d, int64_t p) {
    K(gemm1)(ctx, tid, blk, G + b * T * p, A + b * T * d, 1, 0, p, d, T, 1, 0, 0, 0, 0, OPT_HGEMM_TRI_NONE);
    R sq = 0;
    for (int64_t i = 0; i < p * d; i++) sq += blk[i] * blk[i];
    return sq;
}
/* Examples b0 + [lo, hi): blocks into blk + (b - b0) p d (or the thread's slot when
 * per_thread), squared norms into sqb[b - b0]. */
typedef struct { void *ctx; R *blk, *sqb; const R *A, *G; int64_t b0, T, d, p; int per_thread; } K(fused_job);
static void K(fused_blocks)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(fused_job) *j = arg;
    for (int64_t it = lo; it < hi; it++) {
        R *blk = j->blk + (j->per_thread ? tid : it) * j->p * j->d;
        j->sqb[it] = K(block)(j->ctx, tid, blk, j->A, j->G, j->b0 + it, j->T, j->d, j->p);
    }
}
/* dW[e] += c_b blk_b[e] for the chunk's examples b in order, elements [lo, hi) */
typedef struct { R *dW; const R *blk, *c; int64_t nb, n; } K(fused_acc_job);
static void K(fused_acc)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(fused_acc_job) *j = arg;
    for (int64_t e = lo; e < hi; e++) {
        R v = j->dW[e];
        for (int64_t b = 0; b < j->nb; b++) v += j->c[b] * j->blk[b * j->n + e];
        j->dW[e] = v;
    }
}
/* Chunks of `threads` examples: their blocks in parallel (one example per item), then
 * norms and factors in example order, then dW += c_b g_b over the chunk's examples in
 * order, split across threads by element: every dW element sees b = 0..B-1 in order. */
static dp_status K(fused_clip_accum)(void *ctx, void *dW_, void *sq_out_, void *c_out_, const void *A_, const void *G_,
                                     const void *extra_, double C, opt_clip_fn fn, double gamma, int64_t B, int64_t T,
                                     int64_t d, int64_t p) {
    R *dW = dW_, *sq_out = sq_out_, *c_out = c_out_; const R *A = A_, *G = G_, *extra = extra_;
    int64_t chunk = ((host_ctx *)ctx)->threads, n = p * d;
    if (chunk > B) chunk = B > 0 ? B : 1;
    DP_TRY(host_gemm_ws_ready(ctx));
    R *blk = dp_malloc(sizeof(R) * (size_t)(chunk * n + 2 * chunk + 1));
    if (!blk) return dp_error(DP_ERR_NOMEM, "fused_clip_accum: out of memory");
    R *sqb = blk + chunk * n, *cb = sqb + chunk;
    for (int64_t b0 = 0; b0 < B; b0 += chunk) {
        int64_t nb = B - b0 < chunk ? B - b0 : chunk;
        K(fused_job) fj = {ctx, blk, sqb, A, G, b0, T, d, p, 0};
        host_parallel(ctx, K(fused_blocks), &fj, nb, T * n);
        for (int64_t k = 0; k < nb; k++) {
            R sq = sqb[k];
            if (extra) sq += extra[b0 + k];
            cb[k] = K(clipfn)(sq, C, fn, gamma);
            if (sq_out) sq_out[b0 + k] = sq;
            if (c_out) c_out[b0 + k] = cb[k];
        }
        K(fused_acc_job) aj = {dW, blk, cb, nb, n};
        host_parallel(ctx, K(fused_acc), &aj, n, nb);
    }
    dp_free(blk);
    return DP_OK;
}
static dp_status K(fused_sqnorm)(void *ctx, void *sq_, const void *A, const void *G, int64_t B, int64_t T, int64_t d,
                                 int64_t p) {
    R *sq = sq_;
    DP_TRY(host_gemm_ws_ready(ctx));
    R *blk = host_scratch(ctx, sizeof(R) * (size_t)(p * d + 1));
    R *sqb = dp_malloc(sizeof(R) * (size_t)(B + 1));
    if (!blk || !sqb) { dp_free(blk); dp_free(sqb); return dp_error(DP_ERR_NOMEM, "fused_sqnorm: out of memory"); }
    K(fused_job) fj = {ctx, blk, sqb, A, G, 0, T, d, p, 1};
    host_parallel(ctx, K(fused_blocks), &fj, B, T * p * d);
    for (int64_t b = 0; b < B; b++) sq[b] += sqb[b];
    dp_free(blk); dp_free(sqb);
    return DP_OK;
}

/* x[j] = x[j] + std N(0,1), the gaussian element offset + j of the secret noise stream
 * (docs/rng.md), drawn a pair per Philox block (dp_rng_fill_gaussian: the same values
 * as element by element). Each element depends only on its index, so chunks of
 * HOST_NOISE_CHUNK elements are split across threads. */
#ifndef HOST_NOISE_CHUNK
#define HOST_NOISE_CHUNK 512
#endif
typedef struct { R *x; dp_stream s; double std; uint64_t offset; int64_t n; } K(noise_job);
static void K(noise_range)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(noise_job) *j = arg;
    double g[HOST_NOISE_CHUNK];
    for (int64_t c = lo; c < hi; c++) {
        int64_t j0 = c * HOST_NOISE_CHUNK, m = j->n - j0 < HOST_NOISE_CHUNK ? j->n - j0 : HOST_NOISE_CHUNK;
        dp_rng_fill_gaussian(g, &j->s, j->offset + (uint64_t)j0, (size_t)m);
        for (int64_t i = 0; i < m; i++) j->x[j0 + i] = (R)((double)j->x[j0 + i] + j->std * g[i]);
    }
}
static dp_status K(noise_add)(void *ctx, void *x_, dp_noise_key key, uint32_t stream, uint32_t lane, double std,
                              uint64_t offset, int64_t n) {
    if (lane >= (1u << 24)) return dp_error(DP_ERR_INVALID, "noise: lane %u >= 2^24", lane);
    K(noise_job) j = {x_, {0}, std, offset, n};
    DP_TRY(dp_stream_secret(&j.s, key, DP_PURPOSE_NOISE, stream, lane));
    if (n > 0) host_parallel(ctx, K(noise_range), &j, (n + HOST_NOISE_CHUNK - 1) / HOST_NOISE_CHUNK, 50 * HOST_NOISE_CHUNK);
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

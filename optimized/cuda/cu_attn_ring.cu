// optimized/cuda/cu_attn_ring.cu — the ring-attention operations of the CUDA backend
// (context parallelism, docs/longshield.md "Ring attention"; semantics in backend.h):
// rope_at (RoPE at positions t0 + t), attn_block_fwd (online-softmax update of the
// queries by one key/value block), attn_block_finish (y = o / l, lse = m + log l) and
// attn_block_bwd (FlashAttention's backward of one block, D = dout . out).
//
// Every kernel repeats the host backend's sequence of operations (optimized/host/
// host_kern_ring.h) element by element, in the host's order, with correctly rounded
// intrinsics (rn_*: nvcc never contracts them into an FMA) and exp / log / pow / sin / cos
// in double rounded once to the dtype, as the host: on the emulation (glibc's libm) the
// results are the host's bit for bit; on a GPU they differ only where CUDA's double libm
// differs from glibc's (docs/tolerances.md "Ring attention on CUDA").
//
// Parallel layout (each output element has one writer and the host's order of sums):
// forward: a thread per query (b, h, i) computes the scores, the running max and sum
// (serial in j), then a thread per (b, h, i, e) the output row; backward: a thread per
// query accumulates dq (serial in j), a thread per key (b, h, j) accumulates dk and dv
// (serial in i); both recompute p and ds identically. Scratch: slot 4 (the forward's
// scores [B, H, Tq, Tk] and rescale factors [B, H, Tq]; the backward's D [B, H, Tq]).
// Work per thread is O(Tk hd) (forward) and O(Tq hd) (backward): a correct, deterministic
// kernel; a tiled one (FlashAttention-2 style, shared memory) is future work.
#include <math.h>

extern "C" {
#include "common/alloc.h"
}
#include "optimized/cuda/cu_adapter.cuh"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_reduce.cuh"
#include "optimized/cuda/cu_plan.h"

#define GRID(n) cu_grid_1d((n), 1), CU_BLOCK, 0, cu_ctx_stream_(CB(ctx)->cu)
#define FOR_I(n) CU_FOR_I(n)
/* fn<float>(args) or fn<double>(args) by the context's dtype */
#define DISPATCH(fn, ...) (CB(ctx)->f64 ? fn<double>(__VA_ARGS__) : fn<float>(__VA_ARGS__))
/* the launch check of the kernel just launched, naming it */
#define launched(k) cu_check_launch_((k), __FILE__, __LINE__)

/* ---------------- rope_at ---------------- */
/* thread per pair (b, t, h, i): angle = (t0 + t) theta^(-2i/hd) in double; c = (R)cos,
 * s = (R)(sign sin); y0 = x0 c - x1 s, y1 = x0 s + x1 c (the host's rope_apply) */
template <typename R>
__global__ void k_rope_at(R *y, const R *x, double theta, int64_t t0, double sign, int64_t T, int64_t H, int64_t hd,
                          int64_t npairs) {
    const int64_t hh = hd / 2;
    FOR_I(npairs) {
        int64_t pi = i % hh, t = (i / hh / H) % T;
        double ang = (double)(t0 + t) * pow(theta, -2.0 * (double)pi / (double)hd);
        R c = (R)cos(ang), s = (R)(sign * sin(ang));
        int64_t o = (i / hh) * hd + 2 * pi;
        R x0 = x[o], x1 = x[o + 1];
        y[o] = rn_sub(rn_mul(x0, c), rn_mul(x1, s));
        y[o + 1] = rn_add(rn_mul(x0, s), rn_mul(x1, c));
    }
}
template <typename R>
static dp_status l_rope_at(void *ctx, void *y, const void *x, double theta, int64_t t0, double sign, int64_t T, int64_t H,
                           int64_t hd, int64_t npairs) {
    k_rope_at<R><<<GRID(npairs)>>>((R *)y, (const R *)x, theta, t0, sign, T, H, hd, npairs);
    return launched("k_rope_at");
}
static dp_status cb_rope_at(void *ctx, void *y, const void *x, double theta, int64_t t0, int sign, int64_t B, int64_t T,
                            int64_t H, int64_t hd) {
    DP_TRY(ck_n("rope_at", B)); DP_TRY(ck_n("rope_at", T)); DP_TRY(ck_n("rope_at", H)); DP_TRY(ck_n("rope_at", hd));
    if (hd % 2) return dp_error(DP_ERR_INVALID, "rope: head dim %lld is odd", (long long)hd);
    const int64_t npairs = B * T * H * (hd / 2);
    return npairs ? DISPATCH(l_rope_at, ctx, y, x, theta, t0, sign < 0 ? -1.0 : 1.0, T, H, hd, npairs) : DP_OK;
}

/* ---------------- blockwise attention ---------------- */
typedef struct {
    int64_t B, Tq, Tk, H, hd, q0, k0;
} ablk;
/* keys j < nk(i) are visible to query i (global k0 + j <= q0 + i); <= 0: none */
__device__ __forceinline__ int64_t ablk_nk(const ablk &a, int64_t i) {
    int64_t nk = a.q0 + i - a.k0 + 1;
    return nk > a.Tk ? a.Tk : nk;
}

/* query it = (b H + h) Tq + i: scores S[j] = scale q . k_j (e in order), block max mb,
 * m' = max(m, mb), al = exp(m - m') (0 when m = -inf), l = al l + sum_j exp(S_j - m'),
 * S[j] <- exp(S_j - m'); m <- m'; AL[it] = al (for the output kernel) */
template <typename R>
__global__ void k_ablk_fwd_stats(R *m, R *l, R *S, R *AL, const R *q, const R *k, ablk a, R scale) {
    FOR_I(a.B * a.H * a.Tq) {
        const int64_t b = i / (a.H * a.Tq), h = (i / a.Tq) % a.H, qi_ = i % a.Tq;
        const int64_t nk = ablk_nk(a, qi_);
        if (nk <= 0) continue;
        const R *qi = q + ((b * a.Tq + qi_) * a.H + h) * a.hd;
        R *Si = S + i * a.Tk;
        R mb = (R)-INFINITY;
        for (int64_t j = 0; j < nk; j++) {
            const R *kj = k + ((b * a.Tk + j) * a.H + h) * a.hd;
            R dot = 0;
            for (int64_t e = 0; e < a.hd; e++) dot = rn_add(dot, rn_mul(qi[e], kj[e]));
            Si[j] = rn_mul(dot, scale);
            if (Si[j] > mb) mb = Si[j];
        }
        const R mi = m[i], mn = mi > mb ? mi : mb;
        const R al = mi == (R)-INFINITY ? (R)0 : (R)exp((double)rn_sub(mi, mn));
        R lsum = 0;
        for (int64_t j = 0; j < nk; j++) {
            Si[j] = (R)exp((double)rn_sub(Si[j], mn));
            lsum = rn_add(lsum, Si[j]);
        }
        l[i] = rn_add(rn_mul(al, l[i]), lsum);
        m[i] = mn;
        AL[i] = al;
    }
}
/* element (b, i, h, e) of o: o = al o + sum_j S[j] v_j[e] (j in order) */
template <typename R> __global__ void k_ablk_fwd_out(R *o, const R *S, const R *AL, const R *v, ablk a) {
    FOR_I(a.B * a.Tq * a.H * a.hd) {
        const int64_t e = i % a.hd, h = (i / a.hd) % a.H, qi_ = (i / a.hd / a.H) % a.Tq, b = i / (a.hd * a.H * a.Tq);
        const int64_t nk = ablk_nk(a, qi_);
        if (nk <= 0) continue;
        const int64_t it = (b * a.H + h) * a.Tq + qi_;
        const R *Si = S + it * a.Tk;
        R acc = 0;
        for (int64_t j = 0; j < nk; j++) acc = rn_add(acc, rn_mul(Si[j], v[((b * a.Tk + j) * a.H + h) * a.hd + e]));
        o[i] = rn_add(rn_mul(AL[it], o[i]), acc);
    }
}
template <typename R>
static dp_status l_ablk_fwd(void *ctx, void *o, void *m, void *l, const void *q, const void *k, const void *v, ablk a) {
    const int64_t nq = a.B * a.H * a.Tq;
    void *scr;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &scr, sizeof(R) * (size_t)(nq * a.Tk + nq), CU_SLOT_TMP));
    R *S = (R *)scr, *AL = S + nq * a.Tk;
    const R scale = (R)(1.0 / sqrt((double)a.hd));
    k_ablk_fwd_stats<R><<<GRID(nq)>>>((R *)m, (R *)l, S, AL, (const R *)q, (const R *)k, a, scale);
    DP_TRY(launched("k_ablk_fwd_stats"));
    k_ablk_fwd_out<R><<<GRID(nq * a.hd)>>>((R *)o, S, AL, (const R *)v, a);
    return launched("k_ablk_fwd_out");
}
static dp_status ablk_args(const char *op, const ablk &a) {
    DP_TRY(ck_n(op, a.B)); DP_TRY(ck_n(op, a.Tq)); DP_TRY(ck_n(op, a.Tk)); DP_TRY(ck_n(op, a.H)); DP_TRY(ck_n(op, a.hd));
    if (a.B * a.H * a.Tq > 0 && a.hd < 1) return dp_error(DP_ERR_INVALID, "cuda %s: head dim %lld < 1", op, (long long)a.hd);
    return DP_OK;
}
static dp_status cb_attn_block_fwd(void *ctx, void *o, void *m, void *l, const void *q, const void *k, const void *v,
                                   int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t hd, int64_t q0, int64_t k0) {
    const ablk a = {B, Tq, Tk, H, hd, q0, k0};
    DP_TRY(ablk_args("attn_block_fwd", a));
    if (B * H * Tq == 0 || Tk == 0) return DP_OK;
    return DISPATCH(l_ablk_fwd, ctx, o, m, l, q, k, v, a);
}

/* y = o / l, lse = m + (R)log((double)l) */
template <typename R>
__global__ void k_ablk_finish(R *y, R *lse, const R *o, const R *m, const R *l, int64_t Tq, int64_t H, int64_t hd,
                              int64_t n) {
    FOR_I(n) {
        const int64_t e = i % hd, h = (i / hd) % H, qi_ = (i / hd / H) % Tq, b = i / (hd * H * Tq);
        const int64_t s = (b * H + h) * Tq + qi_;
        y[i] = rn_div(o[i], l[s]);
        if (e == 0) lse[s] = rn_add(m[s], (R)log((double)l[s]));
    }
}
template <typename R>
static dp_status l_ablk_finish(void *ctx, void *y, void *lse, const void *o, const void *m, const void *l, int64_t Tq,
                               int64_t H, int64_t hd, int64_t n) {
    k_ablk_finish<R><<<GRID(n)>>>((R *)y, (R *)lse, (const R *)o, (const R *)m, (const R *)l, Tq, H, hd, n);
    return launched("k_ablk_finish");
}
static dp_status cb_attn_block_finish(void *ctx, void *y, void *lse, const void *o, const void *m, const void *l,
                                      int64_t B, int64_t Tq, int64_t H, int64_t hd) {
    const ablk a = {B, Tq, 0, H, hd, 0, 0};
    DP_TRY(ablk_args("attn_block_finish", a));
    const int64_t n = B * Tq * H * hd;
    return n ? DISPATCH(l_ablk_finish, ctx, y, lse, o, m, l, Tq, H, hd, n) : DP_OK;
}

/* D[it] = dout_i . out_i (e in order) */
template <typename R> __global__ void k_ablk_bwd_d(R *D, const R *dout, const R *out, ablk a) {
    FOR_I(a.B * a.H * a.Tq) {
        const int64_t b = i / (a.H * a.Tq), h = (i / a.Tq) % a.H, qi_ = i % a.Tq;
        const int64_t ri = ((b * a.Tq + qi_) * a.H + h) * a.hd;
        R acc = 0;
        for (int64_t e = 0; e < a.hd; e++) acc = rn_add(acc, rn_mul(dout[ri + e], out[ri + e]));
        D[i] = acc;
    }
}
/* p = exp(scale q_i . k_j - lse_i), dp = dout_i . v_j, ds = p (dp - D_i): the host's values */
template <typename R>
__device__ __forceinline__ void ablk_p_ds(R *p, R *ds, const R *qi, const R *kj, const R *doi, const R *vj, R lse, R D,
                                          int64_t hd, R scale) {
    R dot = 0, dp = 0;
    for (int64_t e = 0; e < hd; e++) dot = rn_add(dot, rn_mul(qi[e], kj[e]));
    *p = (R)exp((double)rn_sub(rn_mul(dot, scale), lse));
    for (int64_t e = 0; e < hd; e++) dp = rn_add(dp, rn_mul(doi[e], vj[e]));
    *ds = rn_mul(*p, rn_sub(dp, D));
}
/* query (b, h, i): dq_i += (scale ds) k_j, j in order */
template <typename R>
__global__ void k_ablk_bwd_q(R *dq, const R *D, const R *dout, const R *q, const R *k, const R *v, const R *lse, ablk a,
                             R scale) {
    FOR_I(a.B * a.H * a.Tq) {
        const int64_t b = i / (a.H * a.Tq), h = (i / a.Tq) % a.H, qi_ = i % a.Tq;
        const int64_t nk = ablk_nk(a, qi_);
        if (nk <= 0) continue;
        const int64_t ri = ((b * a.Tq + qi_) * a.H + h) * a.hd;
        for (int64_t j = 0; j < nk; j++) {
            const int64_t rj = ((b * a.Tk + j) * a.H + h) * a.hd;
            R p, ds;
            ablk_p_ds(&p, &ds, q + ri, k + rj, dout + ri, v + rj, lse[i], D[i], a.hd, scale);
            const R sds = rn_mul(scale, ds);
            for (int64_t e = 0; e < a.hd; e++) dq[ri + e] = rn_add(dq[ri + e], rn_mul(sds, k[rj + e]));
        }
    }
}
/* key (b, h, j): dk_j += (scale ds) q_i, dv_j += p dout_i, i in order over the queries that see j */
template <typename R>
__global__ void k_ablk_bwd_kv(R *dk, R *dv, const R *D, const R *dout, const R *q, const R *k, const R *v, const R *lse,
                              ablk a, R scale) {
    FOR_I(a.B * a.H * a.Tk) {
        const int64_t b = i / (a.H * a.Tk), h = (i / a.Tk) % a.H, j = i % a.Tk;
        const int64_t rj = ((b * a.Tk + j) * a.H + h) * a.hd;
        for (int64_t qi_ = 0; qi_ < a.Tq; qi_++) {
            if (j >= ablk_nk(a, qi_)) continue;
            const int64_t ri = ((b * a.Tq + qi_) * a.H + h) * a.hd, it = (b * a.H + h) * a.Tq + qi_;
            R p, ds;
            ablk_p_ds(&p, &ds, q + ri, k + rj, dout + ri, v + rj, lse[it], D[it], a.hd, scale);
            const R sds = rn_mul(scale, ds);
            for (int64_t e = 0; e < a.hd; e++) {
                dk[rj + e] = rn_add(dk[rj + e], rn_mul(sds, q[ri + e]));
                dv[rj + e] = rn_add(dv[rj + e], rn_mul(p, dout[ri + e]));
            }
        }
    }
}
template <typename R>
static dp_status l_ablk_bwd(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                            const void *v, const void *out, const void *lse, ablk a) {
    const int64_t nq = a.B * a.H * a.Tq;
    void *scr;
    DP_TRY(cu_ctx_scratch_(CB(ctx)->cu, &scr, sizeof(R) * (size_t)nq, CU_SLOT_TMP));
    R *D = (R *)scr;
    const R scale = (R)(1.0 / sqrt((double)a.hd));
    k_ablk_bwd_d<R><<<GRID(nq)>>>(D, (const R *)dout, (const R *)out, a);
    DP_TRY(launched("k_ablk_bwd_d"));
    k_ablk_bwd_q<R><<<GRID(nq)>>>((R *)dq, D, (const R *)dout, (const R *)q, (const R *)k, (const R *)v, (const R *)lse, a,
                                  scale);
    DP_TRY(launched("k_ablk_bwd_q"));
    k_ablk_bwd_kv<R><<<GRID(a.B * a.H * a.Tk)>>>((R *)dk, (R *)dv, D, (const R *)dout, (const R *)q, (const R *)k,
                                                 (const R *)v, (const R *)lse, a, scale);
    return launched("k_ablk_bwd_kv");
}
static dp_status cb_attn_block_bwd(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q, const void *k,
                                   const void *v, const void *out, const void *lse, int64_t B, int64_t Tq, int64_t Tk,
                                   int64_t H, int64_t hd, int64_t q0, int64_t k0) {
    const ablk a = {B, Tq, Tk, H, hd, q0, k0};
    DP_TRY(ablk_args("attn_block_bwd", a));
    if (B * H * Tq == 0 || Tk == 0) return DP_OK;
    return DISPATCH(l_ablk_bwd, ctx, dq, dk, dv, dout, q, k, v, out, lse, a);
}

void cb_ring_ops(opt_backend_ops *o) {
    o->rope_at = cb_rope_at; o->attn_block_fwd = cb_attn_block_fwd; o->attn_block_finish = cb_attn_block_finish;
    o->attn_block_bwd = cb_attn_block_bwd;
}

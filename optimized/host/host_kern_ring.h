/* optimized/host/host_kern_ring.h — the host kernels of ring attention (context
 * parallelism, docs/longshield.md "Ring attention"), instantiated like host_kern.h:
 * RoPE at an offset, and the blockwise causal attention with an online softmax. Work is
 * split over (b, h) only; every reduction runs in a fixed order. */

static dp_status K(rope_at)(void *ctx, void *y_, const void *x_, double theta, int64_t t0, int sign, int64_t B,
                            int64_t T, int64_t H, int64_t hd) {
    if (hd % 2) return dp_error(DP_ERR_INVALID, "rope: head dim %lld is odd", (long long)hd);
    return K(rope_apply)(y_, x_, theta, B, T, H, hd, sign < 0 ? -1.0 : 1.0, t0);
}

typedef struct {
    R *o, *m, *l, *dq, *dk, *dv; const R *q, *k, *v, *out, *lse, *dout;
    int64_t Tq, Tk, H, hd, q0, k0;
    R *scratch; int64_t sstride;
} K(ablk_job);

/* Query i (global q0 + i) sees key j (global k0 + j) iff k0 + j <= q0 + i. Per query:
 * scores s_j = scale q . k_j (e in order), block max mb, m' = max(m, mb),
 * a = exp(m - m') (0 when m = -inf), l = a l + sum_j exp(s_j - m') (j in order),
 * o = a o + sum_j exp(s_j - m') v_j (j in order). */
static void K(ablk_fwd_bh)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(ablk_job) *a = arg;
    const int64_t Tq = a->Tq, Tk = a->Tk, H = a->H, hd = a->hd;
    R scale = (R)(1.0 / sqrt((double)hd));
    R *S = a->scratch + tid * a->sstride;
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / H, h = it % H;
        for (int64_t i = 0; i < Tq; i++) {
            int64_t nk = a->q0 + i - a->k0 + 1; /* keys j < nk are visible */
            if (nk > Tk) nk = Tk;
            if (nk <= 0) continue;
            const R *qi = a->q + ((b * Tq + i) * H + h) * hd;
            R mb = -INFINITY;
            for (int64_t j = 0; j < nk; j++) {
                const R *kj = a->k + ((b * Tk + j) * H + h) * hd;
                R dot = 0;
                for (int64_t e = 0; e < hd; e++) dot += qi[e] * kj[e];
                S[j] = dot * scale;
                if (S[j] > mb) mb = S[j];
            }
            R *mi = a->m + (b * H + h) * Tq + i, *li = a->l + (b * H + h) * Tq + i;
            R mn = *mi > mb ? *mi : mb;
            R al = *mi == -INFINITY ? (R)0 : (R)exp((double)(*mi - mn));
            R *oi = a->o + ((b * Tq + i) * H + h) * hd;
            R lsum = 0;
            for (int64_t j = 0; j < nk; j++) { S[j] = (R)exp((double)(S[j] - mn)); lsum += S[j]; }
            *li = al * *li + lsum;
            for (int64_t e = 0; e < hd; e++) {
                R acc = 0;
                for (int64_t j = 0; j < nk; j++) acc += S[j] * a->v[((b * Tk + j) * H + h) * hd + e];
                oi[e] = al * oi[e] + acc;
            }
            *mi = mn;
        }
    }
}
static dp_status K(attn_block_fwd)(void *ctx, void *o, void *m, void *l, const void *q, const void *k, const void *v,
                                   int64_t B, int64_t Tq, int64_t Tk, int64_t H, int64_t hd, int64_t q0, int64_t k0) {
    R *scratch = host_scratch(ctx, sizeof(R) * (size_t)(Tk + 1));
    if (!scratch) return dp_error(DP_ERR_NOMEM, "attn_block_fwd: out of memory");
    K(ablk_job) a = {o, m, l, NULL, NULL, NULL, q, k, v, NULL, NULL, NULL, Tq, Tk, H, hd, q0, k0, scratch, Tk + 1};
    host_parallel(ctx, K(ablk_fwd_bh), &a, B * H, Tq * Tk * hd);
    dp_free(scratch);
    return DP_OK;
}

/* y = o / l, lse = m + log(l)   (o, y [B, Tq, H, hd]; m, l, lse [B, H, Tq]) */
static dp_status K(attn_block_finish)(void *ctx, void *y_, void *lse_, const void *o_, const void *m_, const void *l_,
                                      int64_t B, int64_t Tq, int64_t H, int64_t hd) {
    R *y = y_, *lse = lse_;
    const R *o = o_, *m = m_, *l = l_;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < Tq; i++)
            for (int64_t h = 0; h < H; h++) {
                int64_t s = (b * H + h) * Tq + i, r = ((b * Tq + i) * H + h) * hd;
                for (int64_t e = 0; e < hd; e++) y[r + e] = o[r + e] / l[s];
                lse[s] = m[s] + (R)log((double)l[s]);
            }
    return DP_OK;
}

/* Per query i: D = dout_i . out_i; per visible key j: p = exp(s_j - lse_i),
 * dv_j += p dout_i, dp = dout_i . v_j, ds = p (dp - D), dq_i += scale ds k_j,
 * dk_j += scale ds q_i (i, then j, in order). */
static void K(ablk_bwd_bh)(void *arg, int64_t lo, int64_t hi, int tid) {
    K(ablk_job) *a = arg;
    const int64_t Tq = a->Tq, Tk = a->Tk, H = a->H, hd = a->hd;
    R scale = (R)(1.0 / sqrt((double)hd));
    for (int64_t it = lo; it < hi; it++) {
        int64_t b = it / H, h = it % H;
        for (int64_t i = 0; i < Tq; i++) {
            int64_t nk = a->q0 + i - a->k0 + 1;
            if (nk > Tk) nk = Tk;
            if (nk <= 0) continue;
            int64_t ri = ((b * Tq + i) * H + h) * hd;
            const R *qi = a->q + ri, *doi = a->dout + ri, *outi = a->out + ri;
            R D = 0;
            for (int64_t e = 0; e < hd; e++) D += doi[e] * outi[e];
            R lse = a->lse[(b * H + h) * Tq + i];
            for (int64_t j = 0; j < nk; j++) {
                int64_t rj = ((b * Tk + j) * H + h) * hd;
                R dot = 0, dp = 0;
                for (int64_t e = 0; e < hd; e++) dot += qi[e] * a->k[rj + e];
                R p = (R)exp((double)(dot * scale - lse));
                for (int64_t e = 0; e < hd; e++) dp += doi[e] * a->v[rj + e];
                R ds = p * (dp - D);
                for (int64_t e = 0; e < hd; e++) {
                    a->dq[ri + e] += scale * ds * a->k[rj + e];
                    a->dk[rj + e] += scale * ds * qi[e];
                    a->dv[rj + e] += p * doi[e];
                }
            }
        }
    }
}
static dp_status K(attn_block_bwd)(void *ctx, void *dq, void *dk, void *dv, const void *dout, const void *q,
                                   const void *k, const void *v, const void *out, const void *lse, int64_t B, int64_t Tq,
                                   int64_t Tk, int64_t H, int64_t hd, int64_t q0, int64_t k0) {
    K(ablk_job) a = {NULL, NULL, NULL, dq, dk, dv, q, k, v, out, lse, dout, Tq, Tk, H, hd, q0, k0, NULL, 0};
    host_parallel(ctx, K(ablk_bwd_bh), &a, B * H, Tq * Tk * hd);
    return DP_OK;
}

static void K(fill_ring_ops)(opt_backend_ops *o) {
    o->rope_at = K(rope_at);
    o->attn_block_fwd = K(attn_block_fwd);
    o->attn_block_finish = K(attn_block_finish);
    o->attn_block_bwd = K(attn_block_bwd);
}

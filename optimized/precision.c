/* optimized/precision.c — half rounding points of the mixed-precision engine
 * (docs/precision.md). */
#include "optimized/precision.h"
#include "common/alloc.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "common/tensor.h"
#include "optimized/backend.h"

/* elements converted per download/upload: bounds the host scratch at 512 KiB (+128 KiB) */
#define OPT_PREC_BLOCK 65536

#define OPT_PREC_NAME_(ID, name) name,
const char *const opt_prec_names[] = {OPT_PRECISIONS(OPT_PREC_NAME_) NULL};
#undef OPT_PREC_NAME_

int opt_prec_is_half(opt_prec p) { return p == OPT_PREC_BF16 || p == OPT_PREC_FP16; }

dp_dtype opt_prec_backend_dtype(opt_prec p) { return p == OPT_PREC_F64 ? DP_F64 : DP_F32; }

float opt_prec_round_value(opt_prec p, float x) { return opt_prec_is_half(p) ? opt_prec_decode(p, opt_prec_encode(p, x)) : x; }

uint16_t opt_prec_encode(opt_prec p, float x) { return p == OPT_PREC_FP16 ? dp_f32_to_f16(x) : dp_f32_to_bf16(x); }

float opt_prec_decode(opt_prec p, uint16_t h) { return p == OPT_PREC_FP16 ? dp_f16_to_f32(h) : dp_bf16_to_f32(h); }

double opt_prec_max_finite(opt_prec p) {
    if (p == OPT_PREC_FP16) return 65504.0;
    if (p == OPT_PREC_BF16) return (double)dp_bf16_to_f32(0x7F7Fu);
    return p == OPT_PREC_F32 ? (double)FLT_MAX : DBL_MAX;
}

/* smallest positive normal of the half type */
static float min_normal(opt_prec p) { return p == OPT_PREC_FP16 ? 0x1p-14f : FLT_MIN; }

dp_status opt_prec_round_dev(opt_backend *be, opt_prec p, void *x, int64_t n, opt_prec_count *cnt) {
    if (!opt_prec_is_half(p) || n <= 0) return DP_OK;
    if (be->dtype != DP_F32)
        return dp_error(DP_ERR_INTERNAL, "precision %s needs an f32 backend", opt_prec_names[p]);
    const int64_t blk = n < OPT_PREC_BLOCK ? n : OPT_PREC_BLOCK;
    double *h = dp_malloc(sizeof(double) * (size_t)blk);
    if (!h) return dp_error(DP_ERR_NOMEM, "engine: out of memory (half rounding of %lld elements)", (long long)blk);
    const float tiny = min_normal(p);
    uint64_t over = 0, under = 0;
    dp_status st = DP_OK;
    for (int64_t a = 0; st == DP_OK && a < n; a += blk) {
        const int64_t m = n - a < blk ? n - a : blk;
        void *xa = (char *)x + sizeof(float) * (size_t)a;
        st = OPT_CALL(be, download_f64, h, xa, m);
        for (int64_t i = 0; st == DP_OK && i < m; i++) {
            float v = (float)h[i]; /* exact: the backend holds f32 */
            float r = opt_prec_round_value(p, v);
            over += isfinite(v) && isinf(r);
            under += v != 0.0f && fabsf(r) < tiny;
            h[i] = (double)r;
        }
        if (st == DP_OK) st = OPT_CALL(be, upload_f64, xa, h, m);
    }
    dp_free(h);
    if (cnt) {
        cnt->elements += (uint64_t)n;
        cnt->overflow += over;
        cnt->underflow += under;
    }
    return st;
}

/* both directions: dir 1 = f32 -> half, 0 = half -> f32 */
static dp_status convert(opt_backend *be, opt_prec p, void *dst, const void *src, int64_t n, int dir) {
    if (!opt_prec_is_half(p) || be->dtype != DP_F32)
        return dp_error(DP_ERR_INTERNAL, "half conversion needs bf16/fp16 and an f32 backend");
    if (n <= 0) return DP_OK;
    const int64_t blk = n < OPT_PREC_BLOCK ? n : OPT_PREC_BLOCK;
    double *h = dp_malloc(sizeof(double) * (size_t)blk);
    uint16_t *b = dp_malloc(sizeof(uint16_t) * (size_t)blk);
    dp_status st = h && b ? DP_OK : dp_error(DP_ERR_NOMEM, "engine: out of memory (half conversion)");
    for (int64_t a = 0; st == DP_OK && a < n; a += blk) {
        const int64_t m = n - a < blk ? n - a : blk;
        if (dir) {
            st = OPT_CALL(be, download_f64, h, (const char *)src + 4 * (size_t)a, m);
            for (int64_t i = 0; i < m; i++) b[i] = opt_prec_encode(p, (float)h[i]);
            if (st == DP_OK) st = OPT_CALL(be, to_device, (char *)dst + 2 * (size_t)a, b, 2 * (size_t)m);
        } else {
            st = OPT_CALL(be, to_host, b, (const char *)src + 2 * (size_t)a, 2 * (size_t)m);
            for (int64_t i = 0; i < m; i++) h[i] = (double)opt_prec_decode(p, b[i]);
            if (st == DP_OK) st = OPT_CALL(be, upload_f64, (char *)dst + 4 * (size_t)a, h, m);
        }
    }
    dp_free(h);
    dp_free(b);
    return st;
}

dp_status opt_prec_to_half(opt_backend *be, opt_prec p, void *dst_half, const void *src_f32, int64_t n) {
    return convert(be, p, dst_half, src_f32, n, 1);
}

dp_status opt_prec_from_half(opt_backend *be, opt_prec p, void *dst_f32, const void *src_half, int64_t n) {
    return convert(be, p, dst_f32, src_half, n, 0);
}

dp_status opt_prec_after_clip(opt_backend *be, opt_prec p, void *sums, int64_t n) {
    (void)be; (void)p; (void)sums; (void)n;
    return DP_OK;
}

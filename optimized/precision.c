/* optimized/precision.c — half rounding points of the mixed-precision engine
 * (docs/precision.md). */
#include "optimized/precision.h"
#include "common/alloc.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "common/tensor.h"
#include "optimized/backend.h"

/* elements converted per block of the generic path (a backend without half_convert):
 * bounds its host scratch at 2 x 256 KiB */
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
static float min_normal(int half) { return half == OPT_HALF_FP16 ? 0x1p-14f : FLT_MIN; }

dp_status opt_half_convert_host(void *y, uint64_t *counts, const void *x, int half, int mode, int64_t n) {
    if (half != OPT_HALF_BF16 && half != OPT_HALF_FP16)
        return dp_error(DP_ERR_INVALID, "half_convert: half type %d (0 bf16, 1 fp16)", half);
    if (mode != OPT_HALF_ROUND && mode != OPT_HALF_ENCODE && mode != OPT_HALF_DECODE)
        return dp_error(DP_ERR_INVALID, "half_convert: mode %d (0 round, 1 encode, 2 decode)", mode);
    if (n < 0) return dp_error(DP_ERR_INVALID, "half_convert: negative size %lld", (long long)n);
    const opt_prec p = half == OPT_HALF_FP16 ? OPT_PREC_FP16 : OPT_PREC_BF16;
    if (mode == OPT_HALF_ENCODE) {
        for (int64_t i = 0; i < n; i++) ((uint16_t *)y)[i] = opt_prec_encode(p, ((const float *)x)[i]);
    } else if (mode == OPT_HALF_DECODE) {
        for (int64_t i = 0; i < n; i++) ((float *)y)[i] = opt_prec_decode(p, ((const uint16_t *)x)[i]);
    } else {
        const float tiny = min_normal(half);
        uint64_t over = 0, under = 0;
        for (int64_t i = 0; i < n; i++) {
            const float v = ((const float *)x)[i], r = opt_prec_round_value(p, v);
            over += isfinite(v) && isinf(r);
            under += v != 0.0f && fabsf(r) < tiny;
            ((float *)y)[i] = r;
        }
        if (counts) {
            counts[0] += over;
            counts[1] += under;
        }
    }
    return DP_OK;
}

/* One conversion through the backend: its half_convert, else (a plugin with its own memory
 * and no half_convert) its memory operations: blocks of OPT_PREC_BLOCK elements copied to
 * the host (to_host), converted by opt_half_convert_host, copied back (to_device). */
static dp_status half_convert(opt_backend *be, opt_prec p, void *y, uint64_t *counts, const void *x, int mode, int64_t n) {
    if (!opt_prec_is_half(p) || be->dtype != DP_F32)
        return dp_error(DP_ERR_INTERNAL, "precision %s: half conversion needs bf16/fp16 and an f32 backend", opt_prec_names[p]);
    const int half = p == OPT_PREC_FP16 ? OPT_HALF_FP16 : OPT_HALF_BF16;
    if (n <= 0) return DP_OK;
    if (be->ops.half_convert) return OPT_CALL(be, half_convert, y, counts, x, half, mode, n);
    const size_t ein = mode == OPT_HALF_DECODE ? 2 : 4, eout = mode == OPT_HALF_ENCODE ? 2 : 4;
    const int64_t blk = n < OPT_PREC_BLOCK ? n : OPT_PREC_BLOCK;
    void *in = dp_malloc(4 * (size_t)blk), *out = dp_malloc(4 * (size_t)blk);
    dp_status st = in && out ? DP_OK : dp_error(DP_ERR_NOMEM, "engine: out of memory (half conversion of %lld elements)", (long long)blk);
    for (int64_t a = 0; st == DP_OK && a < n; a += blk) {
        const int64_t m = n - a < blk ? n - a : blk;
        st = OPT_CALL(be, to_host, in, (const char *)x + ein * (size_t)a, ein * (size_t)m);
        if (st == DP_OK) st = opt_half_convert_host(out, counts, in, half, mode, m);
        if (st == DP_OK) st = OPT_CALL(be, to_device, (char *)y + eout * (size_t)a, out, eout * (size_t)m);
    }
    dp_free(in);
    dp_free(out);
    return st;
}

dp_status opt_prec_round_dev(opt_backend *be, opt_prec p, void *x, int64_t n, opt_prec_count *cnt) {
    if (!opt_prec_is_half(p) || n <= 0) return DP_OK;
    uint64_t c[2] = {0, 0};
    DP_TRY(half_convert(be, p, x, cnt ? c : NULL, x, OPT_HALF_ROUND, n));
    if (cnt) {
        cnt->elements += (uint64_t)n;
        cnt->overflow += c[0];
        cnt->underflow += c[1];
    }
    return DP_OK;
}

dp_status opt_prec_to_half(opt_backend *be, opt_prec p, void *dst_half, const void *src_f32, int64_t n) {
    return half_convert(be, p, dst_half, NULL, src_f32, OPT_HALF_ENCODE, n);
}

dp_status opt_prec_from_half(opt_backend *be, opt_prec p, void *dst_f32, const void *src_half, int64_t n) {
    return half_convert(be, p, dst_f32, NULL, src_half, OPT_HALF_DECODE, n);
}

dp_status opt_prec_after_clip(opt_backend *be, opt_prec p, void *sums, int64_t n) {
    (void)be; (void)p; (void)sums; (void)n;
    return DP_OK;
}

/* optimized/precision.c — half rounding points of the mixed-precision engine
 * (docs/precision.md). */
#include "optimized/precision.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "common/tensor.h"
#include "optimized/engine.h"

#define OPT_PREC_NAME_(ID, name) name,
const char *const opt_prec_names[] = {OPT_PRECISIONS(OPT_PREC_NAME_) NULL};
#undef OPT_PREC_NAME_

int opt_prec_is_half(opt_prec p) { return p == OPT_PREC_BF16 || p == OPT_PREC_FP16; }

dp_dtype opt_prec_backend_dtype(opt_prec p) { return p == OPT_PREC_F64 ? DP_F64 : DP_F32; }

dp_dtype opt_prec_storage_dtype(opt_prec p) {
    switch (p) {
    case OPT_PREC_BF16: return DP_BF16;
    case OPT_PREC_FP16: return DP_F16;
    case OPT_PREC_F32: return DP_F32;
    default: return DP_F64;
    }
}

float opt_prec_round_value(opt_prec p, float x) {
    if (p == OPT_PREC_BF16) return dp_bf16_to_f32(dp_f32_to_bf16(x));
    if (p == OPT_PREC_FP16) return dp_f16_to_f32(dp_f32_to_f16(x));
    return x;
}

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
    double *h = malloc(sizeof(double) * (size_t)n);
    if (!h) return dp_error(DP_ERR_NOMEM, "engine: out of memory (half rounding of %lld elements)", (long long)n);
    dp_status st = OPT_CALL(be, download_f64, h, x, n);
    const float tiny = min_normal(p);
    uint64_t over = 0, under = 0;
    for (int64_t i = 0; st == DP_OK && i < n; i++) {
        float v = (float)h[i]; /* exact: the backend holds f32 */
        float r = opt_prec_round_value(p, v);
        over += isfinite(v) && isinf(r);
        under += v != 0.0f && fabsf(r) < tiny;
        h[i] = (double)r;
    }
    if (st == DP_OK) st = OPT_CALL(be, upload_f64, x, h, n);
    free(h);
    if (cnt) {
        cnt->elements += (uint64_t)n;
        cnt->overflow += over;
        cnt->underflow += under;
    }
    return st;
}

dp_status opt_prec_after_clip(opt_backend *be, opt_prec p, void *sums, int64_t n) {
    (void)be; (void)p; (void)sums; (void)n;
    return DP_OK;
}

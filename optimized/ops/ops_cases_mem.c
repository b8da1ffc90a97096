/* optimized/ops/ops_cases_mem.c — harness cases of the memory operations: alloc (zeroed),
 * free, to_device / to_host (byte round trips at odd sizes and offsets), copy, zero,
 * upload_f64 (rounding to nearest of the dtype, C cast semantics), download_f64 (exact) and
 * half_convert (the half conversions of common/tensor.h) (definitions: optimized/backend.h).
 * Every comparison is exact. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ops/ops.h"
#include "common/alloc.h"
#include "optimized/precision.h"

static const size_t sizes[] = {1, 7, 64, 4099};
#define NSIZES (sizeof sizes / sizeof sizes[0])

/* bytes drawn from the harness stream */
static void pattern(opt_ops_h *h, unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)opt_ops_draw_below(h, 256);
}

static void verdict(opt_ops_h *h, opt_op op, int ok, const char *what, size_t n) {
    h->res[op].ncases++;
    if (ok) opt_ops_pass(h, op);
    else opt_ops_fail(h, op, "%s (%zu bytes)", what, n);
}

static dp_status case_alloc(opt_ops_h *h) {
    void *p = NULL;
    dp_status st = OPS_CALL(h->be, alloc, &p, 0);
    verdict(h, OPT_OP_ALLOC, st == DP_OK, "alloc of 0 bytes failed", 0);
    if (st == DP_OK && p && opt_ops_has(h, OPT_OP_FREE)) OPS_CALL(h->be, free, p);
    for (size_t k = 0; k < NSIZES; k++) {
        unsigned char *got = dp_malloc(sizes[k]);
        if (!got) return DP_ERR_NOMEM;
        p = NULL;
        st = OPS_CALL(h->be, alloc, &p, sizes[k]);
        if (st == DP_OK && p) st = opt_ops_dev_get(h, got, p, sizes[k]);
        int ok = st == DP_OK && p;
        for (size_t i = 0; ok && i < sizes[k]; i++) ok = got[i] == 0;
        verdict(h, OPT_OP_ALLOC, ok, st != DP_OK ? dp_last_error() : !p ? "alloc gave NULL" : "memory not zeroed", sizes[k]);
        if (p && opt_ops_has(h, OPT_OP_FREE)) OPS_CALL(h->be, free, p);
        dp_free(got);
    }
    return DP_OK;
}

static dp_status case_free(opt_ops_h *h) {
    if (!opt_ops_has(h, OPT_OP_ALLOC)) {
        opt_ops_case c;
        opt_ops_case_init(&c, h, OPT_OP_FREE, "alloc/free cycles");
        opt_ops_skip(&c, "free is checked on memory from 'alloc'");
        return DP_OK;
    }
    for (int i = 0; i < 64; i++) {
        void *p = NULL;
        size_t n = (size_t)(1 + 37 * i);
        if (OPS_CALL(h->be, alloc, &p, n) == DP_OK && p) OPS_CALL(h->be, free, p);
    }
    verdict(h, OPT_OP_FREE, 1, "", 0); /* 64 cycles without a fault (the crash guard and sanitizers see the rest) */
    return DP_OK;
}

/* to_device then to_host at a byte offset: the bytes come back, the rest stays zero */
static dp_status xfer(opt_ops_h *h, opt_op op) {
    if (!opt_ops_has(h, OPT_OP_ALLOC) || !opt_ops_has(h, op == OPT_OP_TO_DEVICE ? OPT_OP_TO_HOST : OPT_OP_TO_DEVICE)) {
        opt_ops_case c;
        opt_ops_case_init(&c, h, op, "round trip");
        opt_ops_skip(&c, "to_device and to_host are checked together, on memory from 'alloc'");
        return DP_OK;
    }
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k], off = k % 3, tot = n + off + 8;
        unsigned char *src = dp_malloc(n), *got = dp_malloc(tot);
        void *dev = NULL;
        if (!src || !got) { dp_free(src); dp_free(got); return DP_ERR_NOMEM; }
        pattern(h, src, n);
        dp_status st = OPS_CALL(h->be, alloc, &dev, tot);
        if (st == DP_OK) st = OPS_CALL(h->be, to_device, (unsigned char *)dev + off, src, n);
        if (st == DP_OK) st = OPS_CALL(h->be, to_host, got, dev, tot);
        int ok = st == DP_OK && memcmp(got + off, src, n) == 0;
        for (size_t i = 0; ok && i < tot; i++) ok = (i >= off && i < off + n) || got[i] == 0;
        verdict(h, op, ok, st != DP_OK ? dp_last_error() : "bytes differ after the round trip, or bytes outside it changed", n);
        if (dev && opt_ops_has(h, OPT_OP_FREE)) OPS_CALL(h->be, free, dev);
        dp_free(src);
        dp_free(got);
    }
    /* nbytes = 0 is a no-op */
    unsigned char one = 1;
    void *dev = NULL;
    if (OPS_CALL(h->be, alloc, &dev, 1) == DP_OK) {
        dp_status st = op == OPT_OP_TO_DEVICE ? OPS_CALL(h->be, to_device, dev, &one, 0) : OPS_CALL(h->be, to_host, &one, dev, 0);
        verdict(h, op, st == DP_OK && one == 1, "a transfer of 0 bytes failed or changed memory", 0);
        if (opt_ops_has(h, OPT_OP_FREE)) OPS_CALL(h->be, free, dev);
    }
    return DP_OK;
}
static dp_status case_to_device(opt_ops_h *h) { return xfer(h, OPT_OP_TO_DEVICE); }
static dp_status case_to_host(opt_ops_h *h) { return xfer(h, OPT_OP_TO_HOST); }

/* copy (dst at an offset in another buffer) and zero (a middle range) */
static dp_status copy_zero(opt_ops_h *h, opt_op op) {
    for (size_t k = 0; k < NSIZES; k++) {
        size_t n = sizes[k], off = 1 + k % 5, tot = n + 2 * off;
        unsigned char *src = dp_malloc(tot), *got = dp_malloc(tot);
        void *a = NULL, *b = NULL;
        if (!src || !got) { dp_free(src); dp_free(got); return DP_ERR_NOMEM; }
        pattern(h, src, tot);
        dp_status st = opt_ops_dev_put(h, &a, src, tot);
        if (st == DP_OK && op == OPT_OP_COPY) st = opt_ops_dev_put(h, &b, NULL, tot);
        if (st == DP_OK)
            st = op == OPT_OP_COPY ? OPS_CALL(h->be, copy, (unsigned char *)b + off, a, n) : OPS_CALL(h->be, zero, (unsigned char *)a + off, n);
        if (st == DP_OK) st = opt_ops_dev_get(h, got, op == OPT_OP_COPY ? b : a, tot);
        int ok = st == DP_OK;
        for (size_t i = 0; ok && i < tot; i++) {
            int inside = i >= off && i < off + n;
            unsigned char want = op == OPT_OP_COPY ? (inside ? src[i - off] : 0) : (inside ? 0 : src[i]);
            ok = got[i] == want;
        }
        verdict(h, op, ok, st != DP_OK ? dp_last_error() : "wrong bytes inside or outside the range", n);
        opt_ops_dev_free(h, a);
        opt_ops_dev_free(h, b);
        dp_free(src);
        dp_free(got);
    }
    return DP_OK;
}
static dp_status case_copy(opt_ops_h *h) { return copy_zero(h, OPT_OP_COPY); }
static dp_status case_zero(opt_ops_h *h) { return copy_zero(h, OPT_OP_ZERO); }

/* doubles that are not all representable in f32: specials, subnormals, overflow, ties */
static double *f64_values(opt_ops_h *h, int64_t n) {
    static const double edge[] = {0.0, -0.0, 1.0, 0.1, -1e300, 3.5e38, 1e-45, 1e-310, INFINITY, -INFINITY, NAN,
                                  1.0 + 0x1p-24, 1.0 + 0x1p-23 + 0x1p-24};
    double *x = dp_malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; x && i < n; i++)
        x[i] = i < (int64_t)(sizeof edge / sizeof edge[0]) ? edge[i] : opt_ops_draw_normal(h) * ldexp(1.0, (int)(i % 41) - 20);
    return x;
}

static dp_status case_upload(opt_ops_h *h) {
    const size_t es = dp_dtype_size(h->dtype);
    static const int64_t ns[] = {0, 13, 1031};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        double *x = f64_values(h, n);
        unsigned char *got = dp_malloc((size_t)(n + 4) * es + 1);
        void *dev = NULL;
        if (!x || !got) { dp_free(x); dp_free(got); return DP_ERR_NOMEM; }
        dp_status st = opt_ops_dev_put(h, &dev, NULL, (size_t)(n + 4) * es);
        if (st == DP_OK) st = OPS_CALL(h->be, upload_f64, dev, x, n);
        if (st == DP_OK) st = opt_ops_dev_get(h, got, dev, (size_t)(n + 4) * es);
        int ok = st == DP_OK;
        int64_t bad = -1;
        for (int64_t i = 0; ok && i < n + 4; i++) {
            double g;
            if (h->dtype == DP_F64) memcpy(&g, got + i * 8, 8);
            else { float f; memcpy(&f, got + i * 4, 4); g = f; }
            double want = i >= n ? 0 : h->dtype == DP_F64 ? x[i] : (double)(float)x[i]; /* the guard stays 0 */
            ok = (isnan(want) && isnan(g)) || (g == want && signbit(g) == signbit(want));
            if (!ok) bad = i;
        }
        char what[160];
        snprintf(what, sizeof what, "%s (element %lld of %lld)", st != DP_OK ? dp_last_error() : "not the round-to-nearest value",
                 (long long)bad, (long long)n);
        verdict(h, OPT_OP_UPLOAD_F64, ok, what, (size_t)n * es);
        opt_ops_dev_free(h, dev);
        dp_free(x);
        dp_free(got);
    }
    return DP_OK;
}

static dp_status case_download(opt_ops_h *h) {
    const size_t es = dp_dtype_size(h->dtype);
    static const int64_t ns[] = {0, 13, 1031};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        double *x = f64_values(h, n), *got = dp_malloc(sizeof(double) * (size_t)(n + 2));
        unsigned char *bytes = dp_malloc((size_t)(n + 1) * es);
        void *dev = NULL;
        if (!x || !got || !bytes) { dp_free(x); dp_free(got); dp_free(bytes); return DP_ERR_NOMEM; }
        for (int64_t i = 0; i < n; i++) {
            if (h->dtype == DP_F64) memcpy(bytes + i * 8, &x[i], 8);
            else { float f = (float)x[i]; memcpy(bytes + i * 4, &f, 4); x[i] = f; }
        }
        got[n] = 12345.0; /* one past the end: untouched */
        dp_status st = opt_ops_dev_put(h, &dev, bytes, (size_t)n * es + 1);
        if (st == DP_OK) st = OPS_CALL(h->be, download_f64, got, dev, n);
        int ok = st == DP_OK && got[n] == 12345.0;
        for (int64_t i = 0; ok && i < n; i++) ok = (isnan(x[i]) && isnan(got[i])) || (got[i] == x[i] && signbit(got[i]) == signbit(x[i]));
        verdict(h, OPT_OP_DOWNLOAD_F64, ok, st != DP_OK ? dp_last_error() : "not the exact value, or wrote past the end", (size_t)n * es);
        opt_ops_dev_free(h, dev);
        dp_free(x);
        dp_free(got);
        dp_free(bytes);
    }
    return DP_OK;
}


/* half_convert (optimized/backend.h): every mode against common/tensor.h, bit for bit (a NaN
 * only as a NaN), with the rounding counters; decode over all 2^16 half patterns; round in
 * place and out of place; bad arguments refused; an f64 backend refuses. */
static float f32_of(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static int half_is_nan(int half, uint16_t v) { return half ? (v & 0x7c00u) == 0x7c00u && (v & 0x3ffu) : (v & 0x7f80u) == 0x7f80u && (v & 0x7fu); }
/* f32 inputs: the rounding boundaries of both half types (ties either way, the overflow
 * thresholds, subnormal ties), specials, then values over the whole exponent range */
static void half_inputs(opt_ops_h *h, float *x, int64_t n) {
    static const uint32_t edge[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00001u, 0xffc12345u,
                                    0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f817fffu, /* bf16 ties, even and odd */
                                    0x7f7f7fffu, 0x7f7f8000u, 0x7f7fffffu, 0x00000001u, 0x00008000u, 0x80018000u,
                                    0x3f801000u, 0x3f803000u, 0x3f801001u, /* fp16 ties */
                                    0x477fe000u, 0x477fefffu, 0x477ff000u, 0xc77ff000u, /* 65504, 65520 - ulp, 65520 */
                                    0x33000000u, 0x33000001u, 0x33c00000u, 0x38800000u, 0x387fe000u, 0x387ff000u,
                                    0x38000000u, 0x337fffffu, 0xb3000001u};
    const int64_t ne = (int64_t)(sizeof edge / sizeof edge[0]);
    for (int64_t i = 0; i < n; i++)
        x[i] = i < ne ? f32_of(edge[i]) : (float)(opt_ops_draw_normal(h) * ldexp(1.0, (int)opt_ops_draw_below(h, 300) - 150));
}
static void half_one(opt_ops_h *h, int half, int mode, int in_place, int64_t n) {
    const opt_prec p = half ? OPT_PREC_FP16 : OPT_PREC_BF16;
    const size_t ein = mode == OPT_HALF_DECODE ? 2 : 4, eout = mode == OPT_HALF_ENCODE ? 2 : 4, tot = eout * (size_t)(n + OPT_OPS_GUARD);
    unsigned char *in = dp_malloc(ein * (size_t)n + 4), *want = dp_malloc(tot), *got = dp_malloc(tot);
    void *dx = NULL, *dy = NULL;
    char what[200] = "";
    if (!in || !want || !got) { dp_free(in); dp_free(want); dp_free(got); opt_ops_fail(h, OPT_OP_HALF_CONVERT, "out of memory"); return; }
    if (mode == OPT_HALF_DECODE) for (int64_t i = 0; i < n; i++) ((uint16_t *)in)[i] = (uint16_t)i; /* n = 65536: every pattern */
    else half_inputs(h, (float *)in, n);
    memset(want, 0xA5, tot); /* the guard: the output buffer starts as 0xA5 bytes */
    uint64_t wc[2] = {0, 0}, gc[2] = {0, 0};
    for (int64_t i = 0; i < n; i++) {
        if (mode == OPT_HALF_DECODE) ((float *)want)[i] = opt_prec_decode(p, ((uint16_t *)in)[i]);
        else if (mode == OPT_HALF_ENCODE) ((uint16_t *)want)[i] = opt_prec_encode(p, ((float *)in)[i]);
        else {
            const float v = ((float *)in)[i], r = opt_prec_round_value(p, v);
            ((float *)want)[i] = r;
            wc[0] += isfinite(v) && isinf(r);
            wc[1] += v != 0.0f && fabsf(r) < (half ? 0x1p-14f : FLT_MIN);
        }
    }
    dp_status st = opt_ops_dev_put(h, &dx, in, ein * (size_t)n + 4);
    if (st == DP_OK && !in_place) {
        unsigned char *g0 = dp_malloc(tot);
        if (!g0) st = DP_ERR_NOMEM;
        else { memset(g0, 0xA5, tot); st = opt_ops_dev_put(h, &dy, g0, tot); dp_free(g0); }
    }
    if (st == DP_OK) st = OPS_CALL(h->be, half_convert, in_place ? dx : dy, mode == OPT_HALF_ROUND ? gc : NULL, dx, half, mode, n);
    if (st == DP_OK) st = opt_ops_dev_get(h, got, in_place ? dx : dy, in_place ? 4 * (size_t)n : tot);
    int ok = st == DP_OK;
    if (!ok) snprintf(what, sizeof what, "%s", dp_last_error());
    for (int64_t i = 0; ok && i < n; i++) {
        if (eout == 2) {
            uint16_t g = ((uint16_t *)got)[i], w = ((uint16_t *)want)[i];
            ok = g == w || (half_is_nan(half, g) && half_is_nan(half, w));
            if (!ok) snprintf(what, sizeof what, "element %lld: input %08x gave %04x, want %04x", (long long)i, bits_of(((float *)in)[i]), g, w);
        } else {
            float g = ((float *)got)[i], w = ((float *)want)[i];
            ok = bits_of(g) == bits_of(w) || (isnan(g) && isnan(w));
            if (!ok) snprintf(what, sizeof what, "element %lld: input %08x gave %08x, want %08x", (long long)i,
                              mode == OPT_HALF_DECODE ? (uint32_t)((uint16_t *)in)[i] : bits_of(((float *)in)[i]), bits_of(g), bits_of(w));
        }
    }
    if (ok && !in_place && memcmp(got + eout * (size_t)n, want + eout * (size_t)n, eout * OPT_OPS_GUARD) != 0) {
        ok = 0;
        snprintf(what, sizeof what, "wrote past the end of y");
    }
    if (ok && mode == OPT_HALF_ROUND && (gc[0] != wc[0] || gc[1] != wc[1])) {
        ok = 0;
        snprintf(what, sizeof what, "counts overflow %llu underflow %llu, want %llu %llu", (unsigned long long)gc[0],
                 (unsigned long long)gc[1], (unsigned long long)wc[0], (unsigned long long)wc[1]);
    }
    h->res[OPT_OP_HALF_CONVERT].ncases++;
    if (ok) opt_ops_pass(h, OPT_OP_HALF_CONVERT);
    else opt_ops_fail(h, OPT_OP_HALF_CONVERT, "%s %s%s n %lld: %s", half ? "fp16" : "bf16",
                      mode == OPT_HALF_ROUND ? "round" : mode == OPT_HALF_ENCODE ? "encode" : "decode", in_place ? " in place" : "",
                      (long long)n, what);
    opt_ops_dev_free(h, dx);
    opt_ops_dev_free(h, dy);
    dp_free(in);
    dp_free(want);
    dp_free(got);
}
static dp_status case_half_convert(opt_ops_h *h) {
    h->res[OPT_OP_HALF_CONVERT].ncases++;
    float one = 1.0f;
    void *d = NULL;
    dp_status st = opt_ops_dev_put(h, &d, &one, sizeof one);
    if (st != DP_OK) return st;
    if (h->dtype != DP_F32) { /* defined on f32 backends only */
        st = OPS_CALL(h->be, half_convert, d, NULL, d, OPT_HALF_BF16, OPT_HALF_ROUND, 1);
        if (st == DP_ERR_INVALID) opt_ops_pass(h, OPT_OP_HALF_CONVERT);
        else opt_ops_fail(h, OPT_OP_HALF_CONVERT, "an %s backend returned %s (want an invalid-argument error)", dp_dtype_name(h->dtype), dp_status_name(st));
        opt_ops_dev_free(h, d);
        return DP_OK;
    }
    /* bad arguments: a half type, a mode, a size out of range */
    int bad = OPS_CALL(h->be, half_convert, d, NULL, d, 2, OPT_HALF_ROUND, 1) == DP_ERR_INVALID &&
              OPS_CALL(h->be, half_convert, d, NULL, d, OPT_HALF_FP16, 3, 1) == DP_ERR_INVALID &&
              OPS_CALL(h->be, half_convert, d, NULL, d, OPT_HALF_FP16, OPT_HALF_ROUND, -1) == DP_ERR_INVALID &&
              OPS_CALL(h->be, half_convert, d, NULL, d, OPT_HALF_FP16, OPT_HALF_ROUND, 0) == DP_OK;
    if (bad) opt_ops_pass(h, OPT_OP_HALF_CONVERT);
    else opt_ops_fail(h, OPT_OP_HALF_CONVERT, "a bad half type, mode or size was not refused (or n = 0 failed)");
    opt_ops_dev_free(h, d);
    for (int half = 0; half < 2; half++) {
        half_one(h, half, OPT_HALF_ROUND, 0, 1031);
        half_one(h, half, OPT_HALF_ROUND, 1, 77);
        half_one(h, half, OPT_HALF_ENCODE, 0, 1031);
        half_one(h, half, OPT_HALF_DECODE, 0, 65536);
    }
    return DP_OK;
}

const opt_ops_entry opt_ops_cases_mem[] = {
    {OPT_OP_ALLOC, case_alloc}, {OPT_OP_FREE, case_free}, {OPT_OP_TO_DEVICE, case_to_device},
    {OPT_OP_TO_HOST, case_to_host}, {OPT_OP_COPY, case_copy}, {OPT_OP_ZERO, case_zero},
    {OPT_OP_UPLOAD_F64, case_upload}, {OPT_OP_DOWNLOAD_F64, case_download}, {OPT_OP_HALF_CONVERT, case_half_convert},
    {OPT_OP_COUNT, NULL},
};

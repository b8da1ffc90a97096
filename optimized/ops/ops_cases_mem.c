/* optimized/ops/ops_cases_mem.c — harness cases of the memory operations: alloc (zeroed),
 * free, to_device / to_host (byte round trips at odd sizes and offsets), copy, zero,
 * upload_f64 (rounding to nearest of the dtype, C cast semantics) and download_f64 (exact)
 * (definitions: optimized/backend.h). Every comparison is exact. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "optimized/ops/ops.h"
#include "common/alloc.h"

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

const opt_ops_entry opt_ops_cases_mem[] = {
    {OPT_OP_ALLOC, case_alloc}, {OPT_OP_FREE, case_free}, {OPT_OP_TO_DEVICE, case_to_device},
    {OPT_OP_TO_HOST, case_to_host}, {OPT_OP_COPY, case_copy}, {OPT_OP_ZERO, case_zero},
    {OPT_OP_UPLOAD_F64, case_upload}, {OPT_OP_DOWNLOAD_F64, case_download}, {OPT_OP_COUNT, NULL},
};

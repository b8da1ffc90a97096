/* optimized/tests/plugin_variants.c — defective plugins for optimized/tests/plugin_abi.sh:
 * the skeleton plugin (optimized/plugins/skeleton/skeleton.c, included unchanged) with one
 * defect each, chosen at compile time by -DVARIANT=NAME:
 *   VERSION  built for another ABI version              -> refused, exit 2
 *   LAYOUT   a declaration with another table layout    -> refused, exit 2
 *   MISSING  no dpcert_backend_create                   -> refused, exit 2 (compile with it renamed)
 *   LIE      declares clip_factors but leaves it NULL   -> refused, exit 2
 *   EXTRA    fills add without declaring it             -> refused, exit 2
 *   CRASH    sqnorm_rows dereferences a null pointer    -> exit 3 naming sqnorm_rows (harness and train)
 *   NONDET   declares bitwise determinism; sqnorm_rows reverses its order every other call
 *            (within the rounding bound)                -> FAIL at the determinism check
 *   PLANTED  sqnorm_rows overwrites instead of accumulating (+= lost) -> FAIL naming sqnorm_rows
 *   NONE     the skeleton as it is (the positive control)
 * Build: cc -shared -fPIC -DVARIANT=V_NAME -I optimized/plugins/skeleton plugin_variants.c */
#define V_NONE 0
#define V_VERSION 1
#define V_LAYOUT 2
#define V_MISSING 3
#define V_LIE 4
#define V_EXTRA 5
#define V_CRASH 6
#define V_NONDET 7
#define V_PLANTED 8
#ifndef VARIANT
#error "compile with -DVARIANT=V_NAME"
#endif

#include "plugin_skeleton_wrap.h"

static dpcert_status v_crash(void *ctx, void *sq, const void *g, int64_t B, int64_t n) {
    volatile int *nowhere = (volatile int *)(uintptr_t)(n < 0 ? 8 : 0);
    *nowhere = 1;
    return sk_sqnorm_rows(ctx, sq, g, B, n);
}
static dpcert_status v_add(void *ctx, void *y, const void *a, const void *b, int64_t n) { return DPCERT_OK; }

/* every other call: the same sum in reverse order (a different rounding, the same value
 * up to rounding) */
static dpcert_status v_nondet(void *ctx, void *sq, const void *g, int64_t B, int64_t n) {
    static int calls;
    if (calls++ % 2 == 0) return sk_sqnorm_rows(ctx, sq, g, B, n);
    sk_ctx *c = ctx;
    for (int64_t b = 0; b < B; b++) {
        if (c->dtype == DPCERT_F64) {
            const double *gb = (const double *)g + b * n;
            double acc = 0;
            for (int64_t j = n - 1; j >= 0; j--) acc += gb[j] * gb[j];
            ((double *)sq)[b] += acc;
        } else {
            const float *gb = (const float *)g + b * n;
            float acc = 0;
            for (int64_t j = n - 1; j >= 0; j--) acc += gb[j] * gb[j];
            ((float *)sq)[b] += acc;
        }
    }
    return DPCERT_OK;
}

/* sq[b] = sum (the accumulation into sq lost) */
static dpcert_status v_planted(void *ctx, void *sq, const void *g, int64_t B, int64_t n) {
    sk_ctx *c = ctx;
    memset(sq, 0, (size_t)B * (c->dtype == DPCERT_F64 ? sizeof(double) : sizeof(float)));
    return sk_sqnorm_rows(ctx, sq, g, B, n);
}

uint32_t dpcert_backend_abi_version(void) { return sk_abi_version() + (VARIANT == V_VERSION); }

dpcert_status dpcert_backend_query(dpcert_caps *caps) {
    dpcert_status st = sk_query(caps);
    if (VARIANT == V_LAYOUT) caps->abi_layout += 1;
    if (VARIANT == V_NONDET) caps->ops[DPCERT_OP_AXPBY] = caps->ops[DPCERT_OP_CLIP_FACTORS] = 0;
    return st;
}

#if VARIANT != V_MISSING
dpcert_status dpcert_backend_create(dpcert_backend_ops *ops, void **ctx, const dpcert_backend_config *cfg,
                                    const dpcert_host *host) {
    dpcert_status st = sk_create(ops, ctx, cfg, host);
    if (VARIANT == V_LIE) ops->clip_factors = NULL;
    if (VARIANT == V_EXTRA) ops->add = v_add;
    if (VARIANT == V_CRASH) ops->sqnorm_rows = v_crash;
    if (VARIANT == V_NONDET) { ops->sqnorm_rows = v_nondet; ops->axpby = NULL; ops->clip_factors = NULL; }
    if (VARIANT == V_PLANTED) ops->sqnorm_rows = v_planted;
    return st;
}
#endif

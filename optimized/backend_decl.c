/* optimized/backend_decl.c — the declarations of the built-in backends and the helpers
 * that read a declaration (optimized/backend_decl.h, docs/plugin-abi.md). */
#include "optimized/backend_decl.h"
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Built-in declarations. host: every reduction in the order of backend.h's comments, no
 * FMA (-ffp-contract=off, AVX2 kernels without fma), libm in double then one rounding,
 * bitwise identical for any thread count (docs/engine.md section 2). cuda (and its
 * emulation, names "cuda-*"): cuBLAS chooses the order and uses FMA, kernels use FMA where
 * nvcc contracts, the CUDA math library's documented errors are at most 2 ulps for the
 * functions used (rn_ intrinsics elsewhere), results repeat at a fixed configuration
 * (fixed cuBLAS workspace, no float atomics; docs/cuda.md). */
static void decl_set(dpcert_caps *c, const char *name, const char *desc, int order, int fma, int det, int memory,
                     int coll) {
    snprintf(c->name, sizeof c->name, "%s", name);
    snprintf(c->description, sizeof c->description, "%s", desc);
    c->abi_version = DPCERT_BACKEND_ABI_VERSION;
    c->abi_layout = DPCERT_BACKEND_ABI_LAYOUT;
    c->dtypes = DPCERT_DTYPE_BIT(DPCERT_F64) | DPCERT_DTYPE_BIT(DPCERT_F32);
    c->memory = memory;
    c->collectives = coll;
    c->determinism = det;
    for (int t = 0; t < DPCERT_DTYPE_COUNT; t++)
        c->arith[t] = (dpcert_arith){.u_in = 0, .u_acc = 0, .order = order, .fma = fma, .libm_ulps = 4};
}

dp_status opt_backend_decl_builtin(opt_backend_decl **out, const opt_backend *be) {
    *out = NULL;
    opt_backend_decl *d = dp_calloc(1, sizeof *d);
    if (!d) return DP_ERR_NOMEM;
    const char *n = be->name ? be->name : "?";
    if (strcmp(n, "host") == 0)
        decl_set(&d->caps, n, "dpcert's host backend (C kernels, pthreads, MPI)", DPCERT_ORDER_DOCUMENTED, 0,
                 DPCERT_DET_BITWISE, DPCERT_MEMORY_HOST, DPCERT_COLLECTIVES_GROUPS);
    else if (strncmp(n, "cuda", 4) == 0)
        decl_set(&d->caps, n, "dpcert's CUDA backend (kernels, cuBLAS, NCCL)", DPCERT_ORDER_UNKNOWN, 1,
                 DPCERT_DET_RUN_TO_RUN, DPCERT_MEMORY_DEVICE, DPCERT_COLLECTIVES_GROUPS);
    else
        decl_set(&d->caps, n, "built-in backend without a declaration", DPCERT_ORDER_UNKNOWN, 1, DPCERT_DET_RUN_TO_RUN,
                 DPCERT_MEMORY_DEVICE, DPCERT_COLLECTIVES_WORLD);
    for (int op = 0; op < OPT_OP_COUNT; op++) d->caps.ops[op] = (unsigned char)opt_backend_supports(be, (opt_op)op);
    snprintf(d->origin, sizeof d->origin, "built in");
    *out = d;
    return DP_OK;
}

void opt_backend_decl_free(opt_backend_decl *d) { dp_free(d); }

dpcert_arith opt_decl_arith(const opt_backend_decl *d, dp_dtype dt) {
    dpcert_arith a = {0, 0, DPCERT_ORDER_UNKNOWN, 1, 4};
    if (d && dt >= DP_F64 && dt <= DP_F16) a = d->caps.arith[dt];
    double u = dp_dtype_unit_roundoff(dt);
    if (!(a.u_acc >= u)) a.u_acc = u;
    if (!(a.u_in > 0)) a.u_in = 0;
    if (!(a.libm_ulps > 0)) a.libm_ulps = 4;
    return a;
}

double opt_decl_u_eff(const opt_backend_decl *d, dp_dtype dt) {
    dpcert_arith a = opt_decl_arith(d, dt);
    return a.u_in > a.u_acc ? a.u_in : a.u_acc;
}

const char *opt_decl_det_name(int det) {
    return det == DPCERT_DET_BITWISE ? "bitwise (any thread count)"
         : det == DPCERT_DET_RUN_TO_RUN ? "run-to-run (fixed thread count)" : "none";
}

/* "2^-24" for powers of two, else %.3g */
static void fmt_u(char *b, size_t cap, double u) {
    int e;
    double m = frexp(u, &e);
    if (u > 0 && m == 0.5) snprintf(b, cap, "2^%d", e - 1);
    else snprintf(b, cap, "%.3g", u);
}

void opt_decl_text(char *buf, size_t cap, const opt_backend_decl *d, dp_dtype dt) {
    dpcert_arith a = opt_decl_arith(d, dt);
    char ua[32], ui[64] = "";
    fmt_u(ua, sizeof ua, a.u_acc);
    if (a.u_in > 0) {
        char t[24];
        fmt_u(t, sizeof t, a.u_in);
        snprintf(ui, sizeof ui, ", GEMM operands u=%s", t);
    }
    snprintf(buf, cap, "%s (%s): order %s, %s, %s arithmetic u=%s%s, libm %g ulps, deterministic %s",
             d ? d->caps.name : "?", d ? d->origin : "?", a.order == DPCERT_ORDER_DOCUMENTED ? "documented" : "unknown",
             a.fma ? "FMA allowed" : "no FMA", dp_dtype_name(dt), ua, ui, a.libm_ulps,
             opt_decl_det_name(d ? d->caps.determinism : DPCERT_DET_NONE));
}

int opt_decl_is_own(const opt_backend_decl *d, opt_op op) {
    return d && op >= 0 && op < OPT_OP_COUNT && d->caps.ops[op];
}

void opt_decl_meta(char *text, size_t text_cap, char *u_hex, char *u_in_hex, const opt_backend *be) {
    opt_decl_text(text, text_cap, be->decl, be->dtype);
    snprintf(u_hex, 40, "%a", opt_decl_u_eff(be->decl, be->dtype));
    snprintf(u_in_hex, 40, "%a", opt_decl_arith(be->decl, be->dtype).u_in);
}

/* optimized/clip/instantiate.c — per-example gradients from the tape (docs/engine.md
 * section 3), below both norm sources of the clipping pipeline: a linear parameter's
 * g_b = G_b^T A_b as one strided-batched GEMM (over the rank's positions: under CP a
 * partial), a direct parameter's rows copied (a half tape's decoded), the tied
 * embedding's sum of both; their host copies; a dropped example's tape zeroed. */
#include "optimized/clip/clip.h"
#include "optimized/ledger.h"

/* out [B, numel] = per-example gradient of parameter pi (linear: G_b^T A_b batched). */
dp_status opt_instantiate(void *out, const opt_model *om, const opt_tape *tp, int pi) {
    return opt_instantiate_examples(out, om, tp, pi, 0, tp->B);
}

/* out [ne, numel] = the per-example gradients of examples [e0, e0 + ne) of parameter pi. */
dp_status opt_instantiate_examples(void *out, const opt_model *om, const opt_tape *tp, int pi, int64_t e0, int64_t ne) {
    opt_backend *be = om->be;
    const size_t es = opt_backend_esize(be);
    int64_t T = tp->T, n = om->numel[pi];
    if (ne <= 0) return DP_OK;
    /* a half tape's 2-byte elements are decoded (docs/precision.md section 2) */
    if (om->src[pi] == OPT_SRC_DIRECT && tp->half)
        return opt_prec_from_half(be, om->prec, out, (const char *)tp->direct[pi] + 2 * (size_t)(e0 * n), ne * n);
    if (om->src[pi] == OPT_SRC_DIRECT)
        return OPT_CALL(be, copy, out, (const char *)tp->direct[pi] + es * (size_t)(e0 * n), es * (size_t)(ne * n));
    int64_t d = tp->din[pi], p = tp->dout[pi];
    /* out_b [p, d] = G_b^T [p, T] A_b [T, d] (a half tape decoded into workspace) */
    opt_arena ws = {.be = be};
    const void *A, *G;
    dp_status st = opt_tape_lin_f32(&A, &G, &ws, om, tp, pi);
    if (st == DP_OK)
        st = OPT_CALL(be, gemm, out, (const char *)G + es * (size_t)(e0 * T * p), (const char *)A + es * (size_t)(e0 * T * d),
                      1, 0, p, d, T, 1.0, 0.0, ne, T * p, T * d, p * d);
    opt_arena_free(&ws);
    DP_TRY(st);
    if (om->src[pi] == OPT_SRC_BOTH) {
        const void *dir;
        ws = (opt_arena){.be = be};
        st = opt_tape_f32_view(&ws, &dir, om, tp->half, tp->direct[pi], tp->B * n);
        if (st == DP_OK) st = OPT_CALL(be, add, out, out, (const char *)dir + es * (size_t)(e0 * n), ne * p * d);
        opt_arena_free(&ws);
        DP_TRY(st);
    }
    /* mixed precision, point P: an instantiated per-example gradient is held in the half
     * type (docs/precision.md) */
    return opt_prec_round(om, out, ne * p * d, OPT_PREC_KIND_PE);
}

dp_status opt_tape_zero_example(const opt_model *om, opt_tape *tp, int64_t b) {
    opt_backend *be = om->be;
    size_t es = opt_backend_esize(be), el = tp->half ? sizeof(uint16_t) : es; /* half tape: 2-byte A, G */
    int64_t T = tp->T;
    for (int p = 0; p < om->np; p++) {
        if (om->src[p] != OPT_SRC_DIRECT && tp->A[p]) { /* (--checkpoint block: freed blocks are NULL) */
            DP_TRY(OPT_CALL(be, zero, (char *)tp->A[p] + el * (size_t)(b * T * tp->din[p]), el * (size_t)(T * tp->din[p])));
            DP_TRY(OPT_CALL(be, zero, (char *)tp->G[p] + el * (size_t)(b * T * tp->dout[p]), el * (size_t)(T * tp->dout[p])));
        }
        if (om->src[p] != OPT_SRC_LINEAR)
            DP_TRY(OPT_CALL(be, zero, (char *)tp->direct[p] + el * (size_t)(b * om->numel[p]), el * (size_t)om->numel[p]));
    }
    return DP_OK;
}

dp_status opt_pe_download(double *host, const opt_model *om, opt_tape *tp, const void *held, int p) {
    const int64_t n = tp->B * om->numel[p];
    if (!held) {
        void *buf;
        DP_TRY(opt_arena_alloc_tag(&tp->ar, &buf, opt_backend_esize(om->be) * (size_t)n, OPT_MEM_PER_EXAMPLE));
        DP_TRY(opt_instantiate(buf, om, tp, p));
        return OPT_CALL(om->be, download_f64, host, buf, n);
    }
    opt_arena ws = {.be = om->be};
    const void *v;
    dp_status st = opt_tape_f32_view(&ws, &v, om, tp->half, held, n);
    if (st == DP_OK) st = OPT_CALL(om->be, download_f64, host, v, n);
    opt_arena_free(&ws);
    return st;
}

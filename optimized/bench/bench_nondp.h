/* optimized/bench/bench_nondp.h — the non-private step the engine's step benchmarks
 * compare against (bench_step.c on the host, bench_gpu_step.c on the CUDA backend): forward
 * + backward on the same tape as the DP step, the summed gradient of each linear layer as one
 * GEMM over the B T rows (bk_gemm with c = 1), of each other parameter as a sum over examples
 * (clip_accum with c = 1), then the SGD update (lr 0.1): no norms, clipping or noise.
 * ones[B] holds 1 in the backend's dtype; g[p] a gradient buffer per parameter. */
#ifndef OPT_BENCH_NONDP_H
#define OPT_BENCH_NONDP_H

#include "optimized/dpsgd.h"

static dp_status opt_bench_nondp_step(opt_model *om, const dp_dataset *d, const int64_t *idx, int64_t B, void **g,
                                      void *ones) {
    opt_backend *be = om->be;
    opt_tape tp;
    DP_TRY(opt_forward_backward(&tp, om, d, idx, B));
    dp_status st = DP_OK;
    for (int p = 0; p < om->np && st == DP_OK; p++) {
        st = be->ops.zero(be->ctx, g[p], opt_backend_esize(be) * (size_t)om->numel[p]);
        if (st == DP_OK && om->src[p] != OPT_SRC_DIRECT)
            st = OPT_CALL(be, bk_gemm, g[p], tp.A[p], tp.G[p], ones, B, tp.T, tp.din[p], tp.dout[p]);
        if (st == DP_OK && om->src[p] != OPT_SRC_LINEAR)
            st = OPT_CALL(be, clip_accum, g[p], tp.direct[p], ones, B, om->numel[p]);
        if (st == DP_OK) st = OPT_CALL(be, sgd_momentum, om->w[p], g[p] /* buf: reused */, g[p], 0.1, 0.0, 0.0, 1,
                                       om->numel[p]);
    }
    opt_tape_free(&tp);
    return st;
}

#endif

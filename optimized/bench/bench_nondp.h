/* optimized/bench/bench_nondp.h — the non-private step the engine's step benchmarks
 * compare against (bench_step.c on the host, bench_gpu_step.c on the CUDA backend): forward
 * + backward on the same tape as the DP step, the summed gradient of each linear layer as one
 * GEMM over the B T rows (bk_gemm with c = 1), of each other parameter as a sum over examples
 * (clip_accum with c = 1), then the SGD update (lr 0.1): no norms, clipping or noise.
 * ones[B] holds 1 in the backend's dtype; g[p] a gradient buffer per parameter. */
#ifndef OPT_BENCH_NONDP_H
#define OPT_BENCH_NONDP_H

#include <stdlib.h>
#include <string.h>

#include "optimized/dpsgd.h"
#include "optimized/ledger.h"

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

/* the non-private step's state: the model on the backend, the batch (examples 0..B-1), a
 * gradient per parameter and the factors 1 */
typedef struct {
    opt_model om;
    int64_t B, *idx;
    void **g, *ones;
    int have_model;
} opt_bench_nondp;

static void opt_bench_nondp_free(opt_bench_nondp *n) {
    if (n->have_model) {
        for (int p = 0; n->g && p < n->om.np; p++) opt_mem_free(n->om.be, n->g[p]);
        opt_mem_free(n->om.be, n->ones);
        opt_model_free(&n->om);
    }
    free(n->g);
    free(n->idx);
    memset(n, 0, sizeof *n);
}
static dp_status opt_bench_nondp_init(opt_bench_nondp *n, opt_backend *be, const dp_model *m, int64_t B) {
    memset(n, 0, sizeof *n);
    DP_TRY(opt_model_create(&n->om, be, m));
    n->have_model = 1;
    n->B = B;
    n->idx = malloc(sizeof(int64_t) * (size_t)B);
    n->g = calloc((size_t)n->om.np, sizeof(void *));
    double *h1 = malloc(sizeof(double) * (size_t)B);
    dp_status st = n->idx && n->g && h1 ? DP_OK : dp_error(DP_ERR_NOMEM, "bench: out of memory");
    for (int64_t i = 0; st == DP_OK && i < B; i++) { n->idx[i] = i; h1[i] = 1.0; }
    for (int p = 0; p < n->om.np && st == DP_OK; p++)
        st = opt_mem_alloc(be, &n->g[p], opt_backend_esize(be) * (size_t)n->om.numel[p], OPT_MEM_GRADS);
    if (st == DP_OK) st = opt_mem_alloc(be, &n->ones, opt_backend_esize(be) * (size_t)B, OPT_MEM_WORKSPACE);
    if (st == DP_OK) st = be->ops.upload_f64(be->ctx, n->ones, h1, B);
    free(h1);
    if (st != DP_OK) opt_bench_nondp_free(n);
    return st;
}
static dp_status opt_bench_nondp_run(opt_bench_nondp *n, const dp_dataset *d) {
    return opt_bench_nondp_step(&n->om, d, n->idx, n->B, n->g, n->ones);
}

#endif

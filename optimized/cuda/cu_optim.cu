// optimized/cuda/cu_optim.cu — the optimizer steps of the CUDA backend (f32 and f64):
// SGD with momentum and AdamW, element by element with the host backend's formulas and
// scalars, so that both backends agree bit for bit (docs/cuda.md "Bit-identical operations").
#include <math.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_check.h"
#include "optimized/cuda/cu_internal.cuh"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/cu_reduce.cuh"

/* ---------------- optimizers (the host's formulas, operation by operation) ----------------
 * optimized/host/host_kern.h, sgd_momentum and adamw, f32 or f64 (R):
 *   sgd:   gi = wd != 0 ? g + (R)wd * p : g;  buf = (R)mu * buf + gi;  p = p - (R)lr * buf
 *          (buf always updated, no first-step special case, t unused)
 *   adamw: bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t) (double, glibc pow on the host side of
 *          both backends); decay = (R)(1 - lr*wd), step = (R)(lr / bc1), sbc2 = (R)sqrt(bc2);
 *          p = p * decay; m = (R)b1 * m + (R)(1 - b1) * g; v = (R)b2 * v + (R)(1 - b2) * (g * g);
 *          denom = (R)sqrt((double)v) / sbc2 + (R)eps; p = p - step * (m / denom)
 * Every product, sum, quotient is one correctly rounded rn_ operation (the host is compiled
 * with -ffp-contract=off); the scalars are computed on the host exactly as host_kern.h does. */
template <typename R>
__global__ void k_sgd(R *p, R *buf, const R *g, R lr, R mu, int use_wd, R wd, int64_t n) {
    CU_FOR_I(n) {
        R gi = use_wd ? rn_add(g[i], rn_mul(wd, p[i])) : g[i];
        R bi = rn_add(rn_mul(mu, buf[i]), gi);
        buf[i] = bi;
        p[i] = rn_sub(p[i], rn_mul(lr, bi));
    }
}
template <typename R>
dp_status cu_sgd_t(cu_ctx *ctx, R *param, R *buf, const R *grad, double lr, double mu, double wd, int64_t n) {
    k_sgd<R><<<cu_grid_1d(n, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(param, buf, grad, (R)lr, (R)mu, wd != 0, (R)wd, n);
    CU_CHECK_LAUNCH(k_sgd);
    return DP_OK;
}
template <typename R>
__global__ void k_adamw(R *p, R *m, R *v, const R *g, R decay, R b1, R omb1, R b2, R omb2, R step, R sbc2, R eps, int64_t n) {
    CU_FOR_I(n) {
        R gr = g[i];
        R pi = rn_mul(p[i], decay);
        R mi = rn_add(rn_mul(b1, m[i]), rn_mul(omb1, gr));
        R vi = rn_add(rn_mul(b2, v[i]), rn_mul(omb2, rn_mul(gr, gr)));
        m[i] = mi;
        v[i] = vi;
        R denom = rn_add(rn_div((R)sqrt((double)vi), sbc2), eps); /* double sqrt: IEEE, correctly rounded */
        p[i] = rn_sub(pi, rn_mul(step, rn_div(mi, denom)));
    }
}
/* the host's scalars: volatile stops the host compiler from contracting 1 - lr*wd */
/* the host's scalars: volatile stops the host compiler from contracting 1 - lr*wd */
template <typename R>
dp_status cu_adamw_t(cu_ctx *ctx, R *param, R *m, R *v, const R *grad, double lr, double b1, double b2, double eps,
                     double wd, double bc1, double bc2, int64_t n) {
    volatile double lrwd = lr * wd;
    const R decay = (R)(1.0 - lrwd), step = (R)(lr / bc1), sbc2 = (R)sqrt(bc2);
    k_adamw<R><<<cu_grid_1d(n, 1), CU_BLOCK, 0, cu_ctx_stream_(ctx)>>>(param, m, v, grad, decay, (R)b1, (R)(1.0 - b1), (R)b2,
                                                                      (R)(1.0 - b2), step, sbc2, (R)eps, n);
    CU_CHECK_LAUNCH(k_adamw);
    return DP_OK;
}

#define INST(R)                                                                                             \
    template dp_status cu_sgd_t<R>(cu_ctx *, R *, R *, const R *, double, double, double, int64_t);         \
    template dp_status cu_adamw_t<R>(cu_ctx *, R *, R *, R *, const R *, double, double, double, double, double, \
                                     double, double, int64_t);
CU_INST2(INST)

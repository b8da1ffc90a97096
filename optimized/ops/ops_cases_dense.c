/* optimized/ops/ops_cases_dense.c — harness cases of the dense operations: gemm,
 * add_bias, sum_rows, axpby, add, div_scalar (definitions: optimized/backend.h; bounds:
 * docs/tolerances.md "Operation harness"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "optimized/ops/ops.h"
#include "common/alloc.h"

/* ---- gemm ---- */
typedef struct {
    int ta, tb;
    int64_t M, N, K, batch, sA, sB, sC;
    double alpha, beta;
} gemm_p;

static dp_status gemm_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const gemm_p *p = c->params;
    return OPS_CALL(be, gemm, d[2], d[0], d[1], p->ta, p->tb, p->M, p->N, p->K, p->alpha, p->beta, p->batch, p->sA,
                    p->sB, p->sC);
}

static int64_t span(int64_t batch, int64_t stride, int64_t size) { return batch > 0 ? (batch - 1) * stride + size : 0; }

static dp_status gemm_one(opt_ops_h *h, gemm_p p, opt_ops_fill fa, opt_ops_fill fc, double scale) {
    opt_ops_case c;
    opt_ops_case_init(&c, h, OPT_OP_GEMM, "M=%lld N=%lld K=%lld ta=%d tb=%d alpha=%g beta=%g batch=%lld strides %lld/%lld/%lld%s",
                      (long long)p.M, (long long)p.N, (long long)p.K, p.ta, p.tb, p.alpha, p.beta, (long long)p.batch,
                      (long long)p.sA, (long long)p.sB, (long long)p.sC,
                      fa == OPT_FILL_SPECIAL ? " NaN/inf in A" : fa == OPT_FILL_TINY ? " tiny A" : scale > 1e3 ? " huge" : "");
    const double *A = opt_ops_buf_f(&c, "A", OPT_OPS_IN, span(p.batch, p.sA, p.M * p.K), fa, scale);
    const double *B = opt_ops_buf_f(&c, "B", OPT_OPS_IN, span(p.batch, p.sB, p.K * p.N), OPT_FILL_NORMAL, 1);
    double *C0 = opt_ops_buf_f(&c, "C", OPT_OPS_INOUT, span(p.batch, p.sC, p.M * p.N), fc, 1);
    c.invoke = gemm_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const opt_rd_env *e = &h->env;
    for (int64_t b = 0; b < p.batch; b++)
        for (int64_t i = 0; i < p.M; i++)
            for (int64_t j = 0; j < p.N; j++) {
                /* op(A)[i, k] and op(B)[k, j] with their strides along k */
                const double *a = A + b * p.sA + (p.ta ? i : i * p.K);
                const double *bb = B + b * p.sB + (p.tb ? j * p.K : j);
                opt_rd dot = opt_rd_dot(e, a, p.ta ? p.M : 1, bb, p.tb ? 1 : p.N, p.K);
                opt_rd r = opt_rd_mul(e, opt_rd_scalar(e, p.alpha), dot);
                int64_t ci = b * p.sC + i * p.N + j;
                if (p.beta != 0) r = opt_rd_add(e, r, opt_rd_mul(e, opt_rd_scalar(e, p.beta), opt_rd_x(C0[ci])));
                OPS_REF(&c, 2, ci) = r; /* beta = 0 overwrites C (NaN in C is not propagated) */
            }
    opt_ops_finish(&c);
    return DP_OK;
}

static dp_status case_gemm(opt_ops_h *h) {
    static const int64_t shapes[][3] = {{1, 1, 1}, {3, 5, 7}, {17, 9, 33}, {8, 16, 1}, {0, 3, 4}, {4, 0, 2}, {5, 3, 0}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                double beta = (ta + tb + (int)s) % 3 == 0 ? 0 : (ta + tb) % 2 ? 0.5 : 1;
                gemm_p p = {ta, tb, M, N, K, 1, M * K, K * N, M * N, (ta ^ tb) ? -0.75 : 1.0, beta};
                DP_TRY(gemm_one(h, p, OPT_FILL_NORMAL, beta == 0 ? OPT_FILL_POISON : OPT_FILL_NORMAL, 1));
            }
    /* strided batches: gaps between the batch entries of C must stay untouched; B broadcast (stride 0) */
    DP_TRY(gemm_one(h, (gemm_p){0, 1, 7, 5, 6, 3, 7 * 6 + 3, 0, 7 * 5 + 2, 1.0, 1.0}, OPT_FILL_NORMAL, OPT_FILL_NORMAL, 1));
    DP_TRY(gemm_one(h, (gemm_p){1, 0, 4, 9, 11, 4, 4 * 11, 11 * 9 + 1, 4 * 9 + 5, 2.0, 0.0}, OPT_FILL_NORMAL,
                    OPT_FILL_POISON, 1));
    /* edge values */
    DP_TRY(gemm_one(h, (gemm_p){0, 0, 6, 7, 9, 1, 54, 63, 42, 1.0, 0.0}, OPT_FILL_SPECIAL, OPT_FILL_POISON, 1));
    DP_TRY(gemm_one(h, (gemm_p){0, 1, 6, 7, 9, 1, 54, 63, 42, 1.0, 1.0}, OPT_FILL_ZERO, OPT_FILL_NORMAL, 1));
    DP_TRY(gemm_one(h, (gemm_p){1, 1, 5, 6, 13, 1, 65, 78, 30, 1.0, 0.0}, OPT_FILL_NORMAL, OPT_FILL_POISON, opt_ops_huge(h)));
    DP_TRY(gemm_one(h, (gemm_p){0, 0, 5, 6, 13, 1, 65, 78, 30, 1.0, 0.0}, OPT_FILL_TINY, OPT_FILL_POISON, 1));
    /* large enough to be split across threads (the determinism check's other thread count) */
    return gemm_one(h, (gemm_p){0, 1, 100, 260, 40, 1, 4000, 10400, 26000, 1.0, 0.0}, OPT_FILL_NORMAL, OPT_FILL_POISON, 1);
}

/* ---- element-wise and row operations ---- */
typedef struct { int64_t rows, n, groups, per; int acc; double a, b; } ew_p;

static dp_status add_bias_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const ew_p *p = c->params;
    return OPS_CALL(be, add_bias, d[0], d[1], p->rows, p->n);
}
static dp_status case_add_bias(opt_ops_h *h) {
    static const int64_t sz[][2] = {{1, 1}, {5, 7}, {33, 17}, {0, 4}, {3, 0}};
    for (size_t s = 0; s < sizeof sz / sizeof sz[0] + 1; s++) {
        int special = s == sizeof sz / sizeof sz[0];
        ew_p p = {special ? 4 : sz[s][0], special ? 9 : sz[s][1], 0, 0, 0, 0, 0};
        opt_ops_case c;
        opt_ops_case_init(&c, h, OPT_OP_ADD_BIAS, "rows=%lld n=%lld%s", (long long)p.rows, (long long)p.n,
                          special ? " NaN/inf" : "");
        const double *y = opt_ops_buf_f(&c, "y", OPT_OPS_INOUT, p.rows * p.n, special ? OPT_FILL_SPECIAL : OPT_FILL_NORMAL, 1);
        const double *bias = opt_ops_buf_f(&c, "bias", OPT_OPS_IN, p.n, special ? OPT_FILL_SPECIAL : OPT_FILL_NORMAL, 1);
        c.invoke = add_bias_inv;
        c.params = &p;
        DP_TRY(opt_ops_exec(&c));
        for (int64_t r = 0; r < p.rows; r++)
            for (int64_t j = 0; j < p.n; j++)
                OPS_REF(&c, 0, r * p.n + j) = opt_rd_add(&h->env, opt_rd_x(y[r * p.n + j]), opt_rd_x(bias[j]));
        opt_ops_finish(&c);
    }
    return DP_OK;
}

static dp_status sum_rows_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const ew_p *p = c->params;
    return OPS_CALL(be, sum_rows, d[0], d[1], p->acc, p->groups, p->per, p->n);
}
static dp_status case_sum_rows(opt_ops_h *h) {
    static const int64_t sz[][3] = {{1, 1, 1}, {3, 5, 7}, {2, 17, 9}, {4, 1, 6}, {0, 3, 2}, {3, 0, 4}, {5, 64, 33}};
    for (size_t s = 0; s < sizeof sz / sizeof sz[0]; s++)
        for (int acc = 0; acc < 2; acc++) {
            ew_p p = {0, sz[s][2], sz[s][0], sz[s][1], acc, 0, 0};
            int special = s == 2 && acc;
            opt_ops_case c;
            opt_ops_case_init(&c, h, OPT_OP_SUM_ROWS, "groups=%lld per=%lld n=%lld accumulate=%d%s", (long long)p.groups,
                              (long long)p.per, (long long)p.n, acc, special ? " NaN/inf" : "");
            const double *out = opt_ops_buf_f(&c, "out", OPT_OPS_INOUT, p.groups * p.n, acc ? OPT_FILL_NORMAL : OPT_FILL_POISON, 1);
            const double *x = opt_ops_buf_f(&c, "x", OPT_OPS_IN, p.groups * p.per * p.n,
                                            special ? OPT_FILL_SPECIAL : OPT_FILL_NORMAL, 1);
            c.invoke = sum_rows_inv;
            c.params = &p;
            DP_TRY(opt_ops_exec(&c));
            opt_rd *t = dp_malloc(sizeof(opt_rd) * (size_t)(p.per + 1));
            if (!t) return DP_ERR_NOMEM;
            for (int64_t g = 0; g < p.groups; g++)
                for (int64_t j = 0; j < p.n; j++) {
                    for (int64_t r = 0; r < p.per; r++) t[r] = opt_rd_x(x[(g * p.per + r) * p.n + j]);
                    OPS_REF(&c, 0, g * p.n + j) = acc ? opt_rd_acc(&h->env, opt_rd_x(out[g * p.n + j]), t, p.per)
                                                      : opt_rd_sum(&h->env, t, p.per);
                }
            dp_free(t);
            opt_ops_finish(&c);
        }
    return DP_OK;
}

/* y = f(a, b) element-wise over n: axpby, add, div_scalar */
typedef enum { EW_AXPBY, EW_ADD, EW_DIV } ew_kind;
typedef struct { ew_kind k; int64_t n; double a, b; } ew2_p;
static dp_status ew2_inv(const opt_ops_case *c, opt_backend *be, void *const *d) {
    const ew2_p *p = c->params;
    switch (p->k) {
    case EW_AXPBY: return OPS_CALL(be, axpby, d[0], d[1], p->a, p->b, p->n);
    case EW_ADD: return OPS_CALL(be, add, d[0], d[1], d[2], p->n);
    default: return OPS_CALL(be, div_scalar, d[0], d[1], p->a, p->n);
    }
}
static dp_status ew2_one(opt_ops_h *h, ew2_p p, opt_ops_fill fill, double scale) {
    static const opt_op ops[] = {OPT_OP_AXPBY, OPT_OP_ADD, OPT_OP_DIV_SCALAR};
    opt_ops_case c;
    opt_ops_case_init(&c, h, ops[p.k], "n=%lld a=%g b=%g%s", (long long)p.n, p.a, p.b,
                      fill == OPT_FILL_SPECIAL ? " NaN/inf" : fill == OPT_FILL_TINY ? " tiny" : scale > 1e3 ? " huge" : "");
    const double *y = opt_ops_buf_f(&c, "y", p.k == EW_AXPBY ? OPT_OPS_INOUT : OPT_OPS_OUT, p.n,
                                    p.k == EW_AXPBY ? OPT_FILL_NORMAL : OPT_FILL_POISON, 1);
    const double *x = opt_ops_buf_f(&c, "x", OPT_OPS_IN, p.n, fill, scale);
    const double *x2 = p.k == EW_ADD ? opt_ops_buf_f(&c, "b", OPT_OPS_IN, p.n, fill, scale) : NULL;
    c.invoke = ew2_inv;
    c.params = &p;
    DP_TRY(opt_ops_exec(&c));
    const opt_rd_env *e = &h->env;
    for (int64_t i = 0; i < p.n; i++) {
        opt_rd r;
        if (p.k == EW_AXPBY)
            r = p.b == 0 ? opt_rd_mul(e, opt_rd_scalar(e, p.a), opt_rd_x(x[i]))
                         : opt_rd_add(e, opt_rd_mul(e, opt_rd_scalar(e, p.a), opt_rd_x(x[i])),
                                      opt_rd_mul(e, opt_rd_scalar(e, p.b), opt_rd_x(y[i])));
        else if (p.k == EW_ADD) r = opt_rd_add(e, opt_rd_x(x[i]), opt_rd_x(x2[i]));
        else r = opt_rd_div(e, opt_rd_x(x[i]), opt_rd_scalar(e, p.a));
        OPS_REF(&c, 0, i) = r;
    }
    opt_ops_finish(&c);
    return DP_OK;
}
static dp_status ew2_cases(opt_ops_h *h, ew_kind k) {
    static const int64_t ns[] = {0, 1, 7, 4099};
    static const double ab[][2] = {{1.5, 0.25}, {-2.0, 0.0}, {0.1, -1.0}, {3.0, 1.0}};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) DP_TRY(ew2_one(h, (ew2_p){k, ns[i], ab[i][0], ab[i][1]}, OPT_FILL_NORMAL, 1));
    DP_TRY(ew2_one(h, (ew2_p){k, 33, 0.3, 0.5}, OPT_FILL_SPECIAL, 1));
    DP_TRY(ew2_one(h, (ew2_p){k, 33, 0.7, 0.5}, OPT_FILL_TINY, 1));
    return ew2_one(h, (ew2_p){k, 33, 1.25, 0.5}, OPT_FILL_NORMAL, opt_ops_huge(h));
}
static dp_status case_axpby(opt_ops_h *h) { return ew2_cases(h, EW_AXPBY); }
static dp_status case_add(opt_ops_h *h) { return ew2_cases(h, EW_ADD); }
static dp_status case_div_scalar(opt_ops_h *h) {
    DP_TRY(ew2_cases(h, EW_DIV));
    return ew2_one(h, (ew2_p){EW_DIV, 17, 6.4e2, 0}, OPT_FILL_NORMAL, 1); /* q N = 640: a true division */
}

const opt_ops_entry opt_ops_cases_dense[] = {
    {OPT_OP_GEMM, case_gemm}, {OPT_OP_ADD_BIAS, case_add_bias}, {OPT_OP_SUM_ROWS, case_sum_rows},
    {OPT_OP_AXPBY, case_axpby}, {OPT_OP_ADD, case_add}, {OPT_OP_DIV_SCALAR, case_div_scalar},
    {OPT_OP_COUNT, NULL},
};

/* optimized/ops/ops.h — the operation harness (`dpcert ops`, docs/engine.md "The operation
 * harness", per-op bounds in docs/tolerances.md "Operation harness").
 *
 * Every operation of OPT_BACKEND_OPS has a case function (a generator of sub-cases:
 * shapes, transposes, edge values) registered in one of the group tables below
 * (opt_ops_cases_*). A sub-case declares its buffers (inputs, outputs, in-outs; f
 * elements of the backend's dtype or int32), an invoke function that calls the operation
 * on device pointers, and, from the rounded host inputs, an independent double-precision
 * evaluation of the operation's definition (the comments of optimized/backend.h) in
 * midpoint-radius arithmetic (opt_rd): every output element gets a value v and a radius r
 * such that every implementation allowed by the backend's declared arithmetic returns a
 * value within r of v. The runner uploads, invokes (again for the determinism check),
 * downloads, checks the guard elements after every output, and compares.
 *
 * Names: opt_ops_ (harness), opt_rd_ (the arithmetic). */
#ifndef OPT_OPS_H
#define OPT_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "optimized/backend.h"
#include "optimized/backend_decl.h"

/* ---- midpoint-radius arithmetic (ops_rd.c; docs/tolerances.md "Operation harness") ---- */
typedef struct { double v, r; } opt_rd; /* |implementation - v| <= r */

typedef struct {
    double u;     /* per rounding: u_eff of the declaration + 2^-53 (the reference's own rounding) */
    double u_in;  /* rounding of GEMM-like operands before products (declared; 0 none) */
    double scal;  /* rounding of a double scalar to the dtype: 0 (f64) or u(dtype) */
    double libm;  /* 2 L (1 ulp <= 2u relative): relative error of one elementary function is libm * u */
    double eta;   /* half the smallest subnormal of the dtype: the absolute error of an underflowing product */
    double maxf;  /* the dtype's largest finite value */
} opt_rd_env;

opt_rd opt_rd_x(double x);                                  /* exact input */
opt_rd opt_rd_scalar(const opt_rd_env *e, double x);        /* a double scalar rounded to the dtype */
opt_rd opt_rd_in(const opt_rd_env *e, double x);            /* a GEMM operand (u_in rounding) */
opt_rd opt_rd_in_rd(const opt_rd_env *e, opt_rd a);         /* a computed GEMM operand (u_in rounding) */
opt_rd opt_rd_max(opt_rd a, opt_rd b);                      /* max (exact: radius max(r_a, r_b)) */
opt_rd opt_rd_add(const opt_rd_env *e, opt_rd a, opt_rd b);
opt_rd opt_rd_sub(const opt_rd_env *e, opt_rd a, opt_rd b);
opt_rd opt_rd_mul(const opt_rd_env *e, opt_rd a, opt_rd b);
opt_rd opt_rd_div(const opt_rd_env *e, opt_rd a, opt_rd b);
opt_rd opt_rd_neg(opt_rd a);
/* sum of n terms in any order and any tree: sum r_i + gamma_{n-1}(u) sum (|v_i| + r_i) */
opt_rd opt_rd_sum(const opt_rd_env *e, const opt_rd *t, int64_t n);
/* sum of n terms added to a start value (an accumulating output): n + 1 terms */
opt_rd opt_rd_acc(const opt_rd_env *e, opt_rd start, const opt_rd *t, int64_t n);
/* a monotone elementary function f at a (radius from the end points a.v -+ a.r, plus the
 * function's own error libm u |f| and eta) */
opt_rd opt_rd_mono(const opt_rd_env *e, double (*f)(double), opt_rd a);
opt_rd opt_rd_exp(const opt_rd_env *e, opt_rd a);
opt_rd opt_rd_log(const opt_rd_env *e, opt_rd a);
opt_rd opt_rd_sqrt(const opt_rd_env *e, opt_rd a);
opt_rd opt_rd_tanh(const opt_rd_env *e, opt_rd a);
opt_rd opt_rd_sin(const opt_rd_env *e, opt_rd a);         /* Lipschitz 1 */
opt_rd opt_rd_cos(const opt_rd_env *e, opt_rd a);
opt_rd opt_rd_sigmoid(const opt_rd_env *e, opt_rd a);     /* 1 / (1 + exp(-a)) */
opt_rd opt_rd_max_exact(const opt_rd *t, int64_t n);      /* a softmax shift: max of the v, radius 0 */
/* dot product of n pairs of exact inputs, any order: _dot in the GEMM-like operations
 * (each operand rounded at u_in first), _dot_plain in the others */
opt_rd opt_rd_dot(const opt_rd_env *e, const double *a, int64_t sa, const double *b, int64_t sb, int64_t n);
opt_rd opt_rd_dot_plain(const opt_rd_env *e, const double *a, int64_t sa, const double *b, int64_t sb, int64_t n);

/* ---- the harness ---- */
#define OPT_OPS_MAXBUF 12
#define OPT_OPS_GUARD 8 /* guard elements after every output buffer */

typedef enum { OPT_OPS_IN, OPT_OPS_OUT, OPT_OPS_INOUT } opt_ops_role;
/* value generators for opt_ops_buf_* (scaled Gaussian unless stated) */
typedef enum {
    OPT_FILL_NORMAL,   /* N(0, 1) * scale */
    OPT_FILL_POS,      /* |N(0, 1)| * scale + scale / 16 (positive) */
    OPT_FILL_ZERO,     /* 0 */
    OPT_FILL_POISON,   /* NaN (an output the operation must overwrite) */
    OPT_FILL_SPECIAL,  /* N(0,1) * scale with NaN, +inf, -inf, 0, -0 sprinkled */
    OPT_FILL_TINY,     /* N(0,1) * 2^(emin + 4) of the dtype: subnormal and tiny normals */
    OPT_FILL_UNIT      /* uniform in (-1, 1) * scale */
} opt_ops_fill;

typedef struct {
    const char *name;
    opt_ops_role role;
    int is_int;         /* int32 elements */
    int64_t n;
    double *host;       /* float values (rounded to the dtype): the inputs / initial contents */
    int32_t *ihost;     /* int32 values */
    unsigned char *got[3]; /* downloaded bytes of runs 0..2 (outputs), n + guard elements */
    double *val;        /* run 0's outputs as doubles */
    opt_rd *ref;        /* expected values (outputs): set by the case, else "unchanged" */
} opt_ops_buf;

struct opt_ops_h;
typedef struct opt_ops_case opt_ops_case;
typedef dp_status (*opt_ops_invoke_fn)(const opt_ops_case *c, opt_backend *be, void *const *dev);
struct opt_ops_case {
    struct opt_ops_h *h;
    opt_op op;
    char label[200];
    opt_ops_buf buf[OPT_OPS_MAXBUF];
    int nbuf;
    opt_ops_invoke_fn invoke;
    const void *params;
    dp_status expect;   /* the status the operation must return (DP_OK unless an error case, whose
                           outputs are then not specified: the status is the check) */
    int ran;            /* the runs happened (else: skipped, reason in skip) */
    int bad_status;     /* a run returned another status than expect */
    char skip[200];
};

typedef struct {
    int ncases, nskipped;
    int64_t nchecked, nunchecked; /* elements compared; elements whose bound may overflow (not compared) */
    double worst;                 /* largest fraction of a bound used */
    int failed;
    char detail[480];             /* the first failure, or the skip reason */
    char worst_case[320];
} opt_ops_result;

typedef struct opt_ops_h {
    opt_backend *be, *alt;      /* alt: the second backend of the determinism check (other thread count) or NULL */
    dp_dtype dtype;             /* the backend's dtype (F64 or F32) */
    dp_dtype vdtype;            /* the values' type: dtype, or BF16 / F16 (half values in f32 buffers) */
    opt_rd_env env;
    int det;                    /* declared determinism */
    int rank, size;             /* world */
    dp_stream rng;              /* the public TEST stream of --seed (inputs) */
    uint64_t draws;             /* its next element */
    int own_mem;                /* 1: buffers through the backend's memory ops; 0: host memory directly */
    opt_ops_result res[OPT_OP_COUNT];
} opt_ops_h;

typedef dp_status (*opt_ops_case_fn)(opt_ops_h *h);
typedef struct { opt_op op; opt_ops_case_fn fn; } opt_ops_entry;
/* the group tables (one per case file), terminated by {OPT_OP_COUNT, NULL} */
extern const opt_ops_entry opt_ops_cases_mem[], opt_ops_cases_dense[], opt_ops_cases_act[], opt_ops_cases_attn[],
    opt_ops_cases_dp[], opt_ops_cases_coll[];

/* Start a sub-case of op (label printf-style). */
void opt_ops_case_init(opt_ops_case *c, opt_ops_h *h, opt_op op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* Buffers: float (values generated and rounded to the dtype; returned host array) */
double *opt_ops_buf_f(opt_ops_case *c, const char *name, opt_ops_role role, int64_t n, opt_ops_fill fill, double scale);
int32_t *opt_ops_buf_i(opt_ops_case *c, const char *name, int64_t n);  /* int32 input, caller fills */
/* Round x to the harness's value type (dtype, or the half type). */
double opt_ops_round(const opt_ops_h *h, double x);
/* scale of the "huge" fills: 2^500 (f64), 2^55 (f32, bf16), 2^12 (f16): products of two
 * and sums of a few thousand stay finite in the dtype */
double opt_ops_huge(const opt_ops_h *h);
double opt_ops_draw_normal(opt_ops_h *h);
double opt_ops_draw_unit(opt_ops_h *h);                 /* (0, 1) */
uint64_t opt_ops_draw_below(opt_ops_h *h, uint64_t n);
/* Upload, invoke (runs 0, 1 and the alt backend per the declared determinism), download,
 * check guards and run-to-run bits. After it, buf[i].val holds run 0's outputs and
 * buf[i].ref is allocated (initialised "unchanged": the input values, radius 0). */
dp_status opt_ops_exec(opt_ops_case *c);
/* Compare every output with its ref, record in h->res[op], free the case. */
void opt_ops_finish(opt_ops_case *c);
/* Skip a case (a helper operation it needs is missing): recorded, never a PASS. */
void opt_ops_skip(opt_ops_case *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Record a failure of op that is not an element comparison (a status, a counter). */
void opt_ops_fail(opt_ops_h *h, opt_op op, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Record a passed scalar check of op (counts as one checked element). */
void opt_ops_pass(opt_ops_h *h, opt_op op);
int opt_ops_has(const opt_ops_h *h, opt_op op); /* the backend fills op (own or inherited) */
/* Device buffers outside the case machinery (collective and memory cases): allocate
 * nbytes and copy host bytes in (host may be NULL: zeros), copy back, free. */
dp_status opt_ops_dev_put(const opt_ops_h *h, void **dev, const void *host, size_t nbytes);
dp_status opt_ops_dev_get(const opt_ops_h *h, void *host, const void *dev, size_t nbytes);
void opt_ops_dev_free(const opt_ops_h *h, void *dev);
/* The operation name being run now (printed if the harness dies). */
extern const char *volatile opt_ops_current;

/* Element i of buffer b's ref (allocated by opt_ops_exec). */
#define OPS_REF(c, b, i) ((c)->buf[b].ref[i])
#define OPS_CALL(be, op, ...) ((be)->ops.op((be)->ctx, __VA_ARGS__))

#endif

/* conformance/compare/compare_int.h — internals of the comparison core shared by compare.c (the
 * element-wise comparison, results), compare_step.c (the stages of a step) and compare_dpzo.c. */
#ifndef CONF_COMPARE_INT_H
#define CONF_COMPARE_INT_H
#include "conformance/compare/compare.h"

/* Constants of one step's bounds (docs/tolerances.md "Notation"). */
typedef struct {
    double u;        /* u_cand + u_ref */
    double uc;       /* u_cand */
    double K, P;
    double gK;       /* gamma_K (mixed precision: gamma_K(u) + gamma_H(u_half)) */
    double H, gH;    /* mixed precision: half rounding points on a path, gamma_H(u_half); 0 otherwise */
    double L, uh;    /* mixed precision: params.* tensors of >= 2 dimensions, u_half; 0 otherwise */
    double rho;      /* relative norm bound */
    double bz;       /* |dz| bound of one standard draw (Box-Muller or Laplace) */
} conf_consts;

/* Per-element bounds kept during one step (clipped sums, noise, private gradients,
 * updated parameters) so that later stages propagate the earlier ones. */
enum { CONF_BS_CS = 0, CONF_BS_NOISE, CONF_BS_PG, CONF_BS_PA, CONF_BS_M1, CONF_BS_DM1, CONF_BS_M2, CONF_BS_DM2, CONF_BS_EN, CONF_BS_Z };
typedef struct { char name[160]; int kind; int64_t n; double *b; } conf_bstore_item;
typedef struct { conf_bstore_item *it; size_t n, cap; } conf_bstore;
double *conf_bstore_new(conf_bstore *s, const char *name, int kind, int64_t n);
const double *conf_bstore_get(const conf_bstore *s, const char *name, int kind, int64_t n);
void conf_bstore_free(conf_bstore *s);

/* A result row named prefix+name, nothing compared yet. */
void conf_tr_init(conf_tensor_result *t, const char *prefix, const char *name);
/* Same dtype-independent shape (ndim and extents). */
int conf_same_shape(const dp_tensor *a, const dp_tensor *b);
/* The tensor's values in f64 (dp_free); NULL when out of memory. */
double *conf_as_f64(const dp_tensor *t);
/* A FAIL "missing in the <side> export" / a SKIPPED or NOT_SUPPORTED row. */
dp_status conf_cmp_push_missing(conf_cmp_result *out, const char *prefix, const char *name, const char *side);
dp_status conf_cmp_push_skip(conf_cmp_result *out, const char *prefix, const char *name, conf_status st, const char *why);
/* Element-wise comparison of cand against ref under bound[] (NULL: exact); ref_vals overrides
 * the reference values (NULL: ref's). */
dp_status conf_cmp_elems(conf_cmp_result *out, const char *prefix, const char *name, const dp_tensor *ref,
                         const dp_tensor *cand, const double *ref_vals, const double *bound, double warn);
/* Mark the result INCOMPLETE (a check that could not run; never a pass by omission). */
void conf_cmp_mark_incomplete(conf_cmp_result *out, const char *prefix, const char *name, const char *why);
/* The first of the metadata keys (NULL-terminated) that holds a complete finite number. */
int conf_meta_num(const dp_tensor_set *s, double *v, const char *const *keys);
/* One step of ref against cand (compare_step.c): a candidate declaring another clip convention
 * is compared with the reference re-clipped under it; carry_in: the previous step's bounds
 * (NULL at the first), carry_out: this step's (NULL: not kept). */
dp_status conf_compare_step(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                            const conf_cmp_opts *o, const char *prefix, const conf_bstore *carry_in, conf_bstore *carry_out);
/* DP-ZO step (compare_dpzo.c; docs/tolerances.md "DP-ZO"). */
dp_status conf_compare_dpzo(conf_cmp_result *out, const dp_tensor_set *ref, const dp_tensor_set *cand,
                            const conf_cmp_opts *o, const char *prefix, const conf_consts *k, conf_bstore *bs);
#endif

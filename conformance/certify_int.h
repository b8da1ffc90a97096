/* conformance/certify_int.h — internals shared by certify.c and certify_eval.c. */
#ifndef CONF_CERTIFY_INT_H
#define CONF_CERTIFY_INT_H
#include <stdlib.h>

#include "common/candidate.h"
#include "conformance/certify.h"

/* Pooled standardized residuals z and pairs (a, b) for the independence tests. */
typedef struct {
    double *z; int64_t n, cap;
    double *pa, *pb; int64_t np, pcap;
} cert_pool;

static inline dp_status cert_pool_push(cert_pool *p, double x) {
    if (p->n == p->cap) {
        int64_t nc = p->cap ? 2 * p->cap : 4096;
        double *q = realloc(p->z, (size_t)nc * sizeof *q);
        if (!q) return dp_error(DP_ERR_NOMEM, "out of memory (residuals)");
        p->z = q;
        p->cap = nc;
    }
    p->z[p->n++] = x;
    return DP_OK;
}
static inline dp_status cert_pair_push(cert_pool *p, double a, double b) {
    if (p->np == p->pcap) {
        int64_t nc = p->pcap ? 2 * p->pcap : 4096;
        double *x = realloc(p->pa, (size_t)nc * sizeof *x);
        if (!x) return dp_error(DP_ERR_NOMEM, "out of memory (pairs)");
        p->pa = x;
        double *y = realloc(p->pb, (size_t)nc * sizeof *y);
        if (!y) return dp_error(DP_ERR_NOMEM, "out of memory (pairs)");
        p->pb = y;
        p->pcap = nc;
    }
    p->pa[p->np] = a;
    p->pb[p->np++] = b;
    return DP_OK;
}
static inline void cert_pool_free(cert_pool *p) { free(p->z); free(p->pa); free(p->pb); }

/* One step vector: deterministic checks per output, residuals pooled into `all`, coordinate
 * pairs into `coord`, repeat pairs into `rep`; *zs[k] = the standardized residuals of
 * repeat k (NULL when unreadable), *zn their count (for the across-steps pairs). */
dp_status cert_eval_step(cert_result *r, cert_pool *all, cert_pool *coord, cert_pool *rep, double ***zs, int64_t *zn,
                         const char *bundle, const char *name, const dp_tensor_set *v, const cert_opts *o);
dp_status cert_eval_sampling(cert_result *r, const char *bundle, const char *name, const dp_tensor_set *v,
                             const cert_opts *o);
/* Reads output `r` of vector `name` from the bundle: the stored status line, or the file
 * validated against the vector's expectations. res->outcome OK: *out holds it. */
dp_status cert_read_output(dp_cand_result *res, dp_tensor_set *out, const char *bundle, const char *name, int64_t r,
                           const dp_tensor_set *v);
#endif

/* conformance/certify/certify_figs.h — the data behind `certify`'s plots (docs/reports.md,
 * docs/certification.md "Reports"), gathered during evaluation: the histogram of the pooled
 * standardized noise residuals z (against the N(0, 1) density) and, per sampling vector,
 * the distribution of the batch sizes over every step and repeat (against Binomial(N, q)). */
#ifndef CONF_CERTIFY_FIGS_H
#define CONF_CERTIFY_FIGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"

/* residual histogram: CERT_ZHIST_BINS bins of equal width over [-CERT_ZHIST_R, CERT_ZHIST_R);
 * values outside are counted in below / above (never dropped silently) */
#define CERT_ZHIST_BINS 48
#define CERT_ZHIST_R 6.0

typedef struct {
    char vector[128];
    int64_t N, K;          /* examples, steps per repeat */
    double q;              /* the vector's Poisson rate */
    int64_t *count;        /* [N + 1]: steps whose batch had b examples, over every repeat */
    int64_t steps;         /* steps counted (K x readable repeats) */
} cert_batch_fig;

typedef struct {
    int64_t zbin[CERT_ZHIST_BINS], zbelow, zabove, zn;
    cert_batch_fig *batch;
    size_t nbatch, cap;
} cert_figs;

/* The pooled residuals (once, after every step vector). */
void cert_figs_residuals(cert_figs *g, const double *z, int64_t n);
/* One repeat's batch sizes sizes[K] of sampling vector `vector` (N examples, rate q). */
dp_status cert_figs_batches(cert_figs *g, const char *vector, const int64_t *sizes, int64_t K, int64_t N, double q);
void cert_figs_free(cert_figs *g);

#endif

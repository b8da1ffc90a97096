/* conformance/certify/certify_figs.c — the data behind `certify`'s plots (certify_figs.h),
 * gathered during evaluation: the histogram of the standardized residuals and the batch
 * sizes of each sampling vector. certify_html.c turns them into plot specifications. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "conformance/certify/certify_figs.h"

/* ---- data gathered during evaluation ---- */
void cert_figs_residuals(cert_figs *g, const double *z, int64_t n) {
    const double w = 2 * CERT_ZHIST_R / CERT_ZHIST_BINS;
    for (int64_t i = 0; i < n; i++) {
        if (!(z[i] >= -CERT_ZHIST_R)) g->zbelow++; /* (a non-finite z fails its own check first) */
        else if (z[i] >= CERT_ZHIST_R) g->zabove++;
        else {
            int b = (int)floor((z[i] + CERT_ZHIST_R) / w);
            g->zbin[b < CERT_ZHIST_BINS ? b : CERT_ZHIST_BINS - 1]++;
        }
    }
    g->zn += n;
}

dp_status cert_figs_batches(cert_figs *g, const char *vector, const int64_t *sizes, int64_t K, int64_t N, double q) {
    cert_batch_fig *b = NULL;
    for (size_t i = 0; i < g->nbatch && !b; i++)
        if (strcmp(g->batch[i].vector, vector) == 0) b = &g->batch[i];
    if (!b) {
        DP_TRY(DP_GROW(g->batch, g->cap, g->nbatch + 1, 4, "batch-size figures"));
        b = &g->batch[g->nbatch];
        memset(b, 0, sizeof *b);
        snprintf(b->vector, sizeof b->vector, "%s", vector);
        b->N = N;
        b->K = K;
        b->q = q;
        if (!(b->count = dp_calloc((size_t)N + 1, sizeof *b->count))) return DP_ERR_NOMEM;
        g->nbatch++;
    }
    for (int64_t s = 0; s < K; s++)
        if (sizes[s] >= 0 && sizes[s] <= N) b->count[sizes[s]]++;
    b->steps += K;
    return DP_OK;
}

void cert_figs_free(cert_figs *g) {
    for (size_t i = 0; i < g->nbatch; i++) dp_free(g->batch[i].count);
    dp_free(g->batch);
    memset(g, 0, sizeof *g);
}

/* attacks/audit_pool.c — the thread pool of the audits and MIA runs: nth workers over a
 * strided index space (worker t takes t, t + nth, ...), so what each index computes does not
 * depend on the thread count; the first error stops the others and is reported. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "attacks/audit.h"
#include "common/alloc.h"

double audit_now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void audit_worker_fail(audit_worker *w) {
    snprintf(w->msg, sizeof w->msg, "%s", dp_last_error());
    atomic_store(w->stop, 1);
}

dp_status audit_pool_run(void *(*fn)(void *), void *workers, size_t stride, int nth, double *seconds) {
    pthread_t *th = dp_calloc((size_t)nth, sizeof *th);
    if (!th) return DP_ERR_NOMEM;
    atomic_int stop = 0;
    int started = 0;
    double t0 = audit_now_s();
    for (int t = 0; t < nth; t++) {
        audit_worker *w = (audit_worker *)((char *)workers + (size_t)t * stride);
        w->tid = t;
        w->nth = nth;
        w->stop = &stop;
        w->st = DP_OK;
        w->msg[0] = 0;
    }
    for (int t = 0; t < nth; t++) {
        audit_worker *w = (audit_worker *)((char *)workers + (size_t)t * stride);
        if (nth == 1) { fn(w); break; }
        if (pthread_create(&th[t], NULL, fn, w) != 0) {
            w->st = dp_error(DP_ERR_INTERNAL, "cannot start worker thread %d", t);
            audit_worker_fail(w);
            break;
        }
        started = t + 1;
    }
    for (int t = 0; t < started && nth > 1; t++) pthread_join(th[t], NULL);
    if (seconds) *seconds = audit_now_s() - t0;
    dp_free(th);
    for (int t = 0; t < nth; t++) {
        audit_worker *w = (audit_worker *)((char *)workers + (size_t)t * stride);
        if (w->st != DP_OK) return dp_error(w->st, "%s", w->msg);
    }
    return DP_OK;
}

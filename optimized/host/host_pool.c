/* optimized/host/host_pool.c — persistent worker threads (host_pool.h). One job at a
 * time: the caller publishes it under the mutex and bumps a generation counter, the
 * workers wake on the condition variable, take chunks from an atomic counter, and the
 * last one to finish signals the caller. */
#include "optimized/host/host_pool.h"
#include "common/alloc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef struct {
    opt_host_pool *pool;
    int tid;
} pool_worker;

struct opt_host_pool {
    int nworkers;
    pthread_t *th;
    pool_worker *wk;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    uint64_t gen;
    int stop;
    /* the job */
    opt_pool_fn fn;
    void *arg;
    int64_t n, nchunks;
    int nt, pending;
    atomic_llong next;
};

static _Thread_local int pool_tid = -1; /* tid inside a running job, -1 outside */

static void pool_work(opt_host_pool *p, int tid) {
    pool_tid = tid;
    for (;;) {
        long long c = atomic_fetch_add(&p->next, 1);
        if (c >= p->nchunks) break;
        int64_t lo = p->n * c / p->nchunks, hi = p->n * (c + 1) / p->nchunks;
        if (lo < hi) p->fn(p->arg, lo, hi, tid);
    }
    pool_tid = -1;
}

static void *pool_main(void *arg) {
    pool_worker *w = arg;
    opt_host_pool *p = w->pool;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->gen == seen && !p->stop) pthread_cond_wait(&p->start, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        if (w->tid >= p->nt) continue;
        pthread_mutex_unlock(&p->mu);
        pool_work(p, w->tid);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

dp_status opt_host_pool_create(opt_host_pool **out, int threads) {
    *out = NULL;
    opt_host_pool *p = dp_calloc(1, sizeof *p);
    int nw = threads > 1 ? threads - 1 : 0;
    if (!p) return dp_error(DP_ERR_NOMEM, "thread pool: out of memory");
    p->th = dp_calloc((size_t)nw + 1, sizeof *p->th);
    p->wk = dp_calloc((size_t)nw + 1, sizeof *p->wk);
    if (!p->th || !p->wk) {
        dp_free(p->th); dp_free(p->wk); dp_free(p);
        return dp_error(DP_ERR_NOMEM, "thread pool: out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    for (int i = 0; i < nw; i++) {
        p->wk[i].pool = p;
        p->wk[i].tid = i + 1;
        if (pthread_create(&p->th[i], NULL, pool_main, &p->wk[i]) != 0) break;
        p->nworkers++;
    }
    *out = p;
    return DP_OK;
}

void opt_host_pool_destroy(opt_host_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    dp_free(p->th); dp_free(p->wk); dp_free(p);
}

void opt_host_pool_run(opt_host_pool *p, opt_pool_fn fn, void *arg, int64_t n, int nt) {
    if (n <= 0) return;
    if (pool_tid >= 0) { fn(arg, 0, n, pool_tid); return; } /* nested: stay on this thread */
    if (nt > p->nworkers + 1) nt = p->nworkers + 1;
    if (nt > n) nt = (int)n;
    if (nt <= 1) { pool_tid = 0; fn(arg, 0, n, 0); pool_tid = -1; return; }
    pthread_mutex_lock(&p->mu);
    p->fn = fn; p->arg = arg; p->n = n; p->nt = nt;
    p->nchunks = n < 4 * (int64_t)nt ? n : 4 * (int64_t)nt;
    atomic_store(&p->next, 0);
    p->pending = nt - 1;
    p->gen++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    pool_work(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

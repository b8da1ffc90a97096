/* optimized/host/host_pool.h — the host backend's persistent thread pool: threads - 1
 * workers started once with the backend and woken per parallel kernel call (no thread
 * is created per call). A call splits items [0, n) into contiguous chunks taken by the
 * calling thread (tid 0) and the workers (tid 1..nt-1) in whatever order they come; the
 * kernels' items are independent outputs, so which thread runs a chunk never changes a
 * result bit (docs/engine.md §2). */
#ifndef DP_OPT_HOST_POOL_H
#define DP_OPT_HOST_POOL_H

#include <stdint.h>

#include "common/status.h"

typedef void (*opt_pool_fn)(void *arg, int64_t lo, int64_t hi, int tid);
typedef struct opt_host_pool opt_host_pool;

/* A pool for `threads` threads in all (the caller included): threads - 1 workers. If a
 * worker cannot be started the pool keeps those that did (the caller runs the rest). */
dp_status opt_host_pool_create(opt_host_pool **out, int threads);
void opt_host_pool_destroy(opt_host_pool *p);
/* Run fn over [0, n) on at most nt threads (tid < nt) and return when all is done.
 * Called from inside a running item (nested), it runs fn(arg, 0, n, tid) on the
 * calling thread with that thread's tid. */
void opt_host_pool_run(opt_host_pool *p, opt_pool_fn fn, void *arg, int64_t n, int nt);

#endif

/* optimized/opt_poll.h — the collective timeout's wait, shared by the backends (docs/engine.md
 * "Collective timeout"): poll a completion test, sleeping 10 us doubling to 1 ms between
 * tests, until it reports completion or `timeout` seconds have passed. The host backend
 * tests MPI requests, the CUDA backend CUDA events (cudaEventQuery) and MPI requests. */
#ifndef OPT_POLL_H
#define OPT_POLL_H

#include "common/status.h"

/* test(arg, &err): 1 complete, 0 not yet, -1 failed (err: its dp_status, message set).
 * Returns DP_OK once complete; the test's error; or DP_ERR_DEVICE "collective 'WHAT' timed out on rank RANK after T s
 * (--collective-timeout TIMEOUT): another rank died or stalled". */
dp_status opt_poll_until(int (*test)(void *arg, dp_status *err), void *arg, double timeout, const char *what, int rank);

#endif

/* optimized/opt_poll.c — the collective timeout's polling wait (optimized/opt_poll.h). */
#include "optimized/opt_poll.h"

#include <time.h>

static double opt_poll_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

dp_status opt_poll_until(int (*test)(void *arg, dp_status *err), void *arg, double timeout, const char *what, int rank) {
    double t0 = opt_poll_now();
    long nap_ns = 0;
    for (;;) {
        dp_status err = DP_OK;
        int r = test(arg, &err);
        if (r < 0) return err != DP_OK ? err : DP_ERR_INTERNAL;
        if (r > 0) return DP_OK;
        double waited = opt_poll_now() - t0;
        if (waited > timeout)
            /* the operation stays pending (it may still write its buffers): the caller fails
             * and the process ends (MPI_Abort in the train command) */
            return dp_error(DP_ERR_DEVICE,
                            "collective '%s' timed out on rank %d after %.3g s (--collective-timeout %g): another "
                            "rank died or stalled",
                            what, rank, waited, timeout);
        if (waited > 1e-3) { /* back off to at most 1 ms between tests */
            nap_ns = nap_ns ? (nap_ns * 2 > 1000000 ? 1000000 : nap_ns * 2) : 10000;
            struct timespec ts = {0, nap_ns};
            nanosleep(&ts, NULL);
        }
    }
}

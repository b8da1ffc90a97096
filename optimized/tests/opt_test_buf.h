/* optimized/tests/opt_test_buf.h — backend buffers from and to host doubles, for the
 * engine's test programs (static helpers; include after optimized/backend.h). */
#ifndef OPT_TEST_BUF_H
#define OPT_TEST_BUF_H

#include <stdlib.h>

#include "optimized/backend.h"

/* a device buffer of be's dtype (n + 1 elements, zeroed) holding h[0..n) when h != NULL */
static void *up(opt_backend *be, const double *h, int64_t n) {
    void *d = NULL;
    be->ops.alloc(be->ctx, &d, opt_backend_esize(be) * (size_t)(n + 1));
    if (h) be->ops.upload_f64(be->ctx, d, h, n);
    return d;
}
/* its first n elements as malloc'd host doubles */
static double *down(opt_backend *be, const void *d, int64_t n) {
    double *h = malloc(sizeof(double) * (size_t)(n + 1));
    be->ops.download_f64(be->ctx, h, d, n);
    return h;
}

#endif

/* optimized/opt_sampling.c — the engine's Poisson sampler (docs/dpsgd.md step 1,
 * docs/dpzo.md "RNG streams"; the same convention for DP-SGD and DP-ZO). */
#include <inttypes.h>

#include "optimized/opt_spec.h"

enum { OPT_POISSON_BLOCK = 512 }; /* uniforms drawn per Philox fill */

dp_status opt_poisson(int64_t *idx, int64_t *b, dp_noise_key key, int64_t step, double q, int64_t n) {
    if (step < 1 || step > (int64_t)UINT32_MAX)
        return dp_error(DP_ERR_INVALID, "Poisson sampling: step %" PRId64 " outside [1, 2^32 - 1]", step);
    if (n < 0) return dp_error(DP_ERR_INVALID, "Poisson sampling: dataset size %" PRId64 " < 0", n);
    dp_stream s;
    DP_TRY(dp_stream_secret(&s, key, DP_PURPOSE_SAMPLING, (uint32_t)step, 0));
    double u[OPT_POISSON_BLOCK];
    int64_t count = 0;
    for (int64_t base = 0; base < n; base += OPT_POISSON_BLOCK) {
        int64_t len = n - base < OPT_POISSON_BLOCK ? n - base : OPT_POISSON_BLOCK;
        dp_rng_fill_uniform(u, &s, (uint64_t)base, (size_t)len); /* elements base .. base + len - 1 */
        for (int64_t k = 0; k < len; k++) {
            idx[count] = base + k;       /* written unconditionally, kept iff u < q (strict) */
            count += u[k] < q;
        }
    }
    *b = count;
    return DP_OK;
}

/* optimized/strategies/shard_replicated.c — plain data parallelism: every rank holds the
 * layout's whole vector and optimizer state; one all-reduce of [S | Z] (docs/engine.md
 * "Data-parallel ranks", noise modes single and shares). zero1 reduces the same way. */
#include <math.h>

#include "optimized/shard.h"

dp_status opt_shard_replicated_reduce(opt_dpsgd *s, int64_t step);

dp_status opt_shard_replicated_reduce(opt_dpsgd *s, int64_t step) {
    opt_backend *be = s->be;
    const int R = s->par.dp, rank = s->par.dp_rank;
    const int shares = s->o.noise_mode == OPT_NOISE_SHARES;
    /* single: rank 0 draws the reference's noise of every position, the others add zeros;
     * shares: no rank draws the reference's lanes (unless a test-only hook widens it) */
    int64_t lo = 0, hi = !shares && rank == 0 ? s->nvec : 0;
    s->hooks->noise_span(s, &lo, &hi);
    dp_status st = opt_shard_noise(s, step, lo, hi);
    if (st == DP_OK && shares && hi <= lo) {
        /* rank r: N(0, sigma^2 C^2 / R) from lanes p | (r + 1) << 16 (not the reference's draw) */
        if (rank + 1 >= 256) return dp_error(DP_ERR_INVALID, "--noise-mode shares supports at most 255 ranks");
        double std = s->cfg.sigma * s->groups.c_total / sqrt((double)R);
        for (int p = 0; st == DP_OK && p < s->om.np && s->cfg.sigma > 0; p++) {
            uint32_t lane = (uint32_t)p | ((uint32_t)(rank + 1) << 16);
            int64_t u, e, n;
            for (int64_t k = 0; st == DP_OK && s->layout->run(s, p, 0, s->vlen[p], k, &u, &e, &n); k++)
                st = OPT_CALL(be, noise_add, opt_dev_at(s, s->flat, s->zoff + s->voff[p] + u), s->cfg.key, (uint32_t)step,
                              lane, std, (uint64_t)e, n);
        }
    }
    if (st != DP_OK) return st;
    if (s->zoff == s->nvec) /* [S | Z] contiguous: one all-reduce */
        return OPT_CALL(be, allreduce_sum, s->par.dp_group, s->flat, 2 * s->nvec, NULL);
    DP_TRY(OPT_CALL(be, allreduce_sum, s->par.dp_group, s->flat, s->nvec, NULL));
    return OPT_CALL(be, allreduce_sum, s->par.dp_group, opt_dev_at(s, s->flat, s->zoff), s->nvec, NULL);
}

const opt_shard_strategy opt_shard_replicated = {"replicated", 0, 0, opt_shard_replicated_reduce,
                                                 opt_shard_range_update, opt_shard_range_gather_sums,
                                                 opt_shard_range_gather_pgrad, opt_shard_range_setup,
                                                 opt_shard_range_teardown};

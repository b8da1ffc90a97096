/* optimized/strategies/shard_zero2.c — DP-ZeRO stage 2 (docs/zero.md): also gradients.
 * The per-rank clipped sums are reduce-scattered (rank order), so each rank holds its
 * partition [lo, hi) of S; the noise of that partition is drawn there, at the global
 * (p, e) positions, exactly once across the group. */
#include "optimized/shard.h"

static dp_status zero2_reduce(opt_dpsgd *s, int64_t step) {
    int64_t lo = s->lo, hi = s->hi;
    s->hooks->noise_span(s, &lo, &hi);
    double std = s->cfg.sigma * s->groups.c_total;
    dp_status st = DP_OK;
    /* noise this rank draws outside its partition (none when correct) is a contribution
     * to the other ranks' partitions: it goes through the reduce-scatter with S */
    if (s->cfg.sigma > 0 && lo < s->lo) st = s->hooks->noise(s, s->flat, 0, step, lo, s->lo < hi ? s->lo : hi, std);
    if (st == DP_OK && s->cfg.sigma > 0 && hi > s->hi)
        st = s->hooks->noise(s, s->flat, 0, step, lo > s->hi ? lo : s->hi, hi, std);
    if (st == DP_OK) st = opt_shard_reduce_scatter_sums(s);
    int64_t a = lo > s->lo ? lo : s->lo, b = hi < s->hi ? hi : s->hi;
    if (st == DP_OK && a < b) st = opt_shard_noise(s, step, a, b);
    return st;
}

const opt_shard_strategy opt_shard_zero2 = {"zero2", 1, 1, zero2_reduce, opt_shard_range_update,
                                            opt_shard_range_gather_sums, opt_shard_range_gather_pgrad, opt_shard_range_setup,
                                            opt_shard_range_teardown};

/* optimized/strategies/shard_zero1.c — DP-ZeRO stage 1 (docs/zero.md): optimizer states
 * (and the private gradient) partitioned over the DP group; the summed gradient is
 * all-reduced as in the replicated run; each rank updates its partition; parameters are
 * all-gathered after the step. */
#include "optimized/shard.h"

dp_status opt_shard_replicated_reduce(opt_dpsgd *s, int64_t step);

const opt_shard_strategy opt_shard_zero1 = {"zero1", 1, 0, opt_shard_replicated_reduce, opt_shard_range_update,
                                            opt_shard_range_gather_sums, opt_shard_range_gather_pgrad, opt_shard_range_setup,
                                            opt_shard_range_teardown};

/* optimized/strategy.h — the engine's strategies as function tables, each registered by
 * one line of a list (docs/engine.md "Strategies"):
 *   - norm strategies (how per-example norms and clipped sums are computed):
 *     OPT_NORM_STRATEGIES, one file optimized/strategies/norm_<name>.c each;
 *   - sharding strategies (what each rank of the DP group holds and how the summed
 *     gradient and the parameters move): OPT_SHARDINGS, optimized/strategies/shard_<name>.c;
 *   - test-only injected bugs, wrappers around the correct step hooks: OPT_BUGS,
 *     optimized/strategies/bugs.c.
 * Adding a strategy = its file + one line in the list here. */
#ifndef OPT_STRATEGY_H
#define OPT_STRATEGY_H

#include <stdint.h>

/* X(ID, symbol, "cli-name") — index = opt_strategy */
#define OPT_NORM_STRATEGIES(X)                                                                     \
    X(GRAD_SAMPLE, grad_sample, "grad-sample") X(GHOST, ghost, "ghost")                           \
    X(MIXED_GHOST, mixed_ghost, "mixed-ghost") X(BOOK_KEEPING, book_keeping, "book-keeping")     \
    X(FUSED, fused, "fused")

/* X(ID, symbol, "cli-name") — index = opt_sharding */
#define OPT_SHARDINGS(X)                                                                            \
    X(REPLICATED, replicated, "replicated") X(ZERO1, zero1, "zero1") X(ZERO2, zero2, "zero2")       \
    X(ZERO3, zero3, "zero3")

/* X(ID, "cli-name") — index = opt_bug (test-only negative controls, docs/engine.md) */
#define OPT_BUGS(X)                                                                                 \
    X(NONE, "none") X(CLIP_AFTER_SUM, "clip-after-sum") X(NOISE_EVERY_RANK, "noise-every-rank")   \
    X(REALIZED_DIVISOR, "realized-batch-divisor") X(ZERO_NOISE_SAME_SEED, "zero-noise-same-seed") \
    X(ZERO_WRONG_SLICE, "zero-wrong-slice") X(ZERO_STALE_PARAMS, "zero-stale-params")                 \
    X(CP_DROP_PARTIAL, "cp-drop-partial") X(CP_LOCAL_NORMS, "cp-local-norms")                         \
    X(CP_FULL_NOISE, "cp-full-noise") X(MASTER_HALF, "master-half") X(CKPT_KEEP_FORWARD, "ckpt-keep-forward") \
    X(LS_UNSCALE_AFTER_CLIP, "ls-unscale-after-clip") X(LS_NO_UNSCALE, "ls-no-unscale")         \
    X(CP_ZERO2_LOCAL_NOISE, "cp-zero2-local-noise")

/* How a parameter's norms and clipped sum are computed in a chunk. */
typedef enum {
    OPT_LM_DIRECT = 0, /* instantiated per-example rows (biases, gains, embeddings) */
    OPT_LM_INST,       /* linear, per-example gradients instantiated (G_b^T A_b) */
    OPT_LM_GHOST,      /* linear, ghost norm; clipped sum by bk_gemm or the second pass */
    OPT_LM_FUSEDNORM,  /* linear, streaming norm then bk_gemm */
    OPT_LM_FUSED1      /* linear, FlashDP single pass (norm, clip, accumulate) */
} opt_layer_mode;

struct opt_dp_options;

typedef struct {
    const char *name;
    /* Mode of a linear parameter: T positions, d inputs, p outputs; alone = 1 when it is
     * its clipping group's only linear tensor. */
    opt_layer_mode (*linear_mode)(const struct opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone);
    /* 1: with flat clipping, the clipped sum of every layer comes from the weighted second
     * backward pass (ghost clipping); 0: per-layer accumulation. */
    int second_pass;
    /* 1: the strategy chooses per layer by --mixed-rule (the option is refused otherwise) */
    int uses_mixed_rule;
} opt_norm_strategy;

#define OPT_NORM_DECL_(ID, sym, name) extern const opt_norm_strategy opt_norm_##sym;
OPT_NORM_STRATEGIES(OPT_NORM_DECL_)
#undef OPT_NORM_DECL_
/* The table, index = opt_strategy. */
extern const opt_norm_strategy *const opt_norm_strategies[];

/* The mixed rule (docs/engine.md): 1 = ghost norm for a layer (T, d, p). */
int opt_mixed_pick_ghost(int rule, int64_t T, int64_t d, int64_t p);

#endif

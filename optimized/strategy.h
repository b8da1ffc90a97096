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

/* The norm strategies' ids and CLI names, generated from the list (index = opt_strategy);
 * OPT_COST_<ID> are the same ids under the cost model's names (optimized/opt_cost.h). */
typedef enum {
#define OPT_STRAT_ID_(ID, sym, name) OPT_STRAT_##ID, OPT_COST_##ID = OPT_STRAT_##ID,
    OPT_NORM_STRATEGIES(OPT_STRAT_ID_)
#undef OPT_STRAT_ID_
    OPT_STRAT_COUNT
} opt_strategy;
extern const char *const opt_strategy_names[]; /* NULL-terminated, index = opt_strategy */

/* --mixed-rule, the one rule a strategy that chooses per layer applies (docs/engine.md
 * section 4), and the cost model's rule (optimized/opt_cost.h). */
typedef enum { OPT_MIXED_FLOP = 0, OPT_MIXED_MEMORY = 1 } opt_mixed_rule;

/* How a parameter's norms and clipped sum are computed in a chunk. */
typedef enum {
    OPT_LM_DIRECT = 0, /* instantiated per-example rows (biases, gains, embeddings) */
    OPT_LM_INST,       /* linear, per-example gradients instantiated (G_b^T A_b) */
    OPT_LM_GHOST,      /* linear, ghost norm; clipped sum by bk_gemm or the second pass */
    OPT_LM_FUSEDNORM,  /* linear, streaming norm then bk_gemm */
    OPT_LM_FUSED1      /* linear, FlashDP single pass (norm, clip, accumulate) */
} opt_layer_mode;

struct opt_dp_options;

/* The shape the memory estimate of a run sees (optimized/opt_mem.c, docs/memory.md): one
 * chunk of bc examples of T positions, P parameters, nlin linear layers, act elements of
 * activations and tape per example (opt_mem_example). */
typedef struct {
    double P, T, nlin, bc, act;
} opt_mem_shape;

/* One norm strategy, everything that depends on it (one file each,
 * optimized/strategies/norm_<sym>.c; the engine, the memory estimate and the cost model
 * read only this table). */
typedef struct {
    const char *name;
    /* one line: what it holds per example (the cost model's tables) */
    const char *what;
    /* Mode of a linear parameter: T positions, d inputs, p outputs; alone = 1 when it is
     * its clipping group's only linear tensor. */
    opt_layer_mode (*linear_mode)(const struct opt_dp_options *o, int64_t T, int64_t d, int64_t p, int alone);
    /* 1: with flat clipping, the clipped sum of every layer comes from the weighted second
     * backward pass (ghost clipping); 0: per-layer accumulation. */
    int second_pass;
    /* 1: the strategy chooses per layer by --mixed-rule (the option is refused otherwise) */
    int uses_mixed_rule;
    /* The engine's per-example elements of the strategy in one chunk (docs/memory.md; the
     * upper estimate opt_mem_dpsgd adds to the activations). */
    double (*mem_per_example)(const opt_mem_shape *m);
    /* The cost model's per-example buffers of one linear layer [p, d] for b examples of t
     * positions, e bytes per element (docs/models-of-cost.md): *persistent bytes held for
     * the whole step, *transient bytes alive for that layer only. */
    void (*cost_layer)(double *persistent, double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                       opt_mixed_rule rule);
} opt_norm_strategy;

#define OPT_NORM_DECL_(ID, sym, name) extern const opt_norm_strategy opt_norm_##sym;
OPT_NORM_STRATEGIES(OPT_NORM_DECL_)
#undef OPT_NORM_DECL_
/* The table, index = opt_strategy. */
extern const opt_norm_strategy *const opt_norm_strategies[];

/* The mixed rule (docs/engine.md): 1 = ghost norm for a layer (T, d, p); the engine's
 * choice and the cost model's (opt_cost_mixed_ghost). */
int opt_mixed_pick_ghost(int rule, int64_t T, int64_t d, int64_t p);
/* The per-layer transient of the strategies that choose per layer (mixed-ghost,
 * book-keeping): b examples' Gram matrices or instantiated gradients, by the rule. */
void opt_mixed_cost_transient(double *transient, double b, int64_t t, int64_t p, int64_t d, double e,
                              opt_mixed_rule rule);
/* Two T x T Gram matrices, the ghost norm's per-example elements of one layer. */
static inline double opt_ghost_gram_elems(double T) { return 2 * T * T; }

#endif

/* optimized/dpsgd.h — DP-SGD on the engine: the five strategies, clipping groups,
 * noise, data-parallel ranks and micro-batches (docs/engine.md). Each strategy gives
 * the reference's result (reference/dpsgd.h) up to rounding:
 *   grad-sample   per-example gradients instantiated (batched GEMM over examples),
 *                 norms and clipped sums from them;
 *   ghost         norms from Gram matrices (Li et al.), clipped sum by a second
 *                 backward pass with per-example loss weights c_b (flat clipping; per-
 *                 layer/group clipping uses the book-keeping GEMM instead);
 *   mixed-ghost   per linear layer the cheaper of ghost / instantiation (--mixed-rule
 *                 flop: ghost iff T < pd/(p+d); memory: ghost iff 2T^2 <= pd), clipped
 *                 sum as ghost;
 *   book-keeping  mixed norms and one reweighted GEMM per layer (no second backward);
 *   fused         FlashDP-style streaming per-example blocks: norm, clip and accumulate
 *                 in one pass per layer when the group has one linear tensor; otherwise
 *                 a streaming norm pass then the reweighted GEMM. */
#ifndef OPT_DPSGD_H
#define OPT_DPSGD_H

#include "optimized/engine.h"
#include "reference/dpsgd.h"

typedef enum {
    OPT_STRAT_GRAD_SAMPLE = 0, OPT_STRAT_GHOST, OPT_STRAT_MIXED_GHOST, OPT_STRAT_BOOK_KEEPING, OPT_STRAT_FUSED,
    OPT_STRAT_COUNT
} opt_strategy;
typedef enum { OPT_MIXED_FLOP = 0, OPT_MIXED_MEMORY = 1 } opt_mixed_rule;
typedef enum { OPT_NOISE_SINGLE = 0, OPT_NOISE_SHARES = 1 } opt_noise_mode;
/* Test-only deliberate bugs (docs/engine.md "Injected bugs"): never use for training. */
typedef enum {
    OPT_BUG_NONE = 0, OPT_BUG_CLIP_AFTER_SUM, OPT_BUG_NOISE_EVERY_RANK, OPT_BUG_REALIZED_DIVISOR
} opt_bug;

extern const char *const opt_strategy_names[];   /* NULL-terminated, index = opt_strategy */
extern const char *const opt_mixed_rule_names[];
extern const char *const opt_noise_mode_names[];
extern const char *const opt_bug_names[];        /* "none", "clip-after-sum", ... */

typedef struct {
    opt_strategy strategy;
    opt_mixed_rule mixed_rule;
    opt_noise_mode noise_mode;
    opt_bug bug;
    int keep_per_sample;   /* 1: fill out->grad with per-sample gradients (exports) */
} opt_dp_options;

typedef struct {
    opt_backend *be;
    opt_model om;
    ref_dpsgd_config cfg;
    ref_clip_groups groups;
    opt_dp_options o;
    int64_t total;         /* parameters in all */
    int64_t *off;          /* [np] offset of parameter p in the flat buffers */
    void *flat;            /* device [2 * total]: clipped sums | noise (all-reduced together) */
    void *pgrad;           /* device [total] private gradient */
    void *m1, *m2;         /* device [total] optimizer state */
    int64_t t;             /* optimizer steps taken */
} opt_dpsgd;

/* m: the initial model (copied to the device). Validates cfg (ref_dpsgd_config_check) and
 * resolves the clipping groups exactly as the reference. */
dp_status opt_dpsgd_init(opt_dpsgd *s, opt_backend *be, const ref_dpsgd_config *cfg, const opt_dp_options *o,
                         const ref_model *m);
void opt_dpsgd_free(opt_dpsgd *s);

/* One logical step (1-based), every rank calling it. On return `out` (freed and
 * refilled; rank 0 holds the whole batch's per-example arrays in global order, other
 * ranks their own share only) holds what the reference's step_out holds, and the
 * device parameters are updated. */
dp_status opt_dpsgd_step(ref_dpsgd_step_out *out, opt_dpsgd *s, const ref_dataset *d, int64_t step);
/* The engine's check after every update (docs/engine.md "Non-finite training"): DP_OK
 * unless an element of after's parameters is non-finite where before's is finite
 * (before = the parameters before the step; NULL: any non-finite element), else
 * DP_ERR_INVALID naming the step and the parameter tensor. (opt_dpsgd_step itself fails
 * when the private gradient is not finite.) */
dp_status opt_check_update_finite(const ref_model *after, const ref_model *before, int64_t step);

/* Rank r's share [lo, hi) of a batch of b examples over R ranks: lo = floor(b r / R). */
void opt_rank_share(int64_t *lo, int64_t *hi, int64_t b, int rank, int size);

#endif

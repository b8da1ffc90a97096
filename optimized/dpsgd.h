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

#include <stdio.h>

#include "optimized/engine.h"
#include "optimized/opt_spec.h"
#include "optimized/parallel.h"
#include "optimized/strategy.h"
#include "common/spec_dpsgd.h"

typedef enum {
#define OPT_SHARD_ID_(ID, sym, name) OPT_SHARD_##ID,
    OPT_SHARDINGS(OPT_SHARD_ID_)
#undef OPT_SHARD_ID_
    OPT_SHARD_COUNT
} opt_sharding;
typedef enum { OPT_NOISE_SINGLE = 0, OPT_NOISE_SHARES = 1 } opt_noise_mode;
/* Test-only deliberate bugs (docs/engine.md "Injected bugs"): never use for training. */
typedef enum {
#define OPT_BUG_ID_(ID, name) OPT_BUG_##ID,
    OPT_BUGS(OPT_BUG_ID_)
#undef OPT_BUG_ID_
    OPT_BUG_COUNT
} opt_bug;

extern const char *const opt_sharding_names[];   /* NULL-terminated, index = opt_sharding */
extern const char *const opt_mixed_rule_names[];
extern const char *const opt_noise_mode_names[];
extern const char *const opt_bug_names[];        /* "none", "clip-after-sum", ... */
extern const char *const opt_cp_attention_names[]; /* "allgather", "ring" */
extern const char *const opt_cp_pattern_names[];   /* "input", "output" */
extern const char *const opt_cp_overlap_names[];   /* "on", "off" */
extern const char *const opt_checkpoint_names[];   /* "none", "block" */

/* --loss-scale (docs/precision.md "Loss scaling"): none (all-zero), static:S (steps
 * 1-2-3-4*-5-6: loss x S, clipping at S C, clipped sum / S before the noise), dynamic
 * (the same with S adapted: x 2 after K clean steps, / 2 and the step skipped when a
 * per-example gradient overflows — a data-dependent release the losscale check FAILs). */
typedef enum { OPT_LS_NONE = 0, OPT_LS_STATIC = 1, OPT_LS_DYNAMIC = 2 } opt_ls_mode;
typedef struct {
    opt_ls_mode mode;
    double S;  /* static: the scale; dynamic: the initial scale (powers of two) */
    int64_t K; /* dynamic: growth interval in steps */
} opt_loss_scale;
/* "none" | "static:S" | "dynamic[:S0[:K]]" (S, S0 positive powers of two, dp_parse_pow2) */
dp_status opt_loss_scale_parse(opt_loss_scale *out, const char *s);
/* "none", "static:S" or "dynamic:S0:K" into buf (the export's metadata "loss_scale") */
void opt_ls_describe(char *buf, size_t n, const opt_loss_scale *ls);

/* All-zero = grad-sample, replicated, the DP group = the world. */
typedef struct opt_dp_options {
    opt_strategy strategy;
    opt_mixed_rule mixed_rule;
    opt_noise_mode noise_mode;
    opt_bug bug;
    int keep_per_sample;   /* 1: fill out->grad with per-sample gradients (exports) */
    int no_step_vectors;   /* 1: leave out->clipped_sum, noise, private_grad NULL (no host copies of the
                              step's P-vectors; train without --export; not under --cp or a test-only
                              bug); the private gradient is still checked for finiteness */
    opt_sharding sharding; /* --sharding (docs/zero.md) */
    int dp, cp;            /* --dp N --cp M layout (0: dp = world size / cp, cp = 1) */
    int cp_ring;           /* --cp-attention: 1 ring, 0 allgather (docs/longshield.md) */
    opt_prec prec;         /* --precision (docs/precision.md); f64 with an f64 backend, else f32 or half */
    int cp_path;           /* 1: the context-parallel path (--cp M > 1, or --cp 1 with a --cp-* option) */
    int cp_output;         /* --cp-pattern: 1 output-stationary, 0 input-stationary */
    int cp_no_overlap;     /* --cp-overlap off: each reduce-scatter waited as soon as it is posted */
    int checkpoint;        /* --checkpoint block: 1 (docs/longshield.md "Activation checkpointing") */
    opt_loss_scale ls;     /* --loss-scale (none) */
} opt_dp_options;

struct opt_shard_strategy;
struct opt_step_hooks;

typedef struct {
    opt_backend *be;
    opt_model om;
    dp_dpsgd_config cfg;
    dp_clip_groups groups;
    opt_dp_options o;
    const opt_norm_strategy *norm;          /* o.strategy's table */
    const struct opt_shard_strategy *shard; /* o.sharding's table */
    const struct opt_layout *layout;        /* what the gradient vector holds: opt_layout_full, or opt_layout_cp */
    void *layout_state;                     /* the layout's own state (CP: opt_cp_state) */
    const struct opt_step_hooks *hooks;     /* the step's hooks (o.bug's wrapper, or the correct ones) */
    opt_parallel par;                       /* process groups; DP collectives run on par.dp_group */
    int64_t total;         /* parameters in all */
    int64_t *off;          /* [np] offset of parameter p in tensor order (host outputs) */
    int64_t *voff, *vlen;  /* [np] parameter p's segment of the layout's vector (full: off, numel) */
    int64_t nvec;          /* the vector's length (full: total; CP: the packed slices L) */
    int sums_ranged;       /* 1: S and Z are gathered by DP ranges (opt_layout.sums_in_ranges) */
    int64_t chunk;         /* shard length: ceil(nvec / N) (replicated: nvec) */
    int64_t lo, hi;        /* this rank's shard [lo, hi) of the vector positions (replicated: [0, nvec)) */
    void *flat;            /* device: clipped sums S [N chunk] | noise Z (replicated, zero1: [N chunk];
                              zero2: [chunk], the partition's) */
    int64_t zoff;          /* offset of Z in flat (N * chunk; replicated: total) */
    int64_t zlo;           /* global position of Z's element 0 (zero2: lo; else 0) */
    void *pgrad;           /* device [chunk] private gradient of positions [lo, hi) */
    void *m1, *m2;         /* device [chunk] optimizer state of positions [lo, hi) (m2: adamw only) */
    int64_t t;             /* optimizer steps taken */
    void *shard_state;     /* the sharding's own state (zero3), or NULL */
    void *half_state;      /* bf16/fp16 with a range sharding: the half parameters (strategies/half_params.c) */
    void *master;          /* bf16/fp16: device [chunk] f32 master weights, laid out as pgrad (docs/precision.md); else NULL */
    opt_prec_stats pstats; /* bf16/fp16: half-rounding counts of the last step (the loss-scaling seam) */
    double ls_S;           /* the loss scale of the next step (1: none) */
    int64_t ls_good;       /* dynamic: steps since the last overflow or growth */
    double ls_used;        /* the loss scale of the last step */
    int ls_skipped;        /* 1: the last step was skipped (dynamic, overflow) */
    double ls_max;         /* the largest S whose S C (S gamma) is finite in the backend's type */
    int64_t out_bytes;     /* host bytes of the last step's out vectors, in the ledger (host_buffers) until
                              the next step or opt_dpsgd_free */
} opt_dpsgd;

/* m: the initial model (copied to the device). Validates cfg (opt_dpsgd_config_check) and
 * resolves the clipping groups exactly as the reference. */
dp_status opt_dpsgd_init(opt_dpsgd *s, opt_backend *be, const dp_dpsgd_config *cfg, const opt_dp_options *o,
                         const dp_model *m);
void opt_dpsgd_free(opt_dpsgd *s);

/* One logical step (1-based), every rank calling it. On return `out` (freed and
 * refilled; rank 0 holds the whole batch's per-example arrays in global order, other
 * ranks their own share only) holds what the reference's step_out holds, and the
 * device parameters are updated. */
dp_status opt_dpsgd_step(dp_dpsgd_step_out *out, opt_dpsgd *s, const dp_dataset *d, int64_t step);
/* The engine's check after every update (docs/engine.md "Non-finite training"): DP_OK
 * unless an element of after's parameters is non-finite where before's is finite
 * (before = the parameters before the step; NULL: any non-finite element), else
 * DP_ERR_INVALID naming the step and the parameter tensor. (opt_dpsgd_step itself fails
 * when the private gradient is not finite.) */
dp_status opt_check_update_finite(const dp_model *after, const dp_model *before, int64_t step);

/* host[p] [numel] = the parameters as trained: the f32 master weights under bf16/fp16
 * (gathered over the DP group), else the device parameters. Collective. */
dp_status opt_dpsgd_get_params(opt_dpsgd *s, double *const *host);

/* The layouts --precision bf16|fp16 supports (f32 backend, no --cp) and the fp16 range
 * of m's parameters at load (|w| <= 65504, else DP_ERR_INVALID naming the tensor). */
dp_status opt_prec_check(const opt_backend *be, const opt_dp_options *o, const dp_model *m);
/* Under bf16/fp16: every mlp input |x| of d within the half type's range, else
 * DP_ERR_INVALID naming src (the --data file or "the generated dataset") and the example. */
dp_status opt_prec_check_data(const opt_dp_options *o, const dp_dataset *d, const char *src);
/* This rank's overlap of the CP reduce-scatters with the backward since the last call
 * (docs/longshield.md "Overlap"): hidden = sum over posted groups of (wait start - post),
 * total = sum of (wait end - post), seconds; both 0 without --cp M > 1. Resets them. */
void opt_dpsgd_comm_overlap(opt_dpsgd *s, double *hidden, double *total);
/* Under context parallelism, one line per parameter: its slice orientation and every CP
 * rank's rows or columns (docs/longshield.md "Slice geometry"), e.g.
 * "cp slice layers.0.mlp.down [8, 12]: columns [0, 6) [6, 12)"; nothing otherwise. */
void opt_cp_describe(FILE *f, const opt_dpsgd *s);

/* Rank r's share [lo, hi) of a batch of b examples over R ranks: lo = floor(b r / R). */
void opt_rank_share(int64_t *lo, int64_t *hi, int64_t b, int rank, int size);

#endif

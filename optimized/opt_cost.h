/* optimized/opt_cost.h — analytic memory and communication models of DP training
 * (docs/models-of-cost.md gives every formula and its derivation).
 *
 * All sizes are bytes (double: exact for integers below 2^53) or element counts
 * (int64_t). Nothing here allocates or runs a model: these are the formulas that
 * `dpcert reproduce` evaluates at the papers' sizes and that the validation test
 * compares with the engine's memory ledger and collective byte counters. */
#ifndef OPT_COST_H
#define OPT_COST_H

#include <stdint.h>

#include "common/status.h"
#include "optimized/strategy.h"

/* A Llama-style decoder (grouped-query attention, SwiGLU MLP, RMSNorm). */
typedef struct {
    const char *name;
    int64_t vocab, dim, layers, heads, kv_heads, ffn;
    int tied; /* lm_head shares tok_emb */
} opt_cost_llama;

/* The real configurations of the papers' models (config.json of each release). */
extern const opt_cost_llama OPT_COST_LLAMA32_1B, OPT_COST_LLAMA32_3B, OPT_COST_LLAMA31_8B;

dp_status opt_cost_llama_check(const opt_cost_llama *m);
int64_t opt_cost_llama_params(const opt_cost_llama *m);     /* Psi, all trainable */
int64_t opt_cost_llama_block_params(const opt_cost_llama *m); /* one transformer block */

/* One linear layer y = x W^T, W [p, d], used on T positions per example. */
typedef struct { int64_t p, d; } opt_cost_linear;
/* The linear layers of the model in canonical order (7 per block, then lm_head, which
 * is present also when tied). Writes at most `cap`; returns the count. */
int opt_cost_llama_linears(opt_cost_linear *out, const opt_cost_llama *m, int cap);

/* ---- model states: parameters, gradients, master weights, optimizer states ---- */
typedef struct {
    int param_bytes;  /* bytes per working parameter: 8 f64, 4 f32, 2 bf16/f16 */
    int grad_bytes;   /* bytes per gradient element */
    int master_bytes; /* bytes per master-weight element; 0 = no separate master copy */
    int state_bytes;  /* bytes per optimizer-state element */
    int n_states;     /* optimizer states per parameter: 2 AdamW, 1 momentum, 0 SGD */
} opt_cost_dtypes;

extern const opt_cost_dtypes OPT_COST_MIXED_ADAM; /* bf16 params/grads, f32 master + 2 states */
extern const opt_cost_dtypes OPT_COST_F32_ADAM;   /* f32 everything, no master copy */

typedef struct { double params, grads, master, optim, total; } opt_cost_states;

/* Elements of a flat buffer of n elements that rank r of N holds: contiguous shards of
 * ceil(n/N) elements, the last ones shorter (possibly empty). N = 0 means infinitely
 * many ranks (0 elements). */
int64_t opt_cost_shard_len(int64_t n, int64_t n_ranks, int64_t rank);

/* Per-rank bytes of the model states under ZeRO stage 0 (plain data parallel), 1
 * (optimizer states + master sharded), 2 (+ gradients), 3 (+ parameters). */
dp_status opt_cost_model_states(opt_cost_states *out, int64_t n_params, const opt_cost_dtypes *dt, int zero_stage,
                                int64_t n_ranks, int64_t rank);
/* The same per parameter in the ZeRO paper's units (bytes per Psi, ranks -> exact ratio),
 * e.g. 16 for stage 0 with mixed Adam, 4 + 12/N for stage 1. */
double opt_cost_states_per_param(const opt_cost_dtypes *dt, int zero_stage, double n_ranks);

/* ---- activations ---- */
typedef struct {
    int act_bytes;       /* bytes per stored activation element */
    int checkpoint;      /* 1: block-level activation checkpointing */
    int attn_probs;      /* 1: attention probabilities stored (no flash attention) */
    int logits_extra;    /* extra bytes per logit element (f32 upcast + f32 logit gradient = 8) */
} opt_cost_act;

/* Peak activation bytes of one micro-batch (B examples of T positions) held at the
 * start of the backward pass: per block, per token, the saved tensors of
 * docs/models-of-cost.md §3; with checkpointing the block inputs plus one recomputed
 * block. */
double opt_cost_llama_activations(const opt_cost_llama *m, const opt_cost_act *a, int64_t B, int64_t T);
double opt_cost_llama_block_act_per_token(const opt_cost_llama *m, const opt_cost_act *a, int64_t T);

/* ---- per-example buffers of each clipping strategy ----
 * The strategies are the engine's norm strategies (optimized/strategy.h
 * OPT_NORM_STRATEGIES, one descriptor each, which carries its cost per layer): the ids
 * OPT_COST_<ID> and the names are that list's, the mixed rule is the engine's. */
typedef opt_strategy opt_cost_strategy;
#define OPT_COST_N_STRATEGIES OPT_STRAT_COUNT
const char *opt_cost_strategy_name(opt_cost_strategy s);
const char *opt_cost_strategy_what(opt_cost_strategy s);
int opt_cost_strategy_parse(opt_cost_strategy *out, const char *name); /* 0 unknown */

typedef opt_mixed_rule opt_cost_rule;
#define OPT_COST_RULE_FLOP OPT_MIXED_FLOP
#define OPT_COST_RULE_MEMORY OPT_MIXED_MEMORY
/* Mixed-ghost choice for one layer: 1 = ghost (the engine's rule, opt_mixed_pick_ghost). */
int opt_cost_mixed_ghost(const opt_cost_linear *l, int64_t T, opt_cost_rule rule);

typedef struct {
    double persistent; /* held for the whole step (instantiated grads, book-kept G) */
    double transient;  /* largest buffer alive for one layer at a time */
    double norms;      /* per-example squared norms: B x n_groups x 8 */
    double total;      /* persistent + transient + norms */
} opt_cost_perex;

/* Per-example buffers for `n` linear layers, B examples of T positions, `elem_bytes`
 * per gradient element, `n_groups` clipping groups. */
dp_status opt_cost_per_example(opt_cost_perex *out, opt_cost_strategy s, opt_cost_rule rule,
                               const opt_cost_linear *lin, int n, int64_t B, int64_t T, int elem_bytes,
                               int64_t n_groups);

/* ---- collectives: bytes one rank sends (ring algorithms) and payloads ---- */
#define OPT_COST_COLLECTIVES(X)        \
    X(OPT_COST_ALL_REDUCE, "all-reduce") \
    X(OPT_COST_REDUCE_SCATTER, "reduce-scatter") \
    X(OPT_COST_ALL_GATHER, "all-gather") \
    X(OPT_COST_ALL_TO_ALL, "all-to-all") \
    X(OPT_COST_BROADCAST, "broadcast")
typedef enum {
#define OPT_COST_CENUM_(id, name) id,
    OPT_COST_COLLECTIVES(OPT_COST_CENUM_)
#undef OPT_COST_CENUM_
    OPT_COST_N_COLLECTIVES
} opt_cost_coll;
const char *opt_cost_coll_name(opt_cost_coll c);
/* Bytes one rank sends for a collective over `bytes` (the full, unsharded buffer). */
double opt_cost_coll_sent(opt_cost_coll c, double bytes, int64_t n_ranks);

/* Payload bytes per DP-SGD step and rank, per collective kind: ZeRO stage 0 one
 * all-reduce of the gradient (+ noise shares), stages 1-2 reduce-scatter of the
 * gradient + all-gather of the parameters, stage 3 two all-gathers + reduce-scatter. */
dp_status opt_cost_step_collectives(double out[OPT_COST_N_COLLECTIVES], int64_t n_params, int grad_bytes,
                                    int param_bytes, int zero_stage, int noise_shares, int64_t n_ranks);

/* ---- context parallelism (LongShield §3.2; the engine's --cp M, docs/longshield.md).
 * The paper's patterns with ring algorithms: bytes one rank sends per linear layer
 * [p, d], per micro-batch of B examples, T positions split over c ranks. ---- */
double opt_cost_cp_input_stationary(const opt_cost_linear *l, int64_t B, int elem_bytes, int64_t c);
double opt_cost_cp_output_stationary(const opt_cost_linear *l, int64_t B, int64_t T, int elem_bytes, int64_t c);

/* ---- the dpcert engine's own layout (docs/models-of-cost.md §8; the sharding of
 * docs/zero.md): one dtype of `e` bytes, no master copy, gradient buffers = the [S | Z]
 * reduction buffer + the private gradient, ZeRO-3 partitions per tensor. `numel` lists the
 * parameter tensors in canonical order (docs/models.md). ---- */
/* Tensor sizes of the engine's models; return the count (at most cap written). bwd_reads
 * (may be NULL): 1 for a tensor the backward pass reads (mlp: the weights of layers >= 1;
 * llama: every tensor but an untied tok_emb), which zero3 gathers a second time. */
int opt_cost_engine_mlp_numel(int64_t *out, unsigned char *bwd_reads, int cap, int64_t in, const int64_t *hidden,
                              int n_hidden, int64_t classes);
int opt_cost_engine_llama_numel(int64_t *out, unsigned char *bwd_reads, int cap, int64_t vocab, int64_t dim,
                                int64_t layers, int64_t ffn, int tied);
/* P = sum numel, c = ceil(P / N) (zero1/2 shard), C = sum ceil(numel_p / N) (zero3 packed). */
typedef struct { int64_t P, c, C; } opt_cost_parts;
void opt_cost_engine_parts(opt_cost_parts *out, const int64_t *numel, int n, int64_t n_ranks);
/* Model-state peaks per rank over a whole run (`master` is 0; under zero3 the parameters
 * peak at P + C elements: the full model is loaded once before the partition is kept). */
dp_status opt_cost_engine_states(opt_cost_states *out, const int64_t *numel, int n, int elem_bytes, int n_states,
                                 int zero_stage, int64_t n_ranks);
/* Bytes one rank sends per step with the host backend's algorithms (every rank sends its
 * piece to each of the N - 1 others), without exports: the all-reduce of the sums, the
 * reduce-scatter, the all-gathers (parameters; the private gradient, for the engine's
 * finiteness check; zero3: every tensor before each forward, the tensors the backward
 * reads before each backward, and params_after), `passes` the micro-batch chunks per
 * step (with --export the clipped sum and the noise are gathered too). Indexed by
 * OPT_COST_ALL_REDUCE, _REDUCE_SCATTER, _ALL_GATHER. */
dp_status opt_cost_engine_step_sent(double out[OPT_COST_N_COLLECTIVES], const int64_t *numel,
                                    const unsigned char *bwd_reads, int n, int elem_bytes, int zero_stage,
                                    int64_t n_ranks, int64_t passes);

/* Activation bytes of one engine tape (one forward + backward of B llama examples of T
 * positions, docs/models-of-cost.md §8): the forward state, the backward buffers, the
 * per-example rows of the direct parameters, the token buffers; `second_pass` adds
 * ghost clipping's weighted backward; `walk_empty` = 1 when an empty chunk still walks
 * the layers (zero3). */
double opt_cost_engine_llama_tape(int64_t B, int64_t T, int64_t vocab, int64_t dim, int64_t layers, int64_t heads,
                                  int64_t ffn, int elem_bytes, int second_pass, int walk_empty);

/* Bytes CP rank 1 of M sends in one step of the engine's `--cp M` (docs/longshield.md §6,
 * host algorithms: n elements to a group of M cost n e (M - 1)), one DP rank, one chunk
 * of b examples, all-gather attention, no export, for the engine's llama (H_kv = H,
 * untied) of vocabulary V, width D, L layers, MLP width F, with F > D and V >= D (which
 * fixes the output pattern's orientations: `down` column-sliced, every other linear
 * parameter row-sliced). output_stationary 0: --cp-pattern input. Indexed
 * OPT_COST_REDUCE_SCATTER (per-example gradient slices), _ALL_GATHER (attention inputs
 * and output gradients, gathered layer inputs or output gradients of the output pattern,
 * parameters and the three step outputs), _ALL_TO_ALL (the output pattern's exchanged
 * columns); the rest 0. */
dp_status opt_cost_engine_cp_sent(double out[OPT_COST_N_COLLECTIVES], int64_t V, int64_t D, int64_t L, int64_t F,
                                  int64_t b, int64_t T, int64_t M, int output_stationary, int elem_bytes);

/* ---- the engine's fused strategy (docs/models-of-cost.md §4b) ---- */
/* Examples whose per-example [p, d] blocks the CUDA backend's fused kernel holds at once
 * (cu_fused_chunk of optimized/cuda/cu_plan.h: a 1 GiB budget of f32 blocks, the same
 * byte budget at f64): floor(2^30 / (e p d)) clamped to [1, B]. */
int64_t opt_cost_cuda_fused_chunk(int64_t B, int64_t p, int64_t d, int elem_bytes);

typedef struct {
    double blocks;      /* per-example [p, d] blocks the backend holds at once (its scratch,
                           not in the ledger), the largest over the layers */
    double tape_rows;   /* per-example gradient rows the tape keeps (ledger `activations`):
                           every direct parameter's [B, numel] and the embedding's [B, V D] */
    double per_example; /* ledger `per_example`: a tied embedding/head instantiated [B, V D] */
    double workspace;   /* ledger `workspace`: squared norms and clip factors, 2 (G B + 1) */
    double total;
} opt_cost_fused;

/* What the engine's `--strategy fused` allocates for per-sample clipping on top of a
 * non-private step: `lin` the linear layers, `direct` the numel of every parameter whose
 * per-example gradient the backward forms directly (norm gains, biases, a position
 * table), `emb_numel` the token embedding (V D; tied: also the head), B examples in one
 * chunk, G clipping groups each holding two or more linear layers (the two-pass path,
 * fused_sqnorm then bk_gemm), `e` bytes an element. threads 0: the CUDA backend's chunk
 * rule (opt_cost_cuda_fused_chunk); k >= 1: the host backend's fused_sqnorm, one block of
 * p d + 1 elements per thread. */
dp_status opt_cost_engine_fused(opt_cost_fused *out, const opt_cost_linear *lin, int n_lin, const int64_t *direct,
                                int n_direct, int64_t emb_numel, int tied, int64_t B, int64_t n_groups, int elem_bytes,
                                int64_t threads);

/* ---- floating-point operations (2 per multiply-add; DP-ZeRO Table 2) ---- */
/* One pass of the linear layers over B examples of T positions: 2 B T sum p d (the
 * forward; the output gradients and the parameter gradients cost the same each). */
double opt_cost_linear_flops(const opt_cost_linear *lin, int n, int64_t B, int64_t T);
/* Per-sample clipping on top of the standard step (6 B T sum p d) with book-keeping:
 * footnote7 = 0: per layer the cheaper of the ghost norm 2 B T^2 (p + d) and
 * instantiation 2 B T p d (the engine's `flop` rule); footnote7 = 1: DP-ZeRO's
 * footnote 7, 2 B T^2 (p + d) where 2 T^2 < p d and nothing elsewhere. */
double opt_cost_dp_clip_flops(const opt_cost_linear *lin, int n, int64_t B, int64_t T, int footnote7);

/* Peak activation bytes of a forward pass without a backward (inference, DP-ZO's
 * perturbed forwards): one block's tensors of §3 and the head of B examples alive at a
 * time, nothing kept across blocks: B T (act_block + act_head). */
double opt_cost_llama_forward_act(const opt_cost_llama *m, const opt_cost_act *a, int64_t B, int64_t T);

/* ---- whole-step peak for one rank (the sums the reproduce targets use) ---- */
typedef struct {
    int zero_stage;        /* 0..3 */
    int64_t n_ranks;       /* data-parallel ranks; 0 = infinitely many */
    int64_t cp;            /* context-parallel degree (1 = none) */
    int cp_shard_grads;    /* LongShield-V2: per-example gradients sharded over cp */
    opt_cost_strategy strategy;
    opt_cost_rule rule;
    int dp;                /* 0: non-private (no per-example buffers) */
    opt_cost_dtypes dt;
    opt_cost_act act;
} opt_cost_setup;

typedef struct { double states, activations, per_example, gathered, total; } opt_cost_peak;
dp_status opt_cost_llama_peak(opt_cost_peak *out, const opt_cost_llama *m, const opt_cost_setup *s, int64_t B,
                              int64_t T);
/* Largest power-of-two T (2 <= T <= 2^24) whose peak fits `capacity` bytes; 0 if none. */
int64_t opt_cost_llama_max_T(const opt_cost_llama *m, const opt_cost_setup *s, int64_t B, double capacity);

#endif

/* optimized/engine.h — the optimized engine: the reference models (reference/model.h)
 * run batched on a backend, with a "tape" that keeps what every DP strategy needs
 * (docs/engine.md).
 *
 * Forward/backward over a batch of B examples (rows = B*T, T = 1 for the mlp):
 *   - every linear parameter W [p, d] (y = x W^T) records its input activations
 *     A [B, T, d] and output gradients G [B, T, p], so per-example gradients are
 *     G_b^T A_b (never formed unless a strategy asks);
 *   - every other parameter (mlp biases, RMSNorm gains, the token embedding) has its
 *     per-example gradient instantiated [B, numel] ("direct"); the tied lm_head/tok_emb
 *     has both (linear use + direct embedding use).
 * The second, "summed" backward pass (ghost clipping's reweighted backward) runs the
 * same code with per-example loss weights and accumulates summed parameter gradients. */
#ifndef OPT_ENGINE_H
#define OPT_ENGINE_H

#include <stdint.h>

#include "optimized/arena.h"
#include "optimized/backend.h"
#include "optimized/precision.h"
#include "common/spec_model.h"

struct opt_tape_s;


typedef enum { OPT_SRC_DIRECT = 0, OPT_SRC_LINEAR = 1, OPT_SRC_BOTH = 2 } opt_src_kind;

typedef struct opt_model {
    opt_backend *be;
    dp_model_config cfg;
    int np;                   /* parameters, canonical order of reference/model.c */
    char (*name)[DP_MAX_NAME];
    int64_t *numel;
    int64_t (*shape)[2];      /* [p][0..1] (shape[1] = 0 for vectors) */
    void **w;                 /* device parameters, be->dtype */
    opt_src_kind *src;        /* per parameter */
    int64_t T;                /* positions per example: 1 (mlp) or seq (llama) */
    /* the positions [t0, t0 + Tl) of every example this rank runs the passes on: [0, T)
     * unless a CP layout shards the sequence (cp below, docs/longshield.md) */
    int64_t t0, Tl;
    /* NULL: every parameter resident in w. Else (zero3) w[p] is valid only between
     * acquire(p) and release(p); the batched passes acquire each layer's parameters just
     * before its forward and its backward, prefetch the next layer's, and release them
     * right after (docs/zero.md). */
    const struct opt_param_fetch *fetch;
    /* NULL: every position of an example on this rank. Else (the CP layout,
     * optimized/strategies/layout_cp.c, llama only) the rank's sequence shard and its CP
     * group, which the CP attention implementations exchange over. */
    const struct opt_cp *cp;
    /* The llama's attention, chosen at model init (the seam below): opt_attn_local, or
     * under context parallelism opt_attn_cp_allgather / opt_attn_cp_ring. */
    const struct opt_attn *attn;
    /* --precision (docs/precision.md): bf16/fp16 round the linear layers' inputs, outputs
     * and output gradients and the per-example gradients held in memory to the half type
     * (counted in *pstats when not NULL); f64/f32 round nothing. Set by the caller after
     * opt_model_create (0 = f64, which the f64 backend implies). */
    opt_prec prec;
    opt_prec_stats *pstats;
    /* NULL, or called by the tape backward (opt_forward_backward) as soon as the tape
     * entries of parameters [first, first + n) are final, in backward order (llama: the
     * final norm, an untied lm_head, then layers L-1 .. 0, then the token embedding), so
     * their per-example communication overlaps the rest of the backward
     * (docs/longshield.md "Overlap"). */
    const struct opt_tape_hook *tape_hook;
    /* --checkpoint block (docs/longshield.md "Activation checkpointing"): 1 = a llama
     * block keeps only its input in the forward and is recomputed in the backward, its
     * tape entries valid only inside tape_hook (required). block_release is called on the
     * arena of a block's first-forward activations before it is freed (a seam of the step
     * hooks, optimized/shard.h: opt_block_release_none, or a test-only bug that moves them
     * into retained, freed with the model). */
    int checkpoint;
    dp_status (*block_release)(struct opt_model *om, opt_arena *blk);
    opt_arena retained;
    double loss_scale;        /* the tape pass backpropagates S x the loss (0 or 1: none; --loss-scale) */
} opt_model;

typedef struct opt_tape_hook {
    void *ctx;
    dp_status (*ready)(void *ctx, const struct opt_tape_s *tp, int first, int n);
} opt_tape_hook;

/* The sequence shard of a CP rank (docs/longshield.md "Sequence sharding"). */
typedef struct opt_cp {
    const opt_group *g;       /* the CP group (size M, this rank's position r) */
    int M, r;
    int64_t T;                /* positions per example (global) */
    int64_t t0, Tl;           /* this rank's shard [t0, t0 + Tl) */
    int64_t Tmax;             /* the longest shard: ceil(T / M) */
    int ring;                 /* 1: --cp-attention ring, 0: allgather */
} opt_cp;

/* Shard of CP rank r: [floor(T r / M), floor(T (r + 1) / M)). */
void opt_cp_shard(int64_t *t0, int64_t *Tl, int64_t T, int M, int r);

typedef struct opt_param_fetch {
    void *ctx;
    /* Make w[p] valid (prefetch = 0: complete, waiting for a started gather), or only
     * start its gather (prefetch = 1). Collective over the DP group. */
    dp_status (*acquire)(void *ctx, opt_model *om, int p, int prefetch);
    /* Free w[p] (w[p] = NULL); completes a started gather first. */
    dp_status (*release)(void *ctx, opt_model *om, int p);
    /* 1: acquire/release are collective (zero3's gathers): every rank walks every layer,
     * empty batch or not, and the per-rank choice of the weighted second pass is off.
     * 0: local (the half parameters' f32 working copies, docs/precision.md). */
    int collective;
} opt_param_fetch;

/* 1 when om's parameter fetch is collective (see opt_param_fetch). */
static inline int opt_fetch_collective(const opt_model *om) { return om->fetch && om->fetch->collective; }

typedef struct opt_tape_s {
    int64_t B, T;
    opt_arena ar;
    void *loss;               /* [B] per-example losses (device) */
    /* per parameter */
    const void **A, **G;      /* linear: [B, T, d] and [B, T, p] (device) */
    int64_t *din, *dout;      /* linear: d and p */
    void **direct;            /* direct / both: [B, numel] per-example gradient (device) */
    /* kept for the summed second pass */
    void *x_dev;              /* mlp inputs [B, in] or llama tokens int32 [B, T] */
    int32_t *y_dev;           /* mlp labels int32 [B]; llama next-token targets int32 [B, T] (-1 last) */
    void *fwd_;               /* forward activations (engine.c) */
    /* 1: the linear entries A and G and the direct per-example gradients are 2-byte half
     * containers (bf16/fp16 without --checkpoint block or CP; docs/precision.md section
     * 2); read them through opt_tape_lin_f32 / opt_tape_f32_view */
    int half;
} opt_tape;

dp_status opt_model_create(opt_model *om, opt_backend *be, const dp_model *m);
/* The default opt_model.block_release: nothing (the caller frees the block). */
dp_status opt_block_release_none(opt_model *om, opt_arena *blk);
void opt_model_free(opt_model *om);
/* Upload host f64 parameters (in canonical order) / download them. */
dp_status opt_model_set_params(opt_model *om, double *const *host);
dp_status opt_model_get_params(const opt_model *om, double *const *host);


/* Forward + tape backward on examples idx[0..B) of d (B may be 0: empty tape). */
dp_status opt_forward_backward(opt_tape *tp, const opt_model *om, const dp_dataset *d, const int64_t *idx,
                               int64_t B);
/* Forward only: per-example losses into loss_host[B] (f64). */
dp_status opt_forward_loss(double *loss_host, const opt_model *om, const dp_dataset *d, const int64_t *idx,
                           int64_t B);
/* The summed second pass: grads[p] (device, numel) += sum_b c[b] * g_b[p], using the
 * forward activations stored in tp (weights c [B] device). */
dp_status opt_backward_weighted(void *const *grads, const opt_model *om, opt_tape *tp, const void *c);
void opt_tape_free(opt_tape *tp);
/* The f32 view of linear tape entry pi: *A, *G = tp's pointers, or (tp->half) f32 copies
 * decoded into workspace buffers of ws (tag workspace; the caller frees ws right after
 * the kernel that reads them). */
dp_status opt_tape_lin_f32(const void **A, const void **G, opt_arena *ws, const opt_model *om, const opt_tape *tp,
                           int pi);
/* *out = the f32 values of x [n]: x itself (half = 0) or, x being a 2-byte half container
 * (half = 1, om's half type), an f32 copy decoded into a workspace buffer of ws. */
dp_status opt_tape_f32_view(opt_arena *ws, const void **out, const opt_model *om, int half, const void *x, int64_t n);

/* zero3 parameter fetch (no-op when om->fetch is NULL): acquire parameters
 * [first, first + n), then start the gathers of [next_first, next_first + next_n)
 * (next_first < 0: none); drop releases them. */
dp_status opt_params_use(const opt_model *om, int first, int n, int next_first, int next_n);
dp_status opt_params_drop(const opt_model *om, int first, int n);

/* The attention seam of the llama (docs/engine.md section 3, docs/longshield.md section 3):
 * q, k, v are this rank's rows [B, Tl, H, hd] of a layer before RoPE, y [B, Tl, D] its
 * output rows. alloc reserves, with the layer's activations and before q, k, v are
 * projected, what the attention keeps (local: the probabilities [B, H, T, T]; else
 * nothing); fwd leaves in *q, *k, *v, *probs what bwd reads (arena buffers of ar kept for
 * the backward); bwd gives dq, dk, dv [B, Tl, D] (after RoPE's backward) from dy [B, Tl, D].
 *   opt_attn_local          (attn_local.c) RoPE and causal attention over the rank's T rows;
 *   opt_attn_cp_allgather   (attn_cp.c) q, k, v (and dy) all-gathered over the CP group,
 *                           the whole sequence's attention on every CP rank, its rows kept;
 *                           *q, *k, *v the whole sequence after RoPE, *probs [B, H, T, T];
 *   opt_attn_cp_ring        (attn_cp_ring.c) key/value blocks passed around the CP ring,
 *                           online softmax; *q, *k, *v the rank's rows after RoPE, *probs
 *                           the log-sum-exp [B, H, Tl]. */
typedef struct opt_attn {
    const char *name;
    dp_status (*alloc)(opt_arena *ar, void **probs, const opt_model *om, int64_t B);
    dp_status (*fwd)(opt_arena *ar, void *y, void **q, void **k, void **v, void **probs, const opt_model *om, int64_t B);
    dp_status (*bwd)(opt_arena *ar, void *dq, void *dk, void *dv, const void *dy, const void *q, const void *k,
                     const void *v, const void *probs, const void *y, const opt_model *om, int64_t B);
} opt_attn;
extern const opt_attn opt_attn_local, opt_attn_cp_allgather, opt_attn_cp_ring;
/* full [B, T, D] = every CP rank's rows local [B, Tl, D] at their global positions (one
 * all-gather over the CP group of [B, Tmax, D] per rank; its buffers are ar's). */
dp_status opt_cp_gather_rows(opt_arena *ar, void *full, const void *local, const opt_model *om, int64_t B, int64_t D);

/* x [n] (device) rounded in place to om's half type (no-op unless bf16/fp16); the
 * counts go to om->pstats->pe (per_example = 1) or ->grad (output gradients) or
 * nowhere (activations, parameters). */
dp_status opt_prec_round(const opt_model *om, void *x, int64_t n, int kind);
enum { OPT_PREC_KIND_ACT = 0, OPT_PREC_KIND_GRAD = 1, OPT_PREC_KIND_PE = 2 };

#endif

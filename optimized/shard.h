/* optimized/shard.h — the sharding strategies and the step hooks (docs/zero.md,
 * docs/engine.md "Strategies"). Internal to optimized/dpsgd.c and
 * optimized/strategies/. */
#ifndef OPT_SHARD_H
#define OPT_SHARD_H

#include "optimized/dpsgd.h"

/* A sharding strategy: what a rank of the DP group holds and how the summed gradient
 * and the parameters move. After the chunks of a step, flat's S part holds this rank's
 * clipped sums over all positions and its Z part zeros. */
typedef struct opt_shard_strategy {
    const char *name;
    int shard_states;    /* 1: optimizer states (and the private gradient) hold [lo, hi) only */
    int noise_partition; /* 1: Z holds the partition [lo, hi) only (zlo = lo) */
    /* S and Z of the positions [lo, hi) summed over the DP group (Z: the noise, exactly
     * once), in flat at their global offsets. */
    dp_status (*reduce)(opt_dpsgd *s, int64_t step);
    /* The private gradient (S + Z) / div of the rank's positions, the optimizer on them,
     * and every rank's parameters equal afterwards (ZeRO: all-gathered). */
    dp_status (*update)(opt_dpsgd *s, double div);
    /* Host copies of the whole S | Z (hS [2 total]) and private gradient (hp [total]). */
    dp_status (*gather_sums)(opt_dpsgd *s, double *hS);
    dp_status (*gather_pgrad)(opt_dpsgd *s, double *hp);
    /* After the model and offsets exist, before the step buffers (sized by chunk, zoff):
     * may set chunk, lo, hi, zoff, zlo and s->shard_state; teardown frees it. */
    dp_status (*setup)(opt_dpsgd *s);
    void (*teardown)(opt_dpsgd *s);
} opt_shard_strategy;

#define OPT_SHARD_DECL_(ID, sym, name) extern const opt_shard_strategy opt_shard_##sym;
OPT_SHARDINGS(OPT_SHARD_DECL_)
#undef OPT_SHARD_DECL_
extern const opt_shard_strategy *const opt_shard_strategies[];

/* The points of a step where a test-only bug is injected (optimized/strategies/bugs.c
 * wraps the correct ones); the step calls them unconditionally. */
typedef struct opt_step_hooks {
    int fused_single_pass; /* 1: fused may clip in one pass */
    /* host clip factors of a chunk [G, Bc] after the norms (correct: unchanged) */
    void (*factors)(double *c, const int *dropped, int G, int64_t Bc);
    /* global flat positions [*lo, *hi) whose noise this rank draws (correct: the
     * sharding's choice, given as the input values) */
    void (*noise_span)(const opt_dpsgd *s, int64_t *lo, int64_t *hi);
    /* z[i - zlo] += std N(key, NOISE, step, lane p, element e) for the positions
     * i = off[p] + e in [lo, hi) (correct: the global positions) */
    dp_status (*noise)(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi, double std);
    /* after the reduction, on host copies hS [2 total] (S | Z) of the whole gradient */
    dp_status (*post_sum)(opt_dpsgd *s, double *hS);
    double (*divisor)(const opt_dpsgd *s, int64_t b);
    /* the DP rank whose partition of the parameters this rank's update writes (correct:
     * its own) */
    int (*update_owner)(const opt_dpsgd *s);
    int skip_param_sync; /* 1: parameters are not re-gathered after the update */
    /* context parallelism (docs/longshield.md "Negative controls"; correct: all 0) */
    int cp_drop_partial; /* 1: the last CP rank's partial per-example gradients are left out of the reduce-scatter */
    int cp_local_norms;  /* 1: per-example norms from the local slice only (no all-reduce over the CP group) */
    int cp_full_noise;   /* 1: every CP rank adds noise to the whole layer, summed over the CP group */
    int cp_zero2_local_noise; /* 1: zero2 under CP: a range's noise drawn at the slice-local instead of the global positions */
    /* mixed precision (docs/precision.md "Negative control"; correct: 0) */
    int master_half;     /* 1: the master weights are themselves rounded to the half type after every update */
    int ckpt_keep_forward; /* 1: --checkpoint block keeps the first forward's block activations (dangling) */
    /* loss scaling (docs/precision.md "Loss scaling", negative controls; correct: 0) */
    int ls_clip_unscaled; /* 1: clipping at C on the scaled gradient (and its norms exported as seen) */
    int ls_no_unscale;    /* 1: step 5 left out: the clipped sum keeps S */
} opt_step_hooks;

extern const opt_step_hooks opt_hooks_correct;
/* The hooks of a bug (OPT_BUG_NONE: opt_hooks_correct). */
const opt_step_hooks *opt_bug_hooks(opt_bug bug);

/* The per-example outputs of one chunk of Bc examples (host, [b, .] layout as the reference). */
typedef struct {
    double *loss;     /* [Bc] */
    double *gn;       /* [Bc, G + 1] group norms, then the total norm */
    double *c;        /* [Bc, G] */
    int *dropped;     /* [Bc] */
    double **grad;    /* [np] -> [Bc * numel] per-sample gradients, or NULL */
} opt_chunk_out;

/* out [B, numel] = per-example gradient of parameter pi from the tape (linear: G_b^T A_b
 * batched; under CP the sum over the rank's positions only). */
dp_status opt_instantiate(void *out, const opt_model *om, const opt_tape *tp, int pi);
/* out [ne, numel] = the same for the examples [e0, e0 + ne) of the tape only (ne = 0: nothing). */
dp_status opt_instantiate_examples(void *out, const opt_model *om, const opt_tape *tp, int pi, int64_t e0, int64_t ne);

/* ---- context parallelism (optimized/strategies/shard_cp.c, cp_input.c; docs/longshield.md) ----
 * The CP rank's state: its sequence shard (om.cp points to cp) and the packed layout of
 * its slices (opt_cp_geom_of): every rank stores parameter p's slice at packed offset
 * poff[p] with room pmax[p] = the largest slice of p over the CP ranks (the rest zeros),
 * L in all. */
typedef struct {
    opt_cp cp;
    int64_t *poff, *pmax;
    int64_t L;
    int output;             /* --cp-pattern output (cp_output.c) */
    int zero1;              /* --sharding zero1 or zero2: pgrad, m1, m2 hold the DP rank's range [lo, hi) of [L] */
    int zero2;              /* --sharding zero2: S [L] reduce-scattered over the DP group, Z holds [lo, hi) only */
    /* overlap of the reduce-scatters with the backward (docs/longshield.md "Overlap"),
     * seconds summed over the step's chunks (reset by the step) */
    double ovl_hidden, ovl_total;
} opt_cp_state;
extern const opt_shard_strategy opt_shard_cp;
/* --cp with --sharding zero2 (the same functions; Z holds the DP rank's range only) */
extern const opt_shard_strategy opt_shard_cp_zero2;
/* 1: s->shard is one of the context-parallel strategies */
int opt_shard_is_cp(const opt_dpsgd *s);
/* The layouts --cp M > 1 supports (usage error, exit 2, otherwise): the llama, M <= T,
 * --sharding replicated, zero1 or zero2, --strategy grad-sample, --noise-mode single. */
dp_status opt_cp_check(const dp_dpsgd_config *cfg, const opt_dp_options *o, const dp_model *m);
/* The slice of parameter p held by CP rank j (docs/longshield.md "Slice geometry"; the one
 * place that maps a packed slice to tensor elements): nseg segments of w contiguous
 * elements of the flattened tensor, segment k starting at element e0 + k stride, packed
 * contiguously (segment k at packed offset k w; n = nseg w elements in all).
 *   row slice (every parameter unless below): the rows [r0, r1) = [floor(R j / M),
 *     floor(R (j + 1) / M)) of the R = shape[0] rows of c = numel / R columns: nseg 1,
 *     e0 = r0 c, w = (r1 - r0) c, stride 0;
 *   column slice (opt_cp_by_columns: a linear W [P, d] with P < d under --cp-pattern
 *     output): the columns [c0, c1) = [floor(d j / M), floor(d (j + 1) / M)) of every row:
 *     nseg P, e0 = c0, w = c1 - c0, stride d (packed [P, w], row-major). */
typedef struct {
    int64_t e0, w, nseg, stride;
    int cols; /* 1: column slice */
} opt_cp_geom;
int opt_cp_by_columns(const opt_dpsgd *s, int p);
void opt_cp_geom_of(opt_cp_geom *g, const opt_dpsgd *s, int p, int j);
/* The k-th (k = 0, 1, ...) contiguous run of the packed elements [u0, u1) of slice g: packed
 * offset *u, tensor element *e, length *n (> 0); returns 0 when there is no k-th run. */
int opt_cp_geom_run(int64_t *u, int64_t *e, int64_t *n, const opt_cp_geom *g, int64_t u0, int64_t u1, int64_t k);
/* Copies the packed elements [u0, u1) of slice g between packed (packed element u at
 * packed + (u - u0)) and the flattened tensor: to_tensor 1: tensor <- packed, 0: packed <-
 * tensor. */
dp_status opt_cp_geom_copy(const opt_dpsgd *s, const opt_cp_geom *g, void *tensor, void *packed, int64_t u0, int64_t u1,
                           int to_tensor);
/* The all-gathered tensor of the output-stationary pattern: the whole sequence's
 * [Bc, T, width] of the tape buffer src (input activations A of a row slice, output
 * gradients G of a column slice; the next parameter with the same src reuses it). */
typedef struct {
    const void *src;
    void *full;
    opt_arena ar;
} opt_cp_gathered;
/* Output-stationary (docs/longshield.md "output-stationary"): slice [Bc, pmax[p]] = the
 * complete per-example gradients of this CP rank's slice of linear parameter p: row slice
 * from the all-gathered input activations and the all-to-all'ed output-gradient columns,
 * column slice from the all-gathered output gradients and the all-to-all'ed input columns. */
dp_status opt_cp_output_slice(void *slice, opt_cp_gathered *ga, opt_dpsgd *s, const opt_tape *tp, int p, int64_t Bc);
/* One chunk under CP, input-stationary (the norm strategy's instantiation on slices). */
dp_status opt_cp_run_chunk(opt_chunk_out *co, opt_dpsgd *s, const dp_dataset *d, const int64_t *idx, int64_t Bc);

/* ---- loss scaling (optimized/opt_losscale.c, docs/precision.md "Loss scaling") ---- */
/* s->ls_* from s->o.ls; refuses --cp > 1 and a loss-scale bug without static:S, S > 1 */
dp_status opt_ls_init(opt_dpsgd *s);
/* the factor on the clipping threshold (and gamma), and the divisor of the exported norms
 * and per-example gradients: S of the step (1 under the ls-* bugs, which clip at C) */
double opt_ls_clip_scale(const opt_dpsgd *s);
double opt_ls_export_scale(const opt_dpsgd *s);
/* after the chunks of a step: step 5 on the local clipped sums, then the dynamic scaler
 * (*skip = 1: no update this step); loss/dropped: this rank's [nl] examples */
dp_status opt_ls_after_chunks(int *skip, opt_dpsgd *s, const double *loss, const int *dropped, int64_t nl);

/* ---- helpers shared by the sharding strategies (optimized/strategies/shard_common.c) ---- */
void *opt_dev_at(const opt_dpsgd *s, void *base, int64_t elem);
/* Noise of the positions [lo, hi) of this rank's noise span into Z (s->hooks). */
dp_status opt_shard_noise(opt_dpsgd *s, int64_t step, int64_t lo, int64_t hi);
/* zero2: S [chunk N] of flat reduce-scattered over the DP group into flat[lo, hi). */
dp_status opt_shard_reduce_scatter_sums(opt_dpsgd *s);
/* Allgather of every rank's [lo, hi) parameter positions over the DP group. */
dp_status opt_shard_allgather_params(opt_dpsgd *s);
/* The update and gathers of the range partitions (replicated: [0, total); zero1, zero2). */
dp_status opt_shard_range_update(opt_dpsgd *s, double div);
dp_status opt_shard_range_gather_sums(opt_dpsgd *s, double *hS);
dp_status opt_shard_range_gather_pgrad(opt_dpsgd *s, double *hp);
dp_status opt_shard_range_setup(opt_dpsgd *s);
void opt_shard_range_teardown(opt_dpsgd *s);
/* Mixed precision (docs/precision.md "Master weights"): s->master [n] f32 takes the
 * positions of a range partition ([lo, hi) of om->w; then every om->w is rounded to the
 * half type) or of a packed partition wpart [n] (zero3; then wpart is rounded). No-op
 * unless s->om.prec is bf16/fp16. */
dp_status opt_master_setup_range(opt_dpsgd *s);
dp_status opt_master_setup_packed(opt_dpsgd *s, void *wpart, int64_t n);
/* After the optimizer updated master [n] (elements from master_at): the master itself
 * rounded to the half type under the test-only master-half bug (else nothing); then
 * opt_master_store: the f32 container w [n] = round(master) (zero3's partition). */
dp_status opt_master_bug(opt_dpsgd *s, void *master_at, int64_t n);
dp_status opt_master_store(opt_dpsgd *s, void *w, void *master_at, int64_t n);
/* The half parameters of the range shardings (strategies/half_params.c, docs/precision.md):
 * setup turns every om->w[p] (f32, already the master's values) into a 2-byte half tensor
 * and installs a local parameter fetch that decodes f32 working copies; store re-encodes
 * n elements of tensor p from element e0 from the f32 master; allgather shares every
 * rank's partition (zero1/zero2 parameter sync). */
dp_status opt_half_params_setup(opt_dpsgd *s);
void opt_half_params_teardown(opt_dpsgd *s);
dp_status opt_half_params_store(opt_dpsgd *s, int p, int64_t e0, const void *master_at, int64_t n);
dp_status opt_half_params_allgather(opt_dpsgd *s);

/* This rank's shard of N (rank r: [r chunk, min((r + 1) chunk, total))). */
void opt_shard_range(int64_t *lo, int64_t *hi, int64_t total, int64_t chunk, int r);

#endif

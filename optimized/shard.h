/* optimized/shard.h — the layouts of the gradient vector, the sharding strategies and the
 * step hooks (docs/zero.md, docs/engine.md "Strategies"). Internal to optimized/dpsgd.c,
 * optimized/strategies/ and optimized/clip/. */
#ifndef OPT_SHARD_H
#define OPT_SHARD_H

#include "optimized/dpsgd.h"

/* ---- layouts: what the gradient vector of a rank is (docs/engine.md "Strategies") ----
 * The clipped sums S, the noise Z, the private gradient and the optimizer states of a rank
 * are one vector of nvec elements: parameter p's segment at voff[p], vlen[p] elements long.
 * The full layout (layout_full.c) holds every parameter whole (voff = off, vlen = numel,
 * nvec = total); the CP layout (layout_cp.c, docs/longshield.md section 5) holds the
 * rank's packed CP slice of every parameter (opt_cp_geom), vlen = the largest slice of
 * the CP group (tail zero). The sharding strategies partition that vector over the DP
 * group whatever it holds, mapping its elements to tensor elements by the layout's runs. */
typedef struct opt_layout {
    const char *name;
    /* after the model exists: voff, vlen, nvec and the layout's own state (the CP layout
     * also sets the model's sequence shard and attention); teardown undoes it */
    dp_status (*setup)(opt_dpsgd *s);
    void (*teardown)(opt_dpsgd *s);
    /* The k-th (k = 0, 1, ...) contiguous run of the segment elements [x0, x1) of parameter
     * p (0 <= x0 <= x1 <= vlen[p]): segment offset *u, tensor element *e, length *n > 0;
     * 0 when there is none (elements past the rank's own slice belong to no tensor). */
    int (*run)(const opt_dpsgd *s, int p, int64_t x0, int64_t x1, int64_t k, int64_t *u, int64_t *e, int64_t *n);
    /* host [total] (tensor order) = the vector dev [nvec] whole on every rank */
    dp_status (*to_host)(opt_dpsgd *s, double *host, const void *dev);
    /* host [total] = the vector whose range [lo, hi) each DP rank holds at dev + (lo - dev_lo) */
    dp_status (*ranges_to_host)(opt_dpsgd *s, double *host, const void *dev, int64_t dev_lo);
    /* every DP rank's updated range [lo, hi) into this rank's segments of the parameters */
    dp_status (*sync_ranges)(opt_dpsgd *s);
    /* then every rank's whole parameters from its segments (CP: all-gathered over the CP group) */
    dp_status (*sync_params)(opt_dpsgd *s);
    /* zero3: *w = parameter p's tensor from its segment seg [vlen[p]], whole on this rank
     * after the DP gather (full: seg itself; CP: the CP group's slices all-gathered into a
     * new tensor, tag gathered_params); disassemble frees what assemble made */
    dp_status (*assemble)(opt_dpsgd *s, int p, void *seg, void **w);
    void (*disassemble)(opt_dpsgd *s, int p, void *seg, void *w);
    /* host [total] = the vector hvec [nvec] (host) of every rank of the layout */
    dp_status (*vec_to_host)(opt_dpsgd *s, double *host, const double *hvec);
    /* 1: a sharded-state strategy keeps S | Z as [N chunk] | [N chunk] and gathers them by
     * ranges (docs/zero.md section 4); 0: as [nvec] | [nvec], gathered whole
     * (docs/longshield.md section 5) */
    int sums_in_ranges;
    /* the clipping pipeline's norm source for this layout (optimized/clip/clip.h) */
    const struct opt_norm_source *source;
} opt_layout;
extern const opt_layout opt_layout_full, opt_layout_cp;

/* A sharding strategy: what a rank of the DP group holds of the layout's vector and how
 * the summed gradient and the parameters move. After the chunks of a step, flat's S part
 * holds this rank's clipped sums over the whole vector and its Z part zeros. */
typedef struct opt_shard_strategy {
    const char *name;
    int shard_states;    /* 1: optimizer states (and the private gradient) hold [lo, hi) only */
    int noise_partition; /* 1: Z holds the partition [lo, hi) only (zlo = lo) */
    /* S and Z of the positions [lo, hi) summed over the DP group (Z: the noise, exactly
     * once), in flat at their vector offsets. */
    dp_status (*reduce)(opt_dpsgd *s, int64_t step);
    /* The private gradient (S + Z) / div of the rank's positions, the optimizer on them,
     * and every rank's parameters equal afterwards (ZeRO: all-gathered). */
    dp_status (*update)(opt_dpsgd *s, double div);
    /* Host copies of the whole S | Z (hS [2 total]) and private gradient (hp [total]). */
    dp_status (*gather_sums)(opt_dpsgd *s, double *hS);
    dp_status (*gather_pgrad)(opt_dpsgd *s, double *hp);
    /* After the layout, before the step buffers (sized by chunk, zoff): may set chunk, lo,
     * hi, zoff, zlo and s->shard_state; teardown frees it. */
    dp_status (*setup)(opt_dpsgd *s);
    void (*teardown)(opt_dpsgd *s);
} opt_shard_strategy;

#define OPT_SHARD_DECL_(ID, sym, name) extern const opt_shard_strategy opt_shard_##sym;
OPT_SHARDINGS(OPT_SHARD_DECL_)
#undef OPT_SHARD_DECL_
extern const opt_shard_strategy *const opt_shard_strategies[];

/* The named seams of a step where a test-only bug is injected (docs/engine.md "Injected
 * bugs"). The step calls every hook unconditionally; opt_hooks_correct holds the correct
 * behaviour, and optimized/strategies/bugs.c, the only place bugs exist, replaces some of
 * them per --inject-bug. */
typedef struct opt_step_hooks {
    /* layer mode: the mode the norm strategy chose for a linear parameter (correct: m) */
    opt_layer_mode (*layer_mode)(opt_layer_mode m);
    /* clip factors: host factors c [G, Bc] after the norms; returns 1 when it changed one
     * (correct: 0, nothing changed) */
    int (*factors)(double *c, const int *dropped, int G, int64_t Bc);
    /* noise span: the vector positions [*lo, *hi) whose noise this rank draws (correct:
     * the sharding's choice, given as the input values) */
    void (*noise_span)(const opt_dpsgd *s, int64_t *lo, int64_t *hi);
    /* noise draw: z[x - zlo] += std N(key, NOISE, step, lane p, element) for the vector
     * positions x in [lo, hi) (correct: opt_noise_runs, the layout's runs) */
    dp_status (*noise)(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi, double std);
    /* noise position: the Philox element of the first element of a run of parameter p at
     * vector position x, segment offset u, tensor element e, inside the span from lo
     * (correct: e, the global position) */
    int64_t (*noise_elem)(int p, int64_t x, int64_t u, int64_t e, int64_t lo);
    /* after the reduction, on host copies hS [2 total] (S | Z) of the whole gradient */
    dp_status (*post_sum)(opt_dpsgd *s, double *hS);
    /* divisor of the private gradient for a batch of b (correct: q N) */
    double (*divisor)(const opt_dpsgd *s, int64_t b);
    /* the DP rank whose partition of the parameters this rank's update writes (correct:
     * its own) */
    int (*update_owner)(const opt_dpsgd *s);
    /* parameter sync after the update: sync(s) makes every rank's parameters whole and
     * equal (correct: calls it) */
    dp_status (*param_sync)(opt_dpsgd *s, dp_status (*sync)(opt_dpsgd *s));
    /* zero3's gather source: *src = the packed partition w [n] that the per-layer gathers
     * read (correct: w itself), and before every update (correct: nothing) */
    dp_status (*gather_source)(opt_dpsgd *s, void **src, void *w, int64_t n);
    dp_status (*gather_source_update)(opt_dpsgd *s, void *src, const void *w, int64_t n);
    /* CP partial: the send buffer of this rank's per-example partials or exchanged
     * columns before the CP exchange (correct: unchanged) */
    dp_status (*cp_partial)(opt_dpsgd *s, void *send, size_t nbytes);
    /* norm reduce: sq [n] squared norms of slices summed over the CP group (correct:
     * all-reduce) */
    dp_status (*norm_reduce)(opt_dpsgd *s, void *sq, int64_t n);
    /* master store: the f32 master weights [n] after the optimizer updated them
     * (correct: nothing) */
    dp_status (*master_store)(opt_dpsgd *s, void *master_at, int64_t n);
    /* checkpoint block release: a --checkpoint block's first-forward activations (correct:
     * nothing here; the caller frees blk) — installed on the model (opt_model.block_release) */
    dp_status (*block_release)(opt_model *om, opt_arena *blk);
    /* loss scaling (docs/precision.md "Loss scaling"): the factor of the clipping
     * threshold, the divisor of the exported norms and per-example gradients (correct:
     * both the step's S), and step 5 on the local clipped sums S [n] (correct: / S) */
    double (*clip_scale)(const opt_dpsgd *s);
    double (*export_scale)(const opt_dpsgd *s);
    dp_status (*unscale)(opt_dpsgd *s, void *S, int64_t n);
} opt_step_hooks;

extern const opt_step_hooks opt_hooks_correct;
/* The hooks of a bug (OPT_BUG_NONE: opt_hooks_correct). */
const opt_step_hooks *opt_bug_hooks(opt_bug bug);
/* DP_OK when --inject-bug o->bug has an injection point in this run's layout (cp_path:
 * context parallelism), else a usage error naming the bug and what it needs. */
dp_status opt_bug_check(const opt_dp_options *o, int cp_path);
/* The correct noise draw (opt_step_hooks.noise): for every parameter, the layout's runs of
 * the positions [lo, hi), each drawn at the element hooks->noise_elem gives. */
dp_status opt_noise_runs(opt_dpsgd *s, void *z, int64_t zlo, int64_t step, int64_t lo, int64_t hi, double std);

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

/* ---- context parallelism (optimized/strategies/layout_cp.c, optimized/clip/; docs/longshield.md) ----
 * The CP layout's state (s->layout_state): the rank's sequence shard (om.cp points to cp)
 * and the packed layout of its slices (opt_cp_geom_of): every rank stores parameter p's
 * slice at packed offset poff[p] with room pmax[p] = the largest slice of p over the CP
 * ranks (the rest zeros), L in all (s->voff = poff, s->vlen = pmax, s->nvec = L). */
typedef struct {
    opt_cp cp;
    int64_t *poff, *pmax;
    int64_t L;
    int output;             /* --cp-pattern output (clip/cp_output.c) */
    /* overlap of the reduce-scatters with the backward (docs/longshield.md "Overlap"),
     * seconds summed over the step's chunks (reset by the step) */
    double ovl_hidden, ovl_total;
} opt_cp_state;
/* 1: s runs the CP layout (--cp M > 1, or --cp 1 with a --cp-* option) */
int opt_shard_is_cp(const opt_dpsgd *s);
/* The runs --cp M supports (usage error, exit 2, otherwise): the llama, M <= T,
 * --noise-mode single (every sharding and norm strategy runs under CP). */
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

/* ---- loss scaling (optimized/opt_losscale.c, docs/precision.md "Loss scaling") ---- */
/* s->ls_* from s->o.ls; refuses an S whose S C overflows the backend's type */
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
/* Noise of the vector positions [lo, hi) of this rank's noise span into Z (s->hooks). */
dp_status opt_shard_noise(opt_dpsgd *s, int64_t step, int64_t lo, int64_t hi);
/* zero2: S [chunk N] of flat reduce-scattered over the DP group into flat[lo, hi). */
dp_status opt_shard_reduce_scatter_sums(opt_dpsgd *s);
/* The update and gathers of the range partitions of the layout's vector (replicated:
 * [0, nvec); zero1, zero2). */
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
/* After the optimizer updated master [n] (elements from master_at): the master-store seam
 * (s->hooks), then the f32 container w [n] = round(master) (zero3's partition). */
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

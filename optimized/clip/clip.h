/* optimized/clip/clip.h — the one clipping pipeline of DP-SGD (docs/engine.md section 4,
 * docs/longshield.md section 4): one chunk of examples goes through
 *
 *   forward + backward -> per-example losses (non-finite: dropped) -> per-example squared
 *   group norms -> clip factors -> dropped and special examples (the overflow path:
 *   host norms of docs/dpsgd.md step 4) -> clipped sums -> exported per-example outputs
 *
 * once, in opt_clip_chunk (pipeline.c), whatever produces the norms. A norm source
 * (opt_norm_source) says how the per-example gradients of the chunk are held and summed:
 *   opt_source_local (source_local.c): the whole sequence on this rank, each parameter by
 *     its mode (instantiated, ghost, streaming, FlashDP single pass), clipped sums into the
 *     full layout's vector (or by the weighted second backward);
 *   opt_source_cp (source_cp.c): the CP slices of the per-example gradients, reduced over
 *     the CP group (input-stationary rounds of reduce-scatters, or output-stationary,
 *     cp_output.c), their squared norms all-reduced over the CP group (the norm-reduce
 *     seam), clipped sums into the CP layout's packed vector.
 * Loss scaling (the clip and export scales of the step hooks) and the overflow path are
 * the pipeline's, so every source has them. Per-example gradients are instantiated from
 * the tape by opt_instantiate / opt_instantiate_examples (instantiate.c), below both. */
#ifndef OPT_CLIP_H
#define OPT_CLIP_H

#include "optimized/shard.h"

typedef struct opt_clip_ctx opt_clip_ctx;

/* How the per-example gradients of a chunk are held, normed and summed. Called by
 * opt_clip_chunk in this order (each once per chunk unless it says "per"). */
typedef struct opt_norm_source {
    const char *name;
    /* elements allocated past [G, Bc] in the pipeline's sq and cdev (local 1, CP 0: what the
     * two paths always allocated; the exported memory peaks include them) */
    int sq_extra;
    /* the source's state, then the forward and backward of the chunk into k->tp (with the
     * source's tape hook) */
    dp_status (*begin)(opt_clip_ctx *k, const dp_dataset *d, const int64_t *idx);
    /* loss [Bc] (host): the per-example losses */
    dp_status (*losses)(opt_clip_ctx *k, double *loss);
    /* k->sq [G, Bc] (zeroed) += every parameter's per-example squared norms, parameter by
     * parameter in canonical order, into its group's row */
    dp_status (*norms)(opt_clip_ctx *k);
    /* per group g: k->cdev [g, Bc] = the clip factors of k->sq [g, Bc] at threshold C (the
     * FlashDP single pass clips and accumulates here) */
    dp_status (*factors)(opt_clip_ctx *k, int g, double C, double gamma);
    /* a chunk holds a dropped or special example: back to what can leave it out */
    dp_status (*fallback)(opt_clip_ctx *k);
    /* per parameter: h [Bc, numel] (host, tensor order) = its whole per-example gradients */
    dp_status (*rows)(opt_clip_ctx *k, double *h, int p);
    /* per example: b adds an exact 0 to the batched sums from now on */
    dp_status (*drop)(opt_clip_ctx *k, int64_t b);
    /* the clipped sums += sum_b c_b g_b with the factors k->cdev; any_bad: the chunk holds a
     * dropped or special example */
    dp_status (*accumulate)(opt_clip_ctx *k, int any_bad);
    /* per parameter: its clipped sums += each of the nb rows of terms [nb, numel] (host,
     * tensor order): the clipped terms of the special examples */
    dp_status (*add_rows)(opt_clip_ctx *k, int p, const double *terms, int nb);
    /* per parameter: h [Bc, numel] (host) = its per-example gradients for the export */
    dp_status (*grads)(opt_clip_ctx *k, double *h, int p);
    /* frees the source's state (the pipeline frees k->tp afterwards) */
    void (*end)(opt_clip_ctx *k);
} opt_norm_source;

extern const opt_norm_source opt_source_local, opt_source_cp;

/* The pipeline's state of one chunk, shared with its source. */
struct opt_clip_ctx {
    opt_dpsgd *s;
    const opt_norm_source *src;
    void *st;          /* the source's own state */
    opt_tape tp;       /* the chunk's tape (the source's pass) */
    int64_t Bc;        /* examples in the chunk */
    int G, np;
    int *mode;         /* [np] opt_layer_mode of every parameter (the norm strategy's, through the layer-mode seam) */
    void *sq, *cdev;   /* [G, Bc] device: squared group norms, clip factors */
};

/* One chunk of Bc examples idx[0..Bc) through the pipeline with the layout's source:
 * co's per-example outputs, and the clipped sums added into s->flat's S part. */
dp_status opt_clip_chunk(opt_chunk_out *co, opt_dpsgd *s, const opt_norm_source *src, const dp_dataset *d,
                         const int64_t *idx, int64_t Bc);

/* ---- instantiation (instantiate.c), below both sources ---- */
/* host [B, numel] = the per-example gradients of p: held (f32, or a 2-byte container on a
 * half tape) or, held NULL, instantiated from the tape into a per-example buffer of its
 * arena. */
dp_status opt_pe_download(double *host, const opt_model *om, opt_tape *tp, const void *held, int p);
/* Zero every tape slice of example b (its terms then contribute nothing). */
dp_status opt_tape_zero_example(const opt_model *om, opt_tape *tp, int64_t b);

#endif

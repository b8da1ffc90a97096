/* optimized/precision.h — mixed precision in the engine (docs/precision.md):
 * `--precision f64|f32|bf16|fp16` for `dpcert train dpsgd`.
 *
 * In bf16/fp16 the backend computes in f32 (GEMMs and reductions accumulate in f32) and
 * the engine rounds to the half type at the storage points of docs/precision.md
 * ("Rounding points"): parameters (re-derived from the f32 master weights after every
 * step), the input and output of every linear layer, every linear layer's output
 * gradient, and the per-example gradients that are held in memory (instantiated or
 * direct). Norms, clip factors, clipped sums, noise, the private gradient, the
 * optimizer and the master weights stay f32. The parameters are stored as 2-byte half
 * tensors (replicated, zero1, zero2: optimized/strategies/half_params.c); the values the
 * tape keeps (linear inputs, output gradients, held per-example gradients) are rounded in
 * their f32 buffer and then moved into 2-byte containers (optimized/engine.c "half
 * tape", opt_tape.half), decoded into an f32 workspace when a kernel reads them; the
 * other half values live in f32 containers (exactly representable, so every later read
 * is the exact half value) (docs/precision.md sections 2 "Storage" and 6 "Memory").
 *
 * The seam for loss scaling (issue 11 part 2, docs/precision.md "Loss-scaling seam"):
 *   - the per-example gradients held in the half type are rounded by
 *     opt_prec_round_pe(), which counts the elements that overflow to inf and the ones
 *     that underflow (flushed to zero or subnormal) in opt_prec_stats::pe;
 *   - the output gradients are rounded by opt_prec_round() with the counts in ::grad;
 *   - opt_prec_after_clip() is called by opt_dpsgd_step once per step after per-sample
 *     clipping (the clipped sums of every chunk are in s->flat[0, zoff)) and before the
 *     reduction and noise: the place where an unscale by the loss scale S happens (a
 *     no-op here);
 *   - the loss scale itself would multiply the cross-entropy row weights of the tape
 *     pass (opt_forward_backward), i.e. the output gradient of the loss.
 * Conversions of backend memory go through the backend operation half_convert (host:
 * common/tensor.h's dp_f32_to_bf16 / dp_f32_to_f16 and back; CUDA: cu_prec.cu's cvt.rn,
 * the same bits), or, for a backend without it, through its memory operations and
 * opt_half_convert_host; host values through opt_prec_encode / opt_prec_decode. */
#ifndef OPT_PRECISION_H
#define OPT_PRECISION_H

#include <stdint.h>

#include "common/status.h"
#include "optimized/backend.h"

/* X(ID, cli-name) — index = opt_prec */
#define OPT_PRECISIONS(X) X(F64, "f64") X(F32, "f32") X(BF16, "bf16") X(FP16, "fp16")
typedef enum {
#define OPT_PREC_ID_(ID, name) OPT_PREC_##ID,
    OPT_PRECISIONS(OPT_PREC_ID_)
#undef OPT_PREC_ID_
    OPT_PREC_COUNT
} opt_prec;
extern const char *const opt_prec_names[]; /* NULL-terminated, index = opt_prec */

/* 1 for bf16 and fp16 (half storage, f32 compute and master weights). */
int opt_prec_is_half(opt_prec p);
/* The backend dtype a precision computes in (f64 -> DP_F64, the rest DP_F32). */
dp_dtype opt_prec_backend_dtype(opt_prec p);

/* Rounding counters of one kind of tensor (reset by the caller). */
typedef struct {
    uint64_t elements;  /* elements rounded */
    uint64_t overflow;  /* finite before, +-inf after (|x| beyond the half range) */
    uint64_t underflow; /* nonzero before, zero or subnormal after (flushed or lost precision) */
} opt_prec_count;

typedef struct {
    opt_prec_count pe;   /* per-example gradients held in the half type */
    opt_prec_count grad; /* output gradients of linear layers */
} opt_prec_stats;

/* One f32 value rounded to the half type p and back (exact); identity for f64/f32. */
float opt_prec_round_value(opt_prec p, float x);

/* The half bits of an f32 value (round to nearest even) and the f32 value of half bits
 * (exact): common/tensor.h's conversions for bf16 / fp16. */
uint16_t opt_prec_encode(opt_prec p, float x);
float opt_prec_decode(opt_prec p, uint16_t h);
/* Device conversions (the backend's f32 <-> 2-byte half elements), n elements, by the
 * backend's half_convert (else host blocks): dst_half = encode(src_f32); dst_f32 =
 * decode(src_half). */
dp_status opt_prec_to_half(opt_backend *be, opt_prec p, void *dst_half, const void *src_f32, int64_t n);
dp_status opt_prec_from_half(opt_backend *be, opt_prec p, void *dst_f32, const void *src_half, int64_t n);

/* The half conversion of the backend operation half_convert (optimized/backend.h: half
 * OPT_HALF_BF16/FP16, mode OPT_HALF_ROUND/ENCODE/DECODE, counts [2] may be NULL) on host
 * memory, through common/tensor.h: the host backend's half_convert and the generic path of
 * a backend without one (DP_ERR_INVALID for a bad half type, mode or size). */
dp_status opt_half_convert_host(void *y, uint64_t *counts, const void *x, int half, int mode, int64_t n);

/* x[0..n) (device, the backend's f32) rounded in place to the half type p (no-op for
 * f64/f32); cnt (may be NULL) accumulates the counts. Through the backend's half_convert (the same
 * bits on every backend: round to nearest even), or, where it has none, through its
 * memory operations and opt_half_convert_host. */
dp_status opt_prec_round_dev(opt_backend *be, opt_prec p, void *x, int64_t n, opt_prec_count *cnt);

/* The seam where an unscale by the loss scale happens (docs/precision.md "Loss-scaling
 * seam"): called once per step on this rank's clipped sums S [n] (f32, device) after
 * per-sample clipping of every chunk, before the reduction over ranks and the noise.
 * Mixed precision without loss scaling leaves S unchanged (returns DP_OK). */
dp_status opt_prec_after_clip(opt_backend *be, opt_prec p, void *sums, int64_t n);

/* The largest finite value of the half type (fp16 65504, bf16 about 3.39e38). */
double opt_prec_max_finite(opt_prec p);

#endif

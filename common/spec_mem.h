/* common/spec_mem.h — the configuration-only pieces of the memory estimates that the
 * reference (reference/mem_estimate.h) and the engine (optimized/opt_mem.h) both use
 * (docs/memory.md): parameter count, dataset bytes, the batch-size bound, the margin.
 * Counts are doubles (no integer wrap for absurd configurations); bytes unless named. */
#ifndef DP_SPEC_MEM_H
#define DP_SPEC_MEM_H

#include "common/spec_model.h"

/* Number of parameters P of a configuration (docs/models.md), without allocating. */
double dp_mem_params(const dp_model_config *mc);
/* Bytes of a dataset of n examples in memory (mlp x f64 + y i32; llama tokens i32). */
double dp_mem_dataset(const dp_model_config *mc, double n);
/* Batch size used by the estimates: min(N, qN + L/3 + sqrt(L^2/9 + 2 L qN)), L = ln 1e15
 * (Bernstein: P(|B| exceeds it) < 1e-15 per step). */
double dp_mem_batch_bound(double q, double n);
/* The margin every estimate carries: 1.25 x + 64 MiB (docs/memory.md). */
double dp_mem_margin(double bytes);

#endif

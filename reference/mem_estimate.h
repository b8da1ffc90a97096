/* reference/mem_estimate.h — upper estimates of a run's memory from its configuration,
 * before anything large is allocated (docs/memory.md; issue 15 class 4). Every count is
 * a double (no integer wrap for absurd configurations); bytes unless named otherwise. */
#ifndef REF_MEM_ESTIMATE_H
#define REF_MEM_ESTIMATE_H

#include <stdint.h>

#include "reference/dpsgd.h"
#include "reference/dpzo.h"
#include "reference/model.h"

/* Number of parameters P of a configuration (docs/models.md), without allocating. */
double ref_mem_params(const ref_model_config *mc);
/* Doubles of the reference's per-example work arena (forward cache + backward). */
double ref_mem_example(const ref_model_config *mc);
/* Bytes of a dataset of n examples in memory (mlp x f64 + y i32; llama tokens i32). */
double ref_mem_dataset(const ref_model_config *mc, double n);
/* Batch size used by the estimates: min(N, qN + L/3 + sqrt(L^2/9 + 2 L qN)), L = ln 1e15
 * (Bernstein: P(|B| exceeds it) < 1e-15 per step). */
double ref_mem_batch_bound(double q, double n);
/* The margin every estimate carries: 1.25 x + 64 MiB (docs/memory.md). */
double ref_mem_margin(double bytes);
/* `reference dpsgd` / `reference dpzo` with N examples (n_data; 0 = the dataset is not
 * counted: a --data file not yet read), exporting or not; margin included. */
double ref_mem_dpsgd(const ref_model_config *mc, const ref_dpsgd_config *c, double n_data, int exporting);
double ref_mem_dpzo(const ref_model_config *mc, const ref_dpzo_hparams *hp, double n_data, int exporting);

#endif

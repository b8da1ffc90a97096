/* reference/mem_estimate.h — upper estimates of a run's memory from its configuration,
 * before anything large is allocated (docs/memory.md; issue 15 class 4). Every count is
 * a double (no integer wrap for absurd configurations); bytes unless named otherwise. */
#ifndef REF_MEM_ESTIMATE_H
#define REF_MEM_ESTIMATE_H

#include <stdint.h>

#include "common/spec_mem.h"
#include "reference/dpsgd.h"
#include "reference/dpzo.h"
#include "reference/model.h"

/* Doubles of the reference's per-example work arena (forward cache + backward). */
double ref_mem_example(const ref_model_config *mc);
/* `reference dpsgd` / `reference dpzo` with N examples (n_data; 0 = the dataset is not
 * counted: a --data file not yet read), exporting or not; margin included. */
double ref_mem_dpsgd(const ref_model_config *mc, const ref_dpsgd_config *c, double n_data, int exporting);
double ref_mem_dpzo(const ref_model_config *mc, const ref_dpzo_hparams *hp, double n_data, int exporting);

#endif

/* optimized/opt_mem.h — upper estimates of the memory of `train dpsgd|dpzo` on one rank
 * (docs/memory.md), from the configuration, before the engine allocates. The counts of
 * the configuration itself (parameters, dataset, batch bound, margin) are the neutral
 * module's (common/spec_mem.h); the engine's buffers are counted here. */
#ifndef OPT_MEM_H
#define OPT_MEM_H

#include "common/spec_dpsgd.h"
#include "common/spec_dpzo.h"
#include "common/spec_mem.h"
#include "optimized/dpsgd.h"

/* Elements of the engine's batched activations and tape per example (either backend). */
double opt_mem_example(const dp_model_config *mc);
/* One rank of R (esize: bytes of the backend's dtype; n_data 0 = the dataset is not yet
 * known and not counted); margin included. */
double opt_mem_dpsgd(const dp_model_config *mc, const dp_dpsgd_config *c, const opt_dp_options *o, double esize,
                     int R, double n_data, int exporting);
double opt_mem_dpzo(const dp_model_config *mc, const dp_dpzo_hparams *hp, double esize, int R, double n_data,
                    int exporting);

/* Bytes of a data set's arrays and of a host model's f64 parameters. */
double opt_mem_dataset_bytes(const dp_dataset *d);
double opt_mem_model_bytes(const dp_model *m);
/* Records in be's ledger the run's data set (tag dataset) and `copies` host f64 models
 * (tag host_model): memory the run holds outside the engine's allocations. */
void opt_mem_note_run(opt_backend *be, const dp_dataset *d, const dp_model *m, int copies);

#endif

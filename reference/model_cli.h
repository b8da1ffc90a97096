/* reference/model_cli.h — the model and dataset options shared by every training
 * command: aliases of the neutral module common/spec_model.h (dp_model_cli_*), kept
 * for the reference's code and its users (docs/dpsgd.md "Command", docs/dpzo.md). */
#ifndef REF_MODEL_CLI_H
#define REF_MODEL_CLI_H

#include "common/spec_model.h"
#include "reference/model.h"

typedef dp_model_cli ref_model_cli;
#define REF_MODEL_NOPTS DP_MODEL_NOPTS
#define ref_model_cli_init dp_model_cli_init
#define ref_model_cli_add_opts dp_model_cli_add_opts
#define ref_model_cli_finish dp_model_cli_finish
#define ref_model_cli_dataset dp_model_cli_dataset
#define ref_model_cli_mem_check dp_model_cli_mem_check

/* The memory pre-check of a run (common/memlimit.h, docs/memory.md): DP_OK when the
 * estimate `need` (bytes) fits --max-memory, or MemAvailable when it is absent; else
 * DP_ERR_INVALID printing the estimate and the limit. `what` names the run. */
dp_status ref_model_cli_mem_check(const ref_model_cli *c, double need, const char *what);

#endif

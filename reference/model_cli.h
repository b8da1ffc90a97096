/* reference/model_cli.h — the model and dataset options shared by every training
 * command (`reference dpsgd`, `reference dpzo`, `train dpsgd`, `train dpzo`):
 *   --model mlp|llama  --in --hidden --classes (mlp)  --vocab --dim --layers --heads
 *   --ffn --seq --tied (llama)  --data FILE  --dataset-size N  --max-memory BYTES[K|M|G|T]
 * Declared, parsed and validated here once (docs/dpsgd.md "Command", docs/dpzo.md).
 * Usage:
 *   ref_model_cli mc; ref_model_cli_init(&mc, default_n);
 *   DP_TRY(ref_model_cli_add_opts(opts, &n, cap, &mc, "help of --dataset-size"));
 *   ... dp_opts_parse ...
 *   DP_TRY(ref_model_cli_finish(&cfg, &mc));                 (validated model config)
 *   DP_TRY(ref_model_cli_dataset(&d, &N, &cfg, &mc, seed));  (--data FILE or N generated) */
#ifndef REF_MODEL_CLI_H
#define REF_MODEL_CLI_H

#include <stdint.h>

#include "common/cli.h"
#include "common/rng.h"
#include "common/status.h"
#include "reference/model.h"

typedef struct {
    const char *model, *hidden, *data, *max_memory;
    int64_t in, classes, vocab, dim, layers, heads, ffn, seq, n;
    int tied;
    int seen_model, seen_in, seen_hidden, seen_classes, seen_vocab, seen_dim, seen_layers, seen_heads, seen_ffn,
        seen_seq, seen_tied, seen_data, seen_n, seen_max_memory;
} ref_model_cli;
#define REF_MODEL_NOPTS 14

/* n = the --dataset-size value used when the option is absent. */
void ref_model_cli_init(ref_model_cli *c, int64_t n);
/* Appends REF_MODEL_NOPTS entries to opts[*n..] (cap = capacity of opts); n_help is the
 * help text of --dataset-size. */
dp_status ref_model_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, ref_model_cli *c, const char *n_help);
/* The validated model configuration: --model is required; an mlp flag with --model llama
 * (or the reverse) is DP_ERR_USAGE naming the flag; --hidden none = no hidden layer. */
dp_status ref_model_cli_finish(ref_model_config *mc, const ref_model_cli *c);
/* The dataset. --data FILE: every example of the file (ref_dataset_load: shapes, token
 * range, labels and finiteness checked against mc); --dataset-size, when also given, must
 * equal the file's count (DP_ERR_INVALID otherwise). Without --data: *n examples generated
 * from the public seed. On success *n is the dataset's size. */
dp_status ref_model_cli_dataset(ref_dataset *d, int64_t *n, const ref_model_config *mc, const ref_model_cli *c,
                                dp_seed seed);

/* The memory pre-check of a run (common/memlimit.h, docs/memory.md): DP_OK when the
 * estimate `need` (bytes) fits --max-memory, or MemAvailable when it is absent; else
 * DP_ERR_INVALID printing the estimate and the limit. `what` names the run. */
dp_status ref_model_cli_mem_check(const ref_model_cli *c, double need, const char *what);

#endif

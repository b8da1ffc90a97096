/* common/spec_model.h — the models' data structures, configuration, parameter layout
 * and initialisation, the datasets, and the model and dataset command-line options:
 * the neutral plumbing that the reference (reference/) and the engine (optimized/)
 * both include, so that both receive identical parameters and data (docs/models.md,
 * docs/architecture.md "What the engine shares with the reference"). It depends on
 * common/ only. The reference's historical names (ref_model, ref_model_init, ...)
 * remain as aliases in reference/model.h and reference/model_cli.h.
 *
 * Model and dataset options (every training command: `reference dpsgd|dpzo`,
 * `train dpsgd|dpzo`):
 *   --model mlp|llama  --in --hidden --classes (mlp)  --vocab --dim --layers --heads
 *   --ffn --seq --tied (llama)  --data FILE  --dataset-size N
 * Usage:
 *   dp_model_cli mc; dp_model_cli_init(&mc, default_n);
 *   DP_TRY(dp_model_cli_add_opts(opts, &n, cap, &mc, "help of --dataset-size"));
 *   ... dp_opts_parse ...
 *   DP_TRY(dp_model_cli_finish(&cfg, &mc));                 (validated model config)
 *   DP_TRY(dp_model_cli_dataset(&d, &N, &cfg, &mc, seed));  (--data FILE or N generated) */
#ifndef DP_SPEC_MODEL_H
#define DP_SPEC_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/cli.h"
#include "common/rng.h"
#include "common/status.h"
#include "common/tensor.h"

#define DP_MAX_HIDDEN 8
#define DP_MAX_NAME 64

typedef enum { DP_MLP = 0, DP_LLAMA = 1 } dp_model_kind;

typedef struct {
    dp_model_kind kind;
    /* mlp: x in R^in -> hidden[0] -> ... -> hidden[nhidden-1] -> classes */
    int in, nhidden, hidden[DP_MAX_HIDDEN], classes;
    /* llama: vocab V, dim D, layers L, heads H (head dim D/H), ffn F, sequence T */
    int vocab, dim, layers, heads, ffn, seq, tied;
    double rope_theta; /* 10000 */
    double norm_eps;   /* 1e-5  */
} dp_model_config;

/* One parameter tensor: row-major f64, named as in docs/models.md
 * (`layers.{i}.weight`, `tok_emb`, `layers.{l}.wq`, ...). */
typedef struct {
    char name[DP_MAX_NAME];
    int ndim;
    int64_t shape[DP_MAX_DIMS];
    int64_t numel;
    double *data;
} dp_param;

typedef struct {
    dp_model_config cfg;
    int nparams;
    dp_param *params; /* in the canonical order (docs/models.md); index = RNG stream/lane id */
    int64_t total;     /* sum of numel */
} dp_model;

/* A dataset of N examples: token sequences [N, T] (llama) or inputs [N, in] with
 * integer labels [N] (mlp). */
typedef struct {
    dp_model_kind kind;
    int64_t n;
    int seq, in;
    int32_t *tokens; /* llama: [n, seq] */
    double *x;       /* mlp:   [n, in]  */
    int32_t *y;      /* mlp:   [n]      */
} dp_dataset;

/* The largest generated dataset, in elements (N * T for llama, N * in for mlp): 2^31. */
#define DP_MAX_DATA_ELEMS ((int64_t)1 << 31)

/* Default configs: the tiny llama (V=64, D=32, L=2, H=4, F=64, T=16, untied) and
 * the mlp (in=16, hidden=32,32, classes=10). */
void dp_model_config_default(dp_model_config *cfg, dp_model_kind kind);
/* Validates the config (heads divide dim, head dim even, sizes >= 1, ...). */
dp_status dp_model_config_check(const dp_model_config *cfg);

/* Allocate and initialise from the public seed through the INIT stream
 * (matrices N(0, 0.02^2), norm gains 1, biases 0; docs/models.md). */
dp_status dp_model_init(dp_model *m, const dp_model_config *cfg, dp_seed seed);
dp_status dp_model_copy(dp_model *out, const dp_model *in);
void dp_model_free(dp_model *m);
int dp_model_find(const dp_model *m, const char *name); /* index or -1 */

dp_status dp_dataset_generate(dp_dataset *d, const dp_model_config *cfg, int64_t n, dp_seed seed);
/* Loads `tokens` (I32/I64 [N, T]) or `x` (F64/F32 [N, in]) and `y` (I32/I64 [N]) from a
 * safetensors file; checks shapes and ranges against cfg. */
dp_status dp_dataset_load(dp_dataset *d, const dp_model_config *cfg, const char *path);
void dp_dataset_free(dp_dataset *d);

/* ---- the model and dataset options ---- */
typedef struct {
    const char *model, *hidden, *data, *max_memory;
    int64_t in, classes, vocab, dim, layers, heads, ffn, seq, n;
    int tied;
    int seen_model, seen_in, seen_hidden, seen_classes, seen_vocab, seen_dim, seen_layers, seen_heads, seen_ffn,
        seen_seq, seen_tied, seen_data, seen_n, seen_max_memory;
} dp_model_cli;
#define DP_MODEL_NOPTS 14

/* n = the --dataset-size value used when the option is absent. */
void dp_model_cli_init(dp_model_cli *c, int64_t n);
/* Appends DP_MODEL_NOPTS entries to opts[*n..] (cap = capacity of opts); n_help is the
 * help text of --dataset-size. */
dp_status dp_model_cli_add_opts(dp_opt *opts, size_t *n, size_t cap, dp_model_cli *c, const char *n_help);
/* The validated model configuration: --model is required; an mlp flag with --model llama
 * (or the reverse) is DP_ERR_USAGE naming the flag; --hidden none = no hidden layer. */
dp_status dp_model_cli_finish(dp_model_config *mc, const dp_model_cli *c);
/* The dataset. --data FILE: every example of the file (dp_dataset_load: shapes, token
 * range, labels and finiteness checked against mc); --dataset-size, when also given, must
 * equal the file's count (DP_ERR_INVALID otherwise). Without --data: *n examples generated
 * from the public seed. On success *n is the dataset's size. */
dp_status dp_model_cli_dataset(dp_dataset *d, int64_t *n, const dp_model_config *mc, const dp_model_cli *c,
                                dp_seed seed);
/* Refuse a run whose memory estimate `need` (bytes) exceeds --max-memory, or MemAvailable
 * when it is absent (common/memlimit.h, docs/memory.md); `what` names the command. */
dp_status dp_model_cli_mem_check(const dp_model_cli *c, double need, const char *what);

#endif

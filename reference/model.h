/* reference/model.h — the exact CPU reference models (docs/models.md): an MLP and a
 * tiny Llama-style decoder, in double precision, with per-example loss and
 * per-example gradient by definition (one forward and one backward pass per example).
 *
 * This header is the contract shared by the DP-SGD reference (reference/dpsgd.*),
 * the DP-ZO reference (reference/dpzo.*), the optimized engine (which initialises
 * and loads the same parameters and data) and the conformance runner. */
#ifndef REF_MODEL_H
#define REF_MODEL_H

#include <stdint.h>

#include "common/rng.h"
#include "common/status.h"
#include "common/tensor.h"

#define REF_MAX_HIDDEN 8
#define REF_MAX_NAME 64

typedef enum { REF_MLP = 0, REF_LLAMA = 1 } ref_model_kind;

typedef struct {
    ref_model_kind kind;
    /* mlp: x in R^in -> hidden[0] -> ... -> hidden[nhidden-1] -> classes */
    int in, nhidden, hidden[REF_MAX_HIDDEN], classes;
    /* llama: vocab V, dim D, layers L, heads H (head dim D/H), ffn F, sequence T */
    int vocab, dim, layers, heads, ffn, seq, tied;
    double rope_theta; /* 10000 */
    double norm_eps;   /* 1e-5  */
} ref_model_config;

/* One parameter tensor: row-major f64, named as in docs/models.md
 * (`layers.{i}.weight`, `tok_emb`, `layers.{l}.wq`, ...). */
typedef struct {
    char name[REF_MAX_NAME];
    int ndim;
    int64_t shape[DP_MAX_DIMS];
    int64_t numel;
    double *data;
} ref_param;

typedef struct {
    ref_model_config cfg;
    int nparams;
    ref_param *params; /* in the canonical order (docs/models.md); index = RNG stream/lane id */
    int64_t total;     /* sum of numel */
} ref_model;

/* A dataset of N examples: token sequences [N, T] (llama) or inputs [N, in] with
 * integer labels [N] (mlp). */
typedef struct {
    ref_model_kind kind;
    int64_t n;
    int seq, in;
    int32_t *tokens; /* llama: [n, seq] */
    double *x;       /* mlp:   [n, in]  */
    int32_t *y;      /* mlp:   [n]      */
} ref_dataset;

/* The largest generated dataset, in elements (N * T for llama, N * in for mlp): 2^31. */
#define REF_MAX_DATA_ELEMS ((int64_t)1 << 31)

/* Default configs: the tiny llama (V=64, D=32, L=2, H=4, F=64, T=16, untied) and
 * the mlp (in=16, hidden=32,32, classes=10). */
void ref_config_default(ref_model_config *cfg, ref_model_kind kind);
/* Validates the config (heads divide dim, head dim even, sizes >= 1, ...). */
dp_status ref_config_check(const ref_model_config *cfg);

/* Allocate and initialise from the public seed through the INIT stream
 * (matrices N(0, 0.02^2), norm gains 1, biases 0; docs/models.md). */
dp_status ref_model_init(ref_model *m, const ref_model_config *cfg, dp_seed seed);
dp_status ref_model_copy(ref_model *out, const ref_model *in);
void ref_model_free(ref_model *m);
int ref_model_find(const ref_model *m, const char *name); /* index or -1 */

dp_status ref_dataset_generate(ref_dataset *d, const ref_model_config *cfg, int64_t n, dp_seed seed);
/* Loads `tokens` (I32/I64 [N, T]) or `x` (F64/F32 [N, in]) and `y` (I32/I64 [N]) from a
 * safetensors file; checks shapes and ranges against cfg. */
dp_status ref_dataset_load(ref_dataset *d, const ref_model_config *cfg, const char *path);
void ref_dataset_free(ref_dataset *d);

/* Loss of example i at parameters `params` (an array of m->nparams pointers with the
 * shapes of m's parameters; pass NULL to use m's own parameters). */
dp_status ref_example_loss(double *loss, const ref_model *m, double *const *params, const ref_dataset *d,
                           int64_t i);
/* Loss and gradient of example i at m's parameters: grads[p] has m->params[p].numel
 * doubles and is overwritten. A tied lm_head/tok_emb gradient is the sum of both uses. */
dp_status ref_example_grad(double *loss, double *const *grads, const ref_model *m, const ref_dataset *d, int64_t i);

#endif

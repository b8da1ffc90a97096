/* reference/model.h — the exact CPU reference models (docs/models.md): an MLP and a
 * tiny Llama-style decoder, in double precision, with per-example loss and
 * per-example gradient by definition (one forward and one backward pass per example).
 *
 * The data structures, configuration, parameter layout, initialisation and datasets
 * are the neutral module common/spec_model.h, shared with the engine; the ref_ names
 * below are aliases of it, kept for the reference's own code and its users. */
#ifndef REF_MODEL_H
#define REF_MODEL_H

#include <stdint.h>

#include "common/spec_model.h"

/* aliases of common/spec_model.h */
typedef dp_model_kind ref_model_kind;
#define REF_MLP DP_MLP
#define REF_LLAMA DP_LLAMA
#define REF_MAX_HIDDEN DP_MAX_HIDDEN
#define REF_MAX_NAME DP_MAX_NAME
typedef dp_model_config ref_model_config;
typedef dp_param ref_param;
typedef dp_model ref_model;
typedef dp_dataset ref_dataset;
#define REF_MAX_DATA_ELEMS DP_MAX_DATA_ELEMS
#define ref_config_default dp_model_config_default
#define ref_config_check dp_model_config_check
#define ref_model_init dp_model_init
#define ref_model_copy dp_model_copy
#define ref_model_free dp_model_free
#define ref_model_find dp_model_find
#define ref_dataset_generate dp_dataset_generate
#define ref_dataset_load dp_dataset_load
#define ref_dataset_free dp_dataset_free

/* Loss of example i at parameters `params` (an array of m->nparams pointers with the
 * shapes of m's parameters; pass NULL to use m's own parameters). */
dp_status ref_example_loss(double *loss, const ref_model *m, double *const *params, const ref_dataset *d,
                           int64_t i);
/* Loss and gradient of example i at m's parameters: grads[p] has m->params[p].numel
 * doubles and is overwritten. A tied lm_head/tok_emb gradient is the sum of both uses. */
dp_status ref_example_grad(double *loss, double *const *grads, const ref_model *m, const ref_dataset *d, int64_t i);

#endif

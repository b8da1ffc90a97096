/* common/tensor.h — dense row-major tensors (up to 4 dimensions), dtypes and
 * exact conversions, and named tensor sets (what a safetensors file holds).
 *
 * Conversions f32 -> bf16 and f32 -> f16 round to nearest, ties to even, with
 * IEEE overflow to infinity, gradual underflow to subnormals, and NaN kept NaN
 * (quiet, sign kept). bf16/f16 -> f32 are exact. f64 -> f32 is the C cast
 * (round to nearest even in the default rounding mode). */
#ifndef DP_TENSOR_H
#define DP_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum { DP_F64 = 0, DP_F32, DP_BF16, DP_F16, DP_I32, DP_I64, DP_DTYPE_COUNT } dp_dtype;

#define DP_MAX_DIMS 4

typedef struct {
    dp_dtype dtype;
    int ndim;                      /* 0 (scalar) .. 4 */
    int64_t shape[DP_MAX_DIMS];
    void *data;                    /* row-major, native little-endian */
} dp_tensor;

size_t dp_dtype_size(dp_dtype dt);
/* Unit roundoff of a floating-point dtype: 2^-53, 2^-24, 2^-8 (bf16), 2^-11 (f16); 0 for integers. */
double dp_dtype_unit_roundoff(dp_dtype dt);
const char *dp_dtype_name(dp_dtype dt);                  /* "F64", "F32", "BF16", "F16", "I32", "I64" */
dp_status dp_dtype_from_name(dp_dtype *out, const char *name);

int64_t dp_tensor_numel(const dp_tensor *t);
size_t dp_tensor_nbytes(const dp_tensor *t);
/* Allocate zeroed storage. shape may be NULL when ndim == 0. */
dp_status dp_tensor_alloc(dp_tensor *t, dp_dtype dt, int ndim, const int64_t *shape);
void dp_tensor_free(dp_tensor *t);
dp_status dp_tensor_copy(dp_tensor *out, const dp_tensor *in);
/* Element i (flat index) as double / set from double (rounded to the dtype; integer
 * dtypes take the value truncated toward zero, and a NaN or a value outside the integer
 * type's range is DP_ERR_INVALID with the element left unchanged — never a wrapped or
 * clamped value). */
double dp_tensor_get(const dp_tensor *t, int64_t i);
dp_status dp_tensor_put(dp_tensor *t, int64_t i, double v);
/* out = in converted to dtype `to` (element by element through dp_tensor_get/put). */
dp_status dp_tensor_convert(dp_tensor *out, const dp_tensor *in, dp_dtype to);
/* "[2, 3]" style shape string into buf. */
const char *dp_shape_str(char *buf, size_t len, const dp_tensor *t);

uint16_t dp_f32_to_bf16(float f);
float dp_bf16_to_f32(uint16_t h);
uint16_t dp_f32_to_f16(float f);
float dp_f16_to_f32(uint16_t h);

/* ---- named tensor sets ---- */
typedef struct { char *name; dp_tensor t; } dp_named_tensor;
typedef struct { char *key; char *value; } dp_meta_entry;
typedef struct {
    dp_named_tensor *items; size_t n, cap;
    dp_meta_entry *meta; size_t nmeta, metacap;
} dp_tensor_set;

void dp_tset_init(dp_tensor_set *s);
void dp_tset_free(dp_tensor_set *s);
/* Deep-copies t under `name`; a duplicate name is DP_ERR_INVALID. */
dp_status dp_tset_add(dp_tensor_set *s, const char *name, const dp_tensor *t);
/* Convenience: copy raw arrays of the given dtype / shape. */
dp_status dp_tset_add_raw(dp_tensor_set *s, const char *name, dp_dtype dt, const void *data,
                          int ndim, const int64_t *shape);
dp_status dp_tset_add_f64(dp_tensor_set *s, const char *name, const double *data, int ndim,
                          const int64_t *shape);
dp_status dp_tset_add_scalar_f64(dp_tensor_set *s, const char *name, double v);
const dp_tensor *dp_tset_find(const dp_tensor_set *s, const char *name);
/* 1 when a and b hold the same tensors (names, order, dtypes, shapes, bytes) and the same
 * metadata (keys, order, values); 0 otherwise. */
int dp_tset_equal(const dp_tensor_set *a, const dp_tensor_set *b);
/* Sets or replaces a metadata entry. */
dp_status dp_tset_set_meta(dp_tensor_set *s, const char *key, const char *value);
const char *dp_tset_meta(const dp_tensor_set *s, const char *key);  /* NULL if absent */

#endif

/* common/tensor.c — tensors, dtype conversions, named tensor sets. */
#include "tensor.h"
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct { const char *name; size_t size; } dp_dtypes[DP_DTYPE_COUNT] = {
    [DP_F64] = {"F64", 8}, [DP_F32] = {"F32", 4}, [DP_BF16] = {"BF16", 2},
    [DP_F16] = {"F16", 2}, [DP_I32] = {"I32", 4}, [DP_I64] = {"I64", 8},
};

double dp_dtype_unit_roundoff(dp_dtype dt) {
    switch (dt) {
    case DP_F64: return ldexp(1.0, -53);
    case DP_F32: return ldexp(1.0, -24);
    case DP_BF16: return ldexp(1.0, -8);
    case DP_F16: return ldexp(1.0, -11);
    default: return 0.0; /* integers are exact */
    }
}

size_t dp_dtype_size(dp_dtype dt) { return (unsigned)dt < DP_DTYPE_COUNT ? dp_dtypes[dt].size : 0; }
const char *dp_dtype_name(dp_dtype dt) { return (unsigned)dt < DP_DTYPE_COUNT ? dp_dtypes[dt].name : "?"; }

dp_status dp_dtype_from_name(dp_dtype *out, const char *name) {
    for (int i = 0; i < DP_DTYPE_COUNT; i++)
        if (strcmp(name, dp_dtypes[i].name) == 0) { *out = (dp_dtype)i; return DP_OK; }
    return dp_error(DP_ERR_FORMAT, "unknown or unsupported dtype '%s' (supported: F64 F32 BF16 F16 I32 I64)", name);
}

int64_t dp_tensor_numel(const dp_tensor *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

size_t dp_tensor_nbytes(const dp_tensor *t) { return (size_t)dp_tensor_numel(t) * dp_dtype_size(t->dtype); }

dp_status dp_tensor_alloc(dp_tensor *t, dp_dtype dt, int ndim, const int64_t *shape) {
    memset(t, 0, sizeof *t);
    if ((unsigned)dt >= DP_DTYPE_COUNT) return dp_error(DP_ERR_INVALID, "invalid dtype %d", (int)dt);
    if (ndim < 0 || ndim > DP_MAX_DIMS) return dp_error(DP_ERR_INVALID, "tensor rank %d outside 0..%d", ndim, DP_MAX_DIMS);
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return dp_error(DP_ERR_INVALID, "negative dimension %lld", (long long)shape[d]);
        if (shape[d] && n > (UINT64_MAX / 16) / (uint64_t)shape[d])
            return dp_error(DP_ERR_INVALID, "tensor size overflows");
        n *= (uint64_t)shape[d];
        t->shape[d] = shape[d];
    }
    t->dtype = dt;
    t->ndim = ndim;
    t->data = dp_calloc((size_t)n, dp_dtype_size(dt));
    return t->data ? DP_OK : DP_ERR_NOMEM;
}

void dp_tensor_free(dp_tensor *t) {
    if (!t) return;
    dp_free(t->data);
    t->data = NULL;
}

dp_status dp_tensor_copy(dp_tensor *out, const dp_tensor *in) {
    DP_TRY(dp_tensor_alloc(out, in->dtype, in->ndim, in->shape));
    size_t nb = dp_tensor_nbytes(in);
    if (nb) memcpy(out->data, in->data, nb); /* an empty tensor may have data == NULL */
    return DP_OK;
}

double dp_tensor_get(const dp_tensor *t, int64_t i) {
    switch (t->dtype) {
    case DP_F64: return ((const double *)t->data)[i];
    case DP_F32: return ((const float *)t->data)[i];
    case DP_BF16: return dp_bf16_to_f32(((const uint16_t *)t->data)[i]);
    case DP_F16: return dp_f16_to_f32(((const uint16_t *)t->data)[i]);
    case DP_I32: return ((const int32_t *)t->data)[i];
    case DP_I64: return (double)((const int64_t *)t->data)[i];
    default: return NAN;
    }
}

dp_status dp_tensor_put(dp_tensor *t, int64_t i, double v) {
    /* Integer targets: the truncated value must exist in the type (C leaves the cast of a
     * NaN or out-of-range double undefined). 2^31 and 2^63 are exact doubles. */
    if (t->dtype == DP_I32 && !(v > -2147483649.0 && v < 2147483648.0))
        return dp_error(DP_ERR_INVALID, "value %g does not fit in I32", v);
    if (t->dtype == DP_I64 && !(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return dp_error(DP_ERR_INVALID, "value %g does not fit in I64", v);
    switch (t->dtype) {
    case DP_F64: ((double *)t->data)[i] = v; break;
    case DP_F32: ((float *)t->data)[i] = (float)v; break;
    case DP_BF16: ((uint16_t *)t->data)[i] = dp_f32_to_bf16((float)v); break;
    case DP_F16: ((uint16_t *)t->data)[i] = dp_f32_to_f16((float)v); break;
    case DP_I32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case DP_I64: ((int64_t *)t->data)[i] = (int64_t)v; break;
    default: break;
    }
    return DP_OK;
}

dp_status dp_tensor_convert(dp_tensor *out, const dp_tensor *in, dp_dtype to) {
    DP_TRY(dp_tensor_alloc(out, to, in->ndim, in->shape));
    int64_t n = dp_tensor_numel(in);
    if (in->dtype == to) {
        if (n) memcpy(out->data, in->data, dp_tensor_nbytes(in));
        return DP_OK;
    }
    if (in->dtype == DP_I64 && to == DP_I32) {
        for (int64_t i = 0; i < n; i++) {
            int64_t v = ((const int64_t *)in->data)[i];
            if (v < INT32_MIN || v > INT32_MAX) {
                dp_tensor_free(out);
                return dp_error(DP_ERR_INVALID, "I64 value %lld does not fit in I32", (long long)v);
            }
            ((int32_t *)out->data)[i] = (int32_t)v;
        }
        return DP_OK;
    }
    if (to == DP_I64 && in->dtype == DP_I32) {
        for (int64_t i = 0; i < n; i++) ((int64_t *)out->data)[i] = ((const int32_t *)in->data)[i];
        return DP_OK;
    }
    for (int64_t i = 0; i < n; i++) {
        dp_status st = dp_tensor_put(out, i, dp_tensor_get(in, i));
        if (st != DP_OK) {
            dp_tensor_free(out);
            return dp_error_context(st, "converting element %lld from %s to %s", (long long)i,
                                    dp_dtype_name(in->dtype), dp_dtype_name(to));
        }
    }
    return DP_OK;
}

const char *dp_shape_str(char *buf, size_t len, const dp_tensor *t) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, len - o, "[");
    for (int d = 0; d < t->ndim && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
    return buf;
}

/* ---- bf16 / f16 ---- */
static uint32_t f32_bits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
static float bits_f32(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }

uint16_t dp_f32_to_bf16(float f) {
    uint32_t x = f32_bits(f);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((x >> 16) | 0x0040u); /* NaN: keep sign, quiet */
    /* round to nearest even on the 16 dropped bits; a carry into the exponent is correct
     * (it gives the next binade or infinity). */
    x += 0x7FFFu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

float dp_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t dp_f32_to_f16(float f) {
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xFFu, man = x & 0x7FFFFFu;
    if (exp == 0xFFu) /* inf or NaN (NaN made quiet, top payload bits kept) */
        return (uint16_t)(sign | 0x7C00u | (man ? 0x200u | (man >> 13) : 0));
    int e = (int)exp - 127 + 15; /* biased half exponent */
    if (e >= 0x1F) return (uint16_t)(sign | 0x7C00u); /* >= 2^16: overflow */
    if (e <= 0) {
        /* half subnormal: value = m * 2^-24 with m = round(1.man * 2^(e-1+24-15)) */
        if (e < -10) return (uint16_t)sign; /* below 2^-25: rounds to zero */
        man |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = man >> shift, rem = man & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
        if (rem > halfway || (rem == halfway && (h & 1u))) h++; /* carry to 0x400 = min normal */
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13), rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* carry may give 0x7C00 = inf */
    return (uint16_t)(sign | h);
}

float dp_f16_to_f32(uint16_t h) {
    uint32_t sign = ((uint32_t)h & 0x8000u) << 16, exp = ((uint32_t)h >> 10) & 0x1Fu, man = h & 0x3FFu;
    if (exp == 0x1F) return bits_f32(sign | 0x7F800000u | (man << 13));
    if (exp == 0) {
        float v = (float)man * 0x1p-24f; /* exact: man < 2^10 */
        return bits_f32(f32_bits(v) | sign);
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

/* ---- tensor sets ---- */
void dp_tset_init(dp_tensor_set *s) { memset(s, 0, sizeof *s); }

void dp_tset_free(dp_tensor_set *s) {
    for (size_t i = 0; i < s->n; i++) { dp_free(s->items[i].name); dp_tensor_free(&s->items[i].t); }
    for (size_t i = 0; i < s->nmeta; i++) { dp_free(s->meta[i].key); dp_free(s->meta[i].value); }
    dp_free(s->items);
    dp_free(s->meta);
    memset(s, 0, sizeof *s);
}

const dp_tensor *dp_tset_find(const dp_tensor_set *s, const char *name) {
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->items[i].name, name) == 0) return &s->items[i].t;
    return NULL;
}

int dp_tset_equal(const dp_tensor_set *a, const dp_tensor_set *b) {
    if (a->n != b->n || a->nmeta != b->nmeta) return 0;
    for (size_t i = 0; i < a->n; i++) {
        const dp_tensor *x = &a->items[i].t, *y = &b->items[i].t;
        if (strcmp(a->items[i].name, b->items[i].name) || x->dtype != y->dtype || x->ndim != y->ndim) return 0;
        for (int d = 0; d < x->ndim; d++)
            if (x->shape[d] != y->shape[d]) return 0;
        size_t nb = dp_tensor_nbytes(x);
        if (nb && memcmp(x->data, y->data, nb)) return 0;
    }
    for (size_t i = 0; i < a->nmeta; i++)
        if (strcmp(a->meta[i].key, b->meta[i].key) || strcmp(a->meta[i].value, b->meta[i].value)) return 0;
    return 1;
}

dp_status dp_tset_add(dp_tensor_set *s, const char *name, const dp_tensor *t) {
    if (!name[0]) return dp_error(DP_ERR_INVALID, "empty tensor name");
    if (strcmp(name, "__metadata__") == 0) return dp_error(DP_ERR_INVALID, "tensor name '__metadata__' is reserved");
    if (dp_tset_find(s, name)) return dp_error(DP_ERR_INVALID, "duplicate tensor name '%s'", name);
    DP_TRY(DP_GROW(s->items, s->cap, s->n + 1, 16, "tensor set"));
    dp_named_tensor *it = &s->items[s->n];
    it->name = dp_strdup(name);
    if (!it->name) return DP_ERR_NOMEM;
    dp_status st = dp_tensor_copy(&it->t, t);
    if (st != DP_OK) { dp_free(it->name); return st; }
    s->n++;
    return DP_OK;
}

dp_status dp_tset_add_raw(dp_tensor_set *s, const char *name, dp_dtype dt, const void *data, int ndim,
                          const int64_t *shape) {
    dp_tensor t = {.dtype = dt, .ndim = ndim, .data = (void *)data};
    if (ndim < 0 || ndim > DP_MAX_DIMS) return dp_error(DP_ERR_INVALID, "tensor rank %d outside 0..4", ndim);
    for (int d = 0; d < ndim; d++) t.shape[d] = shape[d];
    return dp_tset_add(s, name, &t);
}

dp_status dp_tset_add_f64(dp_tensor_set *s, const char *name, const double *data, int ndim, const int64_t *shape) {
    return dp_tset_add_raw(s, name, DP_F64, data, ndim, shape);
}

dp_status dp_tset_add_scalar_f64(dp_tensor_set *s, const char *name, double v) {
    return dp_tset_add_raw(s, name, DP_F64, &v, 0, NULL);
}

dp_status dp_tset_set_meta(dp_tensor_set *s, const char *key, const char *value) {
    for (size_t i = 0; i < s->nmeta; i++)
        if (strcmp(s->meta[i].key, key) == 0) {
            char *v = dp_strdup(value);
            if (!v) return DP_ERR_NOMEM;
            dp_free(s->meta[i].value);
            s->meta[i].value = v;
            return DP_OK;
        }
    DP_TRY(DP_GROW(s->meta, s->metacap, s->nmeta + 1, 16, "metadata"));
    char *k = dp_strdup(key), *v = dp_strdup(value);
    if (!k || !v) { dp_free(k); dp_free(v); return DP_ERR_NOMEM; }
    s->meta[s->nmeta].key = k;
    s->meta[s->nmeta].value = v;
    s->nmeta++;
    return DP_OK;
}

const char *dp_tset_meta(const dp_tensor_set *s, const char *key) {
    for (size_t i = 0; i < s->nmeta; i++)
        if (strcmp(s->meta[i].key, key) == 0) return s->meta[i].value;
    return NULL;
}

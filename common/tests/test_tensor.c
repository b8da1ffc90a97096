/* common/tests/test_tensor.c — tensor allocation and validation, element
 * access and dtype conversion for every dtype, shape strings, tensor sets and
 * metadata, and the RNG API's names and key generation. (The f16/bf16
 * conversions themselves are tested exhaustively in test_halfconv.c.) */
#include <string.h>

#include "common/rng.h"
#include "common/tensor.h"
#include "common/test.h"
#include <math.h>

int main(void) {
    dp_tensor t, u;
    const int64_t sh[4] = {2, 3, 1, 2};
    /* allocation and its validation */
    T_OK(dp_tensor_alloc(&t, DP_F32, 4, sh));
    T_CHECK(dp_tensor_numel(&t) == 12 && dp_tensor_nbytes(&t) == 48, "numel %lld", (long long)dp_tensor_numel(&t));
    char buf[64];
    T_CHECK(strcmp(dp_shape_str(buf, sizeof buf, &t), "[2, 3, 1, 2]") == 0, "shape string %s", buf);
    dp_tensor_free(&t);
    T_OK(dp_tensor_alloc(&t, DP_F64, 0, NULL));
    T_CHECK(dp_tensor_numel(&t) == 1 && strcmp(dp_shape_str(buf, sizeof buf, &t), "[]") == 0, "scalar: %s", buf);
    dp_tensor_free(&t);
    const int64_t neg[1] = {-1}, big[3] = {1LL << 40, 1LL << 40, 1LL << 40};
    T_CHECK(dp_tensor_alloc(&t, DP_F32, 1, neg) == DP_ERR_INVALID, "negative dimension");
    T_CHECK(dp_tensor_alloc(&t, DP_F32, 5, sh) == DP_ERR_INVALID, "rank 5");
    T_CHECK(dp_tensor_alloc(&t, DP_F32, -1, sh) == DP_ERR_INVALID, "rank -1");
    T_CHECK(dp_tensor_alloc(&t, DP_F32, 3, big) == DP_ERR_INVALID && strstr(dp_last_error(), "overflow"), "overflow");
    T_CHECK(dp_tensor_alloc(&t, (dp_dtype)99, 1, sh) == DP_ERR_INVALID, "bad dtype");

    /* dtype names */
    for (int d = 0; d < DP_DTYPE_COUNT; d++) {
        dp_dtype back;
        T_OK(dp_dtype_from_name(&back, dp_dtype_name((dp_dtype)d)));
        T_CHECK(back == (dp_dtype)d, "dtype name round trip %d", d);
    }
    dp_dtype dd;
    T_CHECK(dp_dtype_from_name(&dd, "U8") == DP_ERR_FORMAT && strstr(dp_last_error(), "'U8'"), "unknown dtype name");
    T_CHECK(dp_dtype_size((dp_dtype)99) == 0 && strcmp(dp_dtype_name((dp_dtype)99), "?") == 0, "invalid dtype size/name");

    /* get/put/convert for every dtype: small integers are exact in all of them */
    const int64_t s1[1] = {5};
    const double vals[5] = {0, 1, -2, 3, 100};
    for (int a = 0; a < DP_DTYPE_COUNT; a++) {
        T_OK(dp_tensor_alloc(&t, (dp_dtype)a, 1, s1));
        for (int i = 0; i < 5; i++) dp_tensor_put(&t, i, vals[i]);
        for (int b = 0; b < DP_DTYPE_COUNT; b++) {
            T_OK(dp_tensor_convert(&u, &t, (dp_dtype)b));
            int ok = 1;
            for (int i = 0; i < 5; i++) ok &= dp_tensor_get(&u, i) == vals[i];
            T_CHECK(ok && u.dtype == (dp_dtype)b && u.ndim == 1 && u.shape[0] == 5, "convert %s -> %s",
                    dp_dtype_name((dp_dtype)a), dp_dtype_name((dp_dtype)b));
            dp_tensor_free(&u);
        }
        T_OK(dp_tensor_copy(&u, &t));
        T_CHECK(memcmp(u.data, t.data, dp_tensor_nbytes(&t)) == 0, "copy");
        dp_tensor_free(&u);
        dp_tensor_free(&t);
    }
    /* rounding on put: f32 rounds to nearest even, bf16 through f32, integers truncate toward zero */
    T_OK(dp_tensor_alloc(&t, DP_BF16, 1, s1));
    dp_tensor_put(&t, 0, 1.0 + 1.0 / 256);  /* halfway between bf16 1 and 1 + 2^-7: ties to even -> 1 */
    dp_tensor_put(&t, 1, 1.0 + 3.0 / 256);  /* halfway between 1 + 2^-7 and 1 + 2^-6: -> 1 + 2^-6 */
    T_CHECK(dp_tensor_get(&t, 0) == 1.0 && dp_tensor_get(&t, 1) == 1.0 + 1.0 / 64, "bf16 put ties to even: %.9g %.9g",
            dp_tensor_get(&t, 0), dp_tensor_get(&t, 1));
    dp_tensor_free(&t);
    T_OK(dp_tensor_alloc(&t, DP_I32, 1, s1));
    T_OK(dp_tensor_put(&t, 0, -2.7));
    T_CHECK(dp_tensor_get(&t, 0) == -2.0, "I32 put truncates toward zero");
    /* NaN and out-of-range values into integer dtypes are errors, element untouched */
    T_CHECK(dp_tensor_put(&t, 0, NAN) == DP_ERR_INVALID && dp_tensor_get(&t, 0) == -2.0, "NaN into I32");
    T_CHECK(dp_tensor_put(&t, 0, 2147483648.0) == DP_ERR_INVALID, "2^31 into I32");
    T_CHECK(dp_tensor_put(&t, 0, 2147483647.9) == DP_OK && dp_tensor_get(&t, 0) == 2147483647.0, "I32 max");
    T_CHECK(dp_tensor_put(&t, 0, -2147483648.9) == DP_OK && dp_tensor_get(&t, 0) == -2147483648.0, "I32 min");
    {
        dp_tensor f, g;
        int64_t s2[1] = {2};
        T_OK(dp_tensor_alloc(&f, DP_F64, 1, s2));
        ((double *)f.data)[1] = 1e300;
        T_CHECK(dp_tensor_convert(&g, &f, DP_I64) == DP_ERR_INVALID && g.data == NULL, "F64 1e300 -> I64 rejected");
        dp_tensor_free(&f);
    }
    dp_tensor_free(&t);
    /* I64 -> I32 out of range is an error, not a silent wrap */
    T_OK(dp_tensor_alloc(&t, DP_I64, 1, s1));
    ((int64_t *)t.data)[3] = 1LL << 40;
    T_CHECK(dp_tensor_convert(&u, &t, DP_I32) == DP_ERR_INVALID && strstr(dp_last_error(), "does not fit"),
            "I64 -> I32 overflow must be rejected");
    T_CHECK(u.data == NULL, "failed convert leaves no storage");
    dp_tensor_free(&t);
    /* empty tensors convert and copy */
    const int64_t s0[2] = {3, 0};
    T_OK(dp_tensor_alloc(&t, DP_F16, 2, s0));
    T_OK(dp_tensor_convert(&u, &t, DP_F16));
    dp_tensor_free(&u);
    T_OK(dp_tensor_convert(&u, &t, DP_F64));
    T_CHECK(dp_tensor_numel(&u) == 0, "empty convert");
    dp_tensor_free(&u);
    dp_tensor_free(&t);

    /* tensor sets and metadata */
    dp_tensor_set s;
    dp_tset_init(&s);
    double v3[3] = {1, 2, 3};
    const int64_t s3[1] = {3};
    T_OK(dp_tset_add_f64(&s, "w", v3, 1, s3));
    T_OK(dp_tset_add_scalar_f64(&s, "loss", 0.5));
    T_CHECK(dp_tset_add_f64(&s, "w", v3, 1, s3) == DP_ERR_INVALID && strstr(dp_last_error(), "duplicate"), "duplicate name");
    T_CHECK(dp_tset_add_f64(&s, "", v3, 1, s3) == DP_ERR_INVALID, "empty name");
    T_CHECK(dp_tset_add_f64(&s, "__metadata__", v3, 1, s3) == DP_ERR_INVALID, "reserved name");
    T_CHECK(dp_tset_add_raw(&s, "r5", DP_F32, v3, 5, sh) == DP_ERR_INVALID, "rank 5 in a set");
    v3[0] = 99; /* the set holds a deep copy */
    const dp_tensor *w = dp_tset_find(&s, "w");
    T_CHECK(w && dp_tensor_get(w, 0) == 1 && s.n == 2, "find / deep copy");
    T_CHECK(dp_tset_find(&s, "nope") == NULL, "find missing");
    const dp_tensor *l = dp_tset_find(&s, "loss");
    T_CHECK(l && l->ndim == 0 && dp_tensor_get(l, 0) == 0.5, "scalar");
    T_OK(dp_tset_set_meta(&s, "a", "1"));
    T_OK(dp_tset_set_meta(&s, "a", "2"));
    T_CHECK(s.nmeta == 1 && strcmp(dp_tset_meta(&s, "a"), "2") == 0 && dp_tset_meta(&s, "b") == NULL, "meta replace");
    for (int i = 0; i < 40; i++) { /* growth past the initial capacity */
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        T_OK(dp_tset_add_scalar_f64(&s, name, i));
        T_OK(dp_tset_set_meta(&s, name, name));
    }
    T_CHECK(s.n == 42 && s.nmeta == 41 && dp_tensor_get(dp_tset_find(&s, "t39"), 0) == 39, "growth");
    dp_tset_free(&s);
    T_CHECK(s.n == 0 && s.items == NULL, "free resets");

    /* RNG API: purpose names, classes, fresh noise keys */
    const char *names[] = {"data", "init", "dpzo-dir", "attack-data", "test", "noise", "sampling", "dpzo-noise", "audit-noise"};
    for (int i = 0; i < 9; i++) {
        uint32_t p = dp_purpose_from_name(names[i]);
        T_CHECK(p != 0 && strcmp(dp_purpose_name(p), names[i]) == 0, "purpose %s", names[i]);
        T_CHECK((DP_PURPOSE_IS_SECRET(p) != 0) == (i >= 5), "purpose %s class", names[i]);
    }
    T_CHECK(dp_purpose_from_name("nope") == 0 && strcmp(dp_purpose_name(0x7f), "unknown") == 0, "unknown purpose");
    dp_stream st;
    T_CHECK(dp_stream_public(&st, (dp_seed){1}, 0x7f, 0, 0) == DP_ERR_INVALID && strstr(dp_last_error(), "unknown"),
            "unknown tag rejected");
    dp_noise_key k1, k2;
    T_OK(dp_noise_key_random(&k1));
    T_OK(dp_noise_key_random(&k2));
    T_CHECK(k1.k != k2.k, "two RAND_bytes keys coincide (probability 2^-64)");
    return t_finish();
}

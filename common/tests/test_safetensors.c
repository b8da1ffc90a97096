/* common/tests/test_safetensors.c — safetensors writer and reader (docs/formats.md).
 *
 *   1. round trip for every dtype x rank 0..4 (and zero-size dimensions), with
 *      metadata: names, order, dtypes, shapes, bytes and metadata survive, and
 *      re-serialising gives identical bytes; the file layout (8-byte header
 *      length, multiple of 8, space padding) and one golden file byte for byte;
 *   2. a table of malformed files, each rejected with DP_ERR_FORMAT and a message
 *      that names the problem;
 *   3. writer-side rejections (invalid UTF-8 names and metadata).
 * `test_safetensors --write-corpus DIR` writes the valid and malformed files of
 * this table as the fuzz seed corpus (common/tests/data/safetensors-corpus/). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/safetensors.h"
#include "common/test.h"

/* A file image from a header string (padded to a multiple of 8 unless raw) and
 * `ndata` data bytes (0x11, 0x22, ...). hl_override >= 0 replaces the length field. */
static uint8_t *mk(size_t *len, const char *hdr, size_t ndata, long long hl_override) {
    size_t hl = strlen(hdr);
    uint8_t *p = calloc(8 + hl + ndata + 1, 1);
    uint64_t v = hl_override >= 0 ? (uint64_t)hl_override : hl;
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
    memcpy(p + 8, hdr, hl);
    for (size_t i = 0; i < ndata; i++) p[8 + hl + i] = (uint8_t)(0x11 * (i + 1));
    *len = 8 + hl + ndata;
    return p;
}

typedef struct {
    const char *name, *hdr;
    size_t ndata;
    long long hl; /* -1: the header's length */
    size_t truncate_to; /* keep only the first truncate_to bytes; 0: all; 0xFFFF: none */
    const char *expect; /* substring of the message */
} bad_case;

#define T_F32_2 "{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":"
static const bad_case bad[] = {
    {"truncated_len", "{}", 0, -1, 5, "truncated"},
    {"empty_file", "{}", 0, -1, 0xFFFF, "truncated"},
    {"header_longer_than_file", "{\"a\":" T_F32_2 "[0,8]}}", 8, 1000, 0, "longer than the rest"},
    {"header_len_huge", "{}", 0, 0x7FFFFFFFFFFFFFFFLL, 0, "longer than the rest"},
    {"header_len_too_small", "{}", 0, 1, 0, "cannot hold"},
    {"invalid_json", "{\"a\": {\"dtype\": ", 0, -1, 0, "invalid JSON"},
    {"trailing_garbage", "{} x", 0, -1, 0, "invalid JSON"},
    {"invalid_utf8", "{\"a\xff\":" T_F32_2 "[0,8]}}", 8, -1, 0, "invalid JSON"},
    {"duplicate_keys", "{\"a\":" T_F32_2 "[0,8]},\"a\":" T_F32_2 "[8,16]}}", 16, -1, 0, "duplicate"},
    {"root_not_object", "[1,2,3]", 0, -1, 0, "not an object"},
    {"unknown_dtype", "{\"a\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}", 2, -1, 0, "dtype"},
    {"dtype_not_string", "{\"a\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, 0, "dtype"},
    {"missing_dtype", "{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, 0, "dtype"},
    {"shape_not_array", "{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8, -1, 0, "shape"},
    {"descriptor_not_object", "{\"a\":[1]}", 0, -1, 0, "descriptor"},
    {"empty_name", "{\"\":" T_F32_2 "[0,8]}}", 8, -1, 0, "empty tensor name"},
    {"offsets_out_of_range", "{\"a\":" T_F32_2 "[0,100]}}", 8, -1, 0, "out of range"},
    {"offsets_reversed", "{\"a\":" T_F32_2 "[8,0]}}", 8, -1, 0, "out of range"},
    {"offsets_negative", "{\"a\":" T_F32_2 "[-8,0]}}", 8, -1, 0, "out of range"},
    {"offsets_not_integers", "{\"a\":" T_F32_2 "[0.0,8]}}", 8, -1, 0, "not integers"},
    {"offsets_three", "{\"a\":" T_F32_2 "[0,4,8]}}", 8, -1, 0, "data_offsets"},
    {"offsets_too_big_integer", "{\"a\":" T_F32_2 "[0,99999999999999999999]}}", 8, -1, 0, "invalid JSON"},
    {"overlapping", "{\"a\":" T_F32_2 "[0,8]},\"b\":" T_F32_2 "[4,12]}}", 12, -1, 0, "overlap"},
    {"hole", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"b\":{\"dtype\":\"F32\",\"shape\":[1],"
             "\"data_offsets\":[8,12]}}", 12, -1, 0, "hole"},
    {"uncovered_tail", "{\"a\":" T_F32_2 "[0,8]}}", 12, -1, 0, "cover"},
    {"shape_size_mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8, -1, 0, "shape needs"},
    {"dtype_size_mismatch", "{\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, -1, 0, "shape needs"},
    {"size_overflow", "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,8]}}", 8, -1, 0,
     "overflow"},
    {"size_overflow_2", "{\"a\":{\"dtype\":\"I64\",\"shape\":[9223372036854775807],\"data_offsets\":[0,8]}}", 8, -1, 0,
     "overflow"},
    {"rank_5", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, -1, 0, "rank"},
    {"negative_dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, -1, 0, "non-negative"},
    {"fractional_dim", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, -1, 0, "non-negative"},
    {"metadata_not_object", "{\"__metadata__\":[\"x\"]}", 0, -1, 0, "__metadata__"},
    {"metadata_non_string", "{\"__metadata__\":{\"k\":1}}", 0, -1, 0, "not a string"},
    {"metadata_null", "{\"__metadata__\":{\"k\":null}}", 0, -1, 0, "not a string"},
    {"truncated_data", "{\"a\":" T_F32_2 "[0,8]}}", 5, -1, 0, "out of range"},
    {"truncated_header", "{\"a\":" T_F32_2 "[0,8]}}", 8, -1, 30, "longer than the rest"},
};
#define NBAD (sizeof bad / sizeof bad[0])

static uint8_t *bad_image(size_t *len, const bad_case *c) {
    uint8_t *p = mk(len, c->hdr, c->ndata, c->hl);
    if (c->truncate_to == 0xFFFF) *len = 0;
    else if (c->truncate_to && c->truncate_to < *len) *len = c->truncate_to;
    return p;
}

/* The valid sets: every dtype at every rank 0..4, two zero-size tensors, metadata. */
static const int64_t shapes[][4] = {{0}, {3}, {2, 3}, {2, 1, 3}, {1, 2, 2, 2}};
static dp_status build_valid(dp_tensor_set *s, uint64_t seed) {
    dp_tset_init(s);
    dp_stream st;
    dp_seed sd = {seed};
    DP_TRY(dp_stream_public(&st, sd, DP_PURPOSE_TEST, 99, 0));
    uint64_t ctr = 0;
    for (int dt = 0; dt < DP_DTYPE_COUNT; dt++)
        for (int r = 0; r <= 4; r++) {
            dp_tensor t;
            DP_TRY(dp_tensor_alloc(&t, (dp_dtype)dt, r, shapes[r]));
            uint8_t *b = t.data;
            for (size_t i = 0; i < dp_tensor_nbytes(&t); i++) b[i] = (uint8_t)dp_rng_u64(&st, ctr++);
            char name[64];
            snprintf(name, sizeof name, "%s.rank%d", dp_dtype_name((dp_dtype)dt), r);
            dp_status e = dp_tset_add(s, name, &t);
            dp_tensor_free(&t);
            DP_TRY(e);
        }
    const int64_t z1[1] = {0}, z2[2] = {3, 0};
    DP_TRY(dp_tset_add_raw(s, "empty.1d", DP_F32, NULL, 1, z1));
    DP_TRY(dp_tset_add_raw(s, "empty.2d", DP_BF16, NULL, 2, z2));
    DP_TRY(dp_tset_set_meta(s, "format", "pt"));
    DP_TRY(dp_tset_set_meta(s, "dpcert.note", "unicode \xc3\xa9 and \"quotes\" and \\ and \n"));
    DP_TRY(dp_tset_set_meta(s, "empty", ""));
    return DP_OK;
}

static int write_corpus(const char *dir) {
    char path[1024];
    size_t len;
    for (size_t i = 0; i < NBAD; i++) {
        uint8_t *p = bad_image(&len, &bad[i]);
        snprintf(path, sizeof path, "%s/bad_%s.safetensors", dir, bad[i].name);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(p, 1, len, f) != len) { fprintf(stderr, "cannot write %s\n", path); return 2; }
        fclose(f);
        free(p);
    }
    dp_tensor_set s;
    if (build_valid(&s, 1) != DP_OK) return 3;
    snprintf(path, sizeof path, "%s/valid_all_dtypes.safetensors", dir);
    if (dp_st_write(path, &s) != DP_OK) { fprintf(stderr, "%s\n", dp_last_error()); return 2; }
    dp_tset_free(&s);
    dp_tset_init(&s);
    float v[2] = {1.0f, -2.0f};
    const int64_t sh[1] = {2};
    dp_tset_add_raw(&s, "a", DP_F32, v, 1, sh);
    dp_tset_set_meta(&s, "k", "v");
    snprintf(path, sizeof path, "%s/valid_small.safetensors", dir);
    if (dp_st_write(path, &s) != DP_OK) return 2;
    dp_tset_free(&s);
    dp_tset_init(&s);
    snprintf(path, sizeof path, "%s/valid_empty.safetensors", dir);
    if (dp_st_write(path, &s) != DP_OK) return 2;
    printf("wrote %zu malformed and 3 valid files to %s\n", NBAD, dir);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    uint64_t seed = t_seed(7);

    /* 1. round trip */
    dp_tensor_set s, r, r2;
    T_OK(build_valid(&s, seed));
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t len = 0, len2 = 0;
    T_OK(dp_st_serialize(&buf, &len, &s));
    T_CHECK(buf != NULL && len >= 8, "serialize produced nothing");
    if (!buf) return t_finish();
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    T_CHECK(hl % 8 == 0 && hl + 8 <= len && buf[8] == '{', "header length %llu not a multiple of 8 or no '{'",
            (unsigned long long)hl);
    T_CHECK(buf[8 + hl - 1] == '}' || buf[8 + hl - 1] == ' ', "header must end in '}' or padding spaces");
    T_OK(dp_st_parse(&r, buf, len));
    T_CHECK(dp_tset_equal(&s, &r), "round trip changed the tensor set");
    T_CHECK(r.n == DP_DTYPE_COUNT * 5 + 2 && r.nmeta == 3, "round trip gave %zu tensors, %zu metadata", r.n, r.nmeta);
    T_OK(dp_st_serialize(&buf2, &len2, &r));
    T_CHECK(len == len2 && buf2 && memcmp(buf, buf2, len) == 0, "re-serialising is not byte-identical");
    /* through a file */
    T_OK(dp_st_write("rt.safetensors", &s));
    T_OK(dp_st_read(&r2, "rt.safetensors"));
    T_CHECK(dp_tset_equal(&s, &r2), "file round trip changed the tensor set");
    remove("rt.safetensors");
    /* negative control for same_sets: flip one data byte */
    ((uint8_t *)r2.items[1].t.data)[0] ^= 1;
    T_CHECK(!dp_tset_equal(&s, &r2), "dp_tset_equal must notice a flipped byte");
    dp_tset_free(&r2);
    dp_tset_free(&r);
    free(buf);
    free(buf2);
    dp_tset_free(&s);

    /* golden file: one F32 [2] tensor and one metadata entry, byte for byte */
    {
        dp_tset_init(&s);
        float v[2] = {1.0f, -2.0f};
        const int64_t sh[1] = {2};
        T_OK(dp_tset_add_raw(&s, "a", DP_F32, v, 1, sh));
        T_OK(dp_tset_set_meta(&s, "k", "v"));
        T_OK(dp_st_serialize(&buf, &len, &s));
        const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"__metadata__\":{\"k\":\"v\"}}";
        size_t n = strlen(h), pad = (n + 7) / 8 * 8;
        uint8_t want[256] = {(uint8_t)pad};
        memcpy(want + 8, h, n);
        memset(want + 8 + n, ' ', pad - n);
        const uint8_t data[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
        memcpy(want + 8 + pad, data, 8);
        T_CHECK(len == 16 + pad && memcmp(buf, want, len) == 0, "golden file differs (len %zu vs %zu): %.*s", len,
                16 + pad, (int)(len > 8 ? len - 8 : 0), buf + 8);
        free(buf);
        dp_tset_free(&s);
    }

    /* 2. malformed files */
    for (size_t i = 0; i < NBAD; i++) {
        uint8_t *p = bad_image(&len, &bad[i]);
        dp_clear_error();
        dp_status st = dp_st_parse(&r, p, len);
        T_CHECK(st == DP_ERR_FORMAT, "%s: status %s, expected malformed input (%s)", bad[i].name, dp_status_name(st),
                dp_last_error());
        T_CHECK(strstr(dp_last_error(), bad[i].expect) != NULL, "%s: message '%s' does not mention '%s'", bad[i].name,
                dp_last_error(), bad[i].expect);
        T_CHECK(r.n == 0 && r.nmeta == 0, "%s: a rejected parse must leave an empty set", bad[i].name);
        printf("rejected %-26s %s\n", bad[i].name, dp_last_error());
        free(p);
    }
    /* negative control for the table: a well-formed sibling of a bad case parses */
    {
        uint8_t *p = mk(&len, "{\"a\":" T_F32_2 "[0,8]}}", 8, -1);
        T_OK(dp_st_parse(&r, p, len));
        T_CHECK(r.n == 1 && dp_tset_find(&r, "a") != NULL, "well-formed control did not parse");
        dp_tset_free(&r);
        free(p);
    }
    /* missing file: DP_ERR_IO naming it */
    dp_clear_error();
    T_CHECK(dp_st_read(&r, "no-such.safetensors") == DP_ERR_IO && strstr(dp_last_error(), "no-such.safetensors"),
            "missing file: %s", dp_last_error());

    /* 3. writer rejections */
    dp_tset_init(&s);
    float one = 1;
    T_OK(dp_tset_add_raw(&s, "bad\xff", DP_F32, &one, 0, NULL));
    T_CHECK(dp_st_serialize(&buf, &len, &s) == DP_ERR_INVALID && strstr(dp_last_error(), "UTF-8"),
            "invalid UTF-8 name: %s", dp_last_error());
    dp_tset_free(&s);
    dp_tset_init(&s);
    T_OK(dp_tset_set_meta(&s, "k", "\xc3"));
    T_CHECK(dp_st_serialize(&buf, &len, &s) == DP_ERR_INVALID && strstr(dp_last_error(), "UTF-8"),
            "invalid UTF-8 metadata: %s", dp_last_error());
    dp_tset_free(&s);
    return t_finish();
}

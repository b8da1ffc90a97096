/* common/safetensors.c — safetensors I/O on top of jansson. */
#include "safetensors.h"
#include "common/alloc.h"

#include "fsutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

dp_status dp_read_file(uint8_t **buf, size_t *len, const char *path) {
    *buf = NULL;
    *len = 0;
    FILE *f = dp_fopen_read(path);
    if (!f && errno == ENOMEM) return dp_error(DP_ERR_NOMEM, "out of memory opening '%s'", path);
    if (!f) return dp_error(dp_errno_status(errno), "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    uint8_t *p = dp_malloc(cap);
    if (!p) { fclose(f); return dp_error(DP_ERR_NOMEM, "out of memory reading '%s'", path); }
    for (;;) {
        if (n == cap) {
            uint8_t *q = dp_realloc(p, cap * 2);
            if (!q) { dp_free(p); fclose(f); return dp_error(DP_ERR_NOMEM, "out of memory reading '%s'", path); }
            p = q;
            cap *= 2;
        }
        size_t r = fread(p + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (err) { dp_free(p); return dp_read_error("", path, err); }
    *buf = p;
    *len = n;
    return DP_OK;
}

static void put_u64le(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

dp_status dp_st_serialize(uint8_t **buf, size_t *len, const dp_tensor_set *s) {
    *buf = NULL;
    *len = 0;
    json_t *root = json_object();
    if (!root) return dp_error(DP_ERR_NOMEM, "out of memory building a safetensors header");
    size_t off = 0;
    for (size_t i = 0; i < s->n; i++) {
        const dp_tensor *t = &s->items[i].t;
        const char *name = s->items[i].name;
        if ((unsigned)t->dtype >= DP_DTYPE_COUNT || t->ndim < 0 || t->ndim > DP_MAX_DIMS) {
            json_decref(root);
            return dp_error(DP_ERR_INVALID, "tensor '%s': invalid dtype or rank", name);
        }
        json_t *shape = json_array();
        int bad = !shape;
        for (int d = 0; d < t->ndim && !bad; d++) bad = json_array_append_new(shape, json_integer(t->shape[d])) != 0;
        size_t nb = dp_tensor_nbytes(t);
        json_t *ent = bad ? NULL : json_pack("{s:s, s:o, s:[I,I]}", "dtype", dp_dtype_name(t->dtype), "shape", shape,
                                             "data_offsets", (json_int_t)off, (json_int_t)(off + nb));
        if (bad) json_decref(shape);
        if (!ent) {
            json_decref(root);
            return dp_error(DP_ERR_NOMEM, "out of memory building a safetensors header");
        }
        /* json_object_set_new fails (and frees ent) when the name is not valid UTF-8. */
        if (json_object_set_new(root, name, ent) != 0) {
            json_decref(root);
            return dp_error(DP_ERR_INVALID, "tensor name '%s' is not valid UTF-8", name);
        }
        off += nb;
    }
    if (s->nmeta) {
        json_t *meta = json_object();
        if (!meta || json_object_set_new(root, "__metadata__", meta) != 0) {
            json_decref(root);
            return dp_error(DP_ERR_NOMEM, "out of memory building a safetensors header");
        }
        for (size_t i = 0; i < s->nmeta; i++) {
            json_t *v = json_string(s->meta[i].value); /* NULL for invalid UTF-8 */
            if (!v || json_object_set_new(meta, s->meta[i].key, v) != 0) {
                json_decref(root);
                return dp_error(DP_ERR_INVALID, "metadata entry '%s' is not valid UTF-8", s->meta[i].key);
            }
        }
    }
    char *hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
    json_decref(root);
    if (!hdr) return dp_error(DP_ERR_NOMEM, "cannot encode safetensors header");
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    if (padded > DP_ST_MAX_HEADER) {
        dp_free(hdr);
        return dp_error(DP_ERR_INVALID, "safetensors header of %zu bytes exceeds the limit of %u", padded,
                        DP_ST_MAX_HEADER);
    }
    size_t total = 8 + padded + off;
    uint8_t *p = dp_malloc(total);
    if (!p) { dp_free(hdr); return dp_error(DP_ERR_NOMEM, "out of memory serializing safetensors"); }
    put_u64le(p, padded);
    memcpy(p + 8, hdr, hl);
    memset(p + 8 + hl, ' ', padded - hl);
    dp_free(hdr);
    size_t o = 8 + padded;
    for (size_t i = 0; i < s->n; i++) {
        size_t nb = dp_tensor_nbytes(&s->items[i].t);
        if (nb) memcpy(p + o, s->items[i].t.data, nb);
        o += nb;
    }
    *buf = p;
    *len = total;
    return DP_OK;
}

dp_status dp_st_write(const char *path, const dp_tensor_set *s) {
    uint8_t *buf;
    size_t len;
    DP_TRY(dp_st_serialize(&buf, &len, s));
    /* temp file in the same directory, fsync, rename: never through a link, never half-written */
    dp_status st = dp_write_file_atomic("safetensors export", path, buf, len);
    dp_free(buf);
    return st;
}

typedef struct { const char *name; uint64_t begin, end; json_t *desc; size_t order; } st_entry;

static int cmp_entry(const void *a, const void *b) {
    const st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

#define FMT_ERR(...) do { st = dp_error(DP_ERR_FORMAT, __VA_ARGS__); goto fail; } while (0)

dp_status dp_st_parse(dp_tensor_set *out, const uint8_t *buf, size_t len) {
    dp_tset_init(out);
    dp_status st = DP_OK;
    json_t *root = NULL;
    st_entry *ents = NULL, **byhdr = NULL;
    size_t k_hdr = 0;
    if (len < 8) return dp_error(DP_ERR_FORMAT, "truncated file: %zu bytes, the 8-byte header length is missing", len);
    uint64_t hl = 0;
    for (int i = 0; i < 8; i++) hl |= (uint64_t)buf[i] << (8 * i);
    if (hl > len - 8)
        return dp_error(DP_ERR_FORMAT, "header length %llu is longer than the rest of the file (%zu bytes)",
                        (unsigned long long)hl, len - 8);
    if (hl > DP_ST_MAX_HEADER)
        return dp_error(DP_ERR_FORMAT, "header length %llu exceeds the limit of %u bytes", (unsigned long long)hl,
                        DP_ST_MAX_HEADER);
    if (hl < 2) return dp_error(DP_ERR_FORMAT, "header of %llu bytes cannot hold a JSON object", (unsigned long long)hl);
    json_error_t jerr;
    root = json_loadb((const char *)buf + 8, (size_t)hl, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return dp_error(DP_ERR_FORMAT, "invalid JSON header at line %d column %d: %s", jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) FMT_ERR("JSON header is not an object");
    const uint8_t *data = buf + 8 + hl;
    uint64_t dlen = (uint64_t)(len - 8 - hl);
    size_t nt = json_object_size(root), ne = 0;
    ents = dp_calloc(nt ? nt : 1, sizeof *ents);
    if (!ents) { st = dp_error(DP_ERR_NOMEM, "out of memory parsing safetensors"); goto fail; }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) FMT_ERR("__metadata__ is not an object");
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) FMT_ERR("__metadata__ value of '%s' is not a string", mk);
                if ((st = dp_tset_set_meta(out, mk, json_string_value(mv))) != DP_OK) goto fail;
            }
            continue;
        }
        if (!key[0]) FMT_ERR("empty tensor name");
        if (!json_is_object(val)) FMT_ERR("tensor '%s': descriptor is not an object", key);
        json_t *jd = json_object_get(val, "dtype"), *js = json_object_get(val, "shape"),
               *jo = json_object_get(val, "data_offsets");
        if (!json_is_string(jd)) FMT_ERR("tensor '%s': missing or non-string dtype", key);
        if (!json_is_array(js)) FMT_ERR("tensor '%s': missing or non-array shape", key);
        if (!json_is_array(jo) || json_array_size(jo) != 2) FMT_ERR("tensor '%s': data_offsets is not [begin, end]", key);
        json_t *jb = json_array_get(jo, 0), *je = json_array_get(jo, 1);
        if (!json_is_integer(jb) || !json_is_integer(je)) FMT_ERR("tensor '%s': data_offsets are not integers", key);
        json_int_t b = json_integer_value(jb), e = json_integer_value(je);
        if (b < 0 || e < b || (uint64_t)e > dlen)
            FMT_ERR("tensor '%s': data_offsets [%lld, %lld] out of range (buffer has %llu bytes)", key, (long long)b,
                    (long long)e, (unsigned long long)dlen);
        ents[ne].name = key;
        ents[ne].begin = (uint64_t)b;
        ents[ne].end = (uint64_t)e;
        ents[ne].desc = val;
        ents[ne].order = ne;
        ne++;
    }
    /* byhdr[k] = the entry of the k-th tensor in header order (kept before sorting). */
    byhdr = dp_calloc(ne ? ne : 1, sizeof *byhdr);
    if (!byhdr) { st = dp_error(DP_ERR_NOMEM, "out of memory parsing safetensors"); goto fail; }
    qsort(ents, ne, sizeof *ents, cmp_entry);
    for (size_t i = 0; i < ne; i++) byhdr[ents[i].order] = &ents[i];
    uint64_t expect = 0;
    for (size_t i = 0; i < ne; i++) {
        if (ents[i].begin < expect) FMT_ERR("tensor '%s': data_offsets overlap another tensor", ents[i].name);
        if (ents[i].begin > expect) FMT_ERR("tensor '%s': hole in the byte buffer before offset %llu", ents[i].name,
                                            (unsigned long long)ents[i].begin);
        expect = ents[i].end;
    }
    if (expect != dlen)
        FMT_ERR("byte buffer has %llu bytes but the tensors cover %llu", (unsigned long long)dlen,
                (unsigned long long)expect);
    /* Build tensors in header order (the order of the JSON object). */
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        st_entry *en = byhdr[k_hdr++];
        dp_dtype dt;
        if (dp_dtype_from_name(&dt, json_string_value(json_object_get(val, "dtype"))) != DP_OK) {
            /* dp_error must not read the buffer it writes: copy the message first */
            char why[256];
            snprintf(why, sizeof why, "%s", dp_last_error());
            FMT_ERR("tensor '%s': %s", key, why);
        }
        json_t *js = json_object_get(val, "shape");
        size_t nd = json_array_size(js);
        if (nd > DP_MAX_DIMS) FMT_ERR("tensor '%s': rank %zu exceeds the supported maximum of %d", key, nd, DP_MAX_DIMS);
        int64_t shape[DP_MAX_DIMS] = {0};
        uint64_t numel = 1;
        for (size_t d = 0; d < nd; d++) {
            json_t *x = json_array_get(js, d);
            if (!json_is_integer(x) || json_integer_value(x) < 0)
                FMT_ERR("tensor '%s': dimension %zu is not a non-negative integer", key, d);
            uint64_t v = (uint64_t)json_integer_value(x);
            if (v && numel > UINT64_MAX / 8 / v) FMT_ERR("tensor '%s': element count overflows", key);
            numel *= v;
            shape[d] = (int64_t)v;
        }
        uint64_t nbytes = numel * dp_dtype_size(dt);
        if (nbytes != en->end - en->begin)
            FMT_ERR("tensor '%s': shape needs %llu bytes of %s but data_offsets span %llu", key,
                    (unsigned long long)nbytes, dp_dtype_name(dt), (unsigned long long)(en->end - en->begin));
        dp_tensor t = {.dtype = dt, .ndim = (int)nd, .data = (void *)(data + en->begin)};
        memcpy(t.shape, shape, sizeof shape);
        if ((st = dp_tset_add(out, key, &t)) != DP_OK) goto fail;
    }
    dp_free(byhdr);
    dp_free(ents);
    json_decref(root);
    return DP_OK;
fail:
    dp_free(byhdr);
    dp_free(ents);
    if (root) json_decref(root);
    dp_tset_free(out);
    return st;
}

/* fread up to n bytes at p[*len..], growing nothing (the caller sized p); returns bytes read */
static size_t st_fill(uint8_t *p, size_t n, FILE *f) {
    size_t got = 0, r;
    while (got < n && (r = fread(p + got, 1, n - got, f)) > 0) got += r;
    return got;
}

/* The data length a header declares: the largest data_offsets end (0 when the JSON does not
 * parse or has no usable offsets: dp_st_parse then says what is wrong). */
static uint64_t st_declared_data(const uint8_t *hdr, size_t hl) {
    json_t *root = json_loadb((const char *)hdr, hl, 0, NULL);
    uint64_t end = 0;
    const char *k;
    json_t *v;
    if (root && json_is_object(root))
        json_object_foreach(root, k, v) {
            json_t *e = json_array_get(json_object_get(v, "data_offsets"), 1);
            if (json_is_integer(e) && json_integer_value(e) > 0 && (uint64_t)json_integer_value(e) > end)
                end = (uint64_t)json_integer_value(e);
        }
    json_decref(root);
    return end;
}

dp_status dp_st_read_image(uint8_t **buf, size_t *len, const char *path) {
    *buf = NULL;
    *len = 0;
    FILE *f = dp_fopen_read(path);
    if (!f && errno == ENOMEM) return dp_error(DP_ERR_NOMEM, "out of memory opening '%s'", path);
    if (!f) return dp_error(dp_errno_status(errno), "cannot open '%s': %s", path, strerror(errno));
    uint8_t h8[8];
    size_t n8 = st_fill(h8, 8, f);
    uint64_t hl = 0;
    for (size_t i = 0; i < n8; i++) hl |= (uint64_t)h8[i] << (8 * i);
    dp_status st = DP_OK;
    /* the first 8 bytes already decide these (an endless /dev/zero declares a 0-byte header) */
    if (n8 == 8 && hl > DP_ST_MAX_HEADER)
        st = dp_error(DP_ERR_FORMAT, "%s: header length %llu exceeds the limit of %u bytes", path,
                      (unsigned long long)hl, DP_ST_MAX_HEADER);
    else if (n8 == 8 && hl < 2)
        st = dp_error(DP_ERR_FORMAT, "%s: header of %llu bytes cannot hold a JSON object", path, (unsigned long long)hl);
    uint8_t *p = NULL;
    size_t n = n8;
    if (st == DP_OK && n8 == 8) {
        p = dp_malloc(8 + (size_t)hl + 1);
        if (!p) st = dp_error(DP_ERR_NOMEM, "%s: out of memory for a %llu-byte header", path, (unsigned long long)hl);
        else {
            memcpy(p, h8, 8);
            n += st_fill(p + 8, (size_t)hl, f);
        }
    }
    if (st == DP_OK && n == 8 + hl) {
        /* the data: exactly what the header declares, then one probe byte (a longer file is
         * rejected by dp_st_parse, which sees the extra byte); refused before allocating when it
         * exceeds the physical memory */
        uint64_t dl = st_declared_data(p + 8, (size_t)hl);
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        double phys = pages > 0 && psz > 0 ? (double)pages * (double)psz : 0;
        if (phys > 0 && (double)dl > phys)
            st = dp_error(DP_ERR_INVALID, "%s: the header declares %.3g bytes of data, more than this machine's memory "
                          "(%.3g bytes)", path, (double)dl, phys);
        uint8_t *q = st == DP_OK ? dp_realloc(p, 8 + (size_t)hl + (size_t)dl + 1) : NULL;
        if (st == DP_OK && !q) st = dp_error(DP_ERR_NOMEM, "%s: out of memory for %.3g bytes of data", path, (double)dl);
        if (q) {
            p = q;
            n += st_fill(p + n, (size_t)dl + 1, f);
        }
    }
    if (st == DP_OK && ferror(f)) st = dp_read_error("", path, errno);
    fclose(f);
    if (st == DP_OK && !p) { /* shorter than 8 bytes: dp_st_parse names it */
        p = dp_malloc(8);
        if (!p) st = dp_error(DP_ERR_NOMEM, "out of memory");
        else memcpy(p, h8, n8);
    }
    if (st != DP_OK) { dp_free(p); return st; }
    *buf = p;
    *len = n;
    return DP_OK;
}

dp_status dp_st_read(dp_tensor_set *out, const char *path) {
    uint8_t *buf;
    size_t len;
    dp_tset_init(out);
    DP_TRY(dp_st_read_image(&buf, &len, path));
    dp_status st = dp_st_parse(out, buf, len);
    dp_free(buf);
    if (st != DP_OK) return dp_error_context(st, "%s", path);
    return DP_OK;
}

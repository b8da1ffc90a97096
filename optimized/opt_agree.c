/* optimized/opt_agree.c — canonical configuration text and its agreement across ranks
 * (optimized/opt_agree.h, docs/ranks.md). */
#include "optimized/opt_agree.h"
#include "common/alloc.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"

void opt_canon_init(opt_canon *c) { memset(c, 0, sizeof *c); }

void opt_canon_free(opt_canon *c) {
    dp_free(c->text);
    memset(c, 0, sizeof *c);
}

static dp_status canon_reserve(opt_canon *c, size_t more) {
    if (c->len + more + 1 <= c->cap) return DP_OK;
    size_t cap = c->cap ? c->cap : 256;
    while (cap < c->len + more + 1) cap *= 2;
    char *t = dp_realloc(c->text, cap);
    if (!t) return dp_error(DP_ERR_NOMEM, "configuration digest: out of memory");
    c->text = t;
    c->cap = cap;
    return DP_OK;
}

static int is_name(const char *name, const char *const *list) {
    for (size_t k = 0; list && list[k]; k++)
        if (strcmp(name, list[k]) == 0) return 1;
    return 0;
}

dp_status opt_canon_line(opt_canon *c, const char *key, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return dp_error(DP_ERR_INTERNAL, "configuration digest: cannot format %s", key);
    char *v = dp_malloc((size_t)n + 1);
    if (!v) return dp_error(DP_ERR_NOMEM, "configuration digest: out of memory");
    va_start(ap, fmt);
    vsnprintf(v, (size_t)n + 1, fmt, ap);
    va_end(ap);
    dp_status st = canon_reserve(c, strlen(key) + 4 * (size_t)n + 2);
    if (st == DP_OK) {
        c->len += (size_t)sprintf(c->text + c->len, "%s ", key);
        for (const unsigned char *p = (const unsigned char *)v; *p; p++) {
            if (*p >= ' ' && *p <= '~' && *p != '\\') c->text[c->len++] = (char)*p;
            else c->len += (size_t)sprintf(c->text + c->len, "\\x%02x", *p);
        }
        c->text[c->len++] = '\n';
        c->text[c->len] = '\0';
    }
    dp_free(v);
    return st;
}

dp_status opt_canon_options(opt_canon *c, const dp_opt *opts, size_t n, const char *const *skip,
                            const char *const *hashed, const char *const *presence) {
    for (size_t k = 0; k < n; k++) {
        const dp_opt *o = &opts[k];
        if (is_name(o->name, skip)) continue;
        const int given = o->seen ? *o->seen : 1;
        if (is_name(o->name, presence)) {
            DP_TRY(opt_canon_line(c, o->name, "%s", o->seen && !*o->seen ? "absent" : "given"));
            continue;
        }
        if (is_name(o->name, hashed)) {
            const char *path = *(const char *const *)o->dest;
            char hex[DP_SHA256_HEX_LEN];
            if (!given || !path) DP_TRY(opt_canon_line(c, o->name, "absent"));
            else if (dp_sha256_file_hex(hex, path) == DP_OK) DP_TRY(opt_canon_line(c, o->name, "sha256:%s", hex));
            else DP_TRY(opt_canon_line(c, o->name, "unreadable"));
            continue;
        }
        switch (o->type) {
        case DP_OPT_FLAG: DP_TRY(opt_canon_line(c, o->name, "%d", *(const int *)o->dest ? 1 : 0)); break;
        case DP_OPT_DOUBLE: DP_TRY(opt_canon_line(c, o->name, "%.17g", *(const double *)o->dest)); break;
        case DP_OPT_INT: DP_TRY(opt_canon_line(c, o->name, "%" PRId64, *(const int64_t *)o->dest)); break;
        case DP_OPT_U64: DP_TRY(opt_canon_line(c, o->name, "%" PRIu64, *(const uint64_t *)o->dest)); break;
        case DP_OPT_STRING: {
            const char *s = *(const char *const *)o->dest;
            DP_TRY(opt_canon_line(c, o->name, "%s", s ? s : "(absent)"));
            break;
        }
        }
    }
    return DP_OK;
}

dp_status opt_canon_model(opt_canon *c, const dp_model_config *mc) {
    if (mc->kind == DP_MLP) {
        char h[DP_MAX_HIDDEN * 12 + 8] = "none";
        size_t len = 0;
        for (int i = 0; i < mc->nhidden; i++)
            len += (size_t)snprintf(h + len, sizeof h - len, "%s%d", i ? "," : "", mc->hidden[i]);
        return opt_canon_line(c, "model", "mlp in=%d hidden=%s classes=%d", mc->in, h, mc->classes);
    }
    return opt_canon_line(c, "model", "llama vocab=%d dim=%d layers=%d heads=%d ffn=%d seq=%d tied=%d rope_theta=%.17g "
                          "norm_eps=%.17g", mc->vocab, mc->dim, mc->layers, mc->heads, mc->ffn, mc->seq, mc->tied,
                          mc->rope_theta, mc->norm_eps);
}

/* Line `line` (0-based) of text: *start and its length (without '\n'); 0 when absent. */
static int nth_line(const char **start, size_t *len, const char *text, size_t tlen, size_t line) {
    size_t pos = 0;
    for (size_t k = 0; k < line; k++) {
        const char *nl = memchr(text + pos, '\n', tlen - pos);
        if (!nl) return 0;
        pos = (size_t)(nl - text) + 1;
    }
    if (pos >= tlen) return 0;
    const char *nl = memchr(text + pos, '\n', tlen - pos);
    *start = text + pos;
    *len = nl ? (size_t)(nl - (text + pos)) : tlen - pos;
    return 1;
}

/* The disagreement message from every rank's text (all ranks compute the same one). */
static dp_status disagreement(const char *all, const uint64_t *lens, int R) {
    const char *t0 = all;
    for (size_t line = 0;; line++) {
        const char *a = NULL;
        size_t la = 0;
        int has0 = nth_line(&a, &la, t0, (size_t)lens[0], line);
        size_t off = (size_t)lens[0];
        for (int r = 1; r < R; r++) {
            const char *b = NULL;
            size_t lb = 0;
            int hasr = nth_line(&b, &lb, all + off, (size_t)lens[r], line);
            off += (size_t)lens[r];
            if (!has0 && !hasr) continue;
            if (has0 && hasr && la == lb && memcmp(a, b, la) == 0) continue;
            return dp_error(DP_ERR_INVALID,
                            "the MPI ranks disagree on the configuration (docs/ranks.md): rank %d has %.*s, rank 0 has "
                            "%.*s; every rank must be started with the same options, data file and model",
                            r, hasr ? (int)lb : 9, hasr ? b : "(nothing)", has0 ? (int)la : 9, has0 ? a : "(nothing)");
        }
        if (!has0) break;
    }
    return dp_error(DP_ERR_INVALID, "the MPI ranks disagree on the configuration digest (docs/ranks.md)");
}

dp_status opt_config_agree(opt_backend *be, const opt_canon *c) {
    const int R = be->comm.size;
    if (R <= 1) return DP_OK;
    if (!be->ops.allgatherv_bytes)
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend '%s' has no allgatherv_bytes for the configuration digest",
                        be->name);
    /* round 1: [SHA-256 | length (8 bytes, little-endian u64)] of every rank */
    uint8_t mine[DP_SHA256_LEN + 8];
    DP_TRY(dp_sha256_buf(mine, c->text ? c->text : "", c->len));
    for (int k = 0; k < 8; k++) mine[DP_SHA256_LEN + k] = (uint8_t)((uint64_t)c->len >> (8 * k));
    void *got = NULL;
    size_t glen = 0;
    DP_TRY(be->ops.allgatherv_bytes(be->ctx, &got, &glen, mine, sizeof mine));
    if (glen != (size_t)R * sizeof mine) {
        dp_free(got);
        return dp_error(DP_ERR_INTERNAL, "configuration digest: gathered %zu bytes, expected %zu", glen,
                        (size_t)R * sizeof mine);
    }
    const uint8_t *g = got;
    int same = 1;
    uint64_t *lens = dp_calloc((size_t)R, sizeof *lens);
    if (!lens) { dp_free(got); return dp_error(DP_ERR_NOMEM, "configuration digest: out of memory"); }
    for (int r = 0; r < R; r++) {
        if (memcmp(g + (size_t)r * sizeof mine, g, DP_SHA256_LEN) != 0) same = 0;
        for (int k = 0; k < 8; k++) lens[r] |= (uint64_t)g[(size_t)r * sizeof mine + DP_SHA256_LEN + k] << (8 * k);
    }
    dp_free(got);
    if (same) { dp_free(lens); return DP_OK; }
    /* round 2 (every rank saw the same mismatch): the texts themselves, to name the option */
    void *all = NULL;
    size_t alen = 0;
    dp_status st = be->ops.allgatherv_bytes(be->ctx, &all, &alen, c->text ? c->text : "", c->len);
    uint64_t total = 0;
    for (int r = 0; r < R; r++) total += lens[r];
    if (st == DP_OK && alen != total)
        st = dp_error(DP_ERR_INTERNAL, "configuration digest: gathered %zu bytes of text, expected %" PRIu64, alen, total);
    if (st == DP_OK) st = disagreement(all, lens, R);
    dp_free(all);
    dp_free(lens);
    return st;
}

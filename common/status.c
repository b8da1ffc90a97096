/* common/status.c — thread-local last-error message, status names and exit codes. */
#include "status.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define DP_ERRBUF (DP_ERR_MAX + 1)
static _Thread_local char dp_errbuf[DP_ERRBUF];

/* Length of the valid UTF-8 sequence at s (1..4), 0 when s does not start one. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    size_t k = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0; /* 0xf5.. lead nothing */
    if (k == 0 || k > n) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (k == 3 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return 0; /* overlong, surrogate */
    if (k == 4 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return 0;
    return k;
}

/* The unit at s[0..n): the length of the byte or UTF-8 sequence kept as is (0: escape s[0] as
 * \xHH, 4 bytes); *w its escaped width. */
static size_t unit_len(const unsigned char *s, size_t n, size_t *w) {
    size_t k = s[0] >= 0x80 ? utf8_len(s, n) : (s[0] >= 0x20 && s[0] != 0x7f);
    *w = k ? k : 4;
    return k;
}

/* The message m[0..n) escaped (control bytes, DEL and bytes outside valid UTF-8 as \xHH) into
 * out (cap bytes); a result longer than cap - 1 keeps its head and its tail around the marker
 * "[... N bytes ...]" (N: the escaped bytes left out, exact). Passes: the escaped length, for a long
 * message the bytes left out (whole units only), then the bytes. */
static void finish_message(char *out, size_t cap, const char *m, size_t n) {
    const unsigned char *s = (const unsigned char *)m;
    size_t total = 0;
    for (size_t i = 0; i < n;) {
        size_t w, k = unit_len(s + i, n - i, &w);
        total += w;
        i += k ? k : 1;
    }
    char marker[64] = "";
    size_t head = total, tail_from = total; /* escaped offsets kept: [0, head) and [tail_from, total) */
    if (total > cap - 1) {
        size_t room = cap - 1 - 40;          /* 40: the marker's room */
        head = room / 2;
        tail_from = total - (room - head);
        /* what is left out: from the end of the last whole unit (character or escape) within the
         * head to the start of the first unit at or after tail_from */
        size_t hk = 0, tk = total, pos = 0;
        for (size_t i = 0; i < n;) {
            size_t w, k = unit_len(s + i, n - i, &w);
            if (pos + w <= head) hk = pos + w;
            if (pos >= tail_from && tk == total) tk = pos;
            pos += w;
            i += k ? k : 1;
        }
        snprintf(marker, sizeof marker, "[... %zu bytes ...]", tk - hk);
    }
    size_t o = 0, pos = 0; /* pos: escaped offset of s[i] */
    int marked = 0;
    for (size_t i = 0; i < n;) {
        size_t w, k = unit_len(s + i, n - i, &w);
        if (pos + w <= head || pos >= tail_from) {
            if (k) memcpy(out + o, s + i, k);
            else snprintf(out + o, 5, "\\x%02x", s[i]);
            o += w;
        } else if (!marked) {
            size_t ml = strlen(marker);
            memcpy(out + o, marker, ml);
            o += ml;
            marked = 1;
        }
        pos += w;
        i += k ? k : 1;
    }
    out[o] = '\0';
}

/* Format into dp_errbuf. The arguments may include dp_last_error() itself, so the text is
 * formatted elsewhere first: on the stack when it fits, else in a block from the quiet
 * allocator (not counted: reporting an injected allocation failure must not fail). */
static void set_message(const char *fmt, va_list ap) {
    char small[DP_ERRBUF];
    va_list aq;
    va_copy(aq, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    size_t len = n < 0 ? 0 : (size_t)n;
    if (len < sizeof small) {
        finish_message(dp_errbuf, sizeof dp_errbuf, small, len);
    } else {
        char *big = dp_malloc_quiet(len + 1);
        if (big) {
            vsnprintf(big, len + 1, fmt, aq);
            finish_message(dp_errbuf, sizeof dp_errbuf, big, len);
            dp_free(big);
        } else { /* only the head is known: say so */
            finish_message(dp_errbuf, sizeof dp_errbuf - 48, small, sizeof small - 1);
            strcat(dp_errbuf, " [... message cut: out of memory]");
        }
    }
    va_end(aq);
}

dp_status dp_error(dp_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
    return st;
}

static void context_message(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap);
    va_end(ap);
}

dp_status dp_error_context(dp_status st, const char *fmt, ...) {
    char old[DP_ERRBUF];
    memcpy(old, dp_errbuf, sizeof old);
    const char *tail = old[0] ? old : dp_status_name(st);
    va_list ap;
    va_start(ap, fmt);
    set_message(fmt, ap); /* the prefix alone, escaped */
    va_end(ap);
    char prefix[DP_ERRBUF];
    memcpy(prefix, dp_errbuf, sizeof prefix);
    context_message("%s: %s", prefix, tail);
    return st;
}

const char *dp_last_error(void) { return dp_errbuf; }
void dp_clear_error(void) { dp_errbuf[0] = '\0'; }

const char *dp_status_name(dp_status st) {
    switch (st) {
    case DP_OK: return "ok";
    case DP_ERR_USAGE: return "usage error";
    case DP_ERR_INVALID: return "invalid input";
    case DP_ERR_FORMAT: return "malformed input";
    case DP_ERR_IO: return "i/o error";
    case DP_ERR_CHECK_FAILED: return "check failed";
    case DP_ERR_NOT_SUPPORTED: return "not supported";
    case DP_ERR_NOMEM: return "out of memory";
    case DP_ERR_NUMERIC: return "numerical error";
    case DP_ERR_INTERNAL: return "internal error";
    case DP_ERR_DEVICE: return "device error";
    case DP_ERR_SYSIO: return "system i/o failure";
    }
    return "unknown status";
}

int dp_status_exit_code(dp_status st) {
    switch (st) {
    case DP_OK: return 0;
    case DP_ERR_CHECK_FAILED: return 1;
    case DP_ERR_USAGE: case DP_ERR_INVALID: case DP_ERR_FORMAT: case DP_ERR_IO: return 2;
    default: return 3;
    }
}

dp_status dp_errno_status(int err) {
    switch (err) {
    case ENOENT: case EACCES: case EPERM: case ENOTDIR: case EISDIR: case ENAMETOOLONG: case ELOOP: case EROFS:
    case EEXIST: case ENXIO: case ETXTBSY: case EINVAL:
        return DP_ERR_IO;
    default:
        return DP_ERR_SYSIO;
    }
}

dp_status dp_grow_(void *arrp, size_t *cap, size_t need, size_t esize, size_t first, const char *what) {
    if (need <= *cap) return DP_OK;
    size_t nc = *cap ? *cap : (first ? first : 1);
    while (nc < need) {
        if (nc > SIZE_MAX / 2) return dp_error(DP_ERR_NOMEM, "out of memory (%s): %zu elements", what, need);
        nc *= 2;
    }
    if (esize && nc > SIZE_MAX / esize) return dp_error(DP_ERR_NOMEM, "out of memory (%s): %zu elements", what, nc);
    void *old;
    memcpy(&old, arrp, sizeof old); /* arrp is the address of a T * variable */
    void *p = dp_realloc(old, nc * esize);
    if (!p) return dp_error_context(DP_ERR_NOMEM, "%s", what);
    memcpy(arrp, &p, sizeof p);
    *cap = nc;
    return DP_OK;
}

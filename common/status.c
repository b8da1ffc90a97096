/* common/status.c — thread-local last-error message. */
#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DP_ERRBUF 1024
static _Thread_local char dp_errbuf[DP_ERRBUF];

dp_status dp_error(dp_status st, const char *fmt, ...) {
    /* Format into a local buffer first: an argument may be dp_last_error() itself
     * (e.g. dp_error(st, "reading x: %s", dp_last_error())), and vsnprintf must not
     * read the buffer it writes. */
    char tmp[DP_ERRBUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(dp_errbuf, tmp, sizeof dp_errbuf);
    return st;
}

dp_status dp_error_context(dp_status st, const char *fmt, ...) {
    char prefix[512], old[DP_ERRBUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, dp_errbuf, sizeof old);
    const char *tail = old[0] ? old : dp_status_name(st);
    size_t pl = strlen(prefix);
    memcpy(dp_errbuf, prefix, pl);
    dp_errbuf[pl] = ':';
    dp_errbuf[pl + 1] = ' ';
    size_t room = sizeof dp_errbuf - pl - 3, tl = strlen(tail);
    if (tl > room) tl = room;
    memcpy(dp_errbuf + pl + 2, tail, tl);
    dp_errbuf[pl + 2 + tl] = '\0';
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

void *dp_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) dp_error(DP_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *dp_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) dp_error(DP_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
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
    void *p = realloc(old, nc * esize);
    if (!p) return dp_error(DP_ERR_NOMEM, "out of memory (%s): %zu elements of %zu bytes", what, nc, esize);
    memcpy(arrp, &p, sizeof p);
    *cap = nc;
    return DP_OK;
}

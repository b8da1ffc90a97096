/* common/alloc.c — counted allocation with failure injection (see alloc.h). The only file of
 * non-test code that calls the C library's malloc, calloc, realloc, free and strdup. */
#include "common/alloc.h"

#include <execinfo.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

static atomic_uint_fast64_t alloc_n;   /* allocations so far */
static atomic_uint_fast64_t fail_n;    /* the one that fails (0: none) */
static atomic_int fail_sticky;         /* and every later one */
static int fail_trace;                 /* DPCERT_ALLOC_TRACE=1: a backtrace of the failed one */

static void alloc_report(void) {
    fprintf(stderr, "dpcert: %" PRIu64 " allocations\n", (uint64_t)atomic_load(&alloc_n));
}

/* DPCERT_FAIL_ALLOC and DPCERT_ALLOC_COUNT, read once before main. A malformed value is
 * reported and ignored (nothing fails): the failure loops check that a run fails. */
__attribute__((constructor)) static void alloc_env(void) {
    const char *s = getenv("DPCERT_FAIL_ALLOC");
    if (s && *s) {
        char *end = NULL;
        unsigned long long n = strtoull(s, &end, 10);
        int sticky = end && *end == '+';
        if (end == s || (*end && !(sticky && end[1] == '\0')) || n == 0)
            fprintf(stderr, "dpcert: DPCERT_FAIL_ALLOC='%s' ignored (expected N or N+, N >= 1)\n", s);
        else dp_alloc_fail_at((uint64_t)n, sticky);
    }
    const char *t = getenv("DPCERT_ALLOC_TRACE");
    fail_trace = t && strcmp(t, "1") == 0;
    const char *c = getenv("DPCERT_ALLOC_COUNT");
    if (c && strcmp(c, "1") == 0) atexit(alloc_report);
}

void dp_alloc_fail_at(uint64_t n, int sticky) {
    atomic_store(&fail_n, n);
    atomic_store(&fail_sticky, sticky);
}

uint64_t dp_alloc_count(void) { return (uint64_t)atomic_load(&alloc_n); }

/* Counts this allocation; 1 when it is to fail (and records the message). */
static int alloc_fails(size_t bytes) {
    uint64_t k = (uint64_t)atomic_fetch_add(&alloc_n, 1) + 1, f = (uint64_t)atomic_load(&fail_n);
    if (f == 0 || k < f || (k > f && !atomic_load(&fail_sticky))) return 0;
    dp_error(DP_ERR_NOMEM, "out of memory allocating %zu bytes (allocation %" PRIu64 " failed by DPCERT_FAIL_ALLOC)",
             bytes, k);
    if (fail_trace) { /* where it failed (names need -rdynamic, as build/dpcert has) */
        void *bt[32];
        fprintf(stderr, "dpcert: DPCERT_FAIL_ALLOC: allocation %" PRIu64 " failed here:\n", k);
        backtrace_symbols_fd(bt, backtrace(bt, 32), 2);
    }
    return 1;
}

void *dp_malloc(size_t n) {
    if (alloc_fails(n)) return NULL;
    void *p = malloc(n ? n : 1);
    if (!p) dp_error(DP_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *dp_calloc(size_t count, size_t size) {
    if (alloc_fails(count * size)) return NULL;
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) dp_error(DP_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *dp_realloc(void *p, size_t n) {
    if (alloc_fails(n)) return NULL;
    void *q = realloc(p, n ? n : 1);
    if (!q) dp_error(DP_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return q;
}

char *dp_strndup(const char *s, size_t n) {
    size_t l = strnlen(s, n);
    char *d = dp_malloc(l + 1);
    if (!d) return NULL;
    memcpy(d, s, l);
    d[l] = '\0';
    return d;
}

char *dp_strdup(const char *s) { return dp_strndup(s, strlen(s)); }

void dp_free(void *p) { free(p); }

void *dp_malloc_quiet(size_t n) { return malloc(n ? n : 1); }

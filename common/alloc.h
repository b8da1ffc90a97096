/* common/alloc.h — the one allocation module of dpcert (docs/development.md "Allocation").
 *
 * Every heap allocation of non-test code goes through these functions (ci/check-alloc.sh,
 * run by common/tests/alloc_routed.sh, fails on a direct malloc/calloc/realloc/free/strdup
 * outside common/alloc.c; ci/route-alloc.sh rewrites such calls). A failed allocation
 * returns NULL and records "out of memory allocating N bytes" (dp_error, DP_ERR_NOMEM,
 * exit 3); the caller propagates DP_ERR_NOMEM.
 *
 * Fault injection (SQLite's discipline; docs/development.md "Fault injection"): the
 * allocations are counted from 1 over the process. DPCERT_FAIL_ALLOC=N makes the N-th
 * allocation fail (once); DPCERT_FAIL_ALLOC=N+ makes the N-th and every later one fail.
 * DPCERT_ALLOC_COUNT=1 prints "dpcert: N allocations" on stderr at exit (the length of a
 * failure loop); DPCERT_ALLOC_TRACE=1 prints a backtrace where the injected failure happened. Memory of third-party libraries (jansson, OpenSSL, MPFR, FFTW, MPI,
 * stdio) is theirs and not counted. dp_free(NULL) does nothing. */
#ifndef DP_ALLOC_H
#define DP_ALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

void *dp_malloc(size_t n);
void *dp_calloc(size_t count, size_t size);
/* On failure the block p is untouched (still owned by the caller). n = 0 keeps a 1-byte block. */
void *dp_realloc(void *p, size_t n);
char *dp_strdup(const char *s);
char *dp_strndup(const char *s, size_t n);
void dp_free(void *p);
/* For the error path only (dp_error's long messages): not counted, never injected, no message. */
void *dp_malloc_quiet(size_t n);

/* Allocations counted so far (the N of the next one is this + 1). */
uint64_t dp_alloc_count(void);
/* Test hook (what DPCERT_FAIL_ALLOC sets): fail allocation n (0 = none), and every later
 * one when sticky. */
void dp_alloc_fail_at(uint64_t n, int sticky);

#ifdef __cplusplus
}
#endif

#endif

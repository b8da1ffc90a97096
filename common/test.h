/* common/test.h — the tiny test harness every test program uses.
 *
 * A test program is a main() that calls T_CHECK/T_CLOSE and ends with
 * `return t_finish();`: exit 0 if every check passed, 1 otherwise, 77 when it
 * calls t_skip() (what it needs is absent, e.g. a GPU). Seeds: t_seed() reads
 * DPCERT_TEST_SEED (decimal or 0x hex) or uses the default given, and prints it,
 * so every random test can be replayed. */
#ifndef DP_TEST_H
#define DP_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_checks_ = 0, t_failures_ = 0;

#define T_CHECK(cond, ...)                                                                     \
    do {                                                                                       \
        t_checks_++;                                                                           \
        if (!(cond)) {                                                                         \
            t_failures_++;                                                                     \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                    \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
        }                                                                                      \
    } while (0)

/* |a - b| <= tol (and both finite or both the same non-finite). */
#define T_CLOSE(a, b, tol, ...)                                                                \
    do {                                                                                       \
        double t_a_ = (a), t_b_ = (b), t_t_ = (tol);                                           \
        T_CHECK(fabs(t_a_ - t_b_) <= t_t_ || (t_a_ == t_b_), "%.17g vs %.17g (tol %.3g): %s",  \
                t_a_, t_b_, t_t_, "" __VA_ARGS__);                                            \
    } while (0)

/* Check a dp_status is DP_OK, printing the library's message otherwise. */
#define T_OK(expr)                                                                             \
    do {                                                                                       \
        int t_st_ = (int)(expr);                                                               \
        T_CHECK(t_st_ == 0, "status %d: %s", t_st_, dp_last_error());                          \
    } while (0)

static inline uint64_t t_seed(uint64_t dflt) {
    const char *e = getenv("DPCERT_TEST_SEED");
    uint64_t s = e && *e ? strtoull(e, NULL, 0) : dflt;
    printf("seed: %" PRIu64 " (set DPCERT_TEST_SEED to replay another)\n", s);
    return s;
}

/* Occurrences of needle in hay (checks of generated text). */
static inline size_t t_count(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

/* A fresh in-memory stream (open_memstream) over *buf, *len; the previous buffer is freed. */
static inline FILE *t_memstream(char **buf, size_t *len) {
    free(*buf);
    *buf = NULL;
    *len = 0;
    return open_memstream(buf, len);
}

static inline int t_skip(const char *why) {
    printf("SKIP: %s\n", why);
    return 77;
}

static inline int t_finish(void) {
    printf("%d checks, %d failed\n", t_checks_, t_failures_);
    return t_failures_ == 0 && t_checks_ > 0 ? 0 : 1;
}

#endif

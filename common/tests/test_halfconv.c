/* common/tests/test_halfconv.c — exhaustive tests of the f32 <-> f16 and
 * f32 <-> bf16 conversions of common/tensor.c over all 2^16 bit patterns.
 *
 * Oracle (independent of tensor.c): the value of a half / bfloat16 bit pattern
 * is built with ldexp from its fields (half_value, bf16_value below), and the
 * correctly rounded result of f32 -> 16 bits is defined by the grid of those
 * values: below the midpoint of two consecutive values -> the lower one, above
 * -> the upper one, exactly at it -> the one with an even bit pattern; beyond the
 * midpoint between the largest finite value and the next power of two (65520 for
 * f16, 2^128 - 2^119 for bf16) -> infinity, the tie itself going to infinity
 * (the largest finite pattern is odd). Checked:
 *   1. 16 -> 32 bits is exact for every pattern (value and sign of zero);
 *   2. 16 -> 32 -> 16 is the identity for every non-NaN pattern; NaN stays NaN
 *      with its sign;
 *   3. for every pair of consecutive finite values (both signs): the midpoint,
 *      the floats just below and just above it, and the values themselves and
 *      their float neighbours round as the oracle says (ties to even,
 *      subnormals, signed zeros, overflow threshold);
 *   4. NaN payloads that naive truncation would turn into infinity, infinities,
 *      f32 subnormals, FLT_MAX;
 *   5. a sweep of 2^22 f32 bit patterns spread over the whole range against the
 *      oracle by binary search, and, where the compiler has _Float16, against its
 *      conversion too.
 * Deterministic: no randomness, nothing to seed. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "common/tensor.h"
#include "common/test.h"

static uint32_t fbits(float f) { uint32_t x; memcpy(&x, &f, 4); return x; }
static float bitsf(uint32_t x) { float f; memcpy(&f, &x, 4); return f; }

/* half: 1 sign, 5 exponent (bias 15), 10 mantissa bits. NaN for exp == 31, man != 0. */
static double half_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}
/* bfloat16: 1 sign, 8 exponent (bias 127), 7 mantissa bits. */
static double bf16_value(uint16_t b) {
    int s = b >> 15, e = (b >> 7) & 255, m = b & 127;
    double v = e == 255 ? (m ? NAN : INFINITY) : e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return s ? -v : v;
}

typedef struct {
    const char *name;
    double (*value)(uint16_t);
    uint16_t (*from32)(float);
    float (*to32)(uint16_t);
    uint16_t max_finite; /* largest finite positive pattern */
    double next_pow2;    /* the power of two above it (where the next value would be) */
} fmt16;

/* Oracle rounding of a finite float x by binary search over the positive grid. */
static uint16_t oracle_round(const fmt16 *F, float xf) {
    double x = xf, a = fabs(x);
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double top = F->value(F->max_finite), thr = (top + F->next_pow2) / 2;
    uint16_t inf = (uint16_t)(F->max_finite + 1);
    if (a >= thr) return sign | inf;
    if (a >= top) return sign | F->max_finite; /* between max and threshold */
    unsigned lo = 0, hi = F->max_finite;       /* value(lo) <= a < value(hi) */
    while (hi - lo > 1) {
        unsigned m = (lo + hi) / 2;
        if (F->value((uint16_t)m) <= a) lo = m; else hi = m;
    }
    double vl = F->value((uint16_t)lo), vh = F->value((uint16_t)hi), mid = (vl + vh) / 2;
    unsigned r = a < mid ? lo : a > mid ? hi : ((lo & 1) ? hi : lo);
    return (uint16_t)(sign | r);
}

static int is_nan16(const fmt16 *F, uint16_t h) { return isnan(F->value(h)); }

static void check_format(const fmt16 *F) {
    long bad_exact = 0, bad_rt = 0, bad_nan = 0, bad_round = 0, nmid = 0;
    /* 1 + 2: every bit pattern. */
    for (uint32_t u = 0; u < 65536; u++) {
        uint16_t h = (uint16_t)u;
        float f = F->to32(h);
        double want = F->value(h);
        if (isnan(want)) {
            uint16_t back = F->from32(f);
            if (!isnan(f) || !!signbit(f) != (h >> 15) || !is_nan16(F, back) || (back >> 15) != (h >> 15)) {
                if (bad_nan++ < 5) fprintf(stderr, "%s NaN %04x -> %08x -> %04x\n", F->name, h, fbits(f), back);
            }
            continue;
        }
        if (!((double)f == want && !!signbit(f) == !!signbit(want))) {
            if (bad_exact++ < 5) fprintf(stderr, "%s %04x -> %.9g, expected %.9g\n", F->name, h, (double)f, want);
        }
        uint16_t back = F->from32(f);
        if (back != h) {
            if (bad_rt++ < 5) fprintf(stderr, "%s round trip %04x -> %.9g -> %04x\n", F->name, h, (double)f, back);
        }
    }
    T_CHECK(bad_exact == 0, "%s -> f32 inexact for %ld patterns", F->name, bad_exact);
    T_CHECK(bad_rt == 0, "%s -> f32 -> %s not the identity for %ld patterns", F->name, F->name, bad_rt);
    T_CHECK(bad_nan == 0, "%s NaN not preserved for %ld patterns", F->name, bad_nan);

    /* 3: midpoints and neighbours between consecutive finite values, both signs.
     * h = max_finite pairs with the virtual next value 2^16 / 2^128 (overflow). */
    for (uint32_t u = 0; u <= F->max_finite; u++) {
        uint16_t h = (uint16_t)u;
        double lo = F->value(h), hi = u < F->max_finite ? F->value((uint16_t)(h + 1)) : F->next_pow2;
        double mid = (lo + hi) / 2;
        uint16_t up = (uint16_t)(h + 1); /* for h = max_finite this is the infinity pattern */
        T_CHECK((double)(float)mid == mid, "%s midpoint %.17g after %04x not a float", F->name, mid, h);
        float fm = (float)mid;
        float probes[5] = {fm, nextafterf(fm, 0.0f), nextafterf(fm, INFINITY), (float)lo, nextafterf((float)lo, INFINITY)};
        uint16_t want[5] = {(h & 1) ? up : h, h, up, h, h};
        /* nextafter(lo) rounds to h unless it already reaches the midpoint (never: 16-bit grids are coarser). */
        for (int s = 0; s < 2; s++)
            for (int k = 0; k < 5; k++) {
                float x = s ? -probes[k] : probes[k];
                uint16_t w = (uint16_t)(want[k] | (s ? 0x8000 : 0));
                uint16_t got = F->from32(x);
                nmid++;
                if (got != w) {
                    if (bad_round++ < 8)
                        fprintf(stderr, "%s: %.9g (probe %d after %04x) -> %04x, expected %04x\n", F->name, (double)x, k,
                                h, got, w);
                }
            }
    }
    T_CHECK(bad_round == 0, "%s: %ld of %ld midpoint/neighbour probes rounded wrongly", F->name, bad_round, nmid);

    /* 4: special inputs. */
    uint16_t inf = (uint16_t)(F->max_finite + 1);
    T_CHECK(F->from32(INFINITY) == inf && F->from32(-INFINITY) == (uint16_t)(inf | 0x8000), "%s: infinities", F->name);
    T_CHECK(F->from32(FLT_MAX) == inf && F->from32(-FLT_MAX) == (uint16_t)(inf | 0x8000), "%s: FLT_MAX overflows", F->name);
    T_CHECK(F->from32(0.0f) == 0 && F->from32(-0.0f) == 0x8000, "%s: signed zeros", F->name);
    const uint32_t nans[] = {0x7F800001u, 0x7FC00000u, 0x7F801234u, 0xFF800001u, 0xFFFFFFFFu, 0x7FBFFFFFu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t got = F->from32(bitsf(nans[i]));
        T_CHECK(is_nan16(F, got) && (got >> 15) == (nans[i] >> 31), "%s: NaN %08x -> %04x is not a NaN of the same sign",
                F->name, nans[i], got);
    }
    /* f32 subnormals: oracle decides (0 for f16; subnormal bf16 values for bf16). */
    const uint32_t subs[] = {0x00000001u, 0x80000001u, 0x00400000u, 0x007FFFFFu, 0x00800000u};
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
        float x = bitsf(subs[i]);
        T_CHECK(F->from32(x) == oracle_round(F, x), "%s: f32 %08x -> %04x, oracle %04x", F->name, subs[i], F->from32(x),
                oracle_round(F, x));
    }

    /* 5: sweep 2^22 f32 patterns (odd multiplier: a permutation of 32-bit words). */
    long bad_sweep = 0, bad_hw = 0, nsweep = 0;
    for (uint32_t i = 0; i < (1u << 22); i++) {
        uint32_t b = i * 2654435761u + 0x9E37u;
        float x = bitsf(b);
        if (isnan(x)) continue;
        nsweep++;
        uint16_t got = F->from32(x), want = oracle_round(F, x);
        if (got != want && bad_sweep++ < 5)
            fprintf(stderr, "%s sweep: %08x (%.9g) -> %04x, oracle %04x\n", F->name, b, (double)x, got, want);
#if defined(__FLT16_MAX__)
        if (F->max_finite == 0x7BFF) {
            _Float16 hv = (_Float16)x;
            uint16_t hb;
            memcpy(&hb, &hv, 2);
            if (hb != got && bad_hw++ < 5) fprintf(stderr, "f16 vs _Float16: %08x -> %04x vs %04x\n", b, got, hb);
        }
#endif
    }
    T_CHECK(bad_sweep == 0, "%s: %ld of %ld swept floats differ from the oracle", F->name, bad_sweep, nsweep);
    T_CHECK(bad_hw == 0, "%s: %ld swept floats differ from the compiler's _Float16 conversion", F->name, bad_hw);
    printf("%s: 65536 patterns, %ld midpoint probes, %ld swept floats checked\n", F->name, nmid, nsweep);
}

/* Negative control: a truncating converter must be caught by the same checks. */
static uint16_t trunc_f16(float f) {
    uint16_t h = dp_f32_to_f16(f);
    /* emulate round-toward-zero on the probes: step back when the correct result rounded up in magnitude */
    float back = dp_f16_to_f32(h);
    if (isfinite(back) && fabsf(back) > fabsf(f) && (h & 0x7FFF) != 0) h--;
    if (isinf(back) && isfinite(f)) h--;
    return h;
}

int main(void) {
    const fmt16 f16 = {"f16", half_value, dp_f32_to_f16, dp_f16_to_f32, 0x7BFF, 65536.0};
    const fmt16 bf16 = {"bf16", bf16_value, dp_f32_to_bf16, dp_bf16_to_f32, 0x7F7F, ldexp(1.0, 128)};
    T_CHECK(half_value(0x7BFF) == 65504.0 && half_value(0x0001) == ldexp(1, -24) && half_value(0x3C00) == 1.0,
            "oracle sanity (half)");
    T_CHECK(bf16_value(0x3F80) == 1.0 && bf16_value(0x0001) == ldexp(1, -133) && bf16_value(0xC000) == -2.0,
            "oracle sanity (bf16)");
    T_CHECK(dp_f32_to_f16(65519.996f) == 0x7BFF && dp_f32_to_f16(65520.0f) == 0x7C00, "f16 overflow threshold 65520");
    check_format(&f16);
    check_format(&bf16);

    /* Negative control: run the midpoint probes against a truncating converter; they must find errors. */
    long caught = 0;
    for (uint32_t u = 0; u < 0x7BFF; u++) {
        double mid = (half_value((uint16_t)u) + half_value((uint16_t)(u + 1))) / 2;
        float x = nextafterf((float)mid, INFINITY);
        if (trunc_f16(x) != oracle_round(&f16, x)) caught++;
    }
    T_CHECK(caught > 30000, "negative control: truncation caught at only %ld midpoints", caught);
    printf("negative control: a truncating f16 converter fails %ld midpoint probes\n", caught);
    return t_finish();
}

/* conformance/tests/test_losscale.c — the loss-scaling pipelines, the losscale check and
 * DP-ZeRO Table 3 (docs/precision.md "Loss scaling").
 *
 * The check's PASS decision compares with a derived worst-case bound (no randomness in
 * the decision): its false-alarm probability on a correct pipeline is 0 by the
 * derivation, and the 100-seed sweep below checks that; its power against each injected
 * mistake is checked on the same 100 seeds (every seed must FAIL with the right
 * diagnosis). */
#include <math.h>
#include <string.h>

#include "common/cli.h"
#include "common/test.h"
#include "conformance/losscale/losscale.h"

static ls_result run1(ls_pipeline p, ls_batch_kind k, dp_dtype dt, uint64_t seed) {
    ls_batch b;
    ls_result r;
    memset(&r, 0, sizeof r);
    T_OK(ls_batch_make(&b, k, seed, 16));
    ls_dynamic dy = {1024, 2000, 0};
    T_OK(ls_run(&r, p, &b, dt, 1.0, 1024, &dy));
    ls_batch_free(&b);
    return r;
}

static void test_table3(void) {
    ls_t3_cell d[LS_T3_ROWS][LS_T3_COLS];
    ls_t3_derive(d, 3);
    int same = 1;
    for (int r = 0; r < LS_T3_ROWS; r++)
        for (int c = 0; c < LS_T3_COLS; c++) {
            const ls_t3_cell *p = &ls_t3_paper[r][c];
            int eq = p->na == d[r][c].na && (p->na || (p->lo == d[r][c].lo && p->hi == d[r][c].hi));
            T_CHECK(eq, "Table 3 %s / %s: derived 1e%d..1e%d, paper 1e%d..1e%d", ls_t3_row_names[r],
                    ls_t3_col_names[c], d[r][c].lo, d[r][c].hi, p->lo, p->hi);
            same &= eq;
        }
    /* the overflow and over-shrink ranges: S^2 pushes the output-gradient Gram past
     * fp16's 65504, 1/S pushes the scaled-down DP gradient below 2^-24 */
    T_CHECK(ls_t3_fp16_issue(&d[3][3]) == 1, "DP w/ scaling ghost Gram overflows fp16");
    T_CHECK(ls_t3_fp16_issue(&d[2][3]) == 0, "DP w/o scaling ghost Gram fits fp16");
    T_CHECK(ls_t3_fp16_issue(&d[3][6]) == -1, "DP w/ scaling scaled-down gradient underflows fp16");
    T_CHECK(ls_t3_fp16_issue(&d[1][6]) == 0, "standard scaled-down gradient fits fp16");
    T_CHECK(d[3][6].hi - d[2][6].hi == -3 && d[3][4].hi - d[2][4].hi == -3, "over-shrink ratio 10^-3 = 1/S");
    /* negative control: a wrong scale exponent must not reproduce the table */
    ls_t3_derive(d, 2);
    int any_diff = 0;
    for (int c = 0; c < LS_T3_COLS; c++)
        any_diff |= !d[3][c].na && (d[3][c].lo != ls_t3_paper[3][c].lo || d[3][c].hi != ls_t3_paper[3][c].hi);
    T_CHECK(any_diff && same, "S = 10^2 must differ from the paper's S = 10^3 rows");
}

static void test_diagnoses(uint64_t seed) {
    ls_result r;
    r = run1(LS_STANDARD, LSB_TYPICAL, DP_BF16, seed);
    T_CHECK(r.check.verdict == LSV_OVERSHRINK && r.check.k == 10 &&
                strstr(r.check.diag, "loss scale applied after clipping, factor 2^10"),
            "seed %llu dp-standard bf16: %s", (unsigned long long)seed, r.check.diag);
    r = run1(LS_STANDARD, LSB_TYPICAL, DP_F16, seed);
    T_CHECK(r.check.verdict == LSV_OVERFLOW && r.overflow > 0 && strstr(r.check.diag, "inf/NaN"),
            "seed %llu dp-standard fp16: %s", (unsigned long long)seed, r.check.diag);
    r = run1(LS_NO_UNSCALE, LSB_TYPICAL, DP_BF16, seed);
    T_CHECK(r.check.verdict == LSV_NOT_UNSCALED && r.check.k == 10, "seed %llu dp-no-unscale bf16: %s",
            (unsigned long long)seed, r.check.diag);
    r = run1(LS_SCALED_CLIP, LSB_LARGE, DP_F16, seed);
    T_CHECK(r.check.verdict == LSV_OVERFLOW, "seed %llu dp-scaled-threshold fp16 large: %s",
            (unsigned long long)seed, r.check.diag);
    r = run1(LS_DYNAMIC, LSB_TYPICAL, DP_F16, seed);
    T_CHECK(r.check.verdict == LSV_SKIP_RELEASE && r.skipped, "seed %llu dp-dynamic fp16: %s",
            (unsigned long long)seed, r.check.diag);
    r = run1(LS_NONDP, LSB_SMALL, DP_F16, seed);
    T_CHECK(r.check.verdict == LSV_NONDP && r.underflow > 0, "seed %llu nondp fp16 small underflows",
            (unsigned long long)seed);
}

/* the correct pipelines on 100 seeds: no false alarm */
static void test_no_false_alarm(uint64_t seed0) {
    int alarms = 0, runs = 0, under = 0;
    for (uint64_t s = seed0; s < seed0 + 100; s++)
        for (int k = 0; k < LSB_COUNT; k++)
            for (int d = 0; d < 2; d++) {
                const dp_dtype dt = d ? DP_BF16 : DP_F16;
                ls_result r = run1(LS_DPZERO, (ls_batch_kind)k, dt, s);
                alarms += ls_verdict_fails(r.check.verdict);
                under += r.check.verdict == LSV_PASS_UNDERFLOW;
                runs++;
                if (ls_verdict_fails(r.check.verdict))
                    fprintf(stderr, "false alarm: seed %llu dp-zero %s %s: %s\n", (unsigned long long)s,
                            ls_batch_names[k], d ? "bf16" : "fp16", r.check.diag);
                if (dt == DP_BF16 || k == LSB_SMALL) { /* no overflow at these: S C threshold correct */
                    r = run1(LS_SCALED_CLIP, (ls_batch_kind)k, dt, s);
                    alarms += ls_verdict_fails(r.check.verdict);
                    runs++;
                    if (ls_verdict_fails(r.check.verdict))
                        fprintf(stderr, "false alarm: seed %llu dp-scaled-threshold %s: %s\n", (unsigned long long)s,
                                ls_batch_names[k], r.check.diag);
                }
            }
    T_CHECK(alarms == 0, "%d false alarms in %d runs of correct pipelines", alarms, runs);
    T_CHECK(under >= 100, "fp16 small batches show underflow (%d)", under);
}

static void test_check_arrays(void) {
    double rn[4] = {1, 2, 3, 4}, rs[6] = {1, -2, 3, 0.5, -1, 2}, cn[4], cs[6];
    ls_check c;
    memcpy(cn, rn, sizeof cn);
    memcpy(cs, rs, sizeof cs);
    ls_check_arrays(&c, cn, rn, 4, cs, rs, 6, 1e-9, 0, 0);
    T_CHECK(c.verdict == LSV_PASS, "identical: %s", c.diag);
    for (int e = 0; e < 6; e++) cs[e] = rs[e] / 8;
    ls_check_arrays(&c, cn, rn, 4, cs, rs, 6, 1e-9, 0, 0);
    T_CHECK(c.verdict == LSV_OVERSHRINK && c.k == 3 && strstr(c.diag, "factor 2^3"), "1/8: %s", c.diag);
    for (int e = 0; e < 6; e++) cs[e] = rs[e] * 1.3;
    ls_check_arrays(&c, cn, rn, 4, cs, rs, 6, 1e-9, 0, 0);
    T_CHECK(c.verdict == LSV_MISMATCH, "x1.3: %s", c.diag);
    memcpy(cs, rs, sizeof cs);
    cn[2] = INFINITY;
    ls_check_arrays(&c, cn, rn, 4, cs, rs, 6, 1e-9, 0, 0);
    T_CHECK(c.verdict == LSV_OVERFLOW, "inf norm: %s", c.diag);
    for (int i = 0; i < 4; i++) cn[i] = rn[i] * 65536;
    ls_check_arrays(&c, cn, rn, 4, cs, rs, 6, 1e-9, 0, 0);
    T_CHECK(c.verdict == LSV_NOT_UNSCALED && c.k == 16, "norms x 2^16: %s", c.diag);
    memcpy(cn, rn, sizeof cn);
    ls_check_arrays(&c, cn, rn, 4, cs, rs, 6, 1e-9, 1, 0);
    T_CHECK(c.verdict == LSV_SKIP_RELEASE, "skipped: %s", c.diag);
}

static void test_dynamic_and_neighbours(uint64_t seed) {
    ls_dynamic d = {1024, 3, 0};
    T_CHECK(ls_dynamic_update(&d, 0) == 0 && ls_dynamic_update(&d, 0) == 0 && d.S == 1024, "no growth yet");
    T_CHECK(ls_dynamic_update(&d, 0) == 0 && d.S == 2048, "grows after K = 3 clean steps");
    T_CHECK(ls_dynamic_update(&d, 1) == 1 && d.S == 1024 && d.good == 0, "overflow: skip and halve");
    ls_batch b, b2;
    T_OK(ls_batch_make(&b, LSB_SMALL, seed, 16));
    double mx = 0;
    for (int64_t e = 0; e < b.T * b.p; e++) mx = fmax(mx, fabs(b.delta[e]));
    T_OK(ls_batch_neighbour(&b2, &b, 0, 1.0 / mx));
    ls_result r1, r2;
    ls_dynamic s1 = {1024, 2000, 0}, s2 = {1024, 2000, 0};
    T_OK(ls_run(&r1, LS_DYNAMIC, &b, DP_F16, 1.0, 1024, &s1));
    T_OK(ls_run(&r2, LS_DYNAMIC, &b2, DP_F16, 1.0, 1024, &s2));
    T_CHECK(!r1.skipped && r2.skipped && s1.S == 1024 && s2.S == 512, "only the neighbour skips (%d %d)", r1.skipped,
            r2.skipped);
    ls_batch_free(&b);
    ls_batch_free(&b2);
    /* a scale that is not a power of two is refused */
    T_OK(ls_batch_make(&b, LSB_TYPICAL, seed, 4));
    ls_result r;
    T_CHECK(ls_run(&r, LS_STANDARD, &b, DP_F16, 1.0, 1000, NULL) == DP_ERR_INVALID, "S = 1000 refused");
    T_CHECK(ls_run(&r, LS_DYNAMIC, &b, DP_F16, 1.0, 1024, NULL) == DP_ERR_INVALID, "dynamic needs state");
    ls_batch_free(&b);
}

static void test_parse_pow2(void) {
    double v;
    T_CHECK(dp_parse_pow2(&v, "--loss-scale", "1024") == DP_OK && v == 1024, "1024");
    T_CHECK(dp_parse_pow2(&v, "--loss-scale", "2^10") == DP_OK && v == 1024, "2^10");
    T_CHECK(dp_parse_pow2(&v, "--loss-scale", "0.25") == DP_OK && v == 0.25, "0.25");
    static const char *const bad[] = {"1000", "0", "-2", "inf", "nan", "2^2000", "2^x", "", "1e400", "3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        T_CHECK(dp_parse_pow2(&v, "--loss-scale", bad[i]) != DP_OK, "'%s' refused", bad[i]);
}

int main(void) {
    uint64_t seed = t_seed(1);
    test_table3();
    test_check_arrays();
    test_parse_pow2();
    test_dynamic_and_neighbours(seed);
    for (uint64_t s = seed; s < seed + 100; s++) test_diagnoses(s); /* power: every seed */
    test_no_false_alarm(seed);
    return t_finish();
}

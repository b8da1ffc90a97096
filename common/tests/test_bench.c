/* common/tests/test_bench.c — the benchmark harness (common/bench.h, docs/benchmarks.md):
 * median and nearest-rank p10/p90 of known samples (odd and even counts, one sample, unsorted
 * input), the flags -w/-n/-t and positional arguments, and the refusals (-n 0, a negative
 * -w, a missing value, an unknown flag). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/bench.h"
#include "common/test.h"

static dp_status parse(dp_bench_opts *o, int *help, const char *a0, const char *a1, const char *a2, const char *a3,
                       const char *a4) {
    char *argv[6] = {(char *)"bench", (char *)a0, (char *)a1, (char *)a2, (char *)a3, (char *)a4};
    int argc = 1;
    while (argc < 6 && argv[argc]) argc++;
    FILE *keep = stderr;
    stderr = fopen("/dev/null", "w"); /* the usage text of refused flags */
    dp_status st = dp_bench_parse(o, help, argc, argv, 2, 5, "[ARGS]");
    fclose(stderr);
    stderr = keep;
    return st;
}

int main(void) {
    dp_bench_stats s;
    double x[10] = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5}; /* 1..10, unsorted */
    dp_bench_stats_of(&s, x, 10);
    T_CHECK(s.median == 5.5 && s.p10 == 1 && s.p90 == 9, "1..10: median %g p10 %g p90 %g (want 5.5, 1, 9)", s.median,
            s.p10, s.p90);
    double y[5] = {3, 1, 2, 5, 4};
    dp_bench_stats_of(&s, y, 5);
    T_CHECK(s.median == 3 && s.p10 == 1 && s.p90 == 5, "1..5: median %g p10 %g p90 %g (want 3, 1, 5)", s.median, s.p10,
            s.p90);
    double z[1] = {7};
    dp_bench_stats_of(&s, z, 1);
    T_CHECK(s.median == 7 && s.p10 == 7 && s.p90 == 7, "one sample: %g %g %g", s.median, s.p10, s.p90);
    dp_bench_stats_of(&s, z, 0);
    T_CHECK(isnan(s.median), "no sample: median NaN (not 0)");

    dp_bench_opts o;
    int help = 0;
    T_OK(parse(&o, &help, NULL, NULL, NULL, NULL, NULL));
    T_CHECK(o.warmup == 2 && o.iters == 5 && o.threads == 0 && o.npos == 0 && !help, "defaults");
    T_OK(parse(&o, &help, "-w", "0", "-n", "7", "llama"));
    T_CHECK(o.warmup == 0 && o.iters == 7 && o.npos == 1 && strcmp(o.pos[0], "llama") == 0, "-w 0 -n 7 llama");
    T_OK(parse(&o, &help, "-t", "4", "mlp", NULL, NULL));
    T_CHECK(o.threads == 4 && o.npos == 1, "-t 4 mlp");
    T_CHECK(parse(&o, &help, "-n", "0", NULL, NULL, NULL) == DP_ERR_USAGE, "-n 0 refused");
    T_CHECK(parse(&o, &help, "-w", "-1", NULL, NULL, NULL) == DP_ERR_USAGE, "-w -1 refused");
    T_CHECK(parse(&o, &help, "-n", NULL, NULL, NULL, NULL) == DP_ERR_USAGE, "-n without a value refused");
    T_CHECK(parse(&o, &help, "-n", "3x", NULL, NULL, NULL) == DP_ERR_USAGE, "-n 3x refused");
    T_CHECK(parse(&o, &help, "--iters", "3", NULL, NULL, NULL) == DP_ERR_USAGE, "unknown flag refused");
    FILE *keep = stdout;
    stdout = fopen("/dev/null", "w");
    dp_status st = parse(&o, &help, "--help", NULL, NULL, NULL, NULL);
    fclose(stdout);
    stdout = keep;
    T_CHECK(st == DP_OK && help == 1, "--help sets help");
    return t_finish();
}

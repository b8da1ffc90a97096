/* common/tests/test_bench.c — the benchmark harness (common/bench.h, docs/benchmarks.md):
 * median and nearest-rank p10/p90 of known samples (odd and even counts, one sample, unsorted
 * input), the flags -w/-n/-t and positional arguments, and the refusals (-n 0, a negative
 * -w, a missing value, an unknown flag); a program's own long options (a value, a switch, a
 * missing value, still refusing others), and what the row and the reproduce line print (n/a,
 * base, the ratio, a name with spaces as one field, the own options echoed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

    /* a program's own options */
    const char *dim = "8";
    int quick = 0;
    const dp_bench_flag fl[] = {{"--dim", &dim, NULL}, {"--quick", NULL, &quick}};
    char *av[] = {(char *)"bench", (char *)"-n", (char *)"3", (char *)"--dim", (char *)"64", (char *)"--quick",
                  (char *)"llama"};
    T_OK(dp_bench_parse_flags(&o, &help, 7, av, 1, 2, "", fl, 2));
    T_CHECK(o.iters == 3 && strcmp(dim, "64") == 0 && quick == 1 && o.npos == 1 && o.nown == 3,
            "own options: --dim 64 --quick llama");
    char *av2[] = {(char *)"bench", (char *)"--dim"};
    keep = stderr;
    stderr = fopen("/dev/null", "w");
    st = dp_bench_parse_flags(&o, &help, 2, av2, 1, 2, "", fl, 2);
    char *av3[] = {(char *)"bench", (char *)"--dims", (char *)"3"};
    dp_status st3 = dp_bench_parse_flags(&o, &help, 3, av3, 1, 2, "", fl, 2);
    fclose(stderr);
    stderr = keep;
    T_CHECK(st == DP_ERR_USAGE, "an own option without its value refused");
    T_CHECK(st3 == DP_ERR_USAGE && strstr(dp_last_error(), "--dims"), "an unknown option refused, named");

    /* the printed row and reproduce line */
    T_OK(dp_bench_parse_flags(&o, &help, 7, av, 1, 2, "", fl, 2));
    char path[] = "/tmp/dpcert_test_bench_XXXXXX";
    int fd = mkstemp(path);
    T_CHECK(fd >= 0, "temporary file");
    fflush(stdout);
    FILE *out = fdopen(fd, "w+"), *save = stdout;
    stdout = out;
    dp_bench_stats a = {2.0, 1.0, 3.0}, b = {3.0, 2.0, 4.0};
    dp_bench_row("base row", &a, 0, 1, 0, -1);
    dp_bench_row("next", &b, 2.0, 0, -1, 1024);
    dp_bench_row("none", &b, 0, 0, 5, 6);
    dp_bench_reproduce("prog", &o);
    fflush(out);
    stdout = save;
    rewind(out);
    char line[4][256] = {{0}};
    for (int i = 0; i < 4 && fgets(line[i], sizeof line[i], out); i++) {}
    fclose(out);
    remove(path);
    char n0[64], r0[16], b0[16], p0[16];
    double m0 = 0, lo = 0, hi = 0;
    T_CHECK(sscanf(line[0], "%63s %lf %lf %lf %15s %15s %15s", n0, &m0, &lo, &hi, r0, b0, p0) == 7 &&
                strcmp(n0, "base_row") == 0 && m0 == 2.0 && lo == 1.0 && hi == 3.0 && strcmp(r0, "base") == 0 &&
                strcmp(b0, "0") == 0 && strcmp(p0, "n/a") == 0,
            "baseline row: name one field, base, 0 bytes measured, peak n/a (%s)", line[0]);
    T_CHECK(sscanf(line[1], "%63s %lf %lf %lf %15s %15s %15s", n0, &m0, &lo, &hi, r0, b0, p0) == 7 &&
                strcmp(r0, "1.500") == 0 && strcmp(b0, "n/a") == 0 && strcmp(p0, "1024") == 0,
            "row: ratio to the baseline 1.500, bytes n/a, peak 1024 (%s)", line[1]);
    T_CHECK(sscanf(line[2], "%63s %lf %lf %lf %15s", n0, &m0, &lo, &hi, r0) == 5 && strcmp(r0, "n/a") == 0,
            "row without a baseline: ratio n/a (%s)", line[2]);
    T_CHECK(strcmp(line[3], "# reproduce: prog -w 1 -n 3 --dim 64 --quick llama\n") == 0,
            "reproduce line with the own options (%s)", line[3]);
    return t_finish();
}

/* optimized/tests/test_ledger_coverage.c — the memory ledger accounts for the process
 * (docs/memory.md "Ledger coverage"): over a short DP-SGD run of the llama on the host
 * backend, the ledger's peak (every tag: the engine's device buffers, the backend's
 * scratch, the step's host buffers, the data set, the host model) is at least 95 % of
 * the process's peak resident set above its baseline (VmHWM minus the VmRSS measured
 * before the run's first allocation), and at most 110 % of it (a tag counted twice would
 * pass the lower bound vacuously).
 *
 * Each case runs in a fresh process (this binary re-executed with the case number), so
 * that its peak is its own. The cases cover three strategies, both dtypes and 1 and 2
 * threads at D = 128, L = 2, T = 128, B = 16 (about 100 MB in the ledger, so that the
 * code pages a run touches, about 1 MB, stay far below the 5 % margin).
 * Negative control: the same run with an untracked, touched malloc of 32 MB (about 30 %
 * of its ledger) alive through it must fall below 95 % (the check sees memory outside
 * the ledger). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/test.h"
#include "optimized/dpsgd.h"
#include "optimized/ledger.h"
#include "optimized/opt_mem.h"

typedef struct {
    const char *strategy;
    dp_dtype dtype;
    int threads;
    int leak; /* negative control: an untracked buffer of 32 MB */
} cov_case;
static const cov_case k_cases[] = {
    {"book-keeping", DP_F32, 2, 0},
    {"fused", DP_F64, 1, 0},
    {"ghost", DP_F32, 1, 0},
    {"book-keeping", DP_F32, 2, 1},
};
enum { NCASES = sizeof k_cases / sizeof k_cases[0] };

/* kB of a /proc/self/status field ("VmRSS:", "VmHWM:"); -1 if unreadable */
static double status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0) kb = atof(line + n);
    if (f) fclose(f);
    return kb;
}

/* One case in this process: prints "COVERAGE ledger_mb rss_mb" and the ledger; exit 0,
 * or 77 when /proc is unreadable, 3 on an engine error. */
static int run_case(const cov_case *k) {
    const double base = status_kb("VmRSS:");
    if (base < 0) { printf("no /proc/self/status: cannot measure the resident set\n"); return 77; }
    dp_model_config mc;
    dp_model_config_default(&mc, DP_LLAMA);
    mc.dim = 128; mc.layers = 2; mc.seq = 128; mc.heads = 4; mc.ffn = 256; mc.vocab = 64;
    dp_dpsgd_config c;
    dp_dpsgd_config_default(&c);
    c.n = 16; c.q = 1.0; c.clip = 1.0; c.sigma = 1.0; c.key.k = 3; c.seed.k = 4;
    opt_backend_config bc = {"host", k->dtype, k->threads, 0};
    opt_backend *be = NULL;
    dp_model m;
    dp_dataset d;
    int strat = -1;
    for (int i = 0; i < OPT_STRAT_COUNT; i++)
        if (strcmp(opt_strategy_names[i], k->strategy) == 0) strat = i;
    if (strat < 0 || opt_backend_create(&be, &bc) != DP_OK) return 3;
    if (dp_dataset_generate(&d, &mc, c.n, c.seed) != DP_OK || dp_model_init(&m, &mc, c.seed) != DP_OK) return 3;
    opt_mem_note_run(be, &d, &m, 1);
    opt_dp_options o = {.strategy = (opt_strategy)strat, .mixed_rule = OPT_MIXED_FLOP, .no_step_vectors = 1};
    opt_dpsgd s;
    dp_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    char *leak = NULL;
    if (k->leak) { /* untracked and touched, alive through the run: 32 MB, about 30 % of its ledger */
        leak = malloc((size_t)32 << 20);
        if (leak) memset(leak, 1, (size_t)32 << 20);
    }
    dp_status st = opt_dpsgd_init(&s, be, &c, &o, &m);
    for (int64_t step = 1; st == DP_OK && step <= 2; step++) st = opt_dpsgd_step(&out, &s, &d, step);
    opt_mem_report r;
    opt_mem_get(&r, be);
    const double hwm = status_kb("VmHWM:");
    if (st == DP_OK) {
        printf("COVERAGE %.3f %.3f\n", (double)r.peak_total / 1048576.0, (hwm - base) / 1024.0);
        opt_mem_print(stdout, &r, "  ");
    } else
        printf("engine error: %s\n", dp_last_error());
    free(leak);
    dp_dpsgd_step_free(&out);
    opt_dpsgd_free(&s);
    opt_backend_destroy(be);
    dp_model_free(&m);
    dp_dataset_free(&d);
    return st == DP_OK ? 0 : 3;
}

/* Runs case i in a fresh process; *ledger_mb, *rss_mb from its COVERAGE line.
 * Returns its exit status (-1: no line). */
static int spawn_case(int i, double *ledger_mb, double *rss_mb) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        char arg[16];
        snprintf(arg, sizeof arg, "%d", i);
        execl("/proc/self/exe", "test_ledger_coverage", "--case", arg, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    FILE *f = fdopen(fd[0], "r");
    char line[512];
    int found = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "COVERAGE %lf %lf", ledger_mb, rss_mb) == 2) found = 1;
        fputs(line, stdout);
    }
    if (f) fclose(f);
    int ws = 0;
    waitpid(pid, &ws, 0);
    int rc = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128;
    return found || rc != 0 ? rc : -1;
}

int main(int argc, char **argv) {
#if defined(__SANITIZE_ADDRESS__)
    /* ASan's allocator adds redzones and a quarantine of freed blocks to the resident set:
     * the coverage of the release allocator cannot be measured under it */
    printf("SKIP: built with AddressSanitizer (its allocator's redzones and quarantine are resident)\n");
    return 77;
#endif
    if (argc == 3 && strcmp(argv[1], "--case") == 0) {
        int i = atoi(argv[2]);
        return i >= 0 && i < NCASES ? run_case(&k_cases[i]) : 2;
    }
    for (int i = 0; i < NCASES; i++) {
        const cov_case *k = &k_cases[i];
        double led = 0, rss = 0;
        printf("case %d: %s %s, %d thread(s)%s\n", i, k->strategy, dp_dtype_name(k->dtype), k->threads,
               k->leak ? ", NEGATIVE CONTROL: an untracked 32 MB buffer" : "");
        fflush(stdout);
        int rc = spawn_case(i, &led, &rss);
        if (rc == 77) { printf("SKIP: %s\n", "cannot read /proc/self/status"); return 77; }
        T_CHECK(rc == 0 && rss > 0, "case %d: the run failed (exit %d)", i, rc);
        if (rc != 0 || rss <= 0) continue;
        double cov = led / rss;
        printf("case %d: ledger peak %.1f MB, peak RSS above the baseline %.1f MB: coverage %.3f\n", i, led, rss, cov);
        if (k->leak)
            T_CHECK(cov < 0.95, "negative control: an untracked 32 MB buffer was not seen (coverage %.3f)", cov);
        else
            T_CHECK(cov >= 0.95 && cov <= 1.10, "case %d (%s): ledger / RSS above baseline = %.3f, outside [0.95, 1.10]",
                    i, k->strategy, cov);
    }
    return t_finish();
}

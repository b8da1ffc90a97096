/* optimized/tests/test_train_cli.c — the `dpcert train` command, in process, and a
 * driver for the MPI test scripts.
 *
 * Without arguments: a self-test of `train dpsgd|dpzo` (usage errors exit 2 and name
 * the problem, --backend cuda --dtype f64 exits 3, exports carry exactly the
 * reference's tensor names and agree with the reference within the tolerance of
 * docs/engine.md "Test tolerances"; an injected bug is caught).
 *
 * With arguments (used by the optimized/tests shell scripts; `dpcert train`/`dpcert reference` are
 * used instead once the dpcert binary links them):
 *   --as-dpcert train|reference ARGS...   run the subcommand as dpcert would
 *   --compare A B [--skip PREFIX]...      compare export A with reference export B:
 *                                         same tensor names, integers exact, floats
 *                                         within 16 gamma_m max|B| (m = parameters),
 *                                         step.noise* exactly (f64); exit 1 on FAIL
 *   --noise-stat A SCALE                  chi-square of step.noise.* / SCALE against
 *                                         N(0,1): exit 1 when |X - M| > 6 sqrt(2M)
 *                                         (false reject < 1e-8 for the M here) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safetensors.h"
#include "common/test.h"
#include "optimized/dpsgd.h"
#include "reference/dpzo.h"

int dp_cmd_train(int argc, char **argv);

static int as_dpcert(int argc, char **argv) {
    if (argc < 1) return 2;
    if (strcmp(argv[0], "train") == 0) return dp_cmd_train(argc - 1, argv + 1);
    if (strcmp(argv[0], "reference") == 0 && argc > 1) {
        if (strcmp(argv[1], "dpsgd") == 0) return dp_cmd_reference_dpsgd(argc - 2, argv + 2);
        if (strcmp(argv[1], "dpzo") == 0) return dp_cmd_reference_dpzo(argc - 2, argv + 2);
    }
    fprintf(stderr, "driver: unknown command\n");
    return 2;
}

static int starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* Returns 0 PASS, 1 FAIL (printing the worst tensor), 2 on unreadable input. */
static int compare_files(const char *a, const char *b, char **skip, int nskip, int quiet) {
    dp_tensor_set A, B;
    if (dp_st_read(&A, a) != DP_OK) { fprintf(stderr, "compare: %s: %s\n", a, dp_last_error()); return 2; }
    if (dp_st_read(&B, b) != DP_OK) { fprintf(stderr, "compare: %s: %s\n", b, dp_last_error()); dp_tset_free(&A); return 2; }
    int64_t m = 0;
    for (size_t i = 0; i < B.n; i++)
        if (starts(B.items[i].name, "params.")) m += dp_tensor_numel(&B.items[i].t);
    const char *dt = dp_tset_meta(&A, "dtype");
    double u = dt && strcmp(dt, "f32") == 0 ? ldexp(1.0, -24) : ldexp(1.0, -53);
    double gam = (double)m * u / (1 - (double)m * u);
    int fail = 0;
    double worst = 0;
    const char *worst_name = "";
    if (A.n != B.n) { fprintf(stderr, "compare: %zu tensors vs %zu\n", A.n, B.n); fail = 1; }
    for (size_t i = 0; i < B.n; i++) {
        const char *nm = B.items[i].name;
        int skipped = 0;
        for (int k = 0; k < nskip; k++) skipped |= starts(nm, skip[k]);
        const dp_tensor *tb = &B.items[i].t, *ta = dp_tset_find(&A, nm);
        if (!ta) { fprintf(stderr, "compare: %s missing in %s\n", nm, a); fail = 1; continue; }
        int64_t n = dp_tensor_numel(tb);
        if (dp_tensor_numel(ta) != n || ta->ndim != tb->ndim) { fprintf(stderr, "compare: %s shape differs\n", nm); fail = 1; continue; }
        if (skipped) continue;
        int exact = tb->dtype == DP_I32 || tb->dtype == DP_I64 || (starts(nm, "step.noise") && u < 1e-10);
        double mx = 0, err = 0;
        for (int64_t e = 0; e < n; e++) {
            double x = dp_tensor_get(tb, e);
            if (isfinite(x) && fabs(x) > mx) mx = fabs(x);
        }
        for (int64_t e = 0; e < n; e++) {
            double x = dp_tensor_get(ta, e), y = dp_tensor_get(tb, e);
            if (isnan(x) && isnan(y)) continue;
            double d = fabs(x - y);
            if (!(d <= err)) err = isnan(d) ? INFINITY : d;
        }
        double tol = exact ? 0 : 16.0 * gam * (mx > 1e-300 ? mx : 1e-300);
        double frac = err == 0 ? 0 : tol > 0 ? err / tol : INFINITY;
        if (frac > worst) { worst = frac; worst_name = nm; }
        if (frac > 1) {
            fail = 1;
            if (!quiet) fprintf(stderr, "FAIL %s: max |a-b| = %.3g, tolerance %.3g\n", nm, err, tol);
        }
    }
    printf("compare %s vs %s: %s (worst %s at %.3g of tolerance)\n", a, b, fail ? "FAIL" : "PASS", worst_name, worst);
    dp_tset_free(&A); dp_tset_free(&B);
    return fail;
}

static int noise_stat(const char *a, double scale) {
    dp_tensor_set A;
    if (dp_st_read(&A, a) != DP_OK) { fprintf(stderr, "noise-stat: %s: %s\n", a, dp_last_error()); return 2; }
    double x2 = 0;
    int64_t M = 0;
    for (size_t i = 0; i < A.n; i++) {
        if (!starts(A.items[i].name, "step.noise.")) continue;
        for (int64_t e = 0; e < dp_tensor_numel(&A.items[i].t); e++) {
            double z = dp_tensor_get(&A.items[i].t, e) / scale;
            x2 += z * z;
            M++;
        }
    }
    dp_tset_free(&A);
    double dev = (x2 - (double)M) / sqrt(2.0 * (double)M);
    printf("noise-stat %s: M = %lld, X = %.1f, (X - M)/sqrt(2M) = %.2f\n", a, (long long)M, x2, dev);
    return M > 0 && fabs(dev) <= 6.0 ? 0 : 1;
}

/* ---------------------------------------------------------------- self-test */
static int run_argv(const char *line) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", line);
    char *argv[64];
    int argc = 0;
    for (char *t = strtok(buf, " "); t && argc < 63; t = strtok(NULL, " ")) argv[argc++] = t;
    argv[argc] = NULL;
    fflush(stdout);
    return as_dpcert(argc, argv);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--as-dpcert") == 0) return as_dpcert(argc - 2, argv + 2);
    if (argc > 3 && strcmp(argv[1], "--compare") == 0) {
        char *skip[16];
        int ns = 0;
        for (int i = 4; i + 1 < argc && ns < 16; i += 2)
            if (strcmp(argv[i], "--skip") == 0) skip[ns++] = argv[i + 1];
        return compare_files(argv[2], argv[3], skip, ns, 0);
    }
    if (argc == 4 && strcmp(argv[1], "--noise-stat") == 0) return noise_stat(argv[2], atof(argv[3]));

    uint64_t seed = t_seed(5);
    char line[1024], dir[256];
    /* usage errors: exit 2, nothing crashes */
    const char *bad[] = {
        "train", "train sgd --model mlp", "train dpsgd --model mlp --strategy nope", "train dpsgd --model mlp --sigma -1",
        "train dpsgd --model mlp --bogus 1", "train dpsgd --model mlp --threads 0", "train dpsgd --model mlp --dtype f16",
        "train dpsgd --model mlp --noise-mode twice", "train dpsgd --model mlp --inject-bug everything",
        "train dpsgd --model mlp --impl reference", "train dpsgd --model mlp --q nan", "train dpsgd --model mlp --steps",
        "train dpzo --model mlp --strategy ghost --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --phi 0.01 --lr 0.1 --seed 1",
        "train dpzo --model mlp --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --phi 0 --lr 0.1 --seed 1",
        "train dpsgd --model mlp --sharding zero4", "train dpsgd --model mlp --collective-timeout 0",
        "train dpsgd --model mlp --collective-timeout -3", "train dpsgd --model mlp --dp 0",
        "train dpsgd --model mlp --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --dp 2",
        "train dpsgd --model mlp --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --sharding zero2 --noise-mode shares",
        "train dpzo --model mlp --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --phi 0.01 --lr 0.1 --seed 1 --sharding zero1",
        "train dpzo --model mlp --dataset-size 8 --q 0.5 --steps 1 --clip 1 --sigma 1 --phi 0.01 --lr 0.1 --seed 1 --memory-report",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = run_argv(bad[i]);
        T_CHECK(rc == 2, "'%s' exited %d, expected 2", bad[i], rc);
    }
    /* --mixed-rule only with --strategy mixed-ghost or book-keeping (the strategies that use it): exit 2 otherwise, never ignored */
    {
        const char *base = "train dpsgd --model mlp --in 3 --hidden 4 --classes 2 --dataset-size 8 --q 0.5 --steps 1 "
                           "--noise-key 1 --seed 1";
        const char *strat[] = {"grad-sample", "ghost", "fused"};
        for (int i = 0; i < 3; i++) {
            snprintf(line, sizeof line, "%s --strategy %s --mixed-rule memory", base, strat[i]);
            int rc = run_argv(line);
            T_CHECK(rc == 2, "'%s' exited %d, expected 2", line, rc);
            T_CHECK(strstr(dp_last_error(), "--mixed-rule") != NULL, "message does not name --mixed-rule: %s",
                    dp_last_error());
        }
        snprintf(line, sizeof line, "%s --mixed-rule memory", base); /* default strategy grad-sample */
        T_CHECK(run_argv(line) == 2, "--mixed-rule with the default strategy accepted");
        snprintf(line, sizeof line, "%s --strategy mixed-ghost --mixed-rule memory", base);
        T_CHECK(run_argv(line) == 0, "--strategy mixed-ghost --mixed-rule memory refused: %s", dp_last_error());
        snprintf(line, sizeof line, "%s --strategy book-keeping --mixed-rule memory", base);
        T_CHECK(run_argv(line) == 0, "--strategy book-keeping --mixed-rule memory refused: %s", dp_last_error());
    }
    /* --inject-bug: refused (exit 2, message names DPCERT_TEST_INJECT) without DPCERT_TEST_INJECT=1 */
    {
        const char *inj = "train dpsgd --model mlp --in 3 --hidden 4 --classes 2 --dataset-size 8 --q 0.5 --steps 1 "
                          "--noise-key 1 --seed 1 --inject-bug clip-after-sum";
        unsetenv("DPCERT_TEST_INJECT");
        int rc = run_argv(inj);
        T_CHECK(rc == 2, "--inject-bug without DPCERT_TEST_INJECT exited %d, expected 2", rc);
        T_CHECK(strstr(dp_last_error(), "DPCERT_TEST_INJECT=1") != NULL, "message does not name the variable: %s",
                dp_last_error());
        setenv("DPCERT_TEST_INJECT", "0", 1);
        T_CHECK(run_argv(inj) == 2, "--inject-bug with DPCERT_TEST_INJECT=0 accepted");
        setenv("DPCERT_TEST_INJECT", "1", 1);
        T_CHECK(run_argv(inj) == 0, "--inject-bug with DPCERT_TEST_INJECT=1 refused: %s", dp_last_error());
        unsetenv("DPCERT_TEST_INJECT");
    }
    /* --backend cuda: runs where the CUDA backend can be created (a build with CUDA on a
     * machine with a GPU), else exits 3 (NOT_SUPPORTED) with a message naming cuda */
    {
        opt_backend *cb = NULL;
        opt_backend_config cc = {"cuda", DP_F64, 1, 0};
        int usable = opt_backend_create(&cb, &cc) == DP_OK;
        if (usable) opt_backend_destroy(cb);
        dp_clear_error();
        int rc = run_argv("train dpsgd --model mlp --dataset-size 8 --steps 1 --noise-key 1 --backend cuda --dtype f64");
        if (usable) T_CHECK(rc == 0, "--backend cuda exited %d on a machine with a usable CUDA backend", rc);
        else T_CHECK(rc == 3 && strcasestr(dp_last_error(), "cuda") != NULL, "--backend cuda exited %d (expected 3): %s", rc,
                     dp_last_error());
    }

    /* exports: same names as the reference, values within tolerance, for each strategy */
    snprintf(dir, sizeof dir, "train_cli_%d", (int)getpid());
    mkdir(dir, 0777);
    const char *common = "--model llama --vocab 11 --dim 8 --layers 1 --heads 2 --ffn 6 --seq 4 --dataset-size 20 "
                         "--q 0.3 --steps 2 --clip 0.05 --sigma 0.8 --clipping per-layer --groups block";
    snprintf(line, sizeof line, "reference dpsgd %s --seed %llu --noise-key 99 --export %s/ref", common,
             (unsigned long long)seed, dir);
    T_CHECK(run_argv(line) == 0, "reference dpsgd failed: %s", dp_last_error());
    for (int k = 0; k < OPT_STRAT_COUNT; k++) {
        snprintf(line, sizeof line, "train dpsgd %s --seed %llu --noise-key 99 --strategy %s --threads %d --export %s/%s",
                 common, (unsigned long long)seed, opt_strategy_names[k], 1 + k % 2, dir, opt_strategy_names[k]);
        T_CHECK(run_argv(line) == 0, "train %s failed: %s", opt_strategy_names[k], dp_last_error());
        for (int s = 1; s <= 2; s++) {
            char a[512], b[512];
            snprintf(a, sizeof a, "%s/%s/step-%06d.safetensors", dir, opt_strategy_names[k], s);
            snprintf(b, sizeof b, "%s/ref/step-%06d.safetensors", dir, s);
            T_CHECK(compare_files(a, b, NULL, 0, 0) == 0, "%s step %d differs from the reference", opt_strategy_names[k], s);
        }
    }
    /* f32 engine: the same comparison at f32's unit roundoff */
    snprintf(line, sizeof line, "train dpsgd %s --seed %llu --noise-key 99 --strategy fused --dtype f32 --export %s/f32",
             common, (unsigned long long)seed, dir);
    T_CHECK(run_argv(line) == 0, "train f32 failed: %s", dp_last_error());
    snprintf(line, sizeof line, "%s/f32/step-000001.safetensors", dir);
    {
        char b[512];
        snprintf(b, sizeof b, "%s/ref/step-000001.safetensors", dir);
        T_CHECK(compare_files(line, b, NULL, 0, 0) == 0, "f32 engine differs from the reference beyond f32 tolerance");
    }
    /* negative control: the realized-divisor bug must be caught */
    snprintf(line, sizeof line, "train dpsgd %s --seed %llu --noise-key 99 --inject-bug realized-batch-divisor --export %s/bug",
             common, (unsigned long long)seed, dir);
    setenv("DPCERT_TEST_INJECT", "1", 1);
    T_CHECK(run_argv(line) == 0, "train with injected bug failed to run");
    unsetenv("DPCERT_TEST_INJECT");
    {
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/bug/step-000001.safetensors", dir);
        snprintf(b, sizeof b, "%s/ref/step-000001.safetensors", dir);
        T_CHECK(compare_files(a, b, NULL, 0, 1) == 1, "injected realized-batch-divisor bug not caught");
    }
    /* DP-ZO: engine vs reference */
    const char *zo = "--model mlp --in 5 --hidden 6 --classes 3 --dataset-size 16 --q 0.5 --steps 2 --clip 0.5 "
                     "--sigma 0.7 --phi 0.01 --lr 0.05 --n-spsa 2 --noise-key 3";
    snprintf(line, sizeof line, "reference dpzo %s --seed %llu --export %s/zref", zo, (unsigned long long)seed, dir);
    T_CHECK(run_argv(line) == 0, "reference dpzo failed: %s", dp_last_error());
    snprintf(line, sizeof line, "train dpzo %s --seed %llu --export %s/zopt", zo, (unsigned long long)seed, dir);
    T_CHECK(run_argv(line) == 0, "train dpzo failed: %s", dp_last_error());
    for (int s = 1; s <= 2; s++) {
        char a[512], b[512];
        snprintf(a, sizeof a, "%s/zopt/step-%06d.safetensors", dir, s);
        snprintf(b, sizeof b, "%s/zref/step-%06d.safetensors", dir, s);
        T_CHECK(compare_files(a, b, NULL, 0, 0) == 0, "dpzo step %d differs from the reference", s);
    }
    snprintf(line, sizeof line, "rm -rf %s", dir);
    if (system(line) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return t_finish();
}

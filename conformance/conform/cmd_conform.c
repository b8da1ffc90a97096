/* conformance/conform/cmd_conform.c — `dpcert conform --suite NAME ...`: run the cases of a
 * suite, print a table (case, status, budget used, time) as cases finish, write
 * DIR/report.json, DIR/junit.xml and DIR/report.md; exit 1 when any case FAILs. */
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/proc.h"
#include "conformance/conform/conform.h"
#include "optimized/backend.h"
#include "optimized/backend_decl.h"
#include "optimized/plugin_loader.h"

#define CMD "conform"

/* One run of the selection: a case (index) at a rank count. */
typedef struct { size_t ci; int64_t r; } conf_run_sel;

/* The (case, ranks) runs of the selection: the cases matching `re` (NULL: all), each at its
 * rank counts; --ranks (rsel) replaces the case's list when the case allows any rank count,
 * else keeps only the listed rank counts the case has (docs/conformance.md). */
static dp_status select_runs(conf_run_sel **out, size_t *nout, const conf_case *cs, size_t ncs, const regex_t *re,
                             const int64_t *rsel, size_t nrsel) {
    size_t nrun = 0, cap = 0;
    conf_run_sel *runs = NULL;
    dp_status st = DP_OK;
    for (size_t i = 0; i < ncs && st == DP_OK; i++) {
        if (re && regexec(re, cs[i].name, 0, NULL, 0) != 0) continue;
        int force = nrsel && cs[i].any_ranks;
        size_t nk = force ? nrsel : cs[i].nranks;
        for (size_t k = 0; k < nk; k++) {
            int64_t r = force ? rsel[k] : cs[i].ranks[k];
            int ok = !nrsel || force;
            for (size_t j = 0; !ok && j < nrsel; j++) ok |= rsel[j] == r;
            if (!ok) continue;
            if ((st = DP_GROW(runs, cap, nrun + 1, 32, "runs")) != DP_OK) break;
            runs[nrun].ci = i;
            runs[nrun++].r = r;
        }
    }
    *out = runs;
    *nout = nrun;
    return st;
}

/* The progress line of run i of n: status, the budget used (a compared case), time, why. */
static void print_run(size_t i, size_t n, const conf_case_result *res, const conf_case *c) {
    char fr[32], prog[64];
    if (res->status == CONF_SKIPPED || res->status == CONF_NOT_SUPPORTED || res->is_stat || c->expect_fail ||
        res->cmp.ncompared == 0)
        snprintf(fr, sizeof fr, "-");
    else if (isfinite(res->worst_frac)) snprintf(fr, sizeof fr, "%.3g%%", 100 * res->worst_frac);
    else snprintf(fr, sizeof fr, "inf");
    snprintf(prog, sizeof prog, "[%zu/%zu]", i + 1, n);
    printf("%-8s %-52s %-13s %12s %8.2f", prog, res->name, conf_status_name(res->status), fr, res->seconds);
    if (res->status != CONF_PASS || c->expect_fail || res->is_stat) printf("  %s", res->detail);
    printf("\n");
    fflush(stdout);
}

/* The summary line and the exit code: 1 a FAIL (or NOT_SUPPORTED under --require-all), 77 nothing
 * compared (never a pass by omission), else 0. */
static int run_verdict(const size_t counts[5], size_t nrun, double total, int require_all) {
    printf("%zu runs: %zu PASS, %zu MARGINAL, %zu FAIL, %zu NOT_SUPPORTED, %zu SKIPPED (%.1f s)\n", nrun,
           counts[CONF_PASS], counts[CONF_MARGINAL], counts[CONF_FAIL], counts[CONF_NOT_SUPPORTED], counts[CONF_SKIPPED],
           total);
    int rc = counts[CONF_FAIL] ? 1 : 0;
    if (require_all && counts[CONF_NOT_SUPPORTED]) {
        fprintf(stderr, "dpcert conform: %zu runs NOT_SUPPORTED and --require-all is given\n", counts[CONF_NOT_SUPPORTED]);
        rc = 1;
    } else if (!rc && counts[CONF_PASS] + counts[CONF_MARGINAL] == 0) {
        /* never a pass by omission: nothing was compared (backend unavailable, every run skipped) */
        fprintf(stderr, "dpcert conform: no run was compared (%zu NOT_SUPPORTED, %zu SKIPPED): exit 77 (skipped)\n",
                counts[CONF_NOT_SUPPORTED], counts[CONF_SKIPPED]);
        rc = 77;
    }
    return rc;
}

/* report.json, junit.xml, report.md and report.html of the run in dir. */
static dp_status write_reports(const char *dir, const char *suite, const conf_case_result *res, size_t nrun) {
    char p[4200];
    dp_status st;
    snprintf(p, sizeof p, "%s/report.json", dir);
    if ((st = conf_report_json(p, suite, res, nrun)) == DP_OK) {
        snprintf(p, sizeof p, "%s/junit.xml", dir);
        if ((st = conf_report_junit(p, suite, res, nrun)) == DP_OK) {
            snprintf(p, sizeof p, "%s/report.md", dir);
            st = conf_report_md(p, suite, res, nrun);
        }
    }
    if (st == DP_OK && snprintf(p, sizeof p, "%s/report.html", dir) > 0) st = conf_report_html(p, suite, res, nrun);
    if (st == DP_OK) printf("reports: %s/report.json, %s/junit.xml, %s/report.md\n", dir, dir, dir);
    return st;
}

/* The binary the runs use: --dpcert (an executable) or this one (/proc/self/exe into exe). */
static dp_status resolve_binary(char *exe, size_t len, const char **dpcert) {
    if (!*dpcert) {
        ssize_t l = readlink("/proc/self/exe", exe, len - 1);
        if (l <= 0) return dp_error(DP_ERR_INTERNAL, "cannot resolve /proc/self/exe; pass --dpcert PATH");
        exe[l] = '\0';
        *dpcert = exe;
    } else if (access(*dpcert, X_OK) != 0) {
        return dp_error(DP_ERR_IO, "--dpcert: '%s' is not an executable", *dpcert);
    }
    return DP_OK;
}

/* The exports' directory into tmpl: --work (created) or a fresh temporary one. */
static dp_status make_workdir(char *tmpl, size_t len, const char *work) {
    if (work) {
        snprintf(tmpl, len, "%s", work);
        return dp_mkdir_p("--work", work);
    }
    const char *t = getenv("TMPDIR");
    snprintf(tmpl, len, "%s/dpcert-conform-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(tmpl)) return dp_error(DP_ERR_IO, "cannot create a temporary directory %s", tmpl);
    return DP_OK;
}

/* --expand-cases DIR: each selected case as DIR/NAME.json, in its canonical form (top-level keys
 * sorted, JSON_INDENT(1)): sha256 of these files is the snapshot digest of
 * conformance/tests/case_matrix.sh. */
static dp_status expand_cases(const char *dir, const conf_case *cs, size_t ncs, const conf_run_sel *runs, size_t nrun) {
    DP_TRY(dp_mkdir_p("--expand-cases", dir));
    size_t nw = 0;
    for (size_t i = 0; i < nrun; i++) {
        if (i && runs[i].ci == runs[i - 1].ci) continue; /* one file per case, not per rank count */
        const conf_case *c = &cs[runs[i].ci];
        char path[4400], *txt = conf_case_canonical(c->json, JSON_INDENT(1));
        if (!txt) return dp_error(DP_ERR_NOMEM, "out of memory");
        size_t len = strlen(txt);
        dp_status st = dp_path_fmt(path, sizeof path, "--expand-cases", "%s/%s.json", dir, c->name);
        if (st == DP_OK) {
            txt[len] = '\n'; /* the NUL byte becomes the final newline (txt is not used as a string after) */
            st = dp_write_file_atomic("expanded case", path, txt, len + 1);
        }
        dp_free(txt);
        DP_TRY(st);
        nw++;
    }
    printf("%zu cases written to %s (of %zu loaded)\n", nw, dir, ncs);
    return DP_OK;
}

/* A plugin backend: the declaration every case is judged under (docs/plugin-abi.md). */
static void print_plugin_decl(const char *backend) {
    if (strncmp(backend, "plugin:", 7) != 0) return;
    opt_backend_decl decl;
    if (opt_plugin_probe(backend + 7, &decl) != DP_OK) return;
    for (int dt = DP_F64; dt <= DP_F32; dt++) {
        if (!(decl.caps.dtypes & DPCERT_DTYPE_BIT(dt))) continue;
        char txt[4600];
        opt_decl_text(txt, sizeof txt, &decl, (dp_dtype)dt);
        printf("declaration: %s\n", txt);
    }
}

int dp_cmd_conform(int argc, char **argv) {
    const char *suite = NULL, *backend = "host", *ranks_s = NULL, *filter = NULL, *report = NULL, *dpcert = NULL,
               *cases = NULL, *work = NULL, *expand = NULL;
    int help = 0, keep = 0, list = 0, seen_suite = 0, require_all = 0;
    dp_opt opts[] = {
        {"--suite", DP_OPT_STRING, &suite, &seen_suite, "default | ci | full | all (cases list their suites)"},
        {"--backend", DP_OPT_STRING, &backend, NULL, "host (default) | cuda | cuda-emu (the CUDA backend on the CPU emulation) | plugin:PATH (docs/plugin-abi.md)"},
        {"--ranks", DP_OPT_STRING, &ranks_s, NULL, "MPI rank counts, e.g. 1,2: replace the case's list (any_ranks cases), else intersect with it"},
        {"--filter", DP_OPT_STRING, &filter, NULL, "only cases whose name matches this POSIX extended regex"},
        {"--report", DP_OPT_STRING, &report, NULL, "DIR: write report.json, junit.xml and report.md there"},
        {"--dpcert", DP_OPT_STRING, &dpcert, NULL, "binary to run (default: this one)"},
        {"--cases", DP_OPT_STRING, &cases, NULL, "cases directory (default: $DPCERT_ROOT/conformance/cases)"},
        {"--work", DP_OPT_STRING, &work, NULL, "DIR for the exports (default: a fresh temporary directory)"},
        {"--keep", DP_OPT_FLAG, &keep, NULL, "keep the exports and logs of every case"},
        {"--list", DP_OPT_FLAG, &list, NULL, "list the selected cases and exit"},
        {"--expand-cases", DP_OPT_STRING, &expand, NULL, "DIR: write each selected case (files and matrix expansions) as DIR/NAME.json and exit"},
        {"--require-all", DP_OPT_FLAG, &require_all, NULL, "a NOT_SUPPORTED run is a failure (exit 1; for gating jobs)"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    if (help) {
        printf("usage: dpcert conform --suite NAME [--backend host|cuda|cuda-emu|plugin:PATH] [--ranks LIST] [--filter REGEX] [--report DIR]\n"
               "Runs the reference and the optimized engine on each case and compares them tensor by tensor\n"
               "(docs/conformance.md). Exit 0 all PASS/MARGINAL/NOT_SUPPORTED/SKIPPED with at least one run compared,\n"
               "1 a case FAILs (or NOT_SUPPORTED with --require-all), 2 bad usage, 77 no run could run (e.g. the\n"
               "backend is unavailable), 130/143 interrupted (children stopped, temporary directory removed).\n");
        dp_opts_print_help(opts, nopts);
        return 0;
    }
    if (!seen_suite) return dp_cli_fail(CMD, dp_error(DP_ERR_USAGE, "--suite is required (default, ci, full or all)"));
    /* conform launches its own ranks (mpirun -n R dpcert train): started as an MPI rank itself,
     * every rank would race on the same directories */
    static const char *const mpi_env[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", NULL};
    for (const char *const *e = mpi_env; *e; e++)
        if (getenv(*e))
            return dp_cli_fail(CMD, dp_error(DP_ERR_USAGE, "do not run conform under mpirun (%s is set): it launches "
                                                           "its own ranks (--ranks)", *e));
    /* a plugin is loaded and its declaration checked here, once: a bad plugin exits 2 before any case */
    static char backend_canon[4200];
    if ((st = opt_backend_name_check(backend_canon, sizeof backend_canon, backend)) != DP_OK) return dp_cli_fail(CMD, st);
    backend = backend_canon;
    int64_t rsel[CONF_MAX_RANKS];
    size_t nrsel = 0;
    if (ranks_s) {
        if ((st = dp_parse_i64_list(rsel, CONF_MAX_RANKS, &nrsel, "--ranks", ranks_s)) != DP_OK) return dp_cli_fail(CMD, st);
        for (size_t i = 0; i < nrsel; i++)
            if (rsel[i] < 1 || rsel[i] > 64)
                return dp_cli_fail(CMD, dp_error(DP_ERR_INVALID, "--ranks entries must be in [1, 64] (got %lld)", (long long)rsel[i]));
    }
    regex_t re;
    if (filter && regcomp(&re, filter, REG_EXTENDED | REG_NOSUB) != 0)
        return dp_cli_fail(CMD, dp_error(DP_ERR_USAGE, "--filter: invalid regular expression '%s'", filter));
    char exe[4096];
    if ((st = resolve_binary(exe, sizeof exe, &dpcert)) != DP_OK) {
        if (filter) regfree(&re);
        return dp_cli_fail(CMD, st);
    }
    char casedir[4096];
    if (cases) snprintf(casedir, sizeof casedir, "%s", cases);
    else dp_find_tree_path(casedir, sizeof casedir, "conformance/cases", dpcert, 1);
    conf_case *cs = NULL;
    size_t ncs = 0;
    if ((st = conf_cases_load_suite(&cs, &ncs, casedir, suite)) != DP_OK) {
        if (filter) regfree(&re);
        return dp_cli_fail(CMD, st);
    }
    /* (case, ranks) runs */
    size_t nrun = 0;
    conf_run_sel *runs = NULL;
    st = select_runs(&runs, &nrun, cs, ncs, filter ? &re : NULL, rsel, nrsel);
    if (filter) regfree(&re);
    int rc = 0;
    conf_case_result *res = NULL;
    char tmpl[4096] = "";
    if (st == DP_OK && nrun == 0) st = dp_error(DP_ERR_USAGE, "no case of suite '%s' in %s matches the selection", suite, casedir);
    if (st == DP_OK && list) {
        for (size_t i = 0; i < nrun; i++) printf("%s@r%lld\n", cs[runs[i].ci].name, (long long)runs[i].r);
        goto out;
    }
    if (st == DP_OK && expand) {
        st = expand_cases(expand, cs, ncs, runs, nrun);
        goto out;
    }
    if (st == DP_OK && report) {
        st = dp_mkdir_p("--report", report);
    }
    if (st == DP_OK) st = make_workdir(tmpl, sizeof tmpl, work);
    if (st == DP_OK && !(res = dp_calloc(nrun, sizeof *res))) st = DP_ERR_NOMEM;
    if (st != DP_OK) goto out;
    /* mpirun as root in containers (as ci/run-tests.sh sets it) */
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    setenv("OMPI_MCA_rmaps_base_oversubscribe", "1", 0);
    if ((st = dp_proc_install_signal_forwarding()) != DP_OK) goto out;
    conf_run_opts ro = {dpcert, backend, casedir, tmpl, keep, 0};
    printf("dpcert conform: suite %s, backend %s, %zu runs (%s)\n", suite, backend, nrun, casedir);
    print_plugin_decl(backend);
    printf("%-8s %-52s %-13s %12s %8s\n", "", "case", "status", "budget used", "time(s)");
    fflush(stdout);
    size_t counts[5] = {0};
    double total = 0;
    size_t ndone = 0;
    for (size_t i = 0; i < nrun && !dp_proc_interrupted(); i++) {
        const conf_case *c = &cs[runs[i].ci];
        ndone = i + 1;
        if ((st = conf_run_case(&res[i], c, runs[i].r, &ro)) != DP_OK) {
            /* the runner itself failed (disk, memory): record and go on */
            res[i].status = CONF_FAIL;
            snprintf(res[i].name, sizeof res[i].name, "%s@r%lld", c->name, (long long)runs[i].r);
            snprintf(res[i].detail, sizeof res[i].detail, "runner error: %s", dp_last_error());
            st = DP_OK;
        }
        counts[res[i].status]++;
        total += res[i].seconds;
        print_run(i, nrun, &res[i], c);
    }
    if (dp_proc_interrupted()) { /* the children's groups got the signal and were waited for */
        int sig = dp_proc_interrupted();
        if (!work) conf_rm_rf(tmpl);
        fprintf(stderr, "dpcert conform: interrupted by signal %d after %zu of %zu runs; children stopped%s\n", sig,
                ndone, nrun, work ? "" : ", temporary directory removed");
        rc = 128 + sig;
        goto out;
    }
    rc = run_verdict(counts, nrun, total, require_all);
    if (report) st = write_reports(report, suite, res, nrun);
    if (!work && !keep) conf_rm_rf(tmpl);
    else if (keep) printf("exports and logs kept in %s\n", tmpl);
out:
    if (res)
        for (size_t i = 0; i < nrun; i++) conf_cmp_result_free(&res[i].cmp);
    dp_free(res);
    dp_free(runs);
    for (size_t i = 0; i < ncs; i++) conf_case_free(&cs[i]);
    dp_free(cs);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    return rc;
}

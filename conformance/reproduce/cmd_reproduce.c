/* conformance/reproduce/cmd_reproduce.c — `dpcert reproduce TARGET [--json] [--report DIR]` and
 * `dpcert reproduce --list [--json]`: the papers' tables side by side with ours, a verdict
 * and a kind per row (docs/reproduce.md). One registry (REPRO_TARGETS) lists every
 * target. Exit codes: 0 reproduced, 1 a row differs, 77 incomplete (a measured row could
 * not run) or uncorroborated (no independent or measured row matches), 2 bad usage, 3
 * internal error or a target that is not available in this build (NOT_SUPPORTED). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/fsutil.h"
#include "conformance/reproduce/repro.h"

int dp_cmd_reproduce(int argc, char **argv);

/* name, paper, tables, what is modelled / measured, function (NULL: unavailable), why unavailable */
#define REPRO_TARGETS(X)                                                                                      \
    X("dpzo-tables", "DP-ZO (dp-zo.txt)", "Tables 8, 9, 11, 12, 13, 14 (epsilon); memory against DP-SGD (plot)",  \
      "epsilon computed by our accountants (RDP, PLD bounds, pure/RR composition); nothing measured",             \
      repro_dpzo_tables, NULL)                                                                              \
    X("longshield-table2", "LongShield (longshield.txt)", "Table 2 (max sequence length under ZeRO-DP)",          \
      "memory model (docs/models-of-cost.md), 9 independent outcomes and their sensitivity; nothing measured",    \
      repro_longshield_table2, NULL)                                                                        \
    X("longshield-memory", "LongShield (longshield.txt)",                                                         \
      "Tables 4 and 5 peak-memory columns (GB); the 4x context-scaling claim",                                   \
      "memory model; throughput columns are GPU measurements and not reproduced", repro_longshield_memory,  \
      NULL)                                                                                                      \
    X("longshield-comm", "LongShield (longshield.txt)",                                                           \
      "section 3.2 communication volume (input- vs output-stationary, the crossover T)",                         \
      "communication model at Llama scale; the engine's byte counters at small sizes (mpirun)",                  \
      repro_longshield_comm, NULL)                                                                          \
    X("longshield-claims", "LongShield (longshield.txt)",                                                         \
      "section 2 mixed-ghost threshold, Table 5 context with checkpointing and its recompute cost, Tables 3-4 gaps", \
      "memory and FLOP models; the gap columns re-evaluated from the printed throughputs",                       \
      repro_longshield_claims, NULL)                                                                        \
    X("dp-zero-memory", "DP-ZeRO (dp-zero.txt)",                                                                  \
      "section 3 model-state formulas, ZeRO Table 2 sizes, Remark 4.2, section 4.2, the mixed-precision saving",   \
      "model-state formulas; the engine's ledger at small sizes (mpirun)", repro_dp_zero_memory, NULL)      \
    X("dp-zero-time", "DP-ZeRO (dp-zero.txt)",                                                                    \
      "Table 2 time complexity and footnote 7, section 3.2.2 ZeRO3 communication, section 3.2.3 PEFT",           \
      "FLOP counts of the layer shapes; the engine's byte counters at small sizes (mpirun)",                     \
      repro_dp_zero_time, NULL)                                                                             \
    X("flashdp-memory", "FlashDP (flashdp.txt)", "Table 1 memory columns (DP overhead over NonDP); Figure 4 (plot)", \
      "per-example buffers of each method and of dpcert's fused strategy; the engine's ledger at small sizes",    \
      repro_flashdp_memory, NULL)                                                                           \
    X("dp-zero-losscale", "DP-ZeRO (dp-zero.txt)", "Tables 3 and 4 (loss scaling)",                              \
      "Table 3 derived from its unscaled rows; Table 4 simulated (`dpcert losscale`)", repro_dp_zero_losscale, NULL)

typedef struct {
    const char *name, *paper, *tables, *what;
    dp_status (*run)(repro_ctx *r);
    const char *unavailable;
} repro_target;

#define REPRO_ENTRY_(n, p, t, w, f, u) {n, p, t, w, f, u},
static const repro_target TARGETS[] = {REPRO_TARGETS(REPRO_ENTRY_)};
#define N_TARGETS (sizeof TARGETS / sizeof TARGETS[0])

/* ------------------------------------------------------------------ command ---- */
static int list_targets(int json) {
    json_t *a = json_array();
    for (size_t i = 0; i < N_TARGETS; i++) {
        const repro_target *t = &TARGETS[i];
        if (json) {
            json_t *o = json_object();
            json_object_set_new(o, "target", json_string(t->name));
            json_object_set_new(o, "paper", json_string(t->paper));
            json_object_set_new(o, "tables", json_string(t->tables));
            json_object_set_new(o, "modelled_vs_measured", json_string(t->what));
            json_object_set_new(o, "available", json_boolean(t->run != NULL));
            if (!t->run) json_object_set_new(o, "unavailable", json_string(t->unavailable));
            json_array_append_new(a, o);
        } else {
            printf("%-18s %s: %s\n%-18s   %s%s%s\n", t->name, t->paper, t->tables, "", t->what,
                   t->run ? "" : "; UNAVAILABLE: ", t->run ? "" : t->unavailable);
        }
    }
    if (json) {
        char *s = json_dumps(a, JSON_INDENT(2));
        if (s) { puts(s); dp_free(s); }
    }
    json_decref(a);
    dp_status st = dp_stdout_finish("reproduce --list output");
    return st == DP_OK ? 0 : dp_cli_fail("reproduce", st);
}

static dp_status write_report(const char *dir, const json_t *root) {
    DP_TRY(dp_mkdir_p("--report", dir));
    size_t n = strlen(dir) + 32;
    char *p = dp_malloc(n);
    if (!p) return DP_ERR_NOMEM;
    snprintf(p, n, "%s/report.json", dir);
    char *txt = json_dumps(root, JSON_INDENT(1) | JSON_REAL_PRECISION(17) | JSON_ENSURE_ASCII);
    dp_status st = txt ? dp_write_file_atomic("--report", p, txt, strlen(txt)) : DP_ERR_NOMEM;
    dp_free(txt);
    if (st == DP_OK) {
        snprintf(p, n, "%s/report.html", dir);
        st = repro_html(p, root);
    }
    dp_free(p);
    return st;
}

/* exit code of a verdict: 0 reproduced, 1 a row differs, 77 incomplete or uncorroborated
 * (not a pass: nothing failed, but nothing independent was shown or a check could not run) */
static int verdict_exit(repro_verdict v) {
    return v == REPRO_REPRODUCED ? 0 : v == REPRO_DIFFERS ? 1 : 77;
}

int dp_cmd_reproduce(int argc, char **argv) {
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        printf("usage: dpcert reproduce TARGET [--json] [--report DIR] [--dpcert PATH]\n"
               "       dpcert reproduce --list [--json]\ntargets:");
        for (size_t i = 0; i < N_TARGETS; i++) printf(" %s", TARGETS[i].name);
        printf("\nexit: 0 reproduced, 1 a row differs, 77 incomplete or uncorroborated, 2 usage, 3 internal\n");
        return 0;
    }
    if (argc < 1) return dp_cli_fail("reproduce", dp_error(DP_ERR_USAGE, "missing TARGET (or --list)"));
    const int listing = strcmp(argv[0], "--list") == 0;
    int json = 0, help = 0;
    const char *report = NULL, *dpcert = NULL;
    dp_opt opts[] = {{"--json", DP_OPT_FLAG, &json, NULL, "JSON output"},
                     {"--report", DP_OPT_STRING, &report, NULL, "directory for report.json and report.html"},
                     {"--dpcert", DP_OPT_STRING, &dpcert, NULL,
                      "the dpcert binary the measured rows run (default: this one)"}};
    dp_status st = dp_opts_parse(opts, listing ? 1 : 3, argc - 1, argv + 1, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail("reproduce", st);
    if (help) { /* `reproduce TARGET --help` describes and never runs (found by common/tests/cli_fuzz.py) */
        printf("usage: dpcert reproduce %s [--json] [--report DIR]\n", listing ? "--list" : argv[0]);
        dp_opts_print_help(opts, listing ? 1 : 2);
        return 0;
    }
    if (listing) return list_targets(json);
    const repro_target *t = NULL;
    for (size_t i = 0; i < N_TARGETS; i++)
        if (strcmp(argv[0], TARGETS[i].name) == 0) t = &TARGETS[i];
    if (!t) {
        char names[512] = "";
        for (size_t i = 0; i < N_TARGETS; i++) {
            strncat(names, TARGETS[i].name, sizeof names - strlen(names) - 1);
            if (i + 1 < N_TARGETS) strncat(names, ", ", sizeof names - strlen(names) - 1);
        }
        return dp_cli_fail("reproduce", dp_error(DP_ERR_USAGE, "unknown target '%s' (expected one of: %s; "
                                                               "--list describes them)", argv[0], names));
    }
    if (!t->run)
        return dp_cli_fail("reproduce", dp_error(DP_ERR_NOT_SUPPORTED, "target %s: %s", t->name, t->unavailable));
    char exe[4096];
    if (!dpcert) {
        ssize_t l = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (l <= 0) return dp_cli_fail("reproduce", dp_error(DP_ERR_INTERNAL, "cannot resolve /proc/self/exe; pass "
                                                                              "--dpcert PATH"));
        exe[l] = '\0';
        dpcert = exe;
    } else if (access(dpcert, X_OK) != 0)
        return dp_cli_fail("reproduce", dp_error(DP_ERR_USAGE, "--dpcert: '%s' is not an executable", dpcert));
    repro_ctx r = {json_object(), json ? NULL : stdout, dpcert};
    json_object_set_new(r.root, "target", json_string(t->name));
    json_object_set_new(r.root, "paper", json_string(t->paper));
    json_object_set_new(r.root, "tables", json_string(t->tables));
    json_object_set_new(r.root, "modelled_vs_measured", json_string(t->what));
    json_object_set_new(r.root, "rows", json_array());
    json_object_set_new(r.root, "plots", json_array());
    json_object_set_new(r.root, "caveats", json_array());
    if (!json) printf("%s — %s, %s\n(%s)\n", t->name, t->paper, t->tables, t->what);
    repro_verdict v = REPRO_INCOMPLETE;
    st = t->run(&r);
    if (st == DP_OK) st = repro_finish(&v, r.root);
    if (st == DP_OK) {
        if (json) {
            char *s = json_dumps(r.root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
            if (s) { puts(s); dp_free(s); }
        } else
            repro_print(stdout, r.root);
        if (report) st = write_report(report, r.root);
        if (st == DP_OK) st = dp_stdout_finish("reproduce output");
    }
    json_decref(r.root);
    if (st != DP_OK) return dp_cli_fail("reproduce", st);
    return verdict_exit(v);
}

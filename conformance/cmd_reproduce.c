/* conformance/cmd_reproduce.c — `dpcert reproduce TARGET [--json] [--report DIR]` and
 * `dpcert reproduce --list [--json]`: the papers' tables side by side with ours, a verdict
 * per row (docs/reproduce.md). One registry (CONF_REPRO_TARGETS) lists every target.
 * Exit codes: 0 every row reproduced, 1 a row differs, 2 bad usage, 3 internal error or a
 * target that is not available in this build (NOT_SUPPORTED, naming the issue). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/fsutil.h"
#include "conformance/html.h"
#include "conformance/repro.h"

int dp_cmd_reproduce(int argc, char **argv);

/* name, paper, tables, what is modelled / measured, function (NULL: unavailable), why unavailable */
#define CONF_REPRO_TARGETS(X)                                                                                      \
    X("dpzo-tables", "DP-ZO (dp-zo.txt)", "Tables 8, 9, 11, 12, 13, 14 (epsilon)",                               \
      "epsilon computed by our accountants (RDP, PLD bounds, pure/RR composition); nothing measured",             \
      conf_repro_dpzo_tables, NULL)                                                                              \
    X("longshield-table2", "LongShield (longshield.txt)", "Table 2 (max sequence length under ZeRO-DP)",          \
      "memory model (docs/models-of-cost.md); nothing measured", conf_repro_longshield_table2, NULL)             \
    X("longshield-memory", "LongShield (longshield.txt)",                                                         \
      "Tables 4 and 5 peak-memory columns; the 4x context-scaling claim",                                        \
      "memory model; throughput columns are GPU measurements and not reproduced", conf_repro_longshield_memory,  \
      NULL)                                                                                                      \
    X("dp-zero-memory", "DP-ZeRO (dp-zero.txt)",                                                                  \
      "section 3 model-state formulas, ZeRO Table 2 sizes, Remark 4.2, the mixed-precision saving",              \
      "model-state formulas; nothing measured", conf_repro_dp_zero_memory, NULL)                                 \
    X("flashdp-memory", "FlashDP (flashdp.txt)", "Table 1 memory columns (DP overhead over NonDP)",               \
      "per-example buffer model; the paper's columns are measurements", conf_repro_flashdp_memory, NULL)         \
    X("dp-zero-losscale", "DP-ZeRO (dp-zero.txt)", "Tables 3 and 4 (loss scaling)",                              \
      "Table 3 derived from its unscaled rows; Table 4 simulated (`dpcert losscale`)", conf_repro_dp_zero_losscale, NULL)

typedef struct {
    const char *name, *paper, *tables, *what;
    dp_status (*run)(conf_repro *r, FILE *txt);
    const char *unavailable;
} repro_target;

#define REPRO_ENTRY_(n, p, t, w, f, u) {n, p, t, w, f, u},
static const repro_target TARGETS[] = {CONF_REPRO_TARGETS(REPRO_ENTRY_)};
#define N_TARGETS (sizeof TARGETS / sizeof TARGETS[0])

/* ------------------------------------------------------------------ helpers ---- */
void conf_repro_columns(conf_repro *r, const char *const *keys) {
    json_t *a = json_array();
    for (; *keys; keys++) json_array_append_new(a, json_string(*keys));
    json_object_set_new(r->root, "columns", a);
}

json_t *conf_repro_row(conf_repro *r, const char *verdict, const char *reason) {
    json_t *rows = json_object_get(r->root, "rows"), *o = json_object();
    json_object_set_new(o, "verdict", json_string(verdict));
    if (strncmp(verdict, "differs", 7) == 0) {
        r->not_reproduced++;
        json_object_set_new(o, "reason", json_string(reason ? reason : "(no reason given)"));
    }
    json_array_append_new(rows, o);
    return o;
}

void conf_repro_caveat(conf_repro *r, const char *text) {
    json_array_append_new(json_object_get(r->root, "caveats"), json_string(text));
}

/* ------------------------------------------------------- accounting target ---- */
dp_status conf_repro_dpzo_tables(conf_repro *r, FILE *txt) {
    int bad = acct_reproduce_dpzo(r->root, txt);
    if (bad < 0) return DP_ERR_INTERNAL;
    r->not_reproduced += bad;
    /* epsilon versus steps (RDP, the orders grid of the table) for the sigmas of Tables 12/13 */
    json_t *p = dp_html_plot_new(json_object_get(r->root, "plots"), "line",
                              "DP-ZO Gaussian, q = 0.016, delta = 1e-5: epsilon vs steps (RDP)", "steps",
                              "epsilon", 10, 10);
    const double sig[3] = {30.9, 16.4, 4.8};
    double orders[ACCT_MAX_ORDERS];
    size_t no = acct_orders_grid(orders, ACCT_GRID_DPACCOUNTING);
    for (int k = 0; k < 3; k++) {
        double xs[9], ys[9];
        for (int i = 0; i < 9; i++) {
            acct_schedule s = {.n = 1};
            xs[i] = round(100 * pow(10, i * 3.0 / 8)); /* 100 .. 100 000 */
            s.seg[0] = (acct_segment){ACCT_GAUSSIAN, 16.0 / 1000, sig[k], (int64_t)xs[i]};
            if (acct_rdp_epsilon(&ys[i], NULL, &s, orders, no, 1e-5, ACCT_CONV_BALLE) != DP_OK) return DP_ERR_INTERNAL;
        }
        char name[32];
        snprintf(name, sizeof name, "sigma = %g", sig[k]);
        dp_html_plot_series(p, name, xs, ys, 9, 0);
    }
    if (!json_object_get(r->root, "caveats")) json_object_set_new(r->root, "caveats", json_array());
    conf_repro_caveat(r, "Table 11 row: |D| = 1000 and delta = 1e-5 assumed as in Tables 12 and 13 (Table 11 does "
                         "not print them)");
    return DP_OK;
}

/* -------------------------------------------------------------- text table ---- */
static void cell_text(char *b, size_t n, const json_t *v) {
    if (json_is_string(v)) snprintf(b, n, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(b, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(b, n, "%.4g", json_real_value(v));
    else snprintf(b, n, "-");
}

static void print_table(FILE *f, const json_t *root) {
    const json_t *cols = json_object_get(root, "columns"), *rows = json_object_get(root, "rows");
    size_t nc = json_array_size(cols), nr = json_array_size(rows);
    if (nc == 0) return;
    size_t w[32] = {0};
    char b[512];
    if (nc > 32) nc = 32;
    for (size_t c = 0; c < nc; c++) w[c] = strlen(json_string_value(json_array_get(cols, c)));
    for (size_t i = 0; i < nr; i++)
        for (size_t c = 0; c + 1 < nc; c++) { /* the last column (verdict) is not padded */
            cell_text(b, sizeof b, json_object_get(json_array_get(rows, i), json_string_value(json_array_get(cols, c))));
            if (strlen(b) > w[c]) w[c] = strlen(b);
        }
    for (size_t c = 0; c < nc; c++) fprintf(f, "%-*s%s", (int)w[c], json_string_value(json_array_get(cols, c)), c + 1 < nc ? "  " : "\n");
    for (size_t i = 0; i < nr; i++) {
        const json_t *o = json_array_get(rows, i);
        for (size_t c = 0; c < nc; c++) {
            cell_text(b, sizeof b, json_object_get(o, json_string_value(json_array_get(cols, c))));
            fprintf(f, "%-*s%s", c + 1 < nc ? (int)w[c] : 0, b, c + 1 < nc ? "  " : "");
        }
        const char *why = json_string_value(json_object_get(o, "reason"));
        fprintf(f, "%s%s\n", why ? ": " : "", why ? why : "");
    }
}

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
        st = conf_repro_html(p, root);
    }
    dp_free(p);
    return st;
}

int dp_cmd_reproduce(int argc, char **argv) {
    if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0)) {
        printf("usage: dpcert reproduce TARGET [--json] [--report DIR]\n       dpcert reproduce --list [--json]\n"
               "targets:");
        for (size_t i = 0; i < N_TARGETS; i++) printf(" %s", TARGETS[i].name);
        printf("\n");
        return 0;
    }
    if (argc < 1) return dp_cli_fail("reproduce", dp_error(DP_ERR_USAGE, "missing TARGET (or --list)"));
    const int listing = strcmp(argv[0], "--list") == 0;
    int json = 0, help = 0;
    const char *report = NULL;
    dp_opt opts[] = {{"--json", DP_OPT_FLAG, &json, NULL, "JSON output"},
                     {"--report", DP_OPT_STRING, &report, NULL, "directory for report.json and report.html"}};
    dp_status st = dp_opts_parse(opts, listing ? 1 : 2, argc - 1, argv + 1, NULL, 0, NULL, &help);
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
    conf_repro r = {json_object(), 0};
    json_object_set_new(r.root, "target", json_string(t->name));
    json_object_set_new(r.root, "paper", json_string(t->paper));
    json_object_set_new(r.root, "tables", json_string(t->tables));
    json_object_set_new(r.root, "modelled_vs_measured", json_string(t->what));
    json_object_set_new(r.root, "rows", json_array());
    json_object_set_new(r.root, "plots", json_array());
    json_object_set_new(r.root, "caveats", json_array());
    if (!json) printf("%s — %s, %s\n(%s)\n", t->name, t->paper, t->tables, t->what);
    st = t->run(&r, json ? NULL : stdout);
    if (st == DP_OK) {
        json_object_set_new(r.root, "rows_not_reproduced", json_integer(r.not_reproduced));
        json_object_set_new(r.root, "verdict", json_string(r.not_reproduced ? "DIFFERS" : "REPRODUCED"));
        if (json) {
            char *s = json_dumps(r.root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
            if (s) { puts(s); dp_free(s); }
        } else {
            print_table(stdout, r.root);
            const json_t *cv = json_object_get(r.root, "caveats");
            for (size_t i = 0; i < json_array_size(cv); i++) printf("caveat: %s\n", json_string_value(json_array_get(cv, i)));
            printf("%d row(s) not reproduced\n", r.not_reproduced);
        }
        if (report) st = write_report(report, r.root);
        if (st == DP_OK) st = dp_stdout_finish("reproduce output");
    }
    json_decref(r.root);
    if (st != DP_OK) return dp_cli_fail("reproduce", st);
    return r.not_reproduced ? 1 : 0;
}

/* conformance/reproduce/repro_common.c — what every `dpcert reproduce` target shares
 * (conformance/reproduce/repro.h): the row kinds, rows and tables, the per-kind summary and the
 * target's verdict (docs/reproduce.md "Kinds" and "Verdict"), the text output, and the
 * rounding checks of printed values. */
#include <math.h>
#include <string.h>

#include "conformance/reproduce/repro.h"

/* ---------------------------------------------------------------------- kinds ---- */
#define KIND_NAME_(id, name, counts, what) name,
#define KIND_WHAT_(id, name, counts, what) what,
#define KIND_COUNTS_(id, name, counts, what) counts,
static const char *const KIND_NAMES[] = {REPRO_KINDS(KIND_NAME_)};
static const char *const KIND_WHAT[] = {REPRO_KINDS(KIND_WHAT_)};
static const int KIND_COUNTS[] = {REPRO_KINDS(KIND_COUNTS_)};

const char *repro_kind_name(repro_kind k) { return (unsigned)k < REPRO_N_KINDS ? KIND_NAMES[k] : "?"; }
const char *repro_kind_what(repro_kind k) { return (unsigned)k < REPRO_N_KINDS ? KIND_WHAT[k] : "?"; }
int repro_kind_counts(repro_kind k) { return (unsigned)k < REPRO_N_KINDS && KIND_COUNTS[k]; }
int repro_kind_parse(repro_kind *out, const char *name) {
    for (int i = 0; name && i < REPRO_N_KINDS; i++)
        if (strcmp(name, KIND_NAMES[i]) == 0) { *out = (repro_kind)i; return 1; }
    return 0;
}

repro_outcome repro_outcome_of(const char *v) {
    if (!v) return REPRO_OUT_OTHER;
    if (strncmp(v, "match", 5) == 0 || strcmp(v, "CONSISTENT") == 0) return REPRO_OUT_MATCH;
    if (strncmp(v, "differs", 7) == 0 || strcmp(v, "UNDER-REPORTED") == 0) return REPRO_OUT_DIFFERS;
    if (strncmp(v, "not run", 7) == 0) return REPRO_OUT_NOT_RUN;
    return REPRO_OUT_OTHER;
}

/* ----------------------------------------------------------------------- rows ---- */
static json_t *columns_with_kind(const char *const *keys) {
    json_t *a = json_array();
    int have_kind = 0;
    for (const char *const *k = keys; *k; k++) have_kind |= strcmp(*k, "kind") == 0;
    for (; *keys; keys++) {
        if (!have_kind && strcmp(*keys, "verdict") == 0) json_array_append_new(a, json_string("kind"));
        json_array_append_new(a, json_string(*keys));
    }
    return a;
}

void repro_columns(repro_ctx *r, const char *const *keys) {
    json_object_set_new(r->root, "columns", columns_with_kind(keys));
}

json_t *repro_row(repro_ctx *r, repro_kind kind, const char *verdict, const char *reason) {
    json_t *rows = json_object_get(r->root, "rows"), *o = json_object();
    json_object_set_new(o, "kind", json_string(repro_kind_name(kind)));
    json_object_set_new(o, "verdict", json_string(verdict));
    repro_outcome oc = repro_outcome_of(verdict);
    if (oc != REPRO_OUT_MATCH && (reason || oc == REPRO_OUT_DIFFERS || oc == REPRO_OUT_NOT_RUN))
        json_object_set_new(o, "reason", json_string(reason ? reason : ""));
    json_array_append_new(rows, o);
    return o;
}

void repro_caveat(repro_ctx *r, const char *text) {
    json_array_append_new(json_object_get(r->root, "caveats"), json_string(text));
}

json_t *repro_table(repro_ctx *r, const char *title, const char *const *columns) {
    json_t *tables = json_object_get(r->root, "extra_tables");
    if (!tables) {
        tables = json_array();
        json_object_set_new(r->root, "extra_tables", tables);
    }
    json_t *t = json_object(), *rows = json_array(), *cols = json_array();
    for (; *columns; columns++) json_array_append_new(cols, json_string(*columns));
    json_object_set_new(t, "title", json_string(title));
    json_object_set_new(t, "columns", cols);
    json_object_set_new(t, "rows", rows);
    json_array_append_new(tables, t);
    return rows;
}

/* -------------------------------------------------------------------- verdict ---- */
static const char *const VERDICT_NAMES[] = {"REPRODUCED", "DIFFERS", "INCOMPLETE", "UNCORROBORATED"};
const char *repro_verdict_name(repro_verdict v) { return (unsigned)v < 4 ? VERDICT_NAMES[v] : "?"; }

dp_status repro_finish(repro_verdict *out, json_t *root) {
    int n[REPRO_N_KINDS][4] = {{0}}, rows[REPRO_N_KINDS] = {0};
    const json_t *arr = json_object_get(root, "rows");
    size_t i;
    const json_t *o;
    json_array_foreach(arr, i, o) {
        repro_kind k;
        const char *v = json_string_value(json_object_get(o, "verdict"));
        if (!repro_kind_parse(&k, json_string_value(json_object_get(o, "kind"))) || !v)
            return dp_error(DP_ERR_INTERNAL, "reproduce: row %zu has no kind or no verdict", i + 1);
        repro_outcome oc = repro_outcome_of(v);
        const char *why = json_string_value(json_object_get(o, "reason"));
        if ((oc == REPRO_OUT_DIFFERS || oc == REPRO_OUT_NOT_RUN) && (!why || strlen(why) < 8))
            return dp_error(DP_ERR_INTERNAL, "reproduce: row %zu (%s) gives no reason", i + 1, v);
        if (k == REPRO_KIND_NOT_IN_PAPER) {
            const char *key;
            const json_t *val;
            json_object_foreach((json_t *)o, key, val)
                if (strncmp(key, "paper", 5) == 0)
                    return dp_error(DP_ERR_INTERNAL, "reproduce: row %zu is not in the paper but has '%s'", i + 1, key);
        }
        rows[k]++;
        n[k][oc]++;
    }
    json_t *sum = json_object();
    int reproduced = 0, reproducible = 0, differ = 0, not_run = 0;
    for (int k = 0; k < REPRO_N_KINDS; k++) {
        differ += n[k][REPRO_OUT_DIFFERS];
        not_run += n[k][REPRO_OUT_NOT_RUN];
        if (repro_kind_counts((repro_kind)k)) {
            reproduced += n[k][REPRO_OUT_MATCH];
            reproducible += rows[k];
        }
        if (!rows[k]) continue;
        json_t *c = json_object();
        json_object_set_new(c, "rows", json_integer(rows[k]));
        json_object_set_new(c, "match", json_integer(n[k][REPRO_OUT_MATCH]));
        json_object_set_new(c, "differs", json_integer(n[k][REPRO_OUT_DIFFERS]));
        json_object_set_new(c, "not_run", json_integer(n[k][REPRO_OUT_NOT_RUN]));
        json_object_set_new(c, "other", json_integer(n[k][REPRO_OUT_OTHER]));
        json_object_set_new(sum, repro_kind_name((repro_kind)k), c);
    }
    json_object_set_new(sum, "reproduced", json_integer(reproduced));
    json_object_set_new(sum, "reproducible", json_integer(reproducible));
    json_object_set_new(sum, "differ", json_integer(differ));
    json_object_set_new(sum, "not_run", json_integer(not_run));
    json_object_set_new(root, "summary", sum);
    /* a difference of any kind is a difference; a check that could not run leaves the
     * verdict incomplete; agreement without an independent or measured match proves nothing */
    *out = differ ? REPRO_DIFFERS : not_run ? REPRO_INCOMPLETE
           : reproduced ? REPRO_REPRODUCED : REPRO_UNCORROBORATED;
    json_object_set_new(root, "verdict", json_string(repro_verdict_name(*out)));
    return DP_OK;
}

/* ----------------------------------------------------------------------- text ---- */
static void cell_text(char *b, size_t n, const json_t *v) {
    if (json_is_string(v)) snprintf(b, n, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(b, n, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(b, n, "%.4g", json_real_value(v));
    else snprintf(b, n, "-");
}

/* columns + rows as aligned text; the last column unpadded, then ": reason" if any */
static void print_table(FILE *f, const json_t *cols, const json_t *rows) {
    size_t nc = json_array_size(cols), nr = json_array_size(rows);
    if (nc == 0) return;
    size_t w[32] = {0};
    char b[512];
    if (nc > 32) nc = 32;
    for (size_t c = 0; c < nc; c++) w[c] = strlen(json_string_value(json_array_get(cols, c)));
    for (size_t i = 0; i < nr; i++)
        for (size_t c = 0; c + 1 < nc; c++) {
            cell_text(b, sizeof b, json_object_get(json_array_get(rows, i), json_string_value(json_array_get(cols, c))));
            if (strlen(b) > w[c]) w[c] = strlen(b);
        }
    for (size_t c = 0; c < nc; c++)
        fprintf(f, "%-*s%s", (int)w[c], json_string_value(json_array_get(cols, c)), c + 1 < nc ? "  " : "\n");
    for (size_t i = 0; i < nr; i++) {
        const json_t *o = json_array_get(rows, i);
        for (size_t c = 0; c < nc; c++) {
            cell_text(b, sizeof b, json_object_get(o, json_string_value(json_array_get(cols, c))));
            fprintf(f, "%-*s%s", c + 1 < nc ? (int)w[c] : 0, b, c + 1 < nc ? "  " : "");
        }
        const char *why = json_string_value(json_object_get(o, "reason"));
        fprintf(f, "%s%s\n", why && *why ? ": " : "", why && *why ? why : "");
    }
}

void repro_print(FILE *f, const json_t *root) {
    print_table(f, json_object_get(root, "columns"), json_object_get(root, "rows"));
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(root, "extra_tables"), i, t) {
        fprintf(f, "\n%s\n", json_string_value(json_object_get(t, "title")));
        print_table(f, json_object_get(t, "columns"), json_object_get(t, "rows"));
    }
    const json_t *cv = json_object_get(root, "caveats");
    for (i = 0; i < json_array_size(cv); i++) fprintf(f, "caveat: %s\n", json_string_value(json_array_get(cv, i)));
    const json_t *s = json_object_get(root, "summary");
    fprintf(f, "summary by kind        rows  match  differs  not run  other\n");
    for (int k = 0; k < REPRO_N_KINDS; k++) {
        const json_t *c = json_object_get(s, repro_kind_name((repro_kind)k));
        if (!c) continue;
        fprintf(f, "  %-12s  %10lld %6lld %8lld %8lld %6lld\n", repro_kind_name((repro_kind)k),
                (long long)json_integer_value(json_object_get(c, "rows")),
                (long long)json_integer_value(json_object_get(c, "match")),
                (long long)json_integer_value(json_object_get(c, "differs")),
                (long long)json_integer_value(json_object_get(c, "not_run")),
                (long long)json_integer_value(json_object_get(c, "other")));
    }
    fprintf(f, "reproduced: %lld of %lld independent and measured row(s) match\n",
            (long long)json_integer_value(json_object_get(s, "reproduced")),
            (long long)json_integer_value(json_object_get(s, "reproducible")));
    fprintf(f, "%lld row(s) differ, %lld not run\n", (long long)json_integer_value(json_object_get(s, "differ")),
            (long long)json_integer_value(json_object_get(s, "not_run")));
    fprintf(f, "verdict: %s\n", json_string_value(json_object_get(root, "verdict")));
}

/* ------------------------------------------------------------------ rounding ---- */
json_t *repro_num(double x) {
    return isfinite(x) && x == floor(x) && fabs(x) < 9007199254740992.0 ? json_integer((json_int_t)x) : json_real(x);
}

int repro_rounds_to(double x, double printed, double unit) { return fabs(x - printed) <= unit / 2 * (1 + 1e-12); }

int repro_ratio_consistent(double a, double ua, double b, double ub, double printed, double up) {
    const double alo = a - ua / 2, ahi = a + ua / 2, blo = b - ub / 2, bhi = b + ub / 2;
    if (blo <= 0) return 0;
    const double qlo = alo / bhi, qhi = ahi / blo; /* a, b > 0 */
    /* the printed value stands for [printed - up/2, printed + up/2]: the intervals meet */
    return qlo <= printed + up / 2 * (1 + 1e-12) && qhi >= printed - up / 2 * (1 + 1e-12);
}

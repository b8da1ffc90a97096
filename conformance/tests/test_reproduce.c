/* conformance/tests/test_reproduce.c — `dpcert reproduce` called directly: the JSON of
 * every memory target written by --report (row counts, hand-checked cells, one verdict
 * per row, `differs` counted and explained), report.html beside it; and the conform
 * report page's summary verdict (never PASS by omission). Deterministic. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/test.h"
#include "conformance/html.h"

int dp_cmd_reproduce(int argc, char **argv);

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = calloc(1, 1 << 22);
    if (b) b[fread(b, 1, (1 << 22) - 1, f)] = 0;
    fclose(f);
    return b;
}

/* run `reproduce TARGET --report DIR` and load DIR/report.json */
static json_t *run_target(const char *t, int want_rc) {
    char dir[64], path[128];
    snprintf(dir, sizeof dir, "rep-%s", t);
    char *argv[] = {(char *)t, "--report", dir, NULL};
    int rc = dp_cmd_reproduce(3, argv);
    T_CHECK(rc == want_rc, "%s: exit %d (want %d)", t, rc, want_rc);
    snprintf(path, sizeof path, "%s/report.html", dir);
    char *html = slurp(path);
    T_CHECK(html && strstr(html, "<!DOCTYPE html>") && strstr(html, "</html>") && !strstr(html, "<script"),
            "%s: report.html", t);
    free(html);
    snprintf(path, sizeof path, "%s/report.json", dir);
    json_t *j = json_load_file(path, 0, NULL);
    T_CHECK(j != NULL, "%s: report.json", t);
    if (!j) return NULL;
    /* every row has a verdict; the differing ones are counted and carry a reason */
    json_t *rows = json_object_get(j, "rows");
    int differs = 0, verdicts = 0;
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *o = json_array_get(rows, i);
        const char *v = json_string_value(json_object_get(o, "verdict"));
        verdicts += v != NULL;
        if (v && strncmp(v, "differs", 7) == 0) {
            differs++;
            const char *why = json_string_value(json_object_get(o, "reason"));
            T_CHECK(why && strlen(why) > 10, "%s row %zu: differs without a reason", t, i);
        }
    }
    T_CHECK(verdicts == (int)json_array_size(rows) && verdicts > 0, "%s: %d verdicts for %zu rows", t, verdicts,
            json_array_size(rows));
    T_CHECK(json_integer_value(json_object_get(j, "rows_not_reproduced")) == differs, "%s: count %d", t, differs);
    T_CHECK(json_array_size(json_object_get(j, "plots")) >= 1, "%s: no plot", t);
    return j;
}

static const json_t *row_where(const json_t *j, const char *k1, const char *v1, const char *k2, json_int_t v2,
                               const char *k3, const char *v3) {
    const json_t *rows = json_object_get(j, "rows");
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *o = json_array_get(rows, i);
        const char *a = json_string_value(json_object_get(o, k1)), *c = json_string_value(json_object_get(o, k3));
        if (a && c && strcmp(a, v1) == 0 && json_integer_value(json_object_get(o, k2)) == v2 && strcmp(c, v3) == 0)
            return o;
    }
    return NULL;
}

static void test_targets(void) {
    json_t *j = run_target("longshield-table2", 1);
    if (j) {
        T_CHECK(json_array_size(json_object_get(j, "rows")) == 36, "table 2: 3 models x 4 MBS x 3 GPU counts");
        const json_t *o = row_where(j, "model", "Llama 3.2 1B", "mbs", 1, "gpus", "1");
        T_CHECK(o && strcmp(json_string_value(json_object_get(o, "model_T")), "16384") == 0, "1B MBS 1, 1 GPU");
        o = row_where(j, "model", "Llama 3.1 8B", "mbs", 1, "gpus", "1");
        T_CHECK(o && strcmp(json_string_value(json_object_get(o, "model_T")), "OOM") == 0 &&
                    strcmp(json_string_value(json_object_get(o, "verdict")), "match") == 0,
                "8B on one GPU: model states alone (128 GB) do not fit");
        o = row_where(j, "model", "Llama 3.1 8B", "mbs", 8, "gpus", "inf");
        T_CHECK(o && strcmp(json_string_value(json_object_get(o, "verdict")), "differs") == 0, "8B inf differs");
        json_decref(j);
    }
    j = run_target("dp-zero-memory", 1);
    if (j) {
        const json_t *rows = json_object_get(j, "rows");
        int found = 0;
        for (size_t i = 0; i < json_array_size(rows); i++) {
            const json_t *o = json_array_get(rows, i);
            const char *c = json_string_value(json_object_get(o, "claim"));
            if (c && strstr(c, "ZeRO2, 64 x 32 GB")) {
                found++;
                T_CLOSE(json_real_value(json_object_get(o, "model")), 32 / (2 + 14.0 / 64), 1e-12);
            }
            if (c && strstr(c, "model states with AdamW")) {
                found++;
                T_CHECK(strncmp(json_string_value(json_object_get(o, "verdict")), "differs", 7) == 0, "MP states row");
            }
        }
        T_CHECK(found == 2, "dp-zero-memory rows found: %d", found);
        json_decref(j);
    }
    j = run_target("longshield-memory", 1);
    if (j) {
        const json_t *rows = json_object_get(j, "rows");
        T_CHECK(json_array_size(rows) == 51 + 3, "Tables 4 and 5 cells + 3 claim rows: %zu", json_array_size(rows));
        json_decref(j);
    }
    j = run_target("flashdp-memory", 1);
    if (j) {
        const json_t *rows = json_object_get(j, "rows");
        int flash_match = 0;
        for (size_t i = 0; i < json_array_size(rows); i++) {
            const json_t *o = json_array_get(rows, i);
            if (strcmp(json_string_value(json_object_get(o, "method")), "FlashDP") == 0 &&
                strcmp(json_string_value(json_object_get(o, "verdict")), "match") == 0)
                flash_match++;
        }
        T_CHECK(json_array_size(rows) == 48 && flash_match == 11, "FlashDP matches in its 11 measured cells: %d",
                flash_match);
        json_decref(j);
    }
}

/* the conform page: PASS only when every run passed; FAIL wins; NOT_SUPPORTED/SKIPPED make it INCOMPLETE */
static void test_conform_page(void) {
    conf_case_result r[2];
    memset(r, 0, sizeof r);
    snprintf(r[0].name, sizeof r[0].name, "a<b>@r1");
    snprintf(r[1].name, sizeof r[1].name, "c@r2");
    r[0].status = CONF_PASS; r[0].worst_frac = 0.25; r[0].cmp.ncompared = 3;
    r[1].status = CONF_PASS; r[1].worst_frac = 0.5; r[1].cmp.ncompared = 3;
    struct { conf_status s1; size_t n; const char *want; } cases[] = {
        {CONF_PASS, 2, "class=\"verdict ok\">PASS:"},
        {CONF_FAIL, 2, "class=\"verdict bad\">FAIL:"},
        {CONF_NOT_SUPPORTED, 2, "class=\"verdict bad\">INCOMPLETE:"},
        {CONF_SKIPPED, 2, "class=\"verdict bad\">INCOMPLETE:"},
        {CONF_PASS, 0, "class=\"verdict bad\">PASS: 0 PASS"}, /* nothing ran: not green */
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        r[1].status = cases[k].s1;
        r[1].worst_frac = cases[k].s1 == CONF_FAIL ? 1.5 : 0.5;
        T_OK(conf_report_html("conf.html", "ci", r, cases[k].n));
        char *h = slurp("conf.html");
        T_CHECK(h && strstr(h, cases[k].want), "case %zu: want '%s'", k, cases[k].want);
        if (h && cases[k].n) {
            T_CHECK(strstr(h, "a&lt;b&gt;@r1") && !strstr(h, "a<b>"), "case names escaped");
            T_CHECK(strstr(h, "<svg") && strstr(h, "stroke-dasharray=\"6 4\""), "budget plot with the line at 1");
            T_CHECK((cases[k].s1 == CONF_FAIL) == (strstr(h, "#d62728") != NULL), "over-budget bar in red iff FAIL");
        }
        free(h);
    }
    unlink("conf.html");
}

int main(void) {
    test_targets();
    test_conform_page();
    return t_finish();
}

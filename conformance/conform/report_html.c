/* conformance/conform/report_html.c — report.html of `conform` (conf_report_html) and its
 * budget plot, built from the blocks of common/html.h (docs/reports.md). */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/html.h"
#include "common/svg.h"
#include "conformance/conform/conform.h"


/* The budget plot of a run: one bar per case up to CONF_BARS_MAX cases (labelled, the dashed
 * line at 1 = the tolerance, bars above it red, a case with nothing compared "n/a"); a larger
 * run (the full suite has over 1000 cases) gets a histogram of the fractions instead: bins of
 * 0.1 up to 1, then [1, 1.5), [1.5, 2) and a last bin [2, 2.5) holding every fraction >= 2
 * (infinite ones too); the title counts the cases with nothing compared. */
#define CONF_BARS_MAX 60
json_t *conf_budget_plot(const conf_case_result *r, size_t n) {
    json_t *plot = json_object();
    json_object_set_new(plot, "xlog", json_integer(0));
    json_object_set_new(plot, "ylog", json_integer(0));
    if (n <= CONF_BARS_MAX) {
        json_t *labels = json_array(), *values = json_array();
        for (size_t i = 0; i < n; i++) {
            const int has = r[i].cmp.ncompared && !isnan(r[i].worst_frac);
            json_array_append_new(labels, json_string(r[i].name));
            json_array_append_new(values, has && isfinite(r[i].worst_frac) ? json_real(r[i].worst_frac) : json_null());
        }
        json_object_set_new(plot, "kind", json_string("bars"));
        json_object_set_new(plot, "title", json_string("tolerance budget used per case (worst tensor)"));
        json_object_set_new(plot, "xlabel", json_string("case"));
        json_object_set_new(plot, "ylabel", json_string("fraction of the tolerance"));
        json_object_set_new(plot, "ref", json_real(1.0));
        json_object_set_new(plot, "labels", labels);
        json_object_set_new(plot, "values", values);
        return plot;
    }
    enum { NB = 13 };
    double edges[NB + 1], h[NB] = {0};
    for (int i = 0; i <= 10; i++) edges[i] = i / 10.0;
    edges[11] = 1.5; edges[12] = 2.0; edges[13] = 2.5;
    size_t na = 0, over = 0;
    for (size_t i = 0; i < n; i++) {
        double v = r[i].worst_frac;
        if (!r[i].cmp.ncompared || isnan(v) || v < 0) { na++; continue; }
        int b = NB - 1;
        while (b > 0 && v < edges[b]) b--;
        if (v >= 1.0) over++;
        h[b] += 1;
    }
    char t[200];
    snprintf(t, sizeof t, "tolerance budget used per case (worst tensor), %zu cases: %zu at or above 1, %zu with nothing "
                          "compared; the last bin holds every fraction >= 2", n, over, na);
    json_object_set_new(plot, "kind", json_string("histogram"));
    json_object_set_new(plot, "title", json_string(t));
    json_object_set_new(plot, "xlabel", json_string("fraction of the tolerance (1 = the tolerance)"));
    json_object_set_new(plot, "ylabel", json_string("cases"));
    json_object_set_new(plot, "edges", dp_html_num_array(edges, NB + 1));
    json_object_set_new(plot, "heights", dp_html_num_array(h, NB));
    json_object_set_new(plot, "series", json_array());
    return plot;
}

dp_status conf_report_html(const char *path, const char *suite, const conf_case_result *r, size_t n) {
    size_t counts[5] = {0};
    for (size_t i = 0; i < n; i++) counts[r[i].status]++;
    const size_t bad = counts[CONF_FAIL], incomplete = counts[CONF_NOT_SUPPORTED] + counts[CONF_SKIPPED];
    char title[200], verdict[200];
    snprintf(title, sizeof title, "dpcert conform --suite %s", suite);
    snprintf(verdict, sizeof verdict, "%s: %zu PASS, %zu MARGINAL, %zu FAIL, %zu NOT_SUPPORTED, %zu SKIPPED",
             bad ? "FAIL" : incomplete ? "INCOMPLETE" : "PASS", counts[CONF_PASS], counts[CONF_MARGINAL], bad,
             counts[CONF_NOT_SUPPORTED], counts[CONF_SKIPPED]);
    dp_afile af;
    DP_TRY(dp_html_open(&af, path));
    FILE *f = af.f;
    dp_html_begin(f, title, verdict, bad == 0 && incomplete == 0 && n > 0);
    /* tolerance budget used per case: the worst fraction of any tensor's tolerance (1 = the tolerance) */
    json_t *cols = json_array(), *rows = json_array();
    static const char *const keys[] = {"case", "status", "fraction", "seconds", "detail"};
    for (size_t c = 0; c < 5; c++) json_array_append_new(cols, json_string(keys[c]));
    for (size_t i = 0; i < n; i++) {
        const int has = r[i].cmp.ncompared && !isnan(r[i].worst_frac);
        json_t *o = json_object();
        json_object_set_new(o, "case", json_string(r[i].name));
        json_object_set_new(o, "status", json_string(conf_status_name(r[i].status)));
        json_object_set_new(o, "fraction", has && isfinite(r[i].worst_frac) ? json_real(r[i].worst_frac)
                                           : json_string(has ? "inf" : "n/a"));
        json_object_set_new(o, "seconds", json_real(r[i].seconds));
        json_object_set_new(o, "detail", json_string(r[i].detail));
        json_array_append_new(rows, o);
    }
    json_t *plot = n ? conf_budget_plot(r, n) : NULL;
    if (plot) {
        dp_html_heading(f, "Tolerance budget");
        dp_html_plot(f, plot); /* a plot never decides: what cannot be drawn is a note */
    }
    dp_html_heading(f, "Cases");
    dp_html_table(f, cols, rows);
    json_decref(plot);
    json_decref(cols);
    json_decref(rows);
    dp_html_end(f);
    return dp_html_commit(&af, DP_OK);
}

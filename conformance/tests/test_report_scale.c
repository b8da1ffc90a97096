/* conformance/tests/test_report_scale.c — the conform page scales and a plot never decides
 * (issue 29 item 14): report.html of one case, all zeros, NaN and infinite fractions, 1165
 * cases (the full suite's count, where the bar chart used to fail the run with exit 2) and
 * 10,000 cases is written with exactly one plot; above 60 cases the plot is a histogram of
 * the budget fractions whose bins count every compared case once. Negative control: the old
 * plot (one bar per case) of 1165 cases cannot be drawn and becomes a note, not a failure. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/safetensors.h"
#include "common/test.h"
#include "conformance/conform/conform.h"

static char *slurp(const char *path) {
    uint8_t *b = NULL;
    size_t n = 0;
    if (dp_read_file(&b, &n, path) != DP_OK) return NULL;
    char *s = realloc(b, n + 1);
    if (s) s[n] = '\0';
    return s;
}

/* n cases whose fractions come from frac(i); returns the page or NULL */
static char *page(size_t n, double (*frac)(size_t)) {
    conf_case_result *r = calloc(n, sizeof *r);
    for (size_t i = 0; i < n; i++) {
        snprintf(r[i].name, sizeof r[i].name, "case-%zu@r1", i);
        r[i].status = CONF_PASS;
        r[i].worst_frac = frac(i);
        conf_cmp_result_init(&r[i].cmp);
        r[i].cmp.ncompared = 1;
    }
    dp_status st = conf_report_html("report.html", "test", r, n);
    T_CHECK(st == DP_OK, "%zu cases: %s", n, dp_last_error());
    json_t *plot = conf_budget_plot(r, n);
    const char *kind = json_string_value(json_object_get(plot, "kind"));
    T_CHECK(kind && strcmp(kind, n <= 60 ? "bars" : "histogram") == 0, "%zu cases: plot kind %s", n, kind ? kind : "?");
    if (kind && strcmp(kind, "histogram") == 0) {
        double sum = 0, expect = 0;
        json_t *h = json_object_get(plot, "heights");
        for (size_t i = 0; i < json_array_size(h); i++) sum += json_number_value(json_array_get(h, i));
        for (size_t i = 0; i < n; i++) expect += !isnan(frac(i)) && frac(i) >= 0;
        T_CHECK(sum == expect, "%zu cases: the histogram counts %g cases, expected %g", n, sum, expect);
    }
    json_decref(plot);
    free(r);
    return st == DP_OK ? slurp("report.html") : NULL;
}

static double f_ramp(size_t i) { return (double)(i % 250) / 100.0; }
static double f_zero(size_t i) { (void)i; return 0.0; }
static double f_odd(size_t i) { return i % 3 == 0 ? NAN : i % 3 == 1 ? INFINITY : 0.5; }

int main(void) {
    static const size_t sizes[] = {1, 2, 60, 61, 1165, 10000};
    double (*fr[])(size_t) = {f_ramp, f_zero, f_odd};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t j = 0; j < 3; j++) {
            char *p = page(sizes[k], fr[j]);
            T_CHECK(p && t_count(p, "<svg") == 1 && !strstr(p, "class=\"note\"") && strstr(p, "</html>"),
                    "%zu cases (fractions %zu): one drawn plot and the whole page", sizes[k], j);
            free(p);
        }
    /* negative control: one bar per case at the full suite's size is not drawable; the page
     * still renders, with a note in its place */
    json_t *v = json_array();
    for (int i = 0; i < 1165; i++) json_array_append_new(v, json_real(0.5));
    json_t *bars = json_pack("{ss ss so}", "kind", "bars", "title", "per case", "values", v);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = t_memstream(&buf, &len);
    T_OK(dp_html_plot(f, bars));
    fclose(f);
    T_CHECK(t_count(buf, "<svg") == 0 && strstr(buf, "1..512 bars, got 1165"), "negative control: %.200s", buf);
    json_decref(bars);
    free(buf);
    return t_finish();
}

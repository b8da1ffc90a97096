/* conformance/report_html.c — self-contained HTML report pages (docs/reports.md): no
 * scripts, no external references, plots as inline SVG (common/svg.h). Pages: the
 * conformance run (conf_report_html) and a reproduce target (conf_repro_html); the
 * building blocks (conf_html_begin/table/plot/end) are for the other commands' reports. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"
#include "common/svg.h"
#include "conformance/html.h"

#define esc dp_svg_escape

void conf_html_begin(FILE *f, const char *title, const char *verdict, int ok) {
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
          "img-src data:\">\n<title>", f);
    esc(f, title);
    fputs("</title>\n<style>\nbody{font-family:sans-serif;margin:24px;color:#222;max-width:1200px}\n"
          "h1{font-size:22px}h2{font-size:17px;margin-top:28px}\n"
          ".verdict{font-size:20px;font-weight:bold;padding:10px 14px;border-radius:6px;display:inline-block}\n"
          ".ok{background:#e3f4e3;color:#14601a}.bad{background:#fbe3e3;color:#8a1212}\n"
          "table{border-collapse:collapse;font-size:12px;margin-top:8px}\n"
          "th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}\n"
          "th{background:#f2f2f2}td.differs,td.FAIL{color:#8a1212;font-weight:bold}\n"
          "td.match,td.PASS{color:#14601a}.plot{margin:14px 0}\n</style>\n</head>\n<body>\n<h1>", f);
    esc(f, title);
    fprintf(f, "</h1>\n<p class=\"verdict %s\">", ok ? "ok" : "bad");
    esc(f, verdict);
    fputs("</p>\n", f);
}

void conf_html_end(FILE *f) { fputs("</body>\n</html>\n", f); }

static void cell(FILE *f, const json_t *v) {
    char b[64];
    if (json_is_string(v)) { esc(f, json_string_value(v)); return; }
    if (json_is_integer(v)) snprintf(b, sizeof b, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(b, sizeof b, "%.4g", json_real_value(v));
    else if (json_is_true(v) || json_is_false(v)) snprintf(b, sizeof b, "%s", json_is_true(v) ? "yes" : "no");
    else snprintf(b, sizeof b, "-");
    fputs(b, f);
}

/* every string of a JSON array, escaped, as <tag>item</tag> */
static void items(FILE *f, const json_t *a, const char *tag) {
    for (size_t i = 0; i < json_array_size(a); i++) {
        fprintf(f, "<%s>", tag);
        esc(f, json_string_value(json_array_get(a, i)));
        fprintf(f, "</%s>%s", tag, strcmp(tag, "li") == 0 ? "\n" : "");
    }
}

void conf_html_table(FILE *f, const json_t *columns, const json_t *rows) {
    fputs("<table>\n<tr>", f);
    items(f, columns, "th");
    fputs("</tr>\n", f);
    for (size_t i = 0; i < json_array_size(rows); i++) {
        const json_t *o = json_array_get(rows, i);
        fputs("<tr>", f);
        for (size_t c = 0; c < json_array_size(columns); c++) {
            const char *key = json_string_value(json_array_get(columns, c));
            const json_t *v = json_object_get(o, key);
            const char *s = json_string_value(v);
            /* a verdict/status cell is classed by its first word (match, differs, PASS, FAIL) */
            if (s && (strcmp(key, "verdict") == 0 || strcmp(key, "status") == 0)) {
                char cls[16];
                size_t k = strcspn(s, " (");
                snprintf(cls, sizeof cls, "%.*s", (int)(k < 15 ? k : 15), s);
                fprintf(f, "<td class=\"%s\">", strspn(cls, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_") == strlen(cls) ? cls : "");
            } else {
                fputs("<td>", f);
            }
            cell(f, v);
            const char *why = strcmp(key, "verdict") == 0 ? json_string_value(json_object_get(o, "reason")) : NULL;
            if (why) { fputs(": ", f); esc(f, why); }
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</table>\n", f);
}

/* JSON array of numbers (null = NaN) into a new double array */
static double *nums(const json_t *a, size_t *n) {
    *n = json_array_size(a);
    double *v = dp_malloc(sizeof *v * (*n ? *n : 1));
    if (!v) return NULL;
    for (size_t i = 0; i < *n; i++) {
        const json_t *x = json_array_get(a, i);
        v[i] = json_is_number(x) ? json_number_value(x) : NAN;
    }
    return v;
}

dp_status conf_html_plot(FILE *f, const json_t *plot) {
    const char *kind = json_string_value(json_object_get(plot, "kind"));
    dp_svg_axes ax = {json_string_value(json_object_get(plot, "title")),
                      json_string_value(json_object_get(plot, "xlabel")),
                      json_string_value(json_object_get(plot, "ylabel")),
                      (int)json_integer_value(json_object_get(plot, "xlog")),
                      (int)json_integer_value(json_object_get(plot, "ylog")), 760, 400};
    dp_status st = DP_OK;
    fputs("<div class=\"plot\">\n", f);
    if (kind && strcmp(kind, "bars") == 0) {
        const json_t *labs = json_object_get(plot, "labels");
        size_t n;
        double *v = nums(json_object_get(plot, "values"), &n);
        const char **l = dp_calloc(n ? n : 1, sizeof *l);
        if (!v || !l) st = DP_ERR_NOMEM;
        for (size_t i = 0; st == DP_OK && i < n; i++) l[i] = json_string_value(json_array_get(labs, i));
        const json_t *ref = json_object_get(plot, "ref");
        if (st == DP_OK) st = dp_svg_bars(f, &ax, l, v, n, json_is_number(ref) ? json_number_value(ref) : NAN);
        free(v);
        free(l);
    } else if (kind && strcmp(kind, "line") == 0) {
        const json_t *ser = json_object_get(plot, "series");
        size_t ns = json_array_size(ser);
        dp_svg_series s[8];
        double *buf[16] = {0};
        if (ns > 8) st = dp_error(DP_ERR_INVALID, "plot '%s': more than 8 series", ax.title ? ax.title : "");
        for (size_t i = 0; st == DP_OK && i < ns; i++) {
            size_t nx, ny;
            const json_t *o = json_array_get(ser, i);
            buf[2 * i] = nums(json_object_get(o, "x"), &nx);
            buf[2 * i + 1] = nums(json_object_get(o, "y"), &ny);
            if (!buf[2 * i] || !buf[2 * i + 1]) st = DP_ERR_NOMEM;
            else if (nx != ny) st = dp_error(DP_ERR_INVALID, "plot series %zu: %zu x values, %zu y values", i, nx, ny);
            s[i] = (dp_svg_series){json_string_value(json_object_get(o, "name")), buf[2 * i], buf[2 * i + 1], nx,
                                   json_is_true(json_object_get(o, "dashed"))};
        }
        if (st == DP_OK) st = dp_svg_line(f, &ax, s, ns);
        for (size_t i = 0; i < 16; i++) free(buf[i]);
    } else {
        st = dp_error(DP_ERR_INVALID, "plot kind '%s' (expected line or bars)", kind ? kind : "(none)");
    }
    fputs("</div>\n", f);
    return st;
}

static dp_status html_open(dp_afile *af, const char *path) { return dp_afile_open(af, "--report (report.html)", path); }

static dp_status html_commit(dp_afile *af, dp_status st) {
    if (st != DP_OK) { dp_afile_abort(af); return st; }
    return dp_afile_commit(af);
}

dp_status conf_repro_html(const char *path, const json_t *root) {
    dp_afile af;
    DP_TRY(html_open(&af, path));
    FILE *f = af.f;
    const int bad = (int)json_integer_value(json_object_get(root, "rows_not_reproduced"));
    char title[256], verdict[128];
    snprintf(title, sizeof title, "dpcert reproduce %s", json_string_value(json_object_get(root, "target")));
    snprintf(verdict, sizeof verdict, bad ? "DIFFERS: %d row(s) not reproduced" : "REPRODUCED: every row matches", bad);
    conf_html_begin(f, title, verdict, bad == 0);
    fputs("<p>", f);
    esc(f, json_string_value(json_object_get(root, "paper")));
    fputs(" &mdash; ", f);
    esc(f, json_string_value(json_object_get(root, "tables")));
    fputs("<br>", f);
    esc(f, json_string_value(json_object_get(root, "modelled_vs_measured")));
    fputs("</p>\n", f);
    dp_status st = DP_OK;
    const json_t *plots = json_object_get(root, "plots");
    if (json_array_size(plots)) fputs("<h2>Plots</h2>\n", f);
    for (size_t i = 0; st == DP_OK && i < json_array_size(plots); i++) st = conf_html_plot(f, json_array_get(plots, i));
    const json_t *cols = json_object_get(root, "columns");
    json_t *dflt = NULL;
    if (!cols) { /* dpzo-tables: its rows' keys */
        static const char *const k[] = {"table", "mechanism", "sigma", "q", "steps", "delta", "paper_epsilon",
                                        "ours_rdp", "ours_pld_lower", "ours_pld_upper", "verdict"};
        dflt = json_array();
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) json_array_append_new(dflt, json_string(k[i]));
        cols = dflt;
    }
    fputs("<h2>Side by side</h2>\n", f);
    conf_html_table(f, cols, json_object_get(root, "rows"));
    json_decref(dflt);
    const json_t *cv = json_object_get(root, "caveats");
    if (json_array_size(cv)) {
        fputs("<h2>Caveats</h2>\n<ul>\n", f);
        items(f, cv, "li");
        fputs("</ul>\n", f);
    }
    conf_html_end(f);
    return html_commit(&af, st);
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
    DP_TRY(html_open(&af, path));
    FILE *f = af.f;
    conf_html_begin(f, title, verdict, bad == 0 && incomplete == 0 && n > 0);
    /* tolerance budget used per case: the worst fraction of any tensor's tolerance (1 = the tolerance) */
    json_t *plot = json_object(), *labels = json_array(), *values = json_array(), *cols = json_array(),
           *rows = json_array();
    json_object_set_new(plot, "kind", json_string("bars"));
    json_object_set_new(plot, "title", json_string("tolerance budget used per case (worst tensor)"));
    json_object_set_new(plot, "xlabel", json_string("case"));
    json_object_set_new(plot, "ylabel", json_string("fraction of the tolerance"));
    json_object_set_new(plot, "ref", json_real(1.0));
    static const char *const keys[] = {"case", "status", "fraction", "seconds", "detail"};
    for (size_t c = 0; c < 5; c++) json_array_append_new(cols, json_string(keys[c]));
    for (size_t i = 0; i < n; i++) {
        const int has = r[i].cmp.ncompared && isfinite(r[i].worst_frac);
        json_array_append_new(labels, json_string(r[i].name));
        json_array_append_new(values, has ? json_real(r[i].worst_frac) : json_null());
        json_t *o = json_object();
        json_object_set_new(o, "case", json_string(r[i].name));
        json_object_set_new(o, "status", json_string(conf_status_name(r[i].status)));
        json_object_set_new(o, "fraction", has ? json_real(r[i].worst_frac) : json_string("n/a"));
        json_object_set_new(o, "seconds", json_real(r[i].seconds));
        json_object_set_new(o, "detail", json_string(r[i].detail));
        json_array_append_new(rows, o);
    }
    json_object_set_new(plot, "labels", labels);
    json_object_set_new(plot, "values", values);
    dp_status st = DP_OK;
    if (n) {
        fputs("<h2>Tolerance budget</h2>\n", f);
        st = conf_html_plot(f, plot);
    }
    fputs("<h2>Cases</h2>\n", f);
    conf_html_table(f, cols, rows);
    json_decref(plot);
    json_decref(cols);
    json_decref(rows);
    conf_html_end(f);
    return html_commit(&af, st);
}

/* common/html.c — HTML report pages (see html.h, docs/reports.md): no scripts, no external
 * references, plots as inline SVG (common/svg.h) from JSON specifications. */
#include "common/html.h"
#include "common/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/svg.h"

#define esc dp_svg_escape
#define HTML_MAX_SERIES 8

void dp_html_begin(FILE *f, const char *title, const char *verdict, int ok) {
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
          "th{background:#f2f2f2}td.differs,td.FAIL,td.FAILED{color:#8a1212;font-weight:bold}\n"
          "td.match,td.PASS,td.CERTIFIED{color:#14601a}.plot{margin:14px 0}.note{color:#7a4d00;font-style:italic}\n</style>\n</head>\n<body>\n<h1>", f);
    esc(f, title);
    fprintf(f, "</h1>\n<p class=\"verdict %s\">", ok ? "ok" : "bad");
    esc(f, verdict);
    fputs("</p>\n", f);
}

void dp_html_end(FILE *f) { fputs("</body>\n</html>\n", f); }

/* <tag>text</tag>, the text escaped, then `after` */
static void element(FILE *f, const char *tag, const char *text, const char *after) {
    fprintf(f, "<%s>", tag);
    esc(f, text);
    fprintf(f, "</%s>%s", tag, after);
}

void dp_html_heading(FILE *f, const char *text) { element(f, "h2", text, "\n"); }
void dp_html_para(FILE *f, const char *text) { element(f, "p", text, "\n"); }

/* every string of a JSON array as an element */
static void elements(FILE *f, const char *tag, const json_t *a, const char *after) {
    for (size_t i = 0; i < json_array_size(a); i++) element(f, tag, json_string_value(json_array_get(a, i)), after);
}

void dp_html_list(FILE *f, const json_t *items) {
    fputs("<ul>\n", f);
    elements(f, "li", items, "\n");
    fputs("</ul>\n", f);
}

static void cell(FILE *f, const json_t *v) {
    char b[64];
    if (json_is_string(v)) { esc(f, json_string_value(v)); return; }
    if (json_is_integer(v)) snprintf(b, sizeof b, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(b, sizeof b, "%.4g", json_real_value(v));
    else if (json_is_true(v) || json_is_false(v)) snprintf(b, sizeof b, "%s", json_is_true(v) ? "yes" : "no");
    else snprintf(b, sizeof b, "-");
    fputs(b, f);
}

void dp_html_table(FILE *f, const json_t *columns, const json_t *rows) {
    fputs("<table>\n<tr>", f);
    elements(f, "th", columns, "");
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
                size_t k = strcspn(s, " (:");
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

/* What a log axis cannot show: values <= 0 become NaN (not drawn, a line breaks there) and are
 * counted, so the page says so under the plot instead of failing (a plot never decides). */
typedef struct { size_t dropped; } logdrop;
static void drop_nonpositive(double *v, size_t n, int logaxis, logdrop *d) {
    for (size_t i = 0; logaxis && i < n; i++)
        if (v[i] <= 0) { v[i] = NAN; d->dropped++; }
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

/* The "series" of a spec: s[] point into buf[] (2 per series, freed by the caller). */
static dp_status series_of(dp_svg_series *s, double **buf, size_t *ns, const json_t *plot, const dp_svg_axes *ax,
                           logdrop *d) {
    const json_t *ser = json_object_get(plot, "series");
    *ns = json_array_size(ser);
    if (*ns > HTML_MAX_SERIES)
        return dp_error(DP_ERR_INVALID, "%zu series (at most %d)", *ns, HTML_MAX_SERIES);
    for (size_t i = 0; i < *ns; i++) {
        size_t nx, ny;
        const json_t *o = json_array_get(ser, i);
        buf[2 * i] = nums(json_object_get(o, "x"), &nx);
        buf[2 * i + 1] = nums(json_object_get(o, "y"), &ny);
        if (!buf[2 * i] || !buf[2 * i + 1]) return DP_ERR_NOMEM;
        if (nx != ny) return dp_error(DP_ERR_INVALID, "series %zu: %zu x values, %zu y values", i, nx, ny);
        drop_nonpositive(buf[2 * i], nx, ax->xlog, d);
        drop_nonpositive(buf[2 * i + 1], ny, ax->ylog, d);
        s[i] = (dp_svg_series){json_string_value(json_object_get(o, "name")), buf[2 * i], buf[2 * i + 1], nx,
                               json_is_true(json_object_get(o, "dashed"))};
    }
    return DP_OK;
}

static dp_status plot_bars(FILE *f, const dp_svg_axes *ax, const json_t *plot, logdrop *d) {
    const json_t *labs = json_object_get(plot, "labels"), *ref = json_object_get(plot, "ref");
    size_t n;
    double *v = nums(json_object_get(plot, "values"), &n);
    const char **l = dp_calloc(n ? n : 1, sizeof *l);
    dp_status st = (!v || !l) ? DP_ERR_NOMEM : DP_OK;
    if (st == DP_OK) drop_nonpositive(v, n, ax->ylog, d);
    for (size_t i = 0; st == DP_OK && i < n; i++) l[i] = json_string_value(json_array_get(labs, i));
    if (st == DP_OK) st = dp_svg_bars(f, ax, l, v, n, json_is_number(ref) ? json_number_value(ref) : NAN);
    dp_free(v);
    dp_free(l);
    return st;
}

static dp_status plot_histogram(FILE *f, const dp_svg_axes *ax, const dp_svg_series *s, size_t ns, const json_t *plot,
                                logdrop *d) {
    size_t ne, nh;
    double *e = nums(json_object_get(plot, "edges"), &ne), *h = nums(json_object_get(plot, "heights"), &nh);
    dp_status st = (!e || !h) ? DP_ERR_NOMEM : DP_OK;
    if (st == DP_OK && ne != nh + 1)
        st = dp_error(DP_ERR_INVALID, "%zu edges for %zu bins (expected bins + 1)", ne, nh);
    if (st == DP_OK) drop_nonpositive(h, nh, ax->ylog, d);
    if (st == DP_OK) st = dp_svg_histogram(f, ax, e, h, nh, s, ns);
    dp_free(e);
    dp_free(h);
    return st;
}

/* The plot into f (an in-memory stream), or an error naming what does not fit. */
static dp_status plot_draw(FILE *f, const json_t *plot, const char *kind, dp_svg_axes *ax, logdrop *d) {
    dp_svg_series s[HTML_MAX_SERIES];
    double *buf[2 * HTML_MAX_SERIES] = {0};
    size_t ns = 0;
    dp_status st = DP_OK;
    if (kind && strcmp(kind, "bars") == 0) {
        st = plot_bars(f, ax, plot, d);
    } else if (kind && (strcmp(kind, "line") == 0 || strcmp(kind, "histogram") == 0 || strcmp(kind, "roc") == 0)) {
        st = series_of(s, buf, &ns, plot, ax, d);
        if (st == DP_OK && kind[0] == 'l') st = dp_svg_line(f, ax, s, ns);
        else if (st == DP_OK && kind[0] == 'h') st = plot_histogram(f, ax, s, ns, plot, d);
        else if (st == DP_OK) {
            const json_t *e = json_object_get(plot, "epsilon"), *dl = json_object_get(plot, "delta");
            ax->width = 820; /* the unit square beside a legend */
            ax->height = 500;
            st = dp_svg_roc(f, ax, s, ns, json_is_number(e) ? json_number_value(e) : -1,
                            json_is_number(dl) ? json_number_value(dl) : 0);
        }
    } else {
        st = dp_error(DP_ERR_INVALID, "plot kind '%s' (expected line, bars, histogram, roc or note)", kind ? kind : "(none)");
    }
    for (size_t i = 0; i < 2 * HTML_MAX_SERIES; i++) dp_free(buf[i]);
    return st;
}

static void note(FILE *f, const char *title, const char *what, const char *text) {
    fputs("<p class=\"note\">", f);
    if (title && *title) {
        fputs("plot '", f);
        esc(f, title);
        fputs("': ", f);
    }
    esc(f, what);
    esc(f, text);
    fputs("</p>\n", f);
}

dp_status dp_html_plot(FILE *f, const json_t *plot) {
    const char *kind = json_string_value(json_object_get(plot, "kind"));
    const char *title = json_string_value(json_object_get(plot, "title"));
    fputs("<div class=\"plot\">\n", f);
    if (kind && strcmp(kind, "note") == 0) {
        note(f, title, "", json_string_value(json_object_get(plot, "text")));
        fputs("</div>\n", f);
        return DP_OK;
    }
    dp_svg_axes ax = {title ? title : "", json_string_value(json_object_get(plot, "xlabel")),
                      json_string_value(json_object_get(plot, "ylabel")),
                      (int)json_integer_value(json_object_get(plot, "xlog")),
                      (int)json_integer_value(json_object_get(plot, "ylog")), 760, 400};
    logdrop d = {0};
    char *svg = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&svg, &n); /* drawn aside first: a plot that fails leaves no half <svg> */
    dp_status st = m ? plot_draw(m, plot, kind, &ax, &d) : dp_error(DP_ERR_NOMEM, "out of memory for the plot");
    if (m && fclose(m) != 0 && st == DP_OK) st = dp_error(DP_ERR_NOMEM, "out of memory for the plot");
    if (st == DP_OK) {
        fwrite(svg, 1, n, f);
        if (d.dropped) {
            char t[160];
            snprintf(t, sizeof t, "%zu value%s <= 0 not drawn on the logarithmic axis", d.dropped, d.dropped > 1 ? "s" : "");
            note(f, NULL, "", t);
        }
    } else {
        note(f, title, "not drawn: ", dp_last_error());
    }
    dp_free(svg); /* open_memstream's buffer */
    fputs("</div>\n", f);
    return DP_OK;
}

dp_status dp_html_plots(FILE *f, const char *heading, const json_t *plots) {
    if (json_array_size(plots)) dp_html_heading(f, heading);
    for (size_t i = 0; i < json_array_size(plots); i++) dp_html_plot(f, json_array_get(plots, i));
    return DP_OK;
}

json_t *dp_html_note_new(json_t *plots, const char *title, const char *text) {
    json_t *p = json_object();
    json_object_set_new(p, "kind", json_string("note"));
    json_object_set_new(p, "title", json_string(title ? title : ""));
    json_object_set_new(p, "text", json_string(text ? text : ""));
    json_array_append_new(plots, p);
    return p;
}

dp_status dp_html_open(dp_afile *af, const char *path) { return dp_afile_open(af, "--report (report.html)", path); }

dp_status dp_html_open_in(dp_afile *af, const char *dir) {
    size_t n = strlen(dir) + sizeof "/report.html";
    char *p = dp_malloc(n);
    if (!p) return DP_ERR_NOMEM;
    snprintf(p, n, "%s/report.html", dir);
    dp_status st = dp_html_open(af, p);
    dp_free(p);
    return st;
}

dp_status dp_html_commit(dp_afile *af, dp_status st) {
    if (st != DP_OK) { dp_afile_abort(af); return st; }
    return dp_afile_commit(af);
}

json_t *dp_html_plot_new(json_t *plots, const char *kind, const char *title, const char *xlabel, const char *ylabel,
                         int xlog, int ylog) {
    json_t *p = json_object();
    json_object_set_new(p, "kind", json_string(kind));
    json_object_set_new(p, "title", json_string(title));
    json_object_set_new(p, "xlabel", json_string(xlabel));
    json_object_set_new(p, "ylabel", json_string(ylabel));
    json_object_set_new(p, "xlog", json_integer(xlog));
    json_object_set_new(p, "ylog", json_integer(ylog));
    json_object_set_new(p, "series", json_array());
    json_array_append_new(plots, p);
    return p;
}

json_t *dp_html_num_array(const double *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, isfinite(v[i]) ? json_real(v[i]) : json_null());
    return a;
}

void dp_html_plot_series(json_t *plot, const char *name, const double *x, const double *y, size_t n, int dashed) {
    json_t *s = json_object();
    json_object_set_new(s, "name", json_string(name));
    json_object_set_new(s, "x", dp_html_num_array(x, n));
    json_object_set_new(s, "y", dp_html_num_array(y, n));
    if (dashed) json_object_set_new(s, "dashed", json_true());
    json_array_append_new(json_object_get(plot, "series"), s);
}

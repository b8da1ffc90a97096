/* attacks/audit_report.c — JSON and SVG report files (atomic writes). */
#include "attacks/audit_report.h"
#include "common/alloc.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsutil.h"

json_t *audit_json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

json_t *audit_json_roc(const double *fpr, const double *tpr, size_t n) {
    json_t *o = json_object(), *a = json_array(), *b = json_array();
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(a, json_real(fpr[i]));
        json_array_append_new(b, json_real(tpr[i]));
    }
    json_object_set_new(o, "fpr", a);
    json_object_set_new(o, "tpr", b);
    return o;
}

static dp_status join(char **out, const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    *out = dp_malloc(n);
    if (!*out) return DP_ERR_NOMEM;
    snprintf(*out, n, "%s/%s", dir, name);
    return DP_OK;
}

dp_status audit_write_json(const char *dir, const char *name, const json_t *root) {
    char *text = json_dumps(root, JSON_INDENT(1) | JSON_ENSURE_ASCII), *path = NULL;
    if (!text) return dp_error(DP_ERR_NOMEM, "cannot serialise %s", name);
    dp_status st = join(&path, dir, name);
    if (st == DP_OK) st = dp_write_file_atomic("--report", path, text, strlen(text));
    dp_free(text);
    dp_free(path);
    return st;
}

static const char *const colours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
#define NCOLOURS (sizeof colours / sizeof colours[0])

/* XML text: escape & < > " of labels. */
static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

dp_status audit_write_roc_svg(const char *dir, const char *name, const char *title, const audit_curve *c, size_t n) {
    char *path = NULL;
    DP_TRY(join(&path, dir, name));
    dp_afile af;
    dp_status st = dp_afile_open(&af, "--report", path);
    dp_free(path);
    if (st != DP_OK) return st;
    const double x0 = 60, y0 = 40, w = 400, h = 400;
    FILE *f = af.f;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n", x0 + w + 200, y0 + h + 60);
    fprintf(f, "<text x=\"%g\" y=\"20\">", x0);
    xml_text(f, title);
    fprintf(f, "</text>\n<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" fill=\"none\" stroke=\"black\"/>\n", x0, y0,
            w, h);
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"gray\" stroke-dasharray=\"4\"/>\n", x0, y0 + h,
            x0 + w, y0);
    for (int t = 0; t <= 4; t++) {
        double v = t / 4.0;
        fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%.2f</text>\n", x0 + v * w, y0 + h + 16, v);
        fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"end\">%.2f</text>\n", x0 - 4, y0 + h - v * h + 4, v);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">false positive rate</text>\n", x0 + w / 2, y0 + h + 36);
    fprintf(f, "<text x=\"16\" y=\"%g\" transform=\"rotate(-90 16 %g)\" text-anchor=\"middle\">true positive "
               "rate</text>\n", y0 + h / 2, y0 + h / 2);
    for (size_t k = 0; k < n; k++) {
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", colours[k % NCOLOURS]);
        for (size_t i = 0; i < c[k].n; i++)
            fprintf(f, "%.2f,%.2f ", x0 + c[k].fpr[i] * w, y0 + h - c[k].tpr[i] * h);
        fprintf(f, "\"/>\n<text x=\"%g\" y=\"%g\" fill=\"%s\">", x0 + w + 10, y0 + 14 + 16.0 * (double)k,
                colours[k % NCOLOURS]);
        xml_text(f, c[k].label);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
    return dp_afile_commit(&af);
}

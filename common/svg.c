/* common/svg.c — SVG plots (see svg.h). Layout: a frame of width x height pixels, the
 * plot area inset by fixed margins, axes with "nice" ticks (1, 2, 5 x 10^k on linear
 * axes, powers of the base on log axes), the title above, labels below and left. */
#include "common/svg.h"

#include <math.h>
#include <string.h>

#define ML 72.0 /* left margin: y tick labels and the y label */
#define MR 16.0
#define MT 34.0 /* title */
#define MB 56.0 /* x tick labels and the x label */
#define MAX_SERIES 8

static const char *const PALETTE[MAX_SERIES] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};

void dp_svg_escape(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&#39;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n') fputc(*s, f);
        }
    }
}

typedef struct {
    double lo, hi;   /* data range (log axes: powers of base) */
    int base;        /* 0 linear */
    double p0, p1;   /* pixel of lo, hi */
    double step;     /* linear tick step */
} scale;

static double tr(const scale *s, double v) { return s->base ? log(v) / log((double)s->base) : v; }
static double px(const scale *s, double v) {
    double a = tr(s, s->lo), b = tr(s, s->hi);
    return s->p0 + (tr(s, v) - a) / (b - a) * (s->p1 - s->p0);
}

/* Range of the finite values; for log axes only positive values are allowed. */
static dp_status range_of(double *lo, double *hi, int base, const char *axis, const double *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i])) continue;
        if (base && v[i] <= 0)
            return dp_error(DP_ERR_INVALID, "svg: %s value %g on a logarithmic axis (must be > 0)", axis, v[i]);
        if (v[i] < *lo) *lo = v[i];
        if (v[i] > *hi) *hi = v[i];
    }
    return DP_OK;
}

static dp_status finish_scale(scale *s, double lo, double hi, int base, const char *axis) {
    if (base != 0 && base != 2 && base != 10)
        return dp_error(DP_ERR_INVALID, "svg: %s log base must be 0, 2 or 10, got %d", axis, base);
    if (!(lo <= hi)) return dp_error(DP_ERR_INVALID, "svg: no finite %s value to plot", axis);
    s->base = base;
    if (base) {
        double b = (double)base, a = floor(log(lo) / log(b) + 1e-9), c = ceil(log(hi) / log(b) - 1e-9);
        if (c <= a) c = a + 1;
        s->lo = pow(b, a);
        s->hi = pow(b, c);
    } else {
        if (lo == hi) { double d = lo == 0 ? 1 : fabs(lo) * 0.1; lo -= d; hi += d; }
        double step = pow(10, floor(log10((hi - lo) / 5)));
        double m = (hi - lo) / step;
        step *= m > 25 ? 10 : m > 10 ? 5 : m > 5 ? 2 : 1;
        s->lo = floor(lo / step + 1e-9) * step;
        s->hi = ceil(hi / step - 1e-9) * step;
        s->step = step;
    }
    return DP_OK;
}

static void text(FILE *f, double x, double y, const char *anchor, const char *extra, const char *s) {
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\"%s>", x, y, anchor, extra ? extra : "");
    dp_svg_escape(f, s);
    fputs("</text>\n", f);
}

/* Tick label: log-2 axes in binary units (4K = 4096, 1M = 2^20), integers below 1e7 in
 * full, anything else %g. */
static void tick_label(char *b, size_t n, const scale *s, double v) {
    if (s->base == 2 && v >= 1024 * 1024) snprintf(b, n, "%gM", v / (1024.0 * 1024.0));
    else if (s->base == 2 && v >= 1024) snprintf(b, n, "%gK", v / 1024.0);
    else if (v == floor(v) && fabs(v) < 1e7) snprintf(b, n, "%.0f", v);
    else snprintf(b, n, "%g", v);
}

/* Ticks, grid lines and tick labels of one axis (x: vertical = 0). */
static void axis(FILE *f, const scale *s, int vertical, double x0, double x1, double y0, double y1) {
    char lab[32];
    int count = 0;
    double v = s->lo, step = s->base ? 0 : s->step;
    while (count < 64 && v <= s->hi * (1 + 1e-12) + (s->base ? 0 : step * 1e-9)) {
        double p = px(s, v);
        tick_label(lab, sizeof lab, s, fabs(v) < 1e-12 * (s->hi - s->lo) ? 0.0 : v);
        if (vertical) {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", x0, p, x1, p);
            text(f, x0 - 6, p + 4, "end", NULL, lab);
        } else {
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" class=\"grid\"/>\n", p, y0, p, y1);
            text(f, p, y1 + 16, "middle", NULL, lab);
        }
        v = s->base ? v * s->base : s->lo + (++count) * step;
        if (s->base) count++;
    }
}

typedef struct { double w, h, right, bottom; scale x, y; } frame; /* margins incl. legend, bar labels */

/* The legend sits right of the plot area: its width from the longest name (about 6.5 px a
 * character at 12 px), 0 without names. */
static double legend_width(const char *const *names, size_t n) {
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (names[i] && strlen(names[i]) > m) m = strlen(names[i]);
    return m ? 40 + 6.5 * (double)m : 0;
}

static dp_status frame_open(FILE *f, frame *fr, const dp_svg_axes *ax, double xlo, double xhi, double ylo,
                            double yhi, int draw_x_ticks, const char *const *names, size_t n_names,
                            double extra_bottom) {
    fr->w = ax->width > 0 ? ax->width : 640;
    fr->h = ax->height > 0 ? ax->height : 360;
    fr->right = MR + legend_width(names, n_names);
    fr->bottom = MB + extra_bottom;
    if (fr->w - fr->right - ML < 100) fr->right = fr->w - ML - 100;
    if (fr->h - fr->bottom - MT < 80) fr->bottom = fr->h - MT - 80;
    if (fr->w < 200 || fr->h < 150 || fr->w > 4000 || fr->h > 4000)
        return dp_error(DP_ERR_INVALID, "svg: size %gx%g outside 200x150 .. 4000x4000", fr->w, fr->h);
    DP_TRY(finish_scale(&fr->x, xlo, xhi, ax->xlog, "x"));
    DP_TRY(finish_scale(&fr->y, ylo, yhi, ax->ylog, "y"));
    fr->x.p0 = ML; fr->x.p1 = fr->w - fr->right;
    fr->y.p0 = fr->h - fr->bottom; fr->y.p1 = MT;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%g\" height=\"%g\" viewBox=\"0 0 %g %g\" "
               "font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n", fr->w, fr->h, fr->w, fr->h);
    fputs("<style>.grid{stroke:#e4e4e4;stroke-width:1}.frame{fill:none;stroke:#333;stroke-width:1}</style>\n", f);
    fprintf(f, "<rect x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"#fff\"/>\n", fr->w, fr->h);
    if (ax->title) text(f, fr->w / 2, 20, "middle", " font-size=\"14\" font-weight=\"bold\"", ax->title);
    axis(f, &fr->y, 1, ML, fr->w - fr->right, MT, fr->h - fr->bottom);
    if (draw_x_ticks) axis(f, &fr->x, 0, ML, fr->w - fr->right, MT, fr->h - fr->bottom);
    fprintf(f, "<rect x=\"%g\" y=\"%g\" width=\"%g\" height=\"%g\" class=\"frame\"/>\n", ML, MT, fr->w - fr->right - ML,
            fr->h - fr->bottom - MT);
    if (ax->xlabel) text(f, (ML + fr->w - fr->right) / 2, fr->h - 12, "middle", NULL, ax->xlabel);
    if (ax->ylabel) {
        char tf[96];
        snprintf(tf, sizeof tf, " transform=\"rotate(-90 16 %.1f)\"", (MT + fr->h - fr->bottom) / 2);
        text(f, 16, (MT + fr->h - fr->bottom) / 2, "middle", tf, ax->ylabel);
    }
    return DP_OK;
}

static dp_status frame_close(FILE *f) {
    fputs("</svg>\n", f);
    return ferror(f) ? dp_error(DP_ERR_IO, "svg: write error") : DP_OK;
}

static void polyline(FILE *f, const frame *fr, const dp_svg_series *s, const char *colour, const char *dash,
                     int markers) {
    int open = 0;
    for (size_t i = 0; i < s->n; i++) {
        int ok = isfinite(s->x[i]) && isfinite(s->y[i]) && (!fr->x.base || s->x[i] > 0) && (!fr->y.base || s->y[i] > 0);
        if (!ok) { if (open) fputs("\"/>\n", f); open = 0; continue; }
        if (!open) fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"", colour, dash);
        fprintf(f, "%s%.2f,%.2f", open ? " " : "", px(&fr->x, s->x[i]), px(&fr->y, s->y[i]));
        open = 1;
    }
    if (open) fputs("\"/>\n", f);
    if (!markers) return;
    for (size_t i = 0; i < s->n; i++)
        if (isfinite(s->x[i]) && isfinite(s->y[i]))
            fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3\" fill=\"%s\"/>\n", px(&fr->x, s->x[i]),
                    px(&fr->y, s->y[i]), colour);
}

static void legend(FILE *f, const frame *fr, const char *const *names, const char *const *colours, size_t n) {
    double y = MT + 14, x = fr->w - fr->right + MR + 10;
    for (size_t i = 0; i < n; i++) {
        if (!names[i]) continue;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n", x, y - 5, colours[i]);
        text(f, x + 20, y, "start", NULL, names[i]);
        y += 16;
    }
}

static dp_status check_series(const dp_svg_series *s, size_t ns, const char *what) {
    if (ns == 0 || ns > MAX_SERIES) return dp_error(DP_ERR_INVALID, "svg: %s needs 1..%d series, got %zu", what, MAX_SERIES, ns);
    for (size_t i = 0; i < ns; i++)
        if (s[i].n == 0 || !s[i].x || !s[i].y)
            return dp_error(DP_ERR_INVALID, "svg: %s series %zu ('%s') is empty", what, i, s[i].name ? s[i].name : "");
    return DP_OK;
}

dp_status dp_svg_line(FILE *f, const dp_svg_axes *ax, const dp_svg_series *s, size_t ns) {
    DP_TRY(check_series(s, ns, "line plot"));
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    for (size_t i = 0; i < ns; i++) {
        DP_TRY(range_of(&xlo, &xhi, ax->xlog, "x", s[i].x, s[i].n));
        DP_TRY(range_of(&ylo, &yhi, ax->ylog, "y", s[i].y, s[i].n));
    }
    const char *names[MAX_SERIES] = {0};
    for (size_t i = 0; i < ns; i++) names[i] = s[i].name;
    frame fr;
    DP_TRY(frame_open(f, &fr, ax, xlo, xhi, ylo, yhi, 1, names, ns, 0));
    for (size_t i = 0; i < ns; i++)
        polyline(f, &fr, &s[i], PALETTE[i], s[i].dashed ? " stroke-dasharray=\"7 4\" stroke-opacity=\"0.9\"" : "",
                 !s[i].dashed);
    legend(f, &fr, names, PALETTE, ns);
    return frame_close(f);
}

dp_status dp_svg_bars(FILE *f, const dp_svg_axes *ax, const char *const *labels, const double *values, size_t n,
                      double ref_line) {
    if (n == 0 || n > 512) return dp_error(DP_ERR_INVALID, "svg: bar chart needs 1..512 bars, got %zu", n);
    if (ax->xlog) return dp_error(DP_ERR_INVALID, "svg: bar chart x axis cannot be logarithmic");
    double ylo = ax->ylog ? INFINITY : 0, yhi = ax->ylog ? -INFINITY : 0;
    DP_TRY(range_of(&ylo, &yhi, ax->ylog, "bar", values, n));
    if (isfinite(ref_line)) DP_TRY(range_of(&ylo, &yhi, ax->ylog, "reference line", &ref_line, 1));
    frame fr;
    size_t lmax = 0; /* rotated bar labels (30 degrees) need sin(30) x their length below the axis */
    for (size_t i = 0; labels && n <= 40 && i < n; i++)
        if (labels[i] && strlen(labels[i]) > lmax) lmax = strlen(labels[i]);
    DP_TRY(frame_open(f, &fr, ax, 0, (double)n, ylo, yhi, 0, NULL, 0, 0.5 * 6.0 * (double)lmax));
    const double slot = (fr.w - fr.right - ML) / (double)n, base = ax->ylog ? fr.y.p0 : px(&fr.y, 0);
    for (size_t i = 0; i < n; i++) {
        double x = ML + slot * (double)i;
        if (isfinite(values[i])) {
            double top = px(&fr.y, values[i]);
            int alarm = isfinite(ref_line) && values[i] > ref_line;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n", x + slot * 0.15,
                    top < base ? top : base, slot * 0.7, fabs(base - top), alarm ? PALETTE[1] : PALETTE[0]);
            if (n <= 40) { /* the value above its bar */
                char v[32];
                snprintf(v, sizeof v, "%.3g", values[i]);
                text(f, x + slot / 2, (top < base ? top : base) - 4, "middle", " font-size=\"10\"", v);
            }
        } else {
            text(f, x + slot / 2, fr.y.p0 - 4, "middle", " fill=\"#888\"", "n/a");
        }
        if (labels && labels[i] && n <= 40) {
            char tf[96];
            snprintf(tf, sizeof tf, " transform=\"rotate(30 %.1f %.1f)\" font-size=\"10\"", x + slot / 2, fr.y.p0 + 12);
            text(f, x + slot / 2, fr.y.p0 + 12, "start", tf, labels[i]);
        }
    }
    if (isfinite(ref_line)) {
        double y = px(&fr.y, ref_line);
        fprintf(f, "<line x1=\"%g\" y1=\"%.2f\" x2=\"%g\" y2=\"%.2f\" stroke=\"#000\" stroke-dasharray=\"6 4\"/>\n", ML, y,
                fr.w - fr.right, y);
    }
    return frame_close(f);
}

dp_status dp_svg_histogram(FILE *f, const dp_svg_axes *ax, const double *edges, const double *heights,
                           size_t nbins, const dp_svg_series *overlay, size_t n_overlay) {
    if (nbins == 0) return dp_error(DP_ERR_INVALID, "svg: histogram needs at least one bin");
    for (size_t i = 0; i < nbins; i++)
        if (!(edges[i] < edges[i + 1]) || !isfinite(edges[i]) || !isfinite(edges[i + 1]))
            return dp_error(DP_ERR_INVALID, "svg: histogram edges must be finite and increasing (bin %zu)", i);
    if (n_overlay) DP_TRY(check_series(overlay, n_overlay, "histogram overlay"));
    double xlo = INFINITY, xhi = -INFINITY, ylo = ax->ylog ? INFINITY : 0, yhi = ax->ylog ? -INFINITY : 0;
    DP_TRY(range_of(&xlo, &xhi, ax->xlog, "edge", edges, nbins + 1));
    DP_TRY(range_of(&ylo, &yhi, ax->ylog, "height", heights, nbins));
    for (size_t i = 0; i < n_overlay; i++) DP_TRY(range_of(&ylo, &yhi, ax->ylog, "overlay", overlay[i].y, overlay[i].n));
    const char *names[MAX_SERIES] = {0}, *cols[MAX_SERIES] = {0};
    for (size_t i = 0; i < n_overlay; i++) {
        names[i] = overlay[i].name;
        cols[i] = PALETTE[1 + i % (MAX_SERIES - 1)];
    }
    frame fr;
    DP_TRY(frame_open(f, &fr, ax, xlo, xhi, ylo, yhi, 1, names, n_overlay, 0));
    const double base = ax->ylog ? fr.y.p0 : px(&fr.y, 0);
    for (size_t i = 0; i < nbins; i++) {
        if (!isfinite(heights[i]) || (ax->ylog && heights[i] <= 0)) continue;
        double x0 = px(&fr.x, edges[i]), x1 = px(&fr.x, edges[i + 1]), top = px(&fr.y, heights[i]);
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#9ecae1\" stroke=\"#3182bd\"/>\n",
                x0, top < base ? top : base, x1 - x0, fabs(base - top));
    }
    for (size_t i = 0; i < n_overlay; i++) polyline(f, &fr, &overlay[i], cols[i], "", 0);
    legend(f, &fr, names, cols, n_overlay);
    return frame_close(f);
}

dp_status dp_svg_roc(FILE *f, const dp_svg_axes *ax, const dp_svg_series *curves, size_t n, double eps,
                     double delta) {
    DP_TRY(check_series(curves, n, "ROC"));
    if (ax->xlog || ax->ylog) return dp_error(DP_ERR_INVALID, "svg: ROC axes are linear");
    if (!isfinite(eps) || !(delta >= 0 && delta < 1))
        return dp_error(DP_ERR_INVALID, "svg: ROC bound needs a finite epsilon and delta in [0, 1)");
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < curves[i].n; k++)
            if (!(curves[i].x[k] >= 0 && curves[i].x[k] <= 1 && curves[i].y[k] >= 0 && curves[i].y[k] <= 1))
                return dp_error(DP_ERR_INVALID, "svg: ROC curve %zu point %zu outside [0, 1]^2", i, k);
    const char *names[MAX_SERIES + 1] = {0}, *cols[MAX_SERIES + 1] = {0};
    size_t nl = 0;
    if (eps >= 0) { names[nl] = "DP bound"; cols[nl++] = "#000"; }
    for (size_t i = 0; i < n; i++) { names[nl] = curves[i].name; cols[nl++] = PALETTE[i]; }
    frame fr;
    DP_TRY(frame_open(f, &fr, ax, 0, 1, 0, 1, 1, names, nl, 0));
    fprintf(f, "<line x1=\"%.2f\" y1=\"%.2f\" x2=\"%.2f\" y2=\"%.2f\" stroke=\"#888\" stroke-dasharray=\"4 4\"/>\n",
            px(&fr.x, 0), px(&fr.y, 0), px(&fr.x, 1), px(&fr.y, 1));
    if (eps >= 0) {
        double bx[101], by[101];
        for (int k = 0; k <= 100; k++) {
            double x = k / 100.0, a = exp(eps) * x + delta, b = 1 - exp(-eps) * (1 - delta - x);
            bx[k] = x;
            by[k] = fmin(1.0, fmin(a, b));
        }
        dp_svg_series bs = {NULL, bx, by, 101, 0};
        polyline(f, &fr, &bs, "#000", " stroke-dasharray=\"8 3\"", 0);
    }
    for (size_t i = 0; i < n; i++)
        polyline(f, &fr, &curves[i], PALETTE[i], curves[i].dashed ? " stroke-dasharray=\"7 4\"" : "", 0);
    legend(f, &fr, names, cols, nl);
    return frame_close(f);
}

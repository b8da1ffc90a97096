/* common/svg.h — small, dependency-free SVG plots for the HTML reports (docs/reports.md).
 *
 * Every function writes one self-contained <svg> element (inline in an HTML page: no
 * scripts, no fonts, no external references) to a stdio stream and returns DP_OK, or
 * DP_ERR_INVALID naming the bad argument (nothing is clamped: a non-positive value on a
 * log axis, an empty series, a bad size are errors), or DP_ERR_IO when the stream
 * failed. The output is a pure function of the arguments (byte-identical for the same
 * input). Points whose x or y is not finite break a line and are not drawn.
 *
 *   dp_svg_axes ax = {.title = "epsilon vs steps", .xlabel = "steps", .ylabel = "epsilon"};
 *   dp_svg_series s = {"PLD upper", xs, ys, n, 0};
 *   dp_svg_line(f, &ax, &s, 1);
 */
#ifndef DP_SVG_H
#define DP_SVG_H

#include <stddef.h>
#include <stdio.h>

#include "status.h"

typedef struct {
    const char *title, *xlabel, *ylabel; /* plain text; escaped on output; NULL = none */
    int xlog, ylog;      /* 0 linear axis, 2 or 10: logarithmic axis, ticks at powers of it
                            (base 2 labels in binary units: 4K = 4096, 1M = 2^20) */
    int width, height;   /* pixels; 0 = 640 x 360 */
} dp_svg_axes;

typedef struct {
    const char *name;    /* legend entry; NULL = not in the legend */
    const double *x, *y; /* n points */
    size_t n;
    int dashed;          /* 1: a thin dashed line without markers (e.g. a paper's values over ours) */
} dp_svg_series;

/* Lines with point markers, one colour per series (at most 8 series), legend. */
dp_status dp_svg_line(FILE *f, const dp_svg_axes *ax, const dp_svg_series *s, size_t ns);

/* Vertical bars values[i] labelled labels[i]; ref_line (finite) draws a dashed
 * horizontal line, e.g. the tolerance budget 1.0; NAN for none. Bars whose value
 * exceeds ref_line are drawn in the alarm colour. */
dp_status dp_svg_bars(FILE *f, const dp_svg_axes *ax, const char *const *labels, const double *values, size_t n,
                      double ref_line);

/* Histogram: bin i spans [edges[i], edges[i+1]) with height heights[i] (counts or a
 * density), edges increasing; `overlay` (may be NULL) draws curves on top, e.g. the
 * Gaussian density or a binomial pmf scaled to the same units. */
dp_status dp_svg_histogram(FILE *f, const dp_svg_axes *ax, const double *edges, const double *heights,
                           size_t nbins, const dp_svg_series *overlay, size_t n_overlay);

/* ROC curves (x = false-positive rate, y = true-positive rate, both in [0, 1]) with the
 * chance diagonal and the (epsilon, delta)-DP bound on any test:
 * TPR <= min(1, e^eps FPR + delta, 1 - e^-eps (1 - delta - FPR)). eps < 0: no bound. */
dp_status dp_svg_roc(FILE *f, const dp_svg_axes *ax, const dp_svg_series *curves, size_t n, double eps,
                     double delta);

/* Write s with & < > " ' escaped (for SVG and HTML text and attributes). */
void dp_svg_escape(FILE *f, const char *s);

#endif

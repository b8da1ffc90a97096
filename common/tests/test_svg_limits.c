/* common/tests/test_svg_limits.c — common/svg.c's refusals and edges (common/svg.h: nothing is
 * clamped, a bad argument is DP_ERR_INVALID naming it, a failed stream DP_ERR_IO): series
 * counts and empty series, sizes, log bases, no finite value, non-positive values on a log
 * axis, bar counts and a log x axis, histogram bins and edges, the ROC's linear axes, bound
 * and points outside [0, 1]^2; control bytes in text are dropped (the SVG stays well-formed),
 * a bar chart over 40 bars leaves its labels out, one-value and log-2 ranges still frame, and a
 * write error is reported. Each refusal is checked by its status and its message. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/svg.h"
#include "common/test.h"

static char *buf;
static size_t len;

/* st is DP_ERR_INVALID and the message holds want */
static void refused(dp_status st, const char *want, const char *what) {
    T_CHECK(st == DP_ERR_INVALID && strstr(dp_last_error(), want), "%s: status %d, message '%s' (want '%s')", what,
            (int)st, dp_last_error(), want);
}

int main(void) {
    const double x[3] = {1, 2, 4}, y[3] = {1, 3, 2}, zero[3] = {0, 1, 2}, nan3[3] = {NAN, NAN, NAN};
    dp_svg_series s = {"s", x, y, 3, 0};
    dp_svg_axes ax = {"t", "x", "y", 0, 0, 0, 0};
    FILE *f = t_memstream(&buf, &len);

    /* line plots */
    refused(dp_svg_line(f, &ax, &s, 0), "line plot needs 1..8 series, got 0", "no series");
    dp_svg_series nine[9];
    for (int i = 0; i < 9; i++) nine[i] = s;
    refused(dp_svg_line(f, &ax, nine, 9), "line plot needs 1..8 series, got 9", "nine series");
    dp_svg_series empty = {"e", x, y, 0, 0};
    refused(dp_svg_line(f, &ax, &empty, 1), "line plot series 0 ('e') is empty", "an empty series");
    dp_svg_series nox = {NULL, NULL, y, 3, 0};
    refused(dp_svg_line(f, &ax, &nox, 1), "series 0 ('') is empty", "a series without x");
    dp_svg_axes small = ax, big = ax, base3 = ax, logy = ax;
    small.width = 150;
    refused(dp_svg_line(f, &small, &s, 1), "outside 200x150 .. 4000x4000", "width 150");
    big.height = 5000;
    refused(dp_svg_line(f, &big, &s, 1), "outside 200x150 .. 4000x4000", "height 5000");
    base3.xlog = 3;
    refused(dp_svg_line(f, &base3, &s, 1), "x log base must be 0, 2 or 10, got 3", "log base 3");
    dp_svg_series allnan = {"n", x, nan3, 3, 0};
    refused(dp_svg_line(f, &ax, &allnan, 1), "no finite y value to plot", "no finite value");
    logy.ylog = 10;
    dp_svg_series withzero = {"z", x, zero, 3, 0};
    refused(dp_svg_line(f, &logy, &withzero, 1), "on a logarithmic axis (must be > 0)", "0 on a log axis");
    fclose(f);

    /* one value on a log-2 axis and a constant series on a linear one: framed, drawn */
    const double one[1] = {4}, c3[3] = {5, 5, 5};
    dp_svg_series single = {"one", one, one, 1, 0}, flat = {"flat", x, c3, 3, 0};
    dp_svg_axes l2 = {"t", "x", "y", 2, 2, 0, 0};
    f = t_memstream(&buf, &len);
    T_OK(dp_svg_line(f, &l2, &single, 1));
    fclose(f);
    T_CHECK(t_count(buf, "<circle") == 1 && strstr(buf, ">4</text>") != NULL, "one point on log-2 axes: drawn, tick 4");
    f = t_memstream(&buf, &len);
    T_OK(dp_svg_line(f, &ax, &flat, 1));
    fclose(f);
    T_CHECK(t_count(buf, "<circle") == 3, "a constant series is drawn (%zu markers)", t_count(buf, "<circle"));

    /* control bytes in text are dropped; tab and newline kept; markup escaped */
    dp_svg_axes ctl = {"a\x01" "b\x1b[0m'", "x", "y", 0, 0, 0, 0};
    f = t_memstream(&buf, &len);
    T_OK(dp_svg_line(f, &ctl, &s, 1));
    fclose(f);
    T_CHECK(strstr(buf, ">ab[0m&#39;</text>") != NULL && !strchr(buf, '\x01') && !strchr(buf, '\x1b'),
            "control bytes dropped from the title");

    /* bars */
    double v[600];
    const char *lab[600];
    for (int i = 0; i < 600; i++) { v[i] = 0.5 + i % 3; lab[i] = "lbl"; }
    f = t_memstream(&buf, &len);
    refused(dp_svg_bars(f, &ax, lab, v, 0, NAN), "bar chart needs 1..512 bars, got 0", "no bars");
    refused(dp_svg_bars(f, &ax, lab, v, 513, NAN), "bar chart needs 1..512 bars, got 513", "513 bars");
    dp_svg_axes bx = ax;
    bx.xlog = 10;
    refused(dp_svg_bars(f, &bx, lab, v, 3, NAN), "bar chart x axis cannot be logarithmic", "a log x axis");
    dp_svg_axes by = ax;
    by.ylog = 10;
    refused(dp_svg_bars(f, &by, lab, zero, 3, NAN), "on a logarithmic axis", "a zero bar on a log y axis");
    fclose(f);
    f = t_memstream(&buf, &len);
    T_OK(dp_svg_bars(f, &ax, lab, v, 41, 1.0));
    fclose(f);
    T_CHECK(!strstr(buf, ">lbl<"), "41 bars: no labels (they would overlap)");
    f = t_memstream(&buf, &len);
    T_OK(dp_svg_bars(f, &ax, lab, v, 40, 1.0));
    fclose(f);
    T_CHECK(t_count(buf, ">lbl<") == 40, "40 bars: 40 labels (%zu)", t_count(buf, ">lbl<"));
    f = t_memstream(&buf, &len);
    T_OK(dp_svg_bars(f, &by, lab, v, 3, 1.0));
    fclose(f);
    T_CHECK(t_count(buf, "#d62728") == 2, "log-y bars over the reference line 1.0 in the alarm colour (%zu)",
            t_count(buf, "#d62728"));

    /* histograms */
    const double edges[4] = {0, 1, 2, 3}, bad_edges[4] = {0, 2, 1, 3}, nan_edges[4] = {0, NAN, 2, 3}, h[3] = {1, 2, 1};
    f = t_memstream(&buf, &len);
    refused(dp_svg_histogram(f, &ax, edges, h, 0, NULL, 0), "histogram needs at least one bin", "no bins");
    refused(dp_svg_histogram(f, &ax, bad_edges, h, 3, NULL, 0), "edges", "decreasing edges");
    refused(dp_svg_histogram(f, &ax, nan_edges, h, 3, NULL, 0), "edges", "a NaN edge");
    refused(dp_svg_histogram(f, &ax, edges, h, 3, &empty, 1), "histogram overlay series 0 ('e') is empty", "an empty overlay");
    fclose(f);

    /* ROC */
    const double fx[3] = {0, 0.5, 1}, fy[3] = {0, 0.7, 1}, out[3] = {0, 1.5, 1};
    dp_svg_series roc = {"roc", fx, fy, 3, 0}, wild = {"w", fx, out, 3, 0};
    f = t_memstream(&buf, &len);
    refused(dp_svg_roc(f, &by, &roc, 1, 1, 1e-5), "ROC axes are linear", "a log axis");
    refused(dp_svg_roc(f, &ax, &roc, 1, NAN, 1e-5), "finite epsilon and delta in [0, 1)", "NaN epsilon");
    refused(dp_svg_roc(f, &ax, &roc, 1, 1, 1), "finite epsilon and delta in [0, 1)", "delta 1");
    refused(dp_svg_roc(f, &ax, &wild, 1, 1, 1e-5), "ROC curve 0 point 1 outside [0, 1]^2", "a point outside");
    fclose(f);

    /* a stream that fails: DP_ERR_IO */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        setvbuf(full, NULL, _IONBF, 0);
        dp_status st = dp_svg_line(full, &ax, &s, 1);
        T_CHECK(st == DP_ERR_IO && strstr(dp_last_error(), "svg: write error"), "/dev/full: status %d '%s'", (int)st,
                dp_last_error());
        fclose(full);
    }
    free(buf);
    return t_finish();
}

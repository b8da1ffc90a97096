/* common/tests/test_svg.c — the SVG plotting module: well-formed output for each plot
 * kind, deterministic bytes, escaping, log axes, and bad input rejected by name (never
 * clamped). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/svg.h"
#include "common/test.h"

static char *buf;
static size_t len;

static FILE *open_buf(void) { return t_memstream(&buf, &len); }
#define count t_count

int main(void) {
    const double x[4] = {1, 2, 4, 8}, y[4] = {10, 20, NAN, 80}, y2[4] = {1, 2, 3, 4};
    dp_svg_series s[2] = {{"a<b & c", x, y, 4, 0}, {"second", x, y2, 4, 1}};
    dp_svg_axes ax = {"title \"q\" <x>", "x", "y", 2, 10, 0, 0};

    FILE *f = open_buf();
    T_OK(dp_svg_line(f, &ax, s, 2));
    fclose(f);
    T_CHECK(strncmp(buf, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39) == 0, "starts with <svg: %.40s", buf);
    T_CHECK(strstr(buf, "</svg>\n") != NULL && count(buf, "<svg") == 1, "one closed svg");
    T_CHECK(strstr(buf, "a&lt;b &amp; c") && strstr(buf, "title &quot;q&quot; &lt;x&gt;"), "escaping");
    T_CHECK(!strstr(buf, "<x>") && !strstr(buf, "<script"), "raw text leaked");
    /* NaN breaks the first series into two polylines; the second is one */
    T_CHECK(count(buf, "<polyline") == 3, "%zu polylines (want 3: NaN breaks a line)", count(buf, "<polyline"));
    T_CHECK(count(buf, "stroke-dasharray=\"7 4\"") == 1 && count(buf, "<circle") == 3,
            "the dashed series has no markers, the solid one 3 (NaN not drawn)");
    T_CHECK(strstr(buf, ">8</text>") && strstr(buf, ">100</text>"), "log-2 and log-10 tick labels");
    char *first = strdup(buf);
    f = open_buf();
    T_OK(dp_svg_line(f, &ax, s, 2));
    fclose(f);
    T_CHECK(first && strcmp(first, buf) == 0, "same input, different bytes");
    free(first);

    /* bars with a reference line: values above it in the alarm colour */
    const char *labels[3] = {"c1", "c2", "c3"};
    const double v[3] = {0.2, 1.5, NAN};
    dp_svg_axes bx = {"budget", "case", "fraction", 0, 0, 0, 0};
    f = open_buf();
    T_OK(dp_svg_bars(f, &bx, labels, v, 3, 1.0));
    fclose(f);
    T_CHECK(count(buf, "<rect") == 4, "bars: %zu rects", count(buf, "<rect")); /* background, frame, 2 finite bars */
    T_CHECK(count(buf, "#d62728") == 1 && strstr(buf, "stroke-dasharray=\"6 4\"") && strstr(buf, ">n/a<"),
            "alarm bar, reference line, n/a");

    /* histogram with a density overlay */
    const double edges[4] = {-1, 0, 1, 2}, h[3] = {0.2, 0.5, 0.3}, dx[3] = {-1, 0.5, 2}, dy[3] = {0.1, 0.4, 0.1};
    dp_svg_series dens = {"density", dx, dy, 3, 0};
    f = open_buf();
    T_OK(dp_svg_histogram(f, &bx, edges, h, 3, &dens, 1));
    fclose(f);
    T_CHECK(count(buf, "fill=\"#9ecae1\"") == 3 && count(buf, "<polyline") == 1, "histogram bins + overlay");

    /* ROC with the DP bound */
    const double fx[3] = {0, 0.5, 1}, fy[3] = {0, 0.7, 1};
    dp_svg_series roc = {"attack", fx, fy, 3, 0};
    dp_svg_axes rx = {"ROC", "FPR", "TPR", 0, 0, 0, 0};
    f = open_buf();
    T_OK(dp_svg_roc(f, &rx, &roc, 1, 1.0, 1e-5));
    fclose(f);
    T_CHECK(strstr(buf, ">DP bound<") && count(buf, "<polyline") == 2, "ROC bound + curve");

    /* bad input: named errors, nothing written as a plot */
    const double neg[2] = {-1, 2};
    dp_svg_series sn = {"n", neg, neg, 2, 0};
    f = open_buf();
    T_CHECK(dp_svg_line(f, &ax, &sn, 1) == DP_ERR_INVALID && strstr(dp_last_error(), "logarithmic"),
            "negative on a log axis: %s", dp_last_error());
    T_CHECK(dp_svg_line(f, &ax, s, 0) == DP_ERR_INVALID, "no series");
    dp_svg_series empty = {"e", x, y, 0, 0};
    T_CHECK(dp_svg_line(f, &ax, &empty, 1) == DP_ERR_INVALID, "empty series");
    const double bad_edges[4] = {0, 1, 1, 2};
    T_CHECK(dp_svg_histogram(f, &bx, bad_edges, h, 3, NULL, 0) == DP_ERR_INVALID, "non-increasing edges");
    const double out[3] = {0, 1.2, 1};
    dp_svg_series ro = {"r", fx, out, 3, 0};
    T_CHECK(dp_svg_roc(f, &rx, &ro, 1, 1, 0) == DP_ERR_INVALID && strstr(dp_last_error(), "outside"), "ROC > 1");
    dp_svg_axes tiny = {"t", NULL, NULL, 0, 0, 10, 10};
    T_CHECK(dp_svg_line(f, &tiny, &s[1], 1) == DP_ERR_INVALID, "size 10x10 accepted");
    fclose(f);
    T_CHECK(len == 0, "a rejected plot wrote %zu bytes", len);
    free(buf);
    return t_finish();
}

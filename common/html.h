/* common/html.h — self-contained HTML report pages with inline SVG plots (docs/reports.md).
 * Every command's report.html (conform, reproduce, certify, audit, mia) is built from these
 * blocks: dp_html_open → dp_html_begin → dp_html_plot / dp_html_table / dp_html_para →
 * dp_html_end → dp_html_commit (atomic: temporary file in the same directory, rename).
 * The pages have no scripts and no external references (a Content-Security-Policy of
 * default-src 'none' enforces it). */
#ifndef DP_HTML_H
#define DP_HTML_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "common/fsutil.h"
#include "common/status.h"

/* The head, the title and the summary verdict first (`ok` colours it green, otherwise red). */
void dp_html_begin(FILE *f, const char *title, const char *verdict, int ok);
void dp_html_end(FILE *f);
/* <h2>text</h2> and <p>text</p> (escaped). */
void dp_html_heading(FILE *f, const char *text);
void dp_html_para(FILE *f, const char *text);
/* A bulleted list of the strings of a JSON array (escaped). */
void dp_html_list(FILE *f, const json_t *items);
/* A table from "columns" + "rows" (JSON): one column per key, cells as text; a
 * "verdict"/"status" cell is classed (coloured) by its first word and shows the row's
 * "reason" after the verdict. */
void dp_html_table(FILE *f, const json_t *columns, const json_t *rows);
/* One plot from its JSON specification (below). A plot never decides a verdict, an exit code
 * or whether the other outputs are written: a specification that cannot be drawn (a bad
 * spec, degenerate data, no memory) becomes a note in the page naming the plot and why
 * (<p class="note">plot 'TITLE': not drawn: REASON</p>), never a half-drawn <svg>, and
 * values <= 0 on a logarithmic axis are left out with a note saying how many. Returns DP_OK
 * (the stream's own write errors show when the page is committed). */
dp_status dp_html_plot(FILE *f, const json_t *plot);
/* Every plot of a JSON array of specifications, under the heading `heading` (none when
 * the array is empty). DP_OK, as dp_html_plot. */
dp_status dp_html_plots(FILE *f, const char *heading, const json_t *plots);
/* A "note" specification appended to plots: a plot that could not be built says why in its
 * place ({"kind": "note", "title", "text"}). */
json_t *dp_html_note_new(json_t *plots, const char *title, const char *text);

/* report.html written atomically: open (the option named in errors is --report) and
 * commit, or abort when st is not DP_OK (st is returned). */
dp_status dp_html_open(dp_afile *af, const char *path);
dp_status dp_html_commit(dp_afile *af, dp_status st);
/* DIR/report.html of a command's --report DIR. */
dp_status dp_html_open_in(dp_afile *af, const char *dir);

/* Plot specifications (JSON), rendered with common/svg.h:
 * {"kind", "title", "xlabel", "ylabel", "xlog", "ylog" (0, 2 or 10), and by kind:
 *  "line":      "series": [{"name", "x": [...], "y": [...], "dashed": true|absent}]
 *               (null = not finite, breaks the line; dashed: thin dashed, no markers);
 *  "bars":      "labels": [...], "values": [...], "ref": r (dashed line, bars above it red);
 *  "histogram": "edges": [nbins + 1], "heights": [nbins], "series": overlaid curves;
 *  "roc":       "series": curves (x = FPR, y = TPR in [0, 1]), "epsilon", "delta": the
 *               (epsilon, delta)-DP bound (epsilon null or absent: no bound);
 *  "note":      "text": a plot that could not be built, and why} */
json_t *dp_html_plot_new(json_t *plots, const char *kind, const char *title, const char *xlabel, const char *ylabel,
                         int xlog, int ylog);
/* A series appended to a plot's "series" (dashed: drawn thin and dashed, no markers). */
void dp_html_plot_series(json_t *plot, const char *name, const double *x, const double *y, size_t n, int dashed);
/* JSON array of n numbers (non-finite as null). */
json_t *dp_html_num_array(const double *v, size_t n);

#endif

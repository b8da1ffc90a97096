/* conformance/html.h — self-contained HTML report pages with inline SVG plots
 * (conformance/report_html.c, docs/reports.md). Other commands' reports (certify, audit,
 * mia) build their pages from these blocks: conf_html_begin, conf_html_table,
 * conf_html_plot (or common/svg.h directly), conf_html_end, written through dp_afile. */
#ifndef CONF_HTML_H
#define CONF_HTML_H

#include <jansson.h>
#include <stdio.h>

#include "common/status.h"
#include "conformance/conf.h"

/* A self-contained page (no scripts, no network): title, the summary verdict first
 * (`ok` colours it green, otherwise red), then what the caller writes, then
 * conf_html_end. */
void conf_html_begin(FILE *f, const char *title, const char *verdict, int ok);
void conf_html_end(FILE *f);
/* A table from "columns" + "rows" (JSON): one column per key, cells as text. */
void conf_html_table(FILE *f, const json_t *columns, const json_t *rows);
/* One plot from its JSON specification (above); DP_ERR_INVALID names a bad spec. */
dp_status conf_html_plot(FILE *f, const json_t *plot);
/* The page of a reproduce target (its JSON object) written atomically to path. */
dp_status conf_repro_html(const char *path, const json_t *root);

/* Plot specifications (JSON), rendered with common/svg.h:
 * {"kind": "line"|"bars", "title", "xlabel", "ylabel", "xlog", "ylog" (0, 2 or 10),
 *  line: "series": [{"name", "x": [...], "y": [...], "dashed": true|absent}] (null = not
 *        finite, breaks the line; dashed: thin dashed, no markers);
 *  bars: "labels": [...], "values": [...], "ref": r (dashed line, bars above it in red)} */

/* report.html of a conformance run, beside report.json (same results). */
dp_status conf_report_html(const char *path, const char *suite, const conf_case_result *r, size_t n);

#endif

/* conformance/html.h — the report pages of `conform` and `reproduce`
 * (conformance/report_html.c, docs/reports.md), built from the page blocks of
 * common/html.h (dp_html_*), which every command's report.html shares. */
#ifndef CONF_HTML_H
#define CONF_HTML_H

#include <jansson.h>
#include <stdio.h>

#include "common/html.h"
#include "common/status.h"
#include "conformance/conf.h"

/* The page of a reproduce target (its JSON object) written atomically to path. */
dp_status conf_repro_html(const char *path, const json_t *root);

/* The tolerance-budget plot specification of a run (bars up to 60 cases, a histogram of the
 * fractions beyond: docs/reports.md); NULL when out of memory. */
json_t *conf_budget_plot(const conf_case_result *r, size_t n);

/* report.html of a conformance run, beside report.json (same results). */
dp_status conf_report_html(const char *path, const char *suite, const conf_case_result *r, size_t n);

#endif

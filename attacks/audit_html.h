/* attacks/audit_html.h — report.html of `dpcert audit` and `dpcert mia` (docs/reports.md),
 * built from their report.json object (the blocks of common/html.h) and written atomically
 * beside it. */
#ifndef AUDIT_HTML_H
#define AUDIT_HTML_H

#include <jansson.h>

#include "common/status.h"

/* DIR/report.html of an audit: verdict first, the white-box ROC with the DP bound of the
 * claimed (epsilon, delta) and the Gaussian trade-off curve of the claimed mu, the lower
 * bounds against the claim, and the one-run audit's summary. */
dp_status audit_report_html(const char *dir, const json_t *report);
/* DIR/report.html of a membership-inference run: verdict first, one ROC plot per run (every
 * attack, with the run's (epsilon, delta) bound), the AUC table with intervals and the
 * TPR-at-FPR points against the bound. */
dp_status mia_report_html(const char *dir, const json_t *report);

#endif

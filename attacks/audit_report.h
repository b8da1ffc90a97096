/* attacks/audit_report.h — report files shared by `dpcert audit` and `dpcert mia`
 * (docs/audits.md "Reports"): JSON through jansson and an SVG ROC plot, both written with
 * the atomic writer of common/fsutil.h. */
#ifndef AUDIT_REPORT_H
#define AUDIT_REPORT_H

#include <jansson.h>
#include <stddef.h>

#include "common/status.h"

typedef struct {
    const char *label;
    const double *fpr, *tpr;
    size_t n;
} audit_curve;

/* A finite number, or null (JSON has no infinity or NaN). */
json_t *audit_json_num(double v);
/* {"fpr": [...], "tpr": [...]} */
json_t *audit_json_roc(const double *fpr, const double *tpr, size_t n);
/* Serialise `root` (not consumed) to DIR/NAME atomically. */
dp_status audit_write_json(const char *dir, const char *name, const json_t *root);
/* ROC curves on linear axes with the diagonal, title and legend, to DIR/NAME atomically. */
dp_status audit_write_roc_svg(const char *dir, const char *name, const char *title, const audit_curve *c, size_t n);

#endif

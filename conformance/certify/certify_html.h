/* conformance/certify/certify_html.h — `certify`'s plots (report.json "plots", the specifications
 * of common/html.h) and its page, BUNDLE/report.html (docs/reports.md). */
#ifndef CONF_CERTIFY_HTML_H
#define CONF_CERTIFY_HTML_H

#include <jansson.h>

#include "conformance/certify/certify.h"

/* The plot specifications of a certification: noise residual histogram against the N(0, 1)
 * density (when residuals were read), one batch-size distribution against Binomial(N, q)
 * per sampling vector, and epsilon versus steps of the reference run (q 0.01, delta 1e-5,
 * RDP) at the claimed noise multiplier 1 and at the measured one's 99.9 % lower end. NULL when
 * out of memory (the error recorded). */
json_t *cert_plots_json(const cert_result *r);
/* BUNDLE/report.html (atomic): verdict first, the noise summary, the plots, every check. */
dp_status cert_report_html(const char *bundle, const cert_result *r, const cert_opts *o, const json_t *plots);

#endif

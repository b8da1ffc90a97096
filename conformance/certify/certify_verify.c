/* conformance/certify/certify_verify.c — `dpcert verify-report`: the signature, the hash of every
 * file of the bundle, and every check recomputed from the stored vectors and outputs
 * (docs/certification.md "Verifying a report"). */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/hash.h"
#include "conformance/certify/certify.h"

dp_status cert_report_files(json_t **out, const char *bundle);
dp_status cert_verify_bundle(const char *bundle, const char *pubkey);

static dp_status bad(const char *fmt, const char *a, const char *b) {
    return dp_error(DP_ERR_CHECK_FAILED, fmt, a, b);
}

static int same_num(json_t *j, double v) {
    if (json_is_null(j)) return !isfinite(v);
    if (!json_is_number(j) || !isfinite(v)) return 0;
    double x = json_number_value(j);
    return x == v || fabs(x - v) <= 1e-9 * fmax(fabs(x), fabs(v)); /* libm differences across machines */
}

dp_status cert_verify_bundle(const char *bundle, const char *pubkey) {
    DP_TRY(cert_verify_signature(bundle, pubkey));
    char p[4200];
    snprintf(p, sizeof p, "%s/report.json", bundle);
    json_error_t je;
    json_t *root = json_load_file(p, JSON_REJECT_DUPLICATES, &je);
    if (!root) return dp_error(DP_ERR_CHECK_FAILED, "%s: %s (line %d)", p, je.text, je.line);
    dp_status st = DP_OK;
    json_t *files = json_object_get(root, "files"), *now = NULL;
    const char *key;
    json_t *val;
    st = cert_report_files(&now, bundle);
    if (st == DP_ERR_NOMEM || st == DP_ERR_SYSIO) {
        json_decref(root);
        return dp_error_context(st, "listing the bundle %s", bundle);
    }
    if (st != DP_OK) st = dp_error_context(DP_ERR_CHECK_FAILED, "the bundle %s cannot be listed and hashed", bundle);
    else if (!json_is_object(files)) st = bad("%s%s: no files object", p, "");
    json_object_foreach(files, key, val) {
        if (st != DP_OK) break;
        json_t *h = json_object_get(now, key);
        if (!h) st = bad("file %s%s listed in report.json is missing from the bundle", key, "");
        else if (!json_is_string(val) || strcmp(json_string_value(val), json_string_value(h)) != 0)
            st = bad("file %s: SHA-256 differs from report.json (%s)", key, json_string_value(h));
    }
    json_object_foreach(now, key, val) {
        if (st != DP_OK) break;
        if (!json_object_get(files, key)) st = bad("file %s%s is in the bundle but not in report.json", key, "");
    }
    json_decref(now);
    cert_opts o;
    memset(&o, 0, sizeof o);
    const char *suite = json_string_value(json_object_get(root, "suite"));
    if (st == DP_OK) st = cert_suite_parse(&o.suite, "report.json suite", suite);
    o.repeats = json_integer_value(json_object_get(root, "repeats"));
    o.alpha = json_number_value(json_object_get(root, "alpha_per_test"));
    o.candidate = json_string_value(json_object_get(root, "candidate"));
    o.filter = json_string_value(json_object_get(root, "filter")); /* NULL when null */
    o.scope = json_string_value(json_object_get(root, "scope"));   /* NULL (absent): all */
    if (st == DP_OK && cert_scope_check(o.scope) != DP_OK) st = bad("report.json: scope '%s' invalid%s", o.scope, "");
    if (st == DP_OK && (o.repeats < 1 || !(o.alpha > 0 && o.alpha < 1)))
        st = bad("report.json: repeats or alpha_per_test invalid%s%s", "", "");
    cert_result r;
    cert_result_init(&r);
    if (st == DP_OK) st = cert_evaluate(&r, bundle, &o);
    json_t *checks = json_object_get(root, "checks");
    const char *verdict = json_string_value(json_object_get(root, "verdict"));
    if (st == DP_OK && (!verdict || strcmp(verdict, cert_verdict_name(r.verdict)) != 0))
        st = bad("verdict: report.json says %s, recomputed %s", verdict ? verdict : "(none)", cert_verdict_name(r.verdict));
    if (st == DP_OK && (!json_is_array(checks) || json_array_size(checks) != r.n))
        st = dp_error(DP_ERR_CHECK_FAILED, "report.json lists %zu checks, recomputed %zu", json_array_size(checks), r.n);
    for (size_t i = 0; st == DP_OK && i < r.n; i++) {
        json_t *c = json_array_get(checks, i);
        const cert_check *k = &r.items[i];
        const char *nm = json_string_value(json_object_get(c, "check")), *sc = json_string_value(json_object_get(c, "scope"));
        const char *ss = json_string_value(json_object_get(c, "status"));
        if (!nm || !sc || !ss || strcmp(nm, k->name) || strcmp(sc, k->scope) || strcmp(ss, cert_status_name(k->status)) ||
            !same_num(json_object_get(c, "statistic"), k->statistic) || !same_num(json_object_get(c, "alpha"), k->alpha))
            st = dp_error(DP_ERR_CHECK_FAILED, "check %zu (%s [%s]) differs: report.json says %s, recomputed %s (statistic %.17g)",
                          i, k->name, k->scope, ss ? ss : "?", cert_status_name(k->status), k->statistic);
    }
    if (st == DP_OK) printf("verify-report: signature, %zu file hashes and %zu checks verified; verdict %s\n",
                            json_object_size(files), r.n, cert_verdict_name(r.verdict));
    cert_result_free(&r);
    json_decref(root);
    return st;
}

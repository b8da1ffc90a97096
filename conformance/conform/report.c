/* conformance/conform/report.c — report.json (jansson), junit.xml (JUnit: testsuites /
 * testsuite / testcase / failure / skipped) and report.md of a conformance run
 * (formats in docs/conformance.md). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/fsutil.h"
#include "conformance/conform/conform.h"


dp_status conf_report_json(const char *path, const char *suite, const conf_case_result *r, size_t n) {
    json_t *root = json_object(), *cases = json_array();
    size_t counts[5] = {0};
    for (size_t i = 0; i < n; i++) {
        counts[r[i].status]++;
        json_t *c = json_object();
        json_object_set_new(c, "case", json_string(r[i].name));
        if (r[i].backend[0]) json_object_set_new(c, "backend", json_string(r[i].backend));
        json_object_set_new(c, "status", json_string(conf_status_name(r[i].status)));
        json_object_set_new(c, "fraction", r[i].cmp.ncompared ? conf_json_num(r[i].worst_frac) : json_null());
        json_object_set_new(c, "seconds", json_real(r[i].seconds));
        json_object_set_new(c, "detail", json_string(r[i].detail));
        if (r[i].is_stat) {
            json_t *s = json_object();
            json_object_set_new(s, "name", json_string(r[i].stat.name));
            json_object_set_new(s, "statistic", conf_json_num(r[i].stat.statistic));
            json_object_set_new(s, "accept_lo", conf_json_num(r[i].stat.lo));
            json_object_set_new(s, "accept_hi", conf_json_num(r[i].stat.hi));
            json_object_set_new(s, "false_reject_bound", json_real(r[i].stat.alpha));
            json_object_set_new(s, "message", json_string(r[i].stat.msg));
            json_object_set_new(c, "statistical", s);
        }
        json_object_set_new(c, "comparison", conf_cmp_json(&r[i].cmp));
        json_array_append_new(cases, c);
    }
    json_object_set_new(root, "suite", json_string(suite));
    json_object_set_new(root, "format", json_string("dpcert-conformance-report/1"));
    json_t *sum = json_object();
    for (int s = 0; s < 5; s++) json_object_set_new(sum, conf_status_name((conf_status)s), json_integer((json_int_t)counts[s]));
    json_object_set_new(root, "summary", sum);
    json_object_set_new(root, "cases", cases);
    dp_afile af;
    dp_status st = dp_afile_open(&af, "report.json", path);
    if (st == DP_OK) {
        if (json_dumpf(root, af.f, JSON_INDENT(1) | JSON_ENSURE_ASCII) != 0) {
            dp_afile_abort(&af);
            st = dp_error(DP_ERR_IO, "cannot write %s", path);
        } else st = dp_afile_commit(&af);
    }
    json_decref(root);
    return st;
}

/* Length of the valid UTF-8 sequence at s that encodes an XML 1.0 Char (0 when invalid:
 * a stray continuation byte, an overlong form, a surrogate, > U+10FFFF, U+FFFE/U+FFFF,
 * or a sequence cut short by the end of the string). */
static size_t utf8_xml_char(const unsigned char *s) {
    unsigned c = s[0];
    size_t n;
    unsigned cp;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
    else return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0; /* also stops at the terminating NUL */
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0; /* overlong / too large */
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE || cp == 0xFFFF) return 0;    /* not XML Chars */
    return n;
}

void conf_xml_escape(char *buf, size_t len, const char *s) {
    size_t k = 0;
    if (!len) return;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        const char *rep = NULL;
        size_t l, adv = 1;
        switch (*p) {
        case '&': rep = "&amp;"; break;
        case '<': rep = "&lt;"; break;
        case '>': rep = "&gt;"; break;
        case '"': rep = "&quot;"; break;
        case '\'': rep = "&apos;"; break;
        default:
            if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') rep = ""; /* not allowed in XML 1.0 */
            else if (*p >= 0x80) {
                adv = utf8_xml_char(p);
                if (adv == 0) { adv = 1; rep = "\xEF\xBF\xBD"; } /* invalid byte -> U+FFFD */
            }
        }
        if (rep) l = strlen(rep);
        else { rep = (const char *)p; l = adv; } /* a whole character, never a part of one */
        if (k + l + 1 > len) break;
        memcpy(buf + k, rep, l);
        k += l;
        p += adv;
    }
    buf[k] = '\0';
}

dp_status conf_report_junit(const char *path, const char *suite, const conf_case_result *r, size_t n) {
    dp_afile af;
    DP_TRY(dp_afile_open(&af, "junit.xml", path));
    FILE *f = af.f;
    size_t fails = 0, skips = 0;
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        fails += r[i].status == CONF_FAIL;
        skips += r[i].status == CONF_SKIPPED || r[i].status == CONF_NOT_SUPPORTED;
        total += r[i].seconds;
    }
    char es[512], en[512], ed[2048];
    conf_xml_escape(es, sizeof es, suite);
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    fprintf(f, "<testsuites name=\"dpcert conform\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n",
            n, fails, skips, total);
    fprintf(f, "  <testsuite name=\"%s\" tests=\"%zu\" failures=\"%zu\" errors=\"0\" skipped=\"%zu\" time=\"%.3f\">\n", es, n,
            fails, skips, total);
    for (size_t i = 0; i < n; i++) {
        conf_xml_escape(en, sizeof en, r[i].name);
        fprintf(f, "    <testcase classname=\"dpcert.conform.%s\" name=\"%s\" time=\"%.3f\">", es, en, r[i].seconds);
        conf_xml_escape(ed, sizeof ed, r[i].detail);
        if (r[i].status == CONF_FAIL) {
            fprintf(f, "\n      <failure message=\"%s\" type=\"FAIL\">", ed);
            for (size_t t = 0; t < r[i].cmp.n; t++)
                if (r[i].cmp.items[t].status == CONF_FAIL) {
                    char tn[512], tm[1024];
                    conf_xml_escape(tn, sizeof tn, r[i].cmp.items[t].name);
                    conf_xml_escape(tm, sizeof tm, r[i].cmp.items[t].msg);
                    fprintf(f, "%s: %s\n", tn, tm);
                }
            fprintf(f, "</failure>\n    ");
        } else if (r[i].status == CONF_SKIPPED || r[i].status == CONF_NOT_SUPPORTED) {
            fprintf(f, "\n      <skipped message=\"%s: %s\"/>\n    ", conf_status_name(r[i].status), ed);
        } else if (r[i].status == CONF_MARGINAL) {
            fprintf(f, "\n      <system-out>MARGINAL: %s</system-out>\n    ", ed);
        }
        fprintf(f, "</testcase>\n");
    }
    fprintf(f, "  </testsuite>\n</testsuites>\n");
    return dp_afile_commit(&af); /* any failed write above is seen on the stream: DP_ERR_IO */
}

/* Markdown: pipes in free text would break the table, so they are replaced. */
static void md_clean(char *buf, size_t len, const char *s) {
    snprintf(buf, len, "%s", s);
    for (char *p = buf; *p; p++)
        if (*p == '|' || *p == '\n') *p = '/';
}

dp_status conf_report_md(const char *path, const char *suite, const conf_case_result *r, size_t n) {
    dp_afile af;
    DP_TRY(dp_afile_open(&af, "report.md", path));
    FILE *f = af.f;
    size_t counts[5] = {0};
    for (size_t i = 0; i < n; i++) counts[r[i].status]++;
    fprintf(f, "# dpcert conformance report: suite `%s`\n\n", suite);
    if (n && r[0].backend[0]) fprintf(f, "Candidate backend: `%s`%s.\n\n", r[0].backend,
                                      strcmp(r[0].backend, "cuda-emu") == 0 ? " (the CUDA backend on the CPU emulation, not a GPU)" : "");
    fprintf(f, "%zu cases: %zu PASS, %zu MARGINAL, %zu FAIL, %zu NOT_SUPPORTED, %zu SKIPPED.\n\n", n, counts[CONF_PASS],
            counts[CONF_MARGINAL], counts[CONF_FAIL], counts[CONF_NOT_SUPPORTED], counts[CONF_SKIPPED]);
    fprintf(f, "Budget used = max over elements of |candidate - reference| / bound (docs/tolerances.md).\n\n");
    {   /* the declarations the candidates were judged under (docs/tolerances.md "Declared arithmetic") */
        const char *seen[8] = {0};
        size_t ns = 0;
        for (size_t i = 0; i < n && ns < 8; i++) {
            const char *a = r[i].cmp.arith;
            int dup = !a[0];
            for (size_t k = 0; !dup && k < ns; k++) dup = strcmp(seen[k], a) == 0;
            if (dup) continue;
            char d[700];
            md_clean(d, sizeof d, a);
            fprintf(f, "Judged under the declared arithmetic: %s\n\n", d);
            seen[ns++] = a;
        }
    }
    fprintf(f, "| case | status | budget used | time (s) | detail |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < n; i++) {
        char d[600], nm[200];
        md_clean(d, sizeof d, r[i].detail);
        md_clean(nm, sizeof nm, r[i].name);
        char fr[32];
        if (r[i].status == CONF_SKIPPED || r[i].status == CONF_NOT_SUPPORTED || r[i].cmp.ncompared == 0)
            snprintf(fr, sizeof fr, "-");
        else if (isfinite(r[i].worst_frac)) snprintf(fr, sizeof fr, "%.3g%%", 100 * r[i].worst_frac);
        else snprintf(fr, sizeof fr, "inf");
        fprintf(f, "| %s | %s | %s | %.2f | %s |\n", nm, conf_status_name(r[i].status), fr, r[i].seconds, d);
    }
    for (size_t i = 0; i < n; i++) {
        if (r[i].status != CONF_FAIL && r[i].status != CONF_MARGINAL) continue;
        fprintf(f, "\n## %s (%s)\n\n| tensor | status | budget used | max abs diff | detail |\n|---|---|---|---|---|\n",
                r[i].name, conf_status_name(r[i].status));
        for (size_t t = 0; t < r[i].cmp.n; t++) {
            const conf_tensor_result *x = &r[i].cmp.items[t];
            if (x->status != CONF_FAIL && x->status != CONF_MARGINAL) continue;
            char m[300];
            md_clean(m, sizeof m, x->msg);
            fprintf(f, "| %s | %s | %.3g%% | %.3g | %s |\n", x->name, conf_status_name(x->status), 100 * x->worst_frac,
                    x->max_abs_err, m);
        }
    }
    return dp_afile_commit(&af); /* any failed write above is seen on the stream: DP_ERR_IO */
}

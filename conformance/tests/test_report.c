/* conformance/tests/test_report.c — report.json parses back (jansson) with the
 * statuses and fractions written; junit.xml is well-formed (a small checker:
 * balanced tags, quoted attributes, only the five entities, no raw '<' or '&') with
 * hostile names escaped; report.md has one row per case. xmllint is used as a second
 * opinion when it is installed. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "conformance/conform/conform.h"

/* Minimal well-formedness check of an XML document (no DTD, no CDATA, no comments
 * needed). Returns NULL if well-formed, else a static message. */
static const char *xml_check(const char *s) {
    static char msg[256];
    char stack[64][64];
    int depth = 0, roots = 0;
    const char *p = s;
    if (strncmp(p, "<?xml", 5) == 0) {
        p = strstr(p, "?>");
        if (!p) return "unterminated XML declaration";
        p += 2;
    }
    while (*p) {
        if (*p == '&') {
            const char *ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
            int ok = 0;
            for (int i = 0; i < 5; i++) ok |= strncmp(p, ents[i], strlen(ents[i])) == 0;
            if (!ok) { snprintf(msg, sizeof msg, "bad entity at '%.20s'", p); return msg; }
            p++;
            continue;
        }
        if (*p != '<') {
            if ((unsigned char)*p < 0x20 && *p != '\n' && *p != '\r' && *p != '\t') return "control character";
            if (depth == 0 && !isspace((unsigned char)*p)) return "text outside the root element";
            p++;
            continue;
        }
        int closing = p[1] == '/';
        const char *n = p + 1 + closing;
        size_t nl = 0;
        while (n[nl] && (isalnum((unsigned char)n[nl]) || n[nl] == '-' || n[nl] == '_' || n[nl] == ':' || n[nl] == '.')) nl++;
        if (nl == 0 || nl >= 64) { snprintf(msg, sizeof msg, "bad tag name at '%.20s'", p); return msg; }
        const char *q = n + nl;
        /* attributes: name="value" with no '<' in the value */
        while (*q && *q != '>' && !(q[0] == '/' && q[1] == '>')) {
            if (isspace((unsigned char)*q)) { q++; continue; }
            if (closing) return "attributes on a closing tag";
            while (*q && (isalnum((unsigned char)*q) || *q == '-' || *q == '_' || *q == ':')) q++;
            if (*q != '=' || q[1] != '"') { snprintf(msg, sizeof msg, "attribute not name=\"value\" at '%.20s'", q); return msg; }
            q += 2;
            while (*q && *q != '"') {
                if (*q == '<') return "'<' inside an attribute value";
                if (*q == '&') {
                    const char *ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
                    int ok = 0;
                    for (int i = 0; i < 5; i++) ok |= strncmp(q, ents[i], strlen(ents[i])) == 0;
                    if (!ok) return "bad entity in an attribute";
                }
                q++;
            }
            if (*q != '"') return "unterminated attribute value";
            q++;
        }
        if (!*q) return "unterminated tag";
        int selfclose = q[0] == '/';
        if (closing) {
            if (depth == 0 || strncmp(stack[depth - 1], n, nl) != 0 || stack[depth - 1][nl] != '\0') {
                snprintf(msg, sizeof msg, "mismatched closing tag </%.*s>", (int)nl, n);
                return msg;
            }
            depth--;
        } else if (!selfclose) {
            if (depth == 0) roots++;
            if (depth >= 64) return "too deep";
            memcpy(stack[depth], n, nl);
            stack[depth][nl] = '\0';
            depth++;
        } else if (depth == 0) {
            roots++;
        }
        p = q + (selfclose ? 2 : 1);
    }
    if (depth) return "unclosed element";
    if (roots != 1) return "not exactly one root element";
    return NULL;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) { free(b); b = NULL; }
    if (b) b[n] = '\0';
    fclose(f);
    return b;
}

int main(void) {
    (void)t_seed(1);
    /* the checker itself: accepts good XML, rejects each kind of breakage */
    T_CHECK(xml_check("<?xml version=\"1.0\"?>\n<a x=\"1\"><b/><c>t &amp; u</c></a>\n") == NULL, "good XML rejected");
    T_CHECK(xml_check("<a><b></a>") != NULL, "mismatched tags accepted");
    T_CHECK(xml_check("<a>x & y</a>") != NULL, "raw & accepted");
    T_CHECK(xml_check("<a x=\"<\"/>") != NULL, "< in attribute accepted");
    T_CHECK(xml_check("<a/><b/>") != NULL, "two roots accepted");

    conf_case_result r[4];
    memset(r, 0, sizeof r);
    const char *names[] = {"plain@r1", "evil <&\"'>\x01 name@r2", "skipped@r4", "marginal@r1"};
    conf_status sts[] = {CONF_PASS, CONF_FAIL, CONF_NOT_SUPPORTED, CONF_MARGINAL};
    double fr[] = {0.25, INFINITY, 0, 0.75};
    for (int i = 0; i < 4; i++) {
        snprintf(r[i].name, sizeof r[i].name, "%s", names[i]);
        r[i].status = sts[i];
        r[i].worst_frac = fr[i];
        r[i].seconds = 0.5 * i;
        conf_cmp_result_init(&r[i].cmp);
        snprintf(r[i].detail, sizeof r[i].detail, "detail %d with <markup> & \"quotes\" | pipes", i);
        if (isfinite(fr[i]) && sts[i] != CONF_NOT_SUPPORTED) { /* a compared tensor carrying the fraction */
            conf_tensor_result x;
            memset(&x, 0, sizeof x);
            snprintf(x.name, sizeof x.name, "per_sample.norm");
            x.status = sts[i];
            x.worst_frac = fr[i];
            T_OK(conf_cmp_result_push(&r[i].cmp, &x));
        }
    }
    conf_tensor_result t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "step-000001/step.noise.w<1>");
    t.status = CONF_FAIL;
    t.worst_frac = INFINITY;
    snprintf(t.msg, sizeof t.msg, "element 3: candidate 1 & reference 2");
    T_OK(conf_cmp_result_push(&r[1].cmp, &t));
    T_CHECK(r[1].cmp.status == CONF_FAIL && strcmp(r[1].cmp.first_fail, t.name) == 0, "push did not record the FAIL");

    T_OK(conf_report_json("report.json", "ci", r, 4));
    T_OK(conf_report_junit("junit.xml", "ci <suite>", r, 4));
    T_OK(conf_report_md("report.md", "ci", r, 4));

    json_error_t err;
    json_t *j = json_load_file("report.json", 0, &err);
    T_CHECK(j != NULL, "report.json does not parse: %s (line %d)", err.text, err.line);
    if (j) {
        json_t *cs = json_object_get(j, "cases");
        T_CHECK(json_is_array(cs) && json_array_size(cs) == 4, "report.json: 4 cases expected");
        for (size_t i = 0; i < json_array_size(cs); i++) {
            json_t *c = json_array_get(cs, i);
            T_CHECK(strcmp(json_string_value(json_object_get(c, "case")), names[i]) == 0, "case %zu name not round-tripped", i);
            T_CHECK(strcmp(json_string_value(json_object_get(c, "status")), conf_status_name(sts[i])) == 0, "case %zu status", i);
            json_t *f = json_object_get(c, "fraction");
            if (isfinite(fr[i]) && sts[i] != CONF_NOT_SUPPORTED)
                T_CHECK(json_is_number(f) && json_number_value(f) == fr[i], "case %zu fraction", i);
            else T_CHECK(json_is_null(f), "case %zu: a non-finite or absent fraction must be null", i);
        }
        json_t *sum = json_object_get(j, "summary");
        T_CHECK(json_integer_value(json_object_get(sum, "FAIL")) == 1, "summary FAIL count");
        json_t *t0 = json_array_get(json_object_get(json_object_get(json_array_get(cs, 1), "comparison"), "tensors"), 0);
        T_CHECK(t0 && strcmp(json_string_value(json_object_get(t0, "tensor")), t.name) == 0, "tensor result not in report.json");
        json_decref(j);
    }
    char *x = slurp("junit.xml");
    T_CHECK(x != NULL, "junit.xml missing");
    if (x) {
        const char *e = xml_check(x);
        T_CHECK(e == NULL, "junit.xml not well-formed: %s", e ? e : "");
        T_CHECK(strstr(x, "<testsuites") && strstr(x, "<testsuite ") && strstr(x, "<failure") && strstr(x, "<skipped"),
                "junit.xml lacks testsuites/testsuite/failure/skipped");
        T_CHECK(strstr(x, "evil &lt;&amp;&quot;&apos;&gt; name@r2") != NULL, "hostile case name not escaped");
        T_CHECK(strstr(x, "tests=\"4\" failures=\"1\"") != NULL, "junit counts");
        T_CHECK(strstr(x, "step.noise.w&lt;1&gt;") != NULL, "failing tensor not named in the failure text");
        free(x);
    }
    if (system("command -v xmllint >/dev/null 2>&1") == 0)
        T_CHECK(system("xmllint --noout junit.xml") == 0, "xmllint rejects junit.xml");
    else
        printf("xmllint not installed: only the built-in well-formedness check ran\n");
    char *m = slurp("report.md");
    T_CHECK(m != NULL, "report.md missing");
    if (m) {
        int rows = 0;
        for (const char *p = m; (p = strstr(p, "\n| ")); p++) rows++;
        T_CHECK(rows >= 5, "report.md: expected a header and 4 case rows, found %d rows", rows);
        T_CHECK(strstr(m, "| FAIL |") != NULL, "report.md lacks the FAIL row");
        free(m);
    }
    /* escape helper: truncation never splits an entity */
    char small[8];
    conf_xml_escape(small, sizeof small, "ab&cd");
    T_CHECK(strcmp(small, "ab&amp;") == 0, "escape: '%s'", small);
    conf_xml_escape(small, sizeof small, "<<<<");
    T_CHECK(strcmp(small, "&lt;") == 0, "escape truncation: '%s'", small);
    /* UTF-8: valid multibyte characters pass whole; invalid bytes (stray continuation,
       overlong, surrogate, truncated sequence, 0xFF) become U+FFFD; control bytes vanish;
       truncation never splits a character. */
    {
        char big[128];
        conf_xml_escape(big, sizeof big, "\xC3\xA9" "t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
        T_CHECK(strcmp(big, "\xC3\xA9" "t\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80") == 0, "valid UTF-8 altered: '%s'", big);
        conf_xml_escape(big, sizeof big, "a\x80" "b\xC0\xAF" "c\xED\xA0\x80" "d\xFF" "e\x01\x1b\x7f\xE2\x82");
        T_CHECK(strcmp(big, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"
                            "d\xEF\xBF\xBD" "e\x7f\xEF\xBF\xBD\xEF\xBF\xBD") == 0,
                "invalid UTF-8 not replaced: '%s'", big);
        char s5[5];
        conf_xml_escape(s5, sizeof s5, "ab\xE2\x82\xAC");  /* 'ab' + 3-byte char does not fit in 4 */
        T_CHECK(strcmp(s5, "ab") == 0, "truncation split a character: '%s'", s5);
        /* a whole report with hostile bytes must still be well-formed, valid UTF-8 */
        conf_case_result h[1];
        memset(h, 0, sizeof h);
        conf_cmp_result_init(&h[0].cmp);
        snprintf(h[0].name, sizeof h[0].name, "bad\xFF\xC3(name\x02@r1");
        h[0].status = CONF_FAIL;
        snprintf(h[0].detail, sizeof h[0].detail, "candidate exited 1: \xE2\x82\x1b[31m\xC0\x80 boom");
        T_CHECK(conf_report_junit("junit-utf8.xml", "ci", h, 1) == DP_OK, "junit write: %s", dp_last_error());
        FILE *f = fopen("junit-utf8.xml", "rb");
        char x[8192];
        size_t nx = f ? fread(x, 1, sizeof x - 1, f) : 0;
        if (f) fclose(f);
        x[nx] = '\0';
        const char *why = xml_check(x);
        T_CHECK(why == NULL, "junit with hostile bytes not well-formed: %s", why ? why : "");
        for (size_t i = 0; i < nx;) {
            size_t l = (unsigned char)x[i] < 0x80 ? 1 : 0;
            if (!l) {
                /* re-check with the same rules the escaper must satisfy */
                unsigned c = (unsigned char)x[i];
                l = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
                for (size_t j = 1; l && j < l; j++)
                    if (i + j >= nx || ((unsigned char)x[i + j] & 0xC0) != 0x80) l = 0;
            }
            if (!l) { T_CHECK(0, "junit-utf8.xml: invalid UTF-8 at byte %zu", i); break; }
            i += l;
        }
        if (system("command -v xmllint >/dev/null 2>&1") == 0)
            T_CHECK(system("xmllint --noout junit-utf8.xml") == 0, "xmllint rejects junit-utf8.xml");
        conf_cmp_result_free(&h[0].cmp);
    }
    for (int i = 0; i < 4; i++) conf_cmp_result_free(&r[i].cmp);
    return t_finish();
}

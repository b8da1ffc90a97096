/* accountant/acct_claims.c — reading the claims files of `dpcert audit-accounting` (CSV or
 * JSON, docs/accounting.md section 8): every field checked, a bad row an INVALID claim with
 * its file line, never a crash; acct_claims_parse is the fuzz target's entry. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "accountant/acct_claims.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/fsutil.h"


static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    size_t i = 0;
    while (isspace((unsigned char)s[i])) i++;
    if (i) memmove(s, s + i, strlen(s + i) + 1);
}

static int parse_mech(const char *m) {
    return strcmp(m, "gaussian") == 0 ? ACCT_GAUSSIAN : strcmp(m, "laplace") == 0 ? ACCT_LAPLACE
         : strcmp(m, "pure") == 0 ? ACCT_PURE : -1;
}

/* where a claim is: "row N" (the N-th claim, from 1, the header and blank/comment lines not
 * counted), plus "(line L)" for CSV — the one convention of every audit message and column */
void acct_claim_where(char *b, size_t n, int row, int line) {
    if (line > 0) snprintf(b, n, "row %d (line %d)", row, line);
    else snprintf(b, n, "row %d", row);
}

/* validate one claim's values into c->err (empty when valid) */
static void check_claim(acct_claim *c, int row) {
    const char *f = NULL;
    double v = 0;
    if (!(c->seg.q > 0 && c->seg.q <= 1)) { f = "q"; v = c->seg.q; }
    else if (!(c->seg.param > 0) || !isfinite(c->seg.param)) { f = "sigma"; v = c->seg.param; }
    else if (c->seg.steps < 1) { f = "steps"; v = (double)c->seg.steps; }
    else if (!(c->delta >= 0 && c->delta < 1)) { f = "delta"; v = c->delta; }
    else if (!(c->claim >= 0) || !isfinite(c->claim)) { f = "epsilon"; v = c->claim; }
    char w[64];
    acct_claim_where(w, sizeof w, row, c->line);
    if (f) snprintf(c->err, sizeof c->err, "%s: field '%s' out of range (got %g)", w, f, v);
}

/* Split one CSV record (RFC 4180 dialect, docs §8) in place: fields separated by ','; a field may be
 * enclosed in double quotes, inside which ',' is literal and '""' is one '"'; whitespace around a
 * field (outside the quotes) is ignored. Returns the number of fields, or -1 with *why set. */
static int csv_split(char **fields, int maxf, char *line, const char **why) {
    int nf = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *start = p, *w = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) { *why = "unterminated quoted field (a newline inside quotes is not supported)"; return -1; }
                if (*p == '"') {
                    if (p[1] == '"') { *w++ = '"'; p += 2; continue; }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (*p == ' ' || *p == '\t') p++;
            if (*p && *p != ',') { *why = "text after the closing quote of a quoted field"; return -1; }
        } else {
            while (*p && *p != ',') {
                if (*p == '"') { *why = "a double quote inside an unquoted field (quote the whole field, '\"\"' for a quote)"; return -1; }
                *w++ = *p++;
            }
            while (w > start && (w[-1] == ' ' || w[-1] == '\t')) w--;
        }
        char end = *p;
        *w = 0;
        if (nf < maxf) fields[nf] = start;
        nf++;
        if (!end) break;
        p++;
    }
    return nf;
}

/* One CSV line into line[cap] (the '\n' kept): 1 read, 0 end of file, or an error naming the line:
 * a NUL byte (a CSV file is text) or a line of cap - 2 characters or more. */
static int csv_line(dp_status *st, char *line, size_t cap, FILE *fp, const char *path, int lineno) {
    size_t n = 0;
    int ch;
    while ((ch = getc(fp)) != EOF) {
        if (ch == 0) { *st = dp_error(DP_ERR_FORMAT, "%s: line %d: a NUL byte (a claims file is text)", path, lineno); return -1; }
        if (n + 2 >= cap) { *st = dp_error(DP_ERR_FORMAT, "%s: line %d: longer than %zu characters", path, lineno, cap - 3); return -1; }
        line[n++] = (char)ch;
        if (ch == '\n') break;
    }
    line[n] = 0;
    if (ferror(fp)) { *st = dp_error(DP_ERR_IO, "%s: read error", path); return -1; }
    return n > 0;
}

static dp_status read_claims_csv(acct_claim **out, int *n, FILE *fp, const char *path) {
    char line[4096];
    int cols[7] = {-1, -1, -1, -1, -1, -1, -1}; /* mechanism q param steps delta epsilon label */
    static const char *const NAMES[7] = {"mechanism", "q", "sigma", "steps", "delta", "epsilon", "label"};
    dp_status rst = DP_OK;
    int got = csv_line(&rst, line, sizeof line, fp, path, 1);
    if (got < 0) return rst;
    if (!got) return dp_error(DP_ERR_FORMAT, "%s: empty file", path);
    trim(line);
    char *hf[64];
    const char *why = NULL;
    int nc = csv_split(hf, 64, line, &why);
    if (nc < 0) return dp_error(DP_ERR_FORMAT, "%s: header (line 1): %s", path, why);
    if (nc > 64) return dp_error(DP_ERR_FORMAT, "%s: header (line 1): more than 64 columns", path);
    for (int i = 0; i < nc; i++) {
        const char *t = hf[i];
        for (int k = 0; k < 7; k++)
            if (strcmp(t, NAMES[k]) == 0 || (k == 2 && (strcmp(t, "scale") == 0 || strcmp(t, "epsilon0") == 0 || strcmp(t, "param") == 0)) || (k == 5 && strcmp(t, "claimed_epsilon") == 0)) {
                /* a column named twice (or two names of one column: sigma and scale) is ambiguous */
                if (cols[k] >= 0)
                    return dp_error(DP_ERR_FORMAT, "%s: header (line 1): column '%s' (column %d) duplicates '%s' (column %d)",
                                    path, t, i + 1, hf[cols[k]], cols[k] + 1);
                cols[k] = i;
            }
    }
    for (int k = 0; k < 6; k++)
        if (cols[k] < 0) return dp_error(DP_ERR_FORMAT, "%s: header (line 1): missing column '%s'", path, NAMES[k]);
    int cap = 16, m = 0, lineno = 1;
    acct_claim *c = dp_calloc((size_t)cap, sizeof *c);
    if (!c) return DP_ERR_NOMEM;
    for (;;) {
        lineno++;
        got = csv_line(&rst, line, sizeof line, fp, path, lineno);
        if (got < 0) { dp_free(c); return rst; }
        if (!got) break;
        trim(line);
        if (!line[0] || line[0] == '#') continue;
        if (m == cap) {
            acct_claim *nc2 = dp_realloc(c, (size_t)cap * 2 * sizeof *c);
            if (!nc2) { dp_free(c); return dp_error(DP_ERR_NOMEM, "out of memory"); }
            c = nc2; cap *= 2;
        }
        acct_claim *x = &c[m];
        memset(x, 0, sizeof *x);
        x->line = lineno;
        int row = m + 1;
        m++;
        char w[64];
        acct_claim_where(w, sizeof w, row, lineno);
        char *fields[64];
        int nf = csv_split(fields, 64, line, &why);
        if (nf < 0) { snprintf(x->err, sizeof x->err, "%s: malformed CSV: %s", w, why); continue; }
        if (nf > 64) nf = 64;
        int bad = 0;
        for (int k = 0; k < 6 && !bad; k++) {
            if (cols[k] >= nf) { snprintf(x->err, sizeof x->err, "%s: missing field '%s'", w, NAMES[k]); bad = 1; break; }
            const char *v = fields[cols[k]];
            if (k == 0) {
                int mm = parse_mech(v);
                if (mm < 0) { snprintf(x->err, sizeof x->err, "%s: field 'mechanism': unknown '%s' (expected gaussian, laplace or pure)", w, v); bad = 1; }
                else x->seg.mech = (acct_mech)mm;
                continue;
            }
            double d; /* the option parser's rules: finite, no ERANGE underflow (1e-400 is not 0) */
            char fw[40];
            snprintf(fw, sizeof fw, "field '%s'", NAMES[k]);
            if (dp_parse_double(&d, fw, v) != DP_OK) {
                snprintf(x->err, sizeof x->err, "%s: %s", w, dp_last_error());
                dp_clear_error();
                bad = 1;
                break;
            }
            if (k == 1) x->seg.q = d;
            else if (k == 2) x->seg.param = d;
            else if (k == 3) {
                if (d != floor(d) || d < 1 || d > 1e12) { snprintf(x->err, sizeof x->err, "%s: field 'steps': must be an integer >= 1 (got %s)", w, v); bad = 1; }
                else x->seg.steps = (int64_t)d;
            } else if (k == 4) x->delta = d;
            else x->claim = d;
        }
        if (cols[6] >= 0 && cols[6] < nf) snprintf(x->label, sizeof x->label, "%s", fields[cols[6]]);
        if (!bad) check_claim(x, row);
    }
    *out = c;
    *n = m;
    return DP_OK;
}

static dp_status read_claims_json(acct_claim **out, int *n, const char *buf, size_t len, const char *path) {
    json_error_t err;
    DP_TRY(dp_json_numbers_check(buf, len, path));
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) return dp_error(DP_ERR_FORMAT, "%s: line %d: %s", path, err.line, err.text);
    json_t *arr = json_is_object(root) ? json_object_get(root, "claims") : root;
    if (!json_is_array(arr)) { json_decref(root); return dp_error(DP_ERR_FORMAT, "%s: expected an array of claims (or {\"claims\": [...]})", path); }
    size_t m = json_array_size(arr);
    acct_claim *c = dp_calloc(m ? m : 1, sizeof *c);
    if (!c) { json_decref(root); return DP_ERR_NOMEM; }
    for (size_t i = 0; i < m; i++) {
        json_t *o = json_array_get(arr, i);
        acct_claim *x = &c[i];
        int row = (int)i + 1;
        if (!json_is_object(o)) { snprintf(x->err, sizeof x->err, "row %d: not an object", row); continue; }
        json_t *mm = json_object_get(o, "mechanism");
        int mech = json_is_string(mm) ? parse_mech(json_string_value(mm)) : -1;
        if (mech < 0) { snprintf(x->err, sizeof x->err, "row %d: field 'mechanism': missing or unknown", row); continue; }
        x->seg.mech = (acct_mech)mech;
        const char *keys[5] = {"q", mech == 0 ? "sigma" : mech == 1 ? "scale" : "epsilon0", "steps", "delta", "epsilon"};
        int bad = 0;
        for (int k = 0; k < 5 && !bad; k++) {
            json_t *v = json_object_get(o, keys[k]);
            if (!v && k == 1) v = json_object_get(o, "sigma");
            if (!v && k == 4) v = json_object_get(o, "claimed_epsilon");
            if (!json_is_number(v)) { snprintf(x->err, sizeof x->err, "row %d: field '%s': missing or not a number", row, keys[k]); bad = 1; break; }
            double d = json_number_value(v);
            if (k == 0) x->seg.q = d;
            else if (k == 1) x->seg.param = d;
            else if (k == 2) {
                if (d != floor(d) || d < 1 || d > 1e12) { snprintf(x->err, sizeof x->err, "row %d: field 'steps': must be an integer >= 1 (got %g)", row, d); bad = 1; }
                else x->seg.steps = (int64_t)d;
            } else if (k == 3) x->delta = d;
            else x->claim = d;
        }
        json_t *lb = json_object_get(o, "label");
        if (json_is_string(lb)) snprintf(x->label, sizeof x->label, "%s", json_string_value(lb));
        if (!bad) check_claim(x, row);
    }
    json_decref(root);
    *out = c;
    *n = (int)m;
    return DP_OK;
}

/* A claims file image: JSON when its first non-blank byte is '[' or '{', else CSV. */
dp_status acct_claims_read(acct_claim **out, int *n, const char *buf, size_t len, const char *path) {
    size_t i = 0;
    while (i < len && isspace((unsigned char)buf[i])) i++;
    if (i < len && (buf[i] == '[' || buf[i] == '{')) return read_claims_json(out, n, buf, len, path);
    if (len == 0) return dp_error(DP_ERR_FORMAT, "%s: empty file", path);
    FILE *fp = fmemopen((void *)buf, len, "r");
    if (!fp) return dp_error(DP_ERR_NOMEM, "%s: out of memory", path);
    dp_status st = read_claims_csv(out, n, fp, path);
    fclose(fp);
    return st;
}

dp_status acct_claims_parse(int *nclaims, int *ninvalid, const char *buf, size_t len, const char *name) {
    acct_claim *cl = NULL;
    int n = 0;
    DP_TRY(acct_claims_read(&cl, &n, buf, len, name));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += cl[i].err[0] != 0;
    dp_free(cl);
    *nclaims = n;
    *ninvalid = bad;
    return DP_OK;
}

/* common/cli.c — option parsing and validation. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

dp_status dp_parse_double(double *out, const char *what, const char *s) {
    if (!s || !*s) return dp_error(DP_ERR_USAGE, "%s: missing value", what);
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end) return dp_error(DP_ERR_INVALID, "%s: '%s' is not a number", what, s);
    if (isnan(v)) return dp_error(DP_ERR_INVALID, "%s: NaN is not allowed", what);
    if (isinf(v) || (errno == ERANGE && fabs(v) > 1.0))
        return dp_error(DP_ERR_INVALID, "%s: '%s' is not a finite number (overflows a double)", what, s);
    /* Underflow: strtod returns 0 or a subnormal with ERANGE ("1e-400" would silently
     * become 0, e.g. no noise). Only an exact zero spelled as zero is zero. */
    if (errno == ERANGE || (v != 0.0 && !isnormal(v)))
        return dp_error(DP_ERR_INVALID, "%s: '%s' underflows a double (magnitude below %g is not representable exactly)",
                        what, s, DBL_MIN);
    if (end == s || isspace((unsigned char)s[0]))
        return dp_error(DP_ERR_INVALID, "%s: '%s' is not a number", what, s);
    *out = v;
    return DP_OK;
}

dp_status dp_json_numbers_check(const char *buf, size_t len, const char *what) {
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        char c = buf[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') { in_str = 1; continue; }
        if (c != '-' && !(c >= '0' && c <= '9')) continue;
        size_t j = i;
        while (j < len && (buf[j] == '-' || buf[j] == '+' || buf[j] == '.' || buf[j] == 'e' || buf[j] == 'E' ||
                           (buf[j] >= '0' && buf[j] <= '9')))
            j++;
        char tok[64];
        if (j - i >= sizeof tok) return dp_error(DP_ERR_FORMAT, "%s: a number of %zu characters", what, j - i);
        memcpy(tok, buf + i, j - i);
        tok[j - i] = 0;
        double v;
        if (strpbrk(tok, ".eE") && dp_parse_double(&v, what, tok) != DP_OK) { /* integers: jansson checks range */
            dp_status st = dp_error(DP_ERR_FORMAT, "%s", dp_last_error());
            return st;
        }
        i = j - 1;
    }
    return DP_OK;
}

dp_status dp_parse_i64(int64_t *out, const char *what, const char *s) {
    if (!s || !*s) return dp_error(DP_ERR_USAGE, "%s: missing value", what);
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end || end == s || isspace((unsigned char)s[0]))
        return dp_error(DP_ERR_INVALID, "%s: '%s' is not an integer", what, s);
    if (errno == ERANGE)
        return dp_error(DP_ERR_INVALID, "%s: '%s' is out of range (a 64-bit integer is in [%lld, %lld])", what, s,
                        (long long)INT64_MIN, (long long)INT64_MAX);
    *out = v;
    return DP_OK;
}

dp_status dp_parse_u64(uint64_t *out, const char *what, const char *s) {
    if (!s || !*s) return dp_error(DP_ERR_USAGE, "%s: missing value", what);
    if (s[0] == '-') return dp_error(DP_ERR_INVALID, "%s: '%s' must not be negative", what, s);
    /* strtoull skips leading white space and accepts a sign (wrapping "-1" to 2^64-1): only
     * a string that starts with a digit is an unsigned integer here. */
    if (s[0] < '0' || s[0] > '9') return dp_error(DP_ERR_INVALID, "%s: '%s' is not an unsigned integer", what, s);
    char *end;
    errno = 0;
    int base = (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) ? 16 : 10;
    unsigned long long v = strtoull(s, &end, base);
    if (*end || end == s) return dp_error(DP_ERR_INVALID, "%s: '%s' is not an unsigned integer", what, s);
    if (errno == ERANGE) return dp_error(DP_ERR_INVALID, "%s: '%s' does not fit in 64 bits", what, s);
    *out = v;
    return DP_OK;
}

static dp_status parse_list(void *out, int is_double, size_t max, size_t *n, const char *what, const char *s) {
    if (!s || !*s) return dp_error(DP_ERR_USAGE, "%s: missing value", what);
    char buf[4096];
    if (strlen(s) >= sizeof buf) return dp_error(DP_ERR_INVALID, "%s: list too long", what);
    strcpy(buf, s);
    size_t k = 0;
    char *save = NULL;
    if (buf[0] == ',' || buf[strlen(buf) - 1] == ',' || strstr(buf, ",,"))
        return dp_error(DP_ERR_INVALID, "%s: empty element in list '%s'", what, s);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (k >= max) return dp_error(DP_ERR_INVALID, "%s: more than %zu elements", what, max);
        dp_status st = is_double ? dp_parse_double((double *)out + k, what, tok)
                                 : dp_parse_i64((int64_t *)out + k, what, tok);
        if (st != DP_OK) return st;
        k++;
    }
    *n = k;
    return DP_OK;
}

dp_status dp_parse_double_list(double *out, size_t max, size_t *n, const char *what, const char *s) {
    return parse_list(out, 1, max, n, what, s);
}
dp_status dp_parse_i64_list(int64_t *out, size_t max, size_t *n, const char *what, const char *s) {
    return parse_list(out, 0, max, n, what, s);
}

dp_status dp_parse_pow2(double *out, const char *what, const char *s) {
    double v;
    if (s && s[0] == '2' && s[1] == '^') {
        int64_t k;
        DP_TRY(dp_parse_i64(&k, what, s + 2));
        if (k < -1022 || k > 1023)
            return dp_error(DP_ERR_INVALID, "%s: 2^%lld is not a finite normal double (K must be in [-1022, 1023])", what,
                            (long long)k);
        v = ldexp(1.0, (int)k);
    } else {
        DP_TRY(dp_parse_double(&v, what, s));
    }
    int e;
    if (!(v > 0) || frexp(v, &e) != 0.5)
        return dp_error(DP_ERR_INVALID, "%s: '%s' is not a positive finite power of two (e.g. 1024 or 2^10)", what, s);
    *out = v;
    return DP_OK;
}

dp_status dp_parse_choice(int *out, const char *what, const char *s, const char *const *names) {
    char choices[512] = "";
    for (int i = 0; names[i]; i++) {
        if (strcmp(s, names[i]) == 0) { *out = i; return DP_OK; }
        size_t l = strlen(choices);
        snprintf(choices + l, sizeof choices - l, "%s%s", i ? "|" : "", names[i]);
    }
    return dp_error(DP_ERR_USAGE, "%s: unknown value '%s' (expected %s)", what, s, choices);
}

dp_status dp_check_min(const char *what, double v, double lo, int inclusive) {
    if (isnan(v) || (inclusive ? v < lo : v <= lo))
        return dp_error(DP_ERR_INVALID, "%s must be %s %g (got %g)", what, inclusive ? ">=" : ">", lo, v);
    return DP_OK;
}

dp_status dp_check_range(const char *what, double v, double lo, int lo_incl, double hi, int hi_incl) {
    int ok = !isnan(v) && (lo_incl ? v >= lo : v > lo) && (hi_incl ? v <= hi : v < hi);
    if (!ok)
        return dp_error(DP_ERR_INVALID, "%s must be in %c%g, %g%c (got %g)", what, lo_incl ? '[' : '(', lo, hi,
                        hi_incl ? ']' : ')', v);
    return DP_OK;
}

dp_status dp_opts_parse(const dp_opt *opts, size_t nopts, int argc, char **argv, char **pos, int max_pos,
                        int *npos, int *help) {
    int np = 0;
    int given[256] = {0};
    if (nopts > 256) return dp_error(DP_ERR_INTERNAL, "too many options in one table");
    if (help) *help = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) && help) { *help = 1; continue; }
        if (a[0] != '-' || a[1] == '\0' || (a[1] != '-' && (a[1] < 'a' || a[1] > 'z'))) {
            /* positional (also negative numbers like "-3" are positional) */
            if (np >= max_pos) return dp_error(DP_ERR_USAGE, "unexpected argument '%s'", a);
            pos[np++] = argv[i];
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        size_t k;
        for (k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == nl && strncmp(opts[k].name, a, nl) == 0) break;
        if (k == nopts) return dp_error(DP_ERR_USAGE, "unknown option '%.*s' (see --help)", (int)nl, a);
        if (given[k]) return dp_error(DP_ERR_USAGE, "option %s given more than once", opts[k].name);
        given[k] = 1;
        if (opts[k].seen) *opts[k].seen = 1;
        if (opts[k].type == DP_OPT_FLAG) {
            if (eq) return dp_error(DP_ERR_USAGE, "option %s takes no value", opts[k].name);
            *(int *)opts[k].dest = 1;
            continue;
        }
        const char *v;
        if (eq) v = eq + 1;
        else {
            if (i + 1 >= argc) return dp_error(DP_ERR_USAGE, "option %s needs a value", opts[k].name);
            v = argv[++i];
        }
        if (!*v) return dp_error(DP_ERR_USAGE, "option %s needs a value", opts[k].name);
        switch (opts[k].type) {
        case DP_OPT_STRING: *(const char **)opts[k].dest = v; break;
        case DP_OPT_DOUBLE: DP_TRY(dp_parse_double(opts[k].dest, opts[k].name, v)); break;
        case DP_OPT_INT: DP_TRY(dp_parse_i64(opts[k].dest, opts[k].name, v)); break;
        case DP_OPT_U64: DP_TRY(dp_parse_u64(opts[k].dest, opts[k].name, v)); break;
        default: return dp_error(DP_ERR_INTERNAL, "bad option type");
        }
    }
    if (npos) *npos = np;
    return DP_OK;
}

void dp_opts_print_help(const dp_opt *opts, size_t nopts) {
    for (size_t k = 0; k < nopts; k++) {
        const char *arg = opts[k].type == DP_OPT_FLAG ? "" : opts[k].type == DP_OPT_STRING ? " S"
                        : opts[k].type == DP_OPT_DOUBLE ? " X" : " N";
        char left[64];
        snprintf(left, sizeof left, "%s%s", opts[k].name, arg);
        printf("  %-24s %s\n", left, opts[k].help ? opts[k].help : "");
    }
}

void dp_cli_reveal_noise_key(const char *cmd, uint64_t key) {
    fprintf(stderr,
            "dpcert %s: noise key %llu (revealed by --reveal-noise-key and exported with the run: whoever holds "
            "it can regenerate, and subtract, the noise)\n",
            cmd, (unsigned long long)key);
}

int dp_cli_fail(const char *cmd, dp_status st) {
    const char *msg = dp_last_error();
    /* DP_ERR_NOT_SUPPORTED shares exit code 3 with internal errors; the fixed prefix
     * "not supported: " lets a driver (the conformance runner) tell them apart. */
    fprintf(stderr, "dpcert %s: %s%s\n", cmd, st == DP_ERR_NOT_SUPPORTED ? "not supported: " : "",
            msg[0] ? msg : dp_status_name(st));
    return dp_status_exit_code(st);
}

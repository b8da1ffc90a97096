/* attacks/mia_data.c — the populations of `dpcert mia --dataset NAME|FILE` (docs/audits.md
 * "Data"): a registered real data set shipped under attacks/data/ (checked against its
 * SHA-256), or any file of the same CSV layout. Layout (scikit-learn's datasets/data):
 * line 1 `n,d,class_0,...,class_{K-1}` (K >= 2 class names), then n lines of d numbers and
 * an integer label in [0, K). Features are standardised per column over the rows used:
 * (x - mean) / sd with the population sd (divisor n); a constant column becomes 0. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attacks/mia.h"
#include "common/alloc.h"
#include "common/fsutil.h"
#include "common/hash.h"

#define MIA_DATA_NAME_(id, name, file, sha) name,
const char *const mia_dataset_names[] = {MIA_DATASETS(MIA_DATA_NAME_) NULL};
#undef MIA_DATA_NAME_
#define MIA_DATA_FILE_(id, name, file, sha) file,
static const char *const data_files[] = {MIA_DATASETS(MIA_DATA_FILE_) NULL};
#undef MIA_DATA_FILE_
#define MIA_DATA_SHA_(id, name, file, sha) sha,
static const char *const data_sha[] = {MIA_DATASETS(MIA_DATA_SHA_) NULL};
#undef MIA_DATA_SHA_

/* One number and its separator (',' or, for the last field of a line, the end of the line);
 * *p advanced past both. */
static dp_status field(double *v, const char **p, const char *path, int64_t line, int last) {
    char *end;
    errno = 0;
    *v = strtod(*p, &end);
    if (end == *p || errno == ERANGE || !isfinite(*v))
        return dp_error(DP_ERR_FORMAT, "--dataset %s: line %lld: expected a finite number", path, (long long)line);
    while (*end == ' ' || *end == '\t' || *end == '\r') end++;
    if (!last && *end != ',')
        return dp_error(DP_ERR_FORMAT, "--dataset %s: line %lld: expected ',' after a number (too few fields?)", path,
                        (long long)line);
    if (last && *end != '\n' && *end != 0)
        return dp_error(DP_ERR_FORMAT, "--dataset %s: line %lld: expected the end of the line (too many fields?)", path,
                        (long long)line);
    *p = *end ? end + 1 : end;
    return DP_OK;
}

static dp_status parse(ref_dataset *d, int *classes, const char *buf, const char *path, int64_t max_rows) {
    const char *p = buf;
    double n0, dd;
    DP_TRY(field(&n0, &p, path, 1, 0));
    DP_TRY(field(&dd, &p, path, 1, 0));
    if (n0 < 1 || n0 > 1e7 || n0 != floor(n0) || dd < 1 || dd > 4096 || dd != floor(dd))
        return dp_error(DP_ERR_FORMAT, "--dataset %s: line 1: n = %g and d = %g must be integers in [1, 1e7], [1, 4096]",
                        path, n0, dd);
    int k = 0;
    while (*p && *p != '\n') { /* class names up to the end of line 1 */
        k++;
        while (*p && *p != ',' && *p != '\n') p++;
        if (*p == ',') p++;
    }
    if (k < 2) return dp_error(DP_ERR_FORMAT, "--dataset %s: line 1 names %d classes (at least 2)", path, k);
    if (*p) p++;
    int64_t n = (int64_t)n0, in = (int64_t)dd, rows = max_rows > 0 && max_rows < n ? max_rows : n;
    if (max_rows > n)
        return dp_error(DP_ERR_INVALID, "--population %lld: the data set %s has %lld examples", (long long)max_rows,
                        path, (long long)n);
    memset(d, 0, sizeof *d);
    d->kind = REF_MLP;
    d->in = (int)in;
    d->n = rows;
    d->x = dp_malloc((size_t)(rows * in) * sizeof *d->x);
    d->y = dp_malloc((size_t)rows * sizeof *d->y);
    if (!d->x || !d->y) { ref_dataset_free(d); return DP_ERR_NOMEM; }
    dp_status st = DP_OK;
    for (int64_t i = 0; st == DP_OK && i < n; i++) {
        int64_t line = i + 2;
        double v;
        for (int64_t j = 0; st == DP_OK && j < in; j++) {
            st = field(&v, &p, path, line, 0);
            if (st == DP_OK && i < rows) d->x[i * in + j] = v;
        }
        if (st == DP_OK) st = field(&v, &p, path, line, 1);
        if (st == DP_OK && (v != floor(v) || v < 0 || v >= k))
            st = dp_error(DP_ERR_FORMAT, "--dataset %s: line %lld: label %g is not an integer in [0, %d)", path,
                          (long long)line, v, k);
        if (st == DP_OK && i < rows) d->y[i] = (int32_t)v;
    }
    while (st == DP_OK && *p && isspace((unsigned char)*p)) p++;
    if (st == DP_OK && *p) st = dp_error(DP_ERR_FORMAT, "--dataset %s: more than n = %lld rows", path, (long long)n);
    for (int64_t j = 0; st == DP_OK && j < in; j++) { /* standardise */
        double m = 0, s = 0;
        for (int64_t i = 0; i < rows; i++) m += d->x[i * in + j];
        m /= (double)rows;
        for (int64_t i = 0; i < rows; i++) s += (d->x[i * in + j] - m) * (d->x[i * in + j] - m);
        s = sqrt(s / (double)rows);
        for (int64_t i = 0; i < rows; i++) d->x[i * in + j] = s > 0 ? (d->x[i * in + j] - m) / s : 0.0;
    }
    if (st != DP_OK) ref_dataset_free(d);
    *classes = k;
    return st;
}

dp_status mia_dataset_load(ref_dataset *d, int *classes, const char *spec, int64_t max_rows) {
    char path[4200];
    int reg = -1;
    for (int i = 0; mia_dataset_names[i]; i++)
        if (strcmp(spec, mia_dataset_names[i]) == 0) reg = i;
    if (reg >= 0) { /* attacks/data/FILE of the source tree (as `dpcert conform` finds its cases) */
        char rel[512];
        snprintf(rel, sizeof rel, "attacks/data/%s", data_files[reg]);
        dp_find_tree_path(path, sizeof path, rel, NULL, 0);
    }
    else snprintf(path, sizeof path, "%s", spec);
    char *buf = NULL;
    size_t len = 0;
    DP_TRY(dp_read_file_max(&buf, &len, "--dataset", path, DP_MAX_TEXT_INPUT));
    dp_status st = DP_OK;
    if (reg >= 0) { /* a registered data set is exactly the shipped file */
        char hex[DP_SHA256_HEX_LEN];
        st = dp_sha256_buf_hex(hex, buf, len);
        if (st == DP_OK && strcmp(hex, data_sha[reg]) != 0)
            st = dp_error(DP_ERR_FORMAT, "--dataset %s: %s has SHA-256 %s, expected %s (modified?)", spec, path, hex,
                          data_sha[reg]);
    }
    if (st == DP_OK) st = parse(d, classes, buf, path, max_rows);
    dp_free(buf);
    return st;
}

/* conformance/compare/compare_paths.c — comparing two files or two export directories
 * (step-NNNNNN.safetensors each; docs/conformance.md): the candidate's declared precision
 * against the options, every step of the reference present in the candidate, the bounds of
 * one step's update carried into the next (compare_step.c compares each step). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/alloc.h"
#include "common/safetensors.h"
#include "conformance/compare/compare_int.h"

/* The candidate's declared precision (metadata "dtype", docs/precision.md: f64, f32, or bf16 /
 * fp16 = half storage with f32 compute) against the options: taken when none was given,
 * refused (DP_ERR_INVALID, exit 2) when the given one contradicts it (issue 29 item 13: --dtype
 * bf16 on an export made with --precision bf16 formed NaN bounds). */
static dp_status declared_precision(conf_cmp_opts *o, const dp_tensor_set *cand, const char *cand_path) {
    const char *d = dp_tset_meta(cand, "dtype");
    if (!d) return DP_OK;
    conf_cmp_opts m = *o;
    if (strcmp(d, "f64") == 0) { m.cand_dtype = DP_F64; m.mixed = 0; }
    else if (strcmp(d, "f32") == 0) { m.cand_dtype = DP_F32; m.mixed = 0; }
    else if (strcmp(d, "bf16") == 0 || strcmp(d, "fp16") == 0) {
        m.cand_dtype = DP_F32;
        m.mixed = 1;
        m.half_dtype = d[0] == 'b' ? DP_BF16 : DP_F16;
    } else {
        return dp_error(DP_ERR_FORMAT, "%s: metadata dtype '%s' is not a precision (f64, f32, bf16, fp16)", cand_path, d);
    }
    if (!o->dtype_given) {
        *o = m;
        return DP_OK;
    }
    if (o->cand_dtype != m.cand_dtype || o->mixed != m.mixed || (m.mixed && o->half_dtype != m.half_dtype)) {
        const char *given = o->mixed ? (o->half_dtype == DP_F16 ? "--precision fp16" : "--precision bf16")
                          : o->cand_dtype == DP_F64 ? "--dtype f64" : o->cand_dtype == DP_F32 ? "--dtype f32" : "--dtype bf16";
        const char *want = m.mixed ? (m.half_dtype == DP_F16 ? "--precision fp16" : "--precision bf16")
                         : m.cand_dtype == DP_F64 ? "--dtype f64 (the default)" : "--dtype f32";
        return dp_error(DP_ERR_INVALID, "%s contradicts the candidate's declared precision (%s: metadata dtype=%s%s): "
                        "compare with %s, or give no precision option", given, cand_path, d,
                        m.mixed ? ", the mixed-precision recipe: half storage, f32 compute" : "", want);
    }
    return DP_OK;
}

static int is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted step-*.safetensors names of a directory. */
static dp_status list_steps(char ***names, size_t *n, const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return dp_error(DP_ERR_IO, "cannot open directory %s", dir);
    char **v = NULL;
    size_t k = 0, cap = 0;
    struct dirent *e;
    dp_status st = DP_OK;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "step-", 5) != 0 || l < 17 || strcmp(e->d_name + l - 12, ".safetensors") != 0) continue;
        if ((st = DP_GROW(v, cap, k + 1, 16, "step list")) != DP_OK) break;
        v[k] = dp_strdup(e->d_name);
        if (!v[k]) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
        k++;
    }
    closedir(d);
    if (st != DP_OK) {
        for (size_t i = 0; i < k; i++) dp_free(v[i]);
        dp_free(v);
        return st;
    }
    if (k) qsort(v, k, sizeof *v, cmp_str);
    *names = v;
    *n = k;
    return DP_OK;
}

dp_status conf_compare_paths(conf_cmp_result *out, const char *ref_path, const char *cand_path,
                             const conf_cmp_opts *o) {
    int rd = is_dir(ref_path), cd = is_dir(cand_path);
    dp_tensor_set rs, cs;
    conf_cmp_opts eff = *o;
    if (!rd && !cd) {
        DP_TRY(dp_st_read(&rs, ref_path));
        dp_status st = dp_st_read(&cs, cand_path);
        if (st != DP_OK) { dp_tset_free(&rs); return st; }
        st = declared_precision(&eff, &cs, cand_path);
        if (st == DP_OK) st = conf_compare_step(out, &rs, &cs, &eff, "", NULL, NULL);
        dp_tset_free(&rs);
        dp_tset_free(&cs);
        return st;
    }
    if (!rd || !cd)
        return dp_error(DP_ERR_INVALID, "%s is a %s but %s is a %s: compare two files or two export directories",
                        ref_path, rd ? "directory" : "file", cand_path, cd ? "directory" : "file");
    char **names = NULL;
    size_t n = 0;
    DP_TRY(list_steps(&names, &n, ref_path));
    dp_status st = DP_OK;
    if (n == 0) st = dp_error(DP_ERR_FORMAT, "no step-*.safetensors in the reference export %s", ref_path);
    conf_bstore carry = {0};
    for (size_t i = 0; i < n && st == DP_OK; i++) {
        char rp[4096], cp[4096], pfx[64];
        snprintf(rp, sizeof rp, "%s/%s", ref_path, names[i]);
        snprintf(cp, sizeof cp, "%s/%s", cand_path, names[i]);
        snprintf(pfx, sizeof pfx, "%.*s/", (int)(strlen(names[i]) - 12), names[i]);
        if ((st = dp_st_read(&rs, rp)) != DP_OK) break;
        struct stat sb;
        if (stat(cp, &sb) != 0) {
            dp_tset_free(&rs);
            conf_tensor_result t;
            conf_tr_init(&t, pfx, "(step file)");
            t.status = CONF_FAIL;
            t.worst_frac = INFINITY;
            snprintf(t.msg, sizeof t.msg, "%s missing in the candidate export %s", names[i], cand_path);
            st = conf_cmp_result_push(out, &t);
            break; /* later steps depend on this one */
        }
        if ((st = dp_st_read(&cs, cp)) != DP_OK) { dp_tset_free(&rs); break; }
        eff = *o; /* every step's declared precision */
        st = declared_precision(&eff, &cs, cp);
        if (st == DP_OK) st = conf_compare_step(out, &rs, &cs, &eff, pfx, i ? &carry : NULL, &carry);
        dp_tset_free(&rs);
        dp_tset_free(&cs);
    }
    conf_bstore_free(&carry);
    for (size_t i = 0; i < n; i++) dp_free(names[i]);
    dp_free(names);
    return st;
}

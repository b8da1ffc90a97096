/* conformance/conform/cases.c — conformance cases as data (conformance/cases/NAME.json,
 * schema in docs/conformance.md), loaded with jansson. Unknown keys, wrong types and
 * out-of-range values are DP_ERR_FORMAT naming the file and the key. */
#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "common/fsutil.h"
#include "conformance/conform/conform.h"
#include "optimized/dpsgd.h"

static void free_argv(char **v, size_t n) {
    for (size_t i = 0; i < n; i++) dp_free(v[i]);
    dp_free(v);
}

void conf_case_free(conf_case *c) {
    free_argv(c->args, c->nargs);
    free_argv(c->ref_args, c->nref);
    free_argv(c->cand_args, c->ncand);
    json_decref(c->json);
    memset(c, 0, sizeof *c);
}

#define FERR(...) dp_error_context(dp_error(DP_ERR_FORMAT, __VA_ARGS__), "case %s", path)

static dp_status push_arg(char ***v, size_t *n, const char *s) {
    char **p = dp_realloc(*v, (*n + 1) * sizeof *p);
    if (!p) return dp_error(DP_ERR_NOMEM, "out of memory");
    *v = p;
    p[*n] = dp_strdup(s);
    if (!p[*n]) return dp_error(DP_ERR_NOMEM, "out of memory");
    (*n)++;
    return DP_OK;
}

/* {"model": "mlp", "q": 0.125, "tied": true, "hidden": "7,5"} -> --model mlp --q 0.125 --tied --hidden 7,5 */
static dp_status obj_to_argv(char ***v, size_t *n, json_t *o, const char *path, const char *key) {
    if (!json_is_object(o)) return FERR("'%s' must be an object of option: value", key);
    const char *k;
    json_t *val;
    json_object_foreach(o, k, val) {
        char opt[128], num[40]; /* a name is at most 100 characters (checked); a number at most 24 */
        if (!k[0] || strlen(k) > 100 || k[0] == '-') return FERR("'%s': bad option name '%s' (write it without --)", key, k);
        snprintf(opt, sizeof opt, "--%s", k);
        if (json_is_true(val)) { DP_TRY(push_arg(v, n, opt)); continue; }
        if (json_is_false(val)) continue;
        const char *arg = num; /* a string value is passed whole, whatever its length (no cut) */
        if (json_is_string(val)) {
            arg = json_string_value(val);
            if (strlen(arg) != json_string_length(val)) return FERR("'%s.%s' contains a NUL character", key, k);
        } else if (json_is_integer(val)) snprintf(num, sizeof num, "%lld", (long long)json_integer_value(val));
        else if (json_is_real(val)) snprintf(num, sizeof num, "%.17g", json_real_value(val));
        else return FERR("'%s.%s' must be a string, number or boolean", key, k);
        DP_TRY(push_arg(v, n, opt));
        DP_TRY(push_arg(v, n, arg));
    }
    return DP_OK;
}

static dp_status get_str(char *out, size_t len, json_t *root, const char *key, const char *dflt, const char *path,
                         const char *const *allowed) {
    json_t *v = json_object_get(root, key);
    if (!v) {
        if (!dflt) return FERR("missing required key '%s'", key);
        snprintf(out, len, "%s", dflt);
        return DP_OK;
    }
    if (!json_is_string(v)) return FERR("'%s' must be a string", key);
    if (strlen(json_string_value(v)) >= len) return FERR("'%s' is too long", key);
    snprintf(out, len, "%s", json_string_value(v));
    if (allowed) {
        for (const char *const *a = allowed; *a; a++)
            if (strcmp(*a, out) == 0) return DP_OK;
        return FERR("'%s' has an unknown value '%s'", key, out);
    }
    return DP_OK;
}

/* An optional number in [lo, hi] (lo_open: lo excluded). Absent: *present = 0 and *out = dflt;
 * absence is never encoded in the value (a negative value is an error, not "absent"). */
static dp_status get_num(double *out, int *present, json_t *root, const char *key, double dflt, double lo, int lo_open,
                         double hi, const char *path) {
    json_t *v = json_object_get(root, key);
    if (present) *present = v != NULL;
    if (!v) { *out = dflt; return DP_OK; }
    if (!json_is_number(v)) return FERR("'%s' must be a number", key);
    *out = json_number_value(v);
    if (!isfinite(*out) || (lo_open ? !(*out > lo) : !(*out >= lo)) || !(*out <= hi))
        return FERR("'%s' must be a number in %c%g, %g] (got %.17g)", key, lo_open ? '(' : '[', lo, hi, *out);
    return DP_OK;
}

/* An optional JSON integer (not 2.5, not 1e300, not "16") in [lo, hi]. */
static dp_status get_int(int64_t *out, int *present, json_t *root, const char *key, int64_t dflt, int64_t lo,
                         int64_t hi, const char *path) {
    json_t *v = json_object_get(root, key);
    if (present) *present = v != NULL;
    if (!v) { *out = dflt; return DP_OK; }
    if (!json_is_integer(v)) return FERR("'%s' must be an integer (a JSON number without fraction or exponent)", key);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return FERR("'%s' must be an integer in [%lld, %lld] (got %lld)", key, (long long)lo,
                                      (long long)hi, (long long)x);
    *out = (int64_t)x;
    return DP_OK;
}

/* append a value to the argument list of both sides as "--opt value" */
static dp_status push_opt(conf_case *c, const char *opt, const char *val) {
    DP_TRY(push_arg(&c->args, &c->nargs, opt));
    return push_arg(&c->args, &c->nargs, val);
}

dp_status conf_case_load(conf_case *c, const char *path) {
    memset(c, 0, sizeof *c);
    char *buf = NULL;
    size_t len = 0;
    DP_TRY(dp_read_file_max(&buf, &len, "case file", path, DP_MAX_TEXT_INPUT));
    dp_status st = conf_case_parse(c, buf, len, path);
    dp_free(buf);
    return st;
}
/* Over 150 lines (one reason): every key of the case schema checked in one pass, in the order of
 * docs/conformance.md, so that an unknown or ill-typed key is refused where it is read. */

dp_status conf_case_parse(conf_case *c, const char *buf, size_t len, const char *path) {
    memset(c, 0, sizeof *c);
    json_error_t err;
    {
        char what[600];
        snprintf(what, sizeof what, "case %.500s", path);
        DP_TRY(dp_json_numbers_check(buf, len, what));
    }
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) return dp_error(DP_ERR_FORMAT, "case %s: invalid JSON at line %d: %s", path, err.line, err.text);
    dp_status st = DP_OK;
    static const char *const known[] = {"name", "description", "suites", "algorithm", "kind", "strategy", "noise_mode",
                                        "dtype", "ranks", "micro_batches", "args", "reference_args", "candidate_args",
                                        "sigma", "clip", "dataset_size", "q", "steps", "alpha", "expect", "any_ranks", "clip_mix", NULL};
    static const char *const algs[] = {"dpsgd", "dpzo", NULL};
    static const char *const kinds[] = {"compare", "stat-noise", "stat-poisson", NULL};
    static const char *const modes[] = {"single", "shares", NULL};
    static const char *const dts[] = {"f64", "f32", "bf16", "fp16", NULL}; /* bf16/fp16: docs/precision.md */
    if (!json_is_object(root)) { st = FERR("the root must be an object"); goto out; }
    {
        const char *k;
        json_t *v;
        json_object_foreach(root, k, v) {
            int ok = 0;
            for (const char *const *q = known; *q; q++) ok |= strcmp(*q, k) == 0;
            if (!ok) { st = FERR("unknown key '%s'", k); goto out; }
        }
    }
    snprintf(c->file, sizeof c->file, "%s", path);
    if ((st = get_str(c->name, sizeof c->name, root, "name", NULL, path, NULL)) != DP_OK) goto out;
    /* the name becomes a directory under the run's output: never empty, never "." / ".." */
    if (c->name[0] == '\0' || c->name[0] == '.') {
        st = FERR("'name' must be non-empty and must not start with '.' (got '%s')", c->name);
        goto out;
    }
    for (const char *p = c->name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.')) {
            st = FERR("'name' may use only letters, digits, - _ . (got '%s')", c->name);
            goto out;
        }
    if ((st = get_str(c->algorithm, sizeof c->algorithm, root, "algorithm", NULL, path, algs)) != DP_OK) goto out;
    if ((st = get_str(c->kind, sizeof c->kind, root, "kind", "compare", path, kinds)) != DP_OK) goto out;
    if ((st = get_str(c->strategy, sizeof c->strategy, root, "strategy", "grad-sample", path, NULL)) != DP_OK) goto out;
    if ((st = get_str(c->noise_mode, sizeof c->noise_mode, root, "noise_mode", "single", path, modes)) != DP_OK) goto out;
    if ((st = get_str(c->dtype, sizeof c->dtype, root, "dtype", "f64", path, dts)) != DP_OK) goto out;
    {
        json_t *s = json_object_get(root, "suites");
        size_t i;
        json_t *v;
        if (!json_is_array(s) || json_array_size(s) == 0) { st = FERR("'suites' must be a non-empty array"); goto out; }
        json_array_foreach(s, i, v) {
            if (!json_is_string(v)) { st = FERR("'suites' entries must be strings"); goto out; }
            size_t l = strlen(c->suites);
            if (l + 1 + strlen(json_string_value(v)) >= sizeof c->suites) {
                st = FERR("'suites' is longer than %zu characters in all", sizeof c->suites - 1);
                goto out;
            }
            snprintf(c->suites + l, sizeof c->suites - l, "%s%s", l ? "," : "", json_string_value(v));
        }
    }
    {
        json_t *r = json_object_get(root, "ranks");
        if (!r) { c->ranks[0] = 1; c->nranks = 1; }
        else {
            size_t i;
            json_t *v;
            if (!json_is_array(r) || json_array_size(r) == 0 || json_array_size(r) > CONF_MAX_RANKS) {
                st = FERR("'ranks' must be an array of 1 to %d rank counts", CONF_MAX_RANKS);
                goto out;
            }
            json_array_foreach(r, i, v) {
                if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 64) {
                    st = FERR("'ranks' entries must be integers in [1, 64]");
                    goto out;
                }
                c->ranks[c->nranks++] = json_integer_value(v);
            }
        }
    }
    {
        json_t *ds = json_object_get(root, "description");
        if (ds && !json_is_string(ds)) { st = FERR("'description' must be a string"); goto out; }
        int known_strategy = 0;
        for (const char *const *q = opt_strategy_names; *q; q++) known_strategy |= strcmp(*q, c->strategy) == 0;
        if (!known_strategy) { st = FERR("'strategy' has an unknown value '%s'", c->strategy); goto out; }
    }
    /* the statistical and run-size keys: typed, exact and in range; each is also passed to both
     * sides as an option when present (docs/conformance.md) */
    const int64_t u32max = 4294967295LL;
    int has_sigma, has_clip, has_q, has_n, has_steps;
    if ((st = get_int(&c->micro_batches, NULL, root, "micro_batches", 1, 1, u32max, path)) != DP_OK) goto out;
    if ((st = get_num(&c->sigma, &has_sigma, root, "sigma", -1, 0, 0, 1e300, path)) != DP_OK) goto out;
    if ((st = get_num(&c->clip, &has_clip, root, "clip", -1, 0, 1, 1e300, path)) != DP_OK) goto out;
    if ((st = get_num(&c->q, &has_q, root, "q", -1, 0, 1, 1, path)) != DP_OK) goto out;
    if ((st = get_int(&c->n_data, &has_n, root, "dataset_size", -1, 1, u32max, path)) != DP_OK) goto out;
    if ((st = get_int(&c->steps, &has_steps, root, "steps", -1, 1, u32max, path)) != DP_OK) goto out;
    if ((st = get_num(&c->alpha, NULL, root, "alpha", 1e-6, 0, 1, 0.5, path)) != DP_OK) goto out;
    if (c->alpha >= 0.5) { st = FERR("'alpha' must be in (0, 0.5)"); goto out; }
    if (strcmp(c->kind, "stat-noise") == 0 && !(has_sigma && c->sigma > 0 && has_clip)) {
        st = FERR("a stat-noise case needs 'sigma' > 0 and 'clip' > 0 (the variance under test)");
        goto out;
    }
    if (strcmp(c->kind, "stat-poisson") == 0 && !(has_q && has_n)) {
        st = FERR("a stat-poisson case needs 'q' in (0, 1] and 'dataset_size' >= 1");
        goto out;
    }
    {
        char b[40];
        if (has_sigma && (snprintf(b, sizeof b, "%.17g", c->sigma), (st = push_opt(c, "--sigma", b)))) goto out;
        if (has_clip && (snprintf(b, sizeof b, "%.17g", c->clip), (st = push_opt(c, "--clip", b)))) goto out;
        if (has_q && (snprintf(b, sizeof b, "%.17g", c->q), (st = push_opt(c, "--q", b)))) goto out;
        if (has_n && (snprintf(b, sizeof b, "%lld", (long long)c->n_data), (st = push_opt(c, "--dataset-size", b)))) goto out;
        if (has_steps && (snprintf(b, sizeof b, "%lld", (long long)c->steps), (st = push_opt(c, "--steps", b)))) goto out;
        if (c->micro_batches > 1 &&
            (snprintf(b, sizeof b, "%lld", (long long)c->micro_batches), (st = push_opt(c, "--micro-batches", b))))
            goto out;
    }
    json_t *a;
    if ((a = json_object_get(root, "args")) && (st = obj_to_argv(&c->args, &c->nargs, a, path, "args")) != DP_OK) goto out;
    if ((a = json_object_get(root, "reference_args")) &&
        (st = obj_to_argv(&c->ref_args, &c->nref, a, path, "reference_args")) != DP_OK) goto out;
    if ((a = json_object_get(root, "candidate_args")) &&
        (st = obj_to_argv(&c->cand_args, &c->ncand, a, path, "candidate_args")) != DP_OK) goto out;
    if ((a = json_object_get(root, "expect"))) {
        json_t *s = json_object_get(a, "status"), *t = json_object_get(a, "tensor");
        if (!json_is_object(a) || !json_is_string(s) || strcmp(json_string_value(s), "FAIL") != 0 ||
            json_object_size(a) > 2 || (t && !json_is_string(t))) {
            st = FERR("'expect' must be {\"status\": \"FAIL\", \"tensor\": PREFIX} (a negative control)");
            goto out;
        }
        c->expect_fail = 1;
        if (t && strlen(json_string_value(t)) >= sizeof c->expect_tensor) {
            st = FERR("'expect.tensor' is longer than %zu characters", sizeof c->expect_tensor - 1);
            goto out;
        }
        if (t) snprintf(c->expect_tensor, sizeof c->expect_tensor, "%s", json_string_value(t));
    }
    {
        json_t *cm = json_object_get(root, "clip_mix");
        c->clip_mix = 1;
        if (cm) {
            if (!json_is_boolean(cm)) { st = FERR("'clip_mix' must be true or false"); goto out; }
            c->clip_mix = json_is_true(cm);
        }
    }
    {
        json_t *ar = json_object_get(root, "any_ranks");
        c->any_ranks = strcmp(c->kind, "compare") == 0 && !c->expect_fail;
        if (ar) {
            if (!json_is_boolean(ar)) { st = FERR("'any_ranks' must be true or false"); goto out; }
            c->any_ranks = json_is_true(ar);
        }
    }
out:
    json_decref(root);
    if (st != DP_OK) conf_case_free(c);
    return st;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int in_suite(const conf_case *c, const char *suite) {
    if (strcmp(suite, "all") == 0) return 1;
    char buf[sizeof c->suites];
    snprintf(buf, sizeof buf, "%s", c->suites);
    for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv))
        if (strcmp(t, suite) == 0) return 1;
    return 0;
}

/* The sorted names of the *.json files of dir (none when dir is absent and optional). */
static dp_status json_files(char ***out, size_t *n, const char *dir, int optional) {
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return optional ? DP_OK : dp_error(DP_ERR_IO, "cannot open the cases directory %s", dir);
    char **names = NULL;
    size_t nn = 0, cap = 0;
    struct dirent *e;
    dp_status st = DP_OK;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 6 || strcmp(e->d_name + l - 5, ".json") != 0 || e->d_name[0] == '.') continue;
        if ((st = DP_GROW(names, cap, nn + 1, 64, "case files")) != DP_OK) break;
        if (!(names[nn] = dp_strdup(e->d_name))) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
        nn++;
    }
    closedir(d);
    if (nn) qsort(names, nn, sizeof *names, cmp_str);
    *out = names;
    *n = nn;
    return st;
}

/* Append c (moved) to v. */
static dp_status push_case(conf_case **v, size_t *k, size_t *cap, conf_case *c) {
    dp_status st = DP_GROW(*v, *cap, *k + 1, 64, "cases");
    if (st != DP_OK) { conf_case_free(c); return st; }
    (*v)[(*k)++] = *c;
    return DP_OK;
}

/* The hand-written case files of dir (each with its JSON object) appended to v. */
static dp_status load_files(conf_case **v, size_t *k, size_t *cap, const char *dir) {
    char **names = NULL;
    size_t nn = 0;
    dp_status st = json_files(&names, &nn, dir, 0);
    for (size_t i = 0; i < nn && st == DP_OK; i++) {
        char path[4400];
        if ((st = dp_path_fmt(path, sizeof path, "--cases", "%s/%s", dir, names[i])) != DP_OK) break;
        conf_case c;
        char *buf = NULL;
        size_t len = 0;
        if ((st = dp_read_file_max(&buf, &len, "case file", path, DP_MAX_TEXT_INPUT)) != DP_OK) break;
        if ((st = conf_case_parse(&c, buf, len, path)) == DP_OK) {
            /* the bytes parsed just above: loaded again as JSON for the canonical form */
            if (!(c.json = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL))) {
                conf_case_free(&c);
                st = dp_error(DP_ERR_NOMEM, "case %s: out of memory", path);
            }
        }
        dp_free(buf);
        if (st == DP_OK) st = push_case(v, k, cap, &c);
    }
    for (size_t i = 0; i < nn; i++) dp_free(names[i]);
    dp_free(names);
    return st;
}

/* The expansion of every matrix of dir/matrix (docs/conformance.md "Case matrices") appended to
 * v, each parsed by the schema of a case file; c.file is "MATRIX: NAME". */
static dp_status load_matrices(conf_case **v, size_t *k, size_t *cap, const char *dir) {
    char mdir[4400], **names = NULL;
    size_t nn = 0;
    DP_TRY(dp_path_fmt(mdir, sizeof mdir, "--cases", "%s/matrix", dir));
    dp_status st = json_files(&names, &nn, mdir, 1);
    for (size_t i = 0; i < nn && st == DP_OK; i++) {
        char path[4600];
        json_t *cases = NULL;
        if ((st = dp_path_fmt(path, sizeof path, "--cases", "%s/%s", mdir, names[i])) != DP_OK) break;
        if ((st = conf_matrix_expand(&cases, path)) != DP_OK) break;
        size_t j;
        json_t *cj;
        json_array_foreach(cases, j, cj) {
            char label[4800], *txt = json_dumps(cj, JSON_COMPACT);
            snprintf(label, sizeof label, "%s: %.100s", path, json_string_value(json_object_get(cj, "name")));
            conf_case c;
            if (!txt) st = dp_error(DP_ERR_NOMEM, "out of memory");
            else st = conf_case_parse(&c, txt, strlen(txt), label);
            dp_free(txt);
            if (st != DP_OK) break;
            c.json = json_incref(cj);
            if ((st = push_case(v, k, cap, &c)) != DP_OK) break;
        }
        json_decref(cases);
    }
    for (size_t i = 0; i < nn; i++) dp_free(names[i]);
    dp_free(names);
    return st;
}

/* Order of the runs: by file name NAME.json, as when every case was a file. */
static int cmp_case(const void *a, const void *b) {
    const conf_case *x = a, *y = b;
    char kx[sizeof x->name + 8], ky[sizeof y->name + 8];
    snprintf(kx, sizeof kx, "%s.json", x->name);
    snprintf(ky, sizeof ky, "%s.json", y->name);
    return strcmp(kx, ky);
}

/* 1 when the two cases have the same canonical content. */
static int same_content(const conf_case *a, const conf_case *b) {
    char *x = conf_case_canonical(a->json, JSON_COMPACT), *y = conf_case_canonical(b->json, JSON_COMPACT);
    int same = x && y && strcmp(x, y) == 0;
    dp_free(x);
    dp_free(y);
    return same;
}

dp_status conf_cases_load_suite(conf_case **out, size_t *n, const char *dir, const char *suite) {
    *out = NULL;
    *n = 0;
    conf_case *v = NULL;
    size_t k = 0, cap = 0;
    dp_status st = load_files(&v, &k, &cap, dir);
    size_t nfiles = k;
    if (st == DP_OK) st = load_matrices(&v, &k, &cap, dir);
    /* a name defined twice: an error, unless a hand-written file repeats an expanded case
     * exactly (then it is kept once) */
    for (size_t i = 0; i < k && st == DP_OK; i++)
        for (size_t j = i + 1; j < k && st == DP_OK; j++) {
            if (strcmp(v[i].name, v[j].name) != 0) continue;
            if (i < nfiles && j >= nfiles && same_content(&v[i], &v[j])) {
                conf_case_free(&v[j]);
                v[j--] = v[--k];
                continue;
            }
            st = dp_error(DP_ERR_FORMAT, "case name '%s' is defined by %s and by %s%s", v[i].name, v[i].file, v[j].file,
                          i < nfiles && j >= nfiles ? " with a different content" : "");
        }
    if (st == DP_OK && k) qsort(v, k, sizeof *v, cmp_case);
    size_t kept = 0;
    for (size_t i = 0; i < k; i++) {
        if (st == DP_OK && in_suite(&v[i], suite)) v[kept++] = v[i];
        else conf_case_free(&v[i]);
    }
    if (st != DP_OK) {
        dp_free(v);
        return st;
    }
    *out = v;
    *n = kept;
    return DP_OK;
}

/* conformance/conform/case_matrix.c — conformance cases from a matrix
 * (conformance/cases/matrix/FAMILY.json, format in docs/conformance.md "Case matrices"): a
 * base case, axes whose values carry the keys they set, and rules on the combinations; expanded
 * here into ordinary case objects that the runner parses with the same schema as a hand-written
 * case file (cases.c). Unknown keys, wrong types and unknown template variables are
 * DP_ERR_FORMAT naming the file and the key. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/alloc.h"
#include "common/cli.h"
#include "common/fsutil.h"
#include "conformance/conform/conform.h"
#include "optimized/strategy.h"

#define MERR(...) dp_error_context(dp_error(DP_ERR_FORMAT, __VA_ARGS__), "case matrix %s", path)
#define CONF_MATRIX_MAX_AXES 16
#define CONF_MATRIX_MAX_CASES 100000 /* combinations of one matrix (a typo in an axis is refused early) */

/* Refuse any key of object o not in the NULL-terminated list known (`where` names o). */
static dp_status keys_check(const json_t *o, const char *const *known, const char *where, const char *path) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        int ok = 0;
        for (const char *const *q = known; *q; q++) ok |= strcmp(*q, k) == 0;
        if (!ok) return MERR("%s: unknown key '%s'", where, k);
    }
    return DP_OK;
}

/* A variable or axis name: [a-z_][a-z0-9_]*, at most 31 characters. */
static int name_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 31 || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_')) return 0;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return 0;
    return 1;
}

/* Merge src into dst in src's key order: an object into an object merges key by key (a key
 * already in dst keeps its place), null removes the key, any other value replaces it. */
static dp_status merge_into(json_t *dst, const json_t *src) {
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)src, k, v) {
        json_t *d = json_object_get(dst, k);
        if (json_is_null(v)) { json_object_del(dst, k); continue; }
        if (d && json_is_object(d) && json_is_object(v)) { DP_TRY(merge_into(d, v)); continue; }
        if (json_object_set_new(dst, k, json_deep_copy(v)) != 0) return dp_error(DP_ERR_NOMEM, "out of memory");
    }
    return DP_OK;
}

/* The "vars" object of an axis value or a rule: string values under valid names. */
static dp_status vars_check(const json_t *vars, const char *where, const char *path) {
    if (!json_is_object(vars)) return MERR("%s: 'vars' must be an object of name: string", where);
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)vars, k, v) {
        if (!name_ok(k)) return MERR("%s: bad variable name '%s' ([a-z_][a-z0-9_]*)", where, k);
        if (strcmp(k, "name") == 0) return MERR("%s: the variable 'name' is the filled name template (reserved)", where);
        if (!json_is_string(v)) return MERR("%s: variable '%s' must be a string", where, k);
    }
    return DP_OK;
}

/* Replace every {var} of tmpl with its value in vars into a new string (*out, dp_free). */
static dp_status subst(char **out, const char *tmpl, const json_t *vars, const char *key, const char *path) {
    size_t cap = 0, n = 0;
    char *s = NULL;
    DP_TRY(DP_GROW(s, cap, strlen(tmpl) + 1, 64, "matrix template"));
    for (const char *p = tmpl; *p;) {
        const char *add = p;
        size_t len = 1;
        if (*p == '{') {
            const char *e = strchr(p, '}');
            char var[32];
            if (!e || (size_t)(e - p - 1) >= sizeof var) {
                dp_free(s);
                return MERR("'%s': an unclosed or too long {variable} in '%s'", key, tmpl);
            }
            memcpy(var, p + 1, (size_t)(e - p - 1));
            var[e - p - 1] = '\0';
            json_t *v = json_object_get(vars, var);
            if (!v) {
                dp_free(s);
                return MERR("'%s': unknown variable {%s} in '%s'", key, var, tmpl);
            }
            add = json_string_value(v);
            len = strlen(add);
            p = e + 1;
        } else {
            p++;
        }
        dp_status st = DP_GROW(s, cap, n + len + 1, 64, "matrix template");
        if (st != DP_OK) { dp_free(s); return st; }
        memcpy(s + n, add, len);
        n += len;
    }
    s[n] = '\0';
    *out = s;
    return DP_OK;
}

/* 1 when every "axis": value-or-list of `when` matches vars. */
static int when_matches(const json_t *when, const json_t *vars) {
    const char *k;
    json_t *want;
    json_object_foreach((json_t *)when, k, want) {
        const char *have = json_string_value(json_object_get(vars, k));
        if (!have) return 0;
        int hit = 0;
        if (json_is_string(want)) hit = strcmp(have, json_string_value(want)) == 0;
        else {
            size_t i;
            json_t *w;
            json_array_foreach(want, i, w) hit |= strcmp(have, json_string_value(w)) == 0;
        }
        if (!hit) return 0;
    }
    return 1;
}

/* Check the rules: {"when": {VAR: VALUE | [VALUE...]}, "vars": {...}, "case": {...}, "exclude": true}. */
static dp_status rules_check(const json_t *rules, const char *path) {
    static const char *const known[] = {"when", "vars", "case", "exclude", "comment", NULL};
    if (!json_is_array(rules)) return MERR("'rules' must be an array");
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r) {
        char where[48];
        snprintf(where, sizeof where, "rules[%zu]", i);
        if (!json_is_object(r)) return MERR("%s must be an object", where);
        DP_TRY(keys_check(r, known, where, path));
        json_t *w = json_object_get(r, "when"), *v = json_object_get(r, "vars"), *c = json_object_get(r, "case"),
               *x = json_object_get(r, "exclude"), *cm = json_object_get(r, "comment");
        if (!json_is_object(w) || json_object_size(w) == 0) return MERR("%s: 'when' must be a non-empty object", where);
        const char *k;
        json_t *want;
        json_object_foreach(w, k, want) {
            int ok = json_is_string(want);
            if (json_is_array(want) && json_array_size(want) > 0) {
                size_t j;
                json_t *e;
                ok = 1;
                json_array_foreach(want, j, e) ok &= json_is_string(e);
            }
            if (!ok) return MERR("%s: 'when.%s' must be a string or a non-empty array of strings", where, k);
        }
        if (v) DP_TRY(vars_check(v, where, path));
        if (c && !json_is_object(c)) return MERR("%s: 'case' must be an object (keys of a case)", where);
        if (x && !json_is_true(x)) return MERR("%s: 'exclude' must be true when present", where);
        if (cm && !json_is_string(cm)) return MERR("%s: 'comment' must be a string", where);
        if (x && (v || c)) return MERR("%s: an 'exclude' rule sets nothing ('vars' and 'case' not allowed)", where);
        if (!x && !v && !c) return MERR("%s: a rule needs 'vars', 'case' or 'exclude'", where);
    }
    return DP_OK;
}

/* Check the axes and normalise each value to {"value": S, "vars": {...}, "case": {...}} into *norm. */
static dp_status axes_check(json_t **norm, const json_t *axes, const char *path) {
    static const char *const kaxis[] = {"axis", "values", "comment", NULL};
    static const char *const kval[] = {"value", "vars", "case", "comment", NULL};
    if (!json_is_array(axes) || json_array_size(axes) == 0 || json_array_size(axes) > CONF_MATRIX_MAX_AXES)
        return MERR("'axes' must be an array of 1 to %d axes", CONF_MATRIX_MAX_AXES);
    json_t *out = json_array();
    if (!out) return dp_error(DP_ERR_NOMEM, "out of memory");
    size_t i;
    json_t *a;
    dp_status st = DP_OK;
    json_array_foreach(axes, i, a) {
        char where[64];
        snprintf(where, sizeof where, "axes[%zu]", i);
        json_t *name = json_object_get(a, "axis"), *vals = json_object_get(a, "values");
        if (!json_is_object(a)) { st = MERR("%s must be an object", where); break; }
        if ((st = keys_check(a, kaxis, where, path)) != DP_OK) break;
        if (!json_is_string(name) || !name_ok(json_string_value(name))) {
            st = MERR("%s: 'axis' must be a name [a-z_][a-z0-9_]*", where);
            break;
        }
        for (size_t j = 0; j < i && st == DP_OK; j++)
            if (strcmp(json_string_value(json_object_get(json_array_get(out, j), "axis")), json_string_value(name)) == 0)
                st = MERR("%s: axis '%s' is declared twice", where, json_string_value(name));
        if (st != DP_OK) break;
        json_t *reg = NULL; /* "values": "@strategies": the engine's registry of norm strategies */
        if (json_is_string(vals)) {
            if (strcmp(json_string_value(vals), "@strategies") != 0) {
                st = MERR("%s: 'values' names an unknown registry '%s' (known: @strategies)", where, json_string_value(vals));
                break;
            }
            if (!(reg = json_array())) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
            for (const char *const *q = opt_strategy_names; *q && st == DP_OK; q++) {
                json_t *e = json_pack("{s:s,s:{s:s}}", "value", *q, "case", json_string_value(name), *q);
                if (!e || json_array_append_new(reg, e) != 0) st = dp_error(DP_ERR_NOMEM, "out of memory");
            }
            if (st != DP_OK) { json_decref(reg); break; }
            vals = reg;
        }
        if (!json_is_array(vals) || json_array_size(vals) == 0) {
            st = MERR("%s: 'values' must be a non-empty array or a registry (@strategies)", where);
            break;
        }
        json_t *nv = json_array(), *na = json_pack("{s:O,s:o}", "axis", name, "values", nv);
        if (!na || json_array_append_new(out, na) != 0) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
        size_t j;
        json_t *v;
        json_array_foreach(vals, j, v) {
            snprintf(where, sizeof where, "axes[%zu].values[%zu]", i, j);
            json_t *val = v, *vars = NULL, *cs = NULL;
            if (json_is_object(v)) {
                if ((st = keys_check(v, kval, where, path)) != DP_OK) break;
                val = json_object_get(v, "value");
                vars = json_object_get(v, "vars");
                cs = json_object_get(v, "case");
                if (vars && (st = vars_check(vars, where, path)) != DP_OK) break;
                if (cs && !json_is_object(cs)) { st = MERR("%s: 'case' must be an object (keys of a case)", where); break; }
            }
            if (!json_is_string(val)) { st = MERR("%s: the value must be a string or {\"value\": STRING, ...}", where); break; }
            for (size_t k = 0; k < j && st == DP_OK; k++)
                if (strcmp(json_string_value(json_object_get(json_array_get(nv, k), "value")), json_string_value(val)) == 0)
                    st = MERR("%s: value '%s' appears twice", where, json_string_value(val));
            if (st != DP_OK) break;
            json_t *e = json_pack("{s:O,s:o,s:o}", "value", val, "vars", vars ? json_deep_copy(vars) : json_object(),
                                  "case", cs ? json_deep_copy(cs) : json_object());
            if (!e || json_array_append_new(nv, e) != 0) { st = dp_error(DP_ERR_NOMEM, "out of memory"); break; }
        }
        json_decref(reg);
        if (st != DP_OK) break;
    }
    if (st != DP_OK) { json_decref(out); return st; }
    *norm = out;
    return DP_OK;
}

/* 1 when `var` is the name of a variable some part of the matrix defines. */
static int var_defined(const char *var, const json_t *axes, const json_t *vars0, const json_t *rules) {
    if (strcmp(var, "name") == 0 || (vars0 && json_object_get(vars0, var))) return 1;
    for (size_t a = 0; a < json_array_size(axes); a++) {
        const json_t *ax = json_array_get(axes, a), *vals = json_object_get(ax, "values");
        if (strcmp(json_string_value(json_object_get(ax, "axis")), var) == 0) return 1;
        for (size_t j = 0; j < json_array_size(vals); j++)
            if (json_object_get(json_object_get(json_array_get(vals, j), "vars"), var)) return 1;
    }
    for (size_t r = 0; r < json_array_size(rules); r++)
        if (json_object_get(json_object_get(json_array_get(rules, r), "vars"), var)) return 1;
    return 0;
}

/* A `when` never matching because of a typo is refused: each variable it names is defined
 * somewhere, and each value it wants of an axis is a value of that axis. */
static dp_status when_check(const json_t *rules, const json_t *axes, const json_t *vars0, const char *path) {
    for (size_t r = 0; r < json_array_size(rules); r++) {
        const char *k;
        json_t *want;
        json_object_foreach(json_object_get(json_array_get(rules, r), "when"), k, want) {
            if (!var_defined(k, axes, vars0, rules)) return MERR("rules[%zu]: 'when' names an undefined variable '%s'", r, k);
            const json_t *vals = NULL;
            for (size_t a = 0; a < json_array_size(axes); a++)
                if (strcmp(json_string_value(json_object_get(json_array_get(axes, a), "axis")), k) == 0)
                    vals = json_object_get(json_array_get(axes, a), "values");
            for (size_t i = 0; vals && i < (json_is_array(want) ? json_array_size(want) : 1); i++) {
                const char *w = json_string_value(json_is_array(want) ? json_array_get(want, i) : want);
                int hit = 0;
                for (size_t j = 0; j < json_array_size(vals); j++)
                    hit |= strcmp(json_string_value(json_object_get(json_array_get(vals, j), "value")), w) == 0;
                if (!hit) return MERR("rules[%zu]: 'when.%s' wants '%s', not a value of the axis '%s'", r, k, w, k);
            }
        }
    }
    return DP_OK;
}

/* The case of one combination (idx[a] = value index of axis a) into *out, or NULL when a rule
 * excludes it. */
static dp_status expand_one(json_t **out, const json_t *axes, const size_t *idx, const json_t *base, const json_t *vars0,
                            const json_t *rules, const char *path) {
    *out = NULL;
    json_t *vars = vars0 ? json_deep_copy(vars0) : json_object(), *c = json_deep_copy(base);
    dp_status st = vars && c ? DP_OK : dp_error(DP_ERR_NOMEM, "out of memory");
    for (size_t a = 0; a < json_array_size(axes) && st == DP_OK; a++) {
        const json_t *ax = json_array_get(axes, a), *v = json_array_get(json_object_get(ax, "values"), idx[a]);
        if (json_object_set(vars, json_string_value(json_object_get(ax, "axis")), json_object_get(v, "value")) != 0 ||
            json_object_update(vars, json_object_get(v, "vars")) != 0)
            st = dp_error(DP_ERR_NOMEM, "out of memory");
        if (st == DP_OK) st = merge_into(c, json_object_get(v, "case"));
    }
    /* the variable "name": the name template filled with the variables of the axes, for rules */
    if (st == DP_OK) {
        char *nm = NULL;
        st = subst(&nm, json_string_value(json_object_get(base, "name")), vars, "name", path);
        if (st == DP_OK && json_object_set_new(vars, "name", json_string(nm)) != 0) st = dp_error(DP_ERR_NOMEM, "out of memory");
        dp_free(nm);
    }
    int excluded = 0;
    for (size_t r = 0; r < json_array_size(rules) && st == DP_OK && !excluded; r++) {
        const json_t *rule = json_array_get(rules, r);
        if (!when_matches(json_object_get(rule, "when"), vars)) continue;
        if (json_object_get(rule, "exclude")) { excluded = 1; break; }
        json_t *rv = json_object_get(rule, "vars"), *rc = json_object_get(rule, "case");
        if (rv && json_object_update(vars, rv) != 0) st = dp_error(DP_ERR_NOMEM, "out of memory");
        if (rc && st == DP_OK) st = merge_into(c, rc);
    }
    static const char *const templated[] = {"description", NULL};
    for (const char *const *k = templated; *k && st == DP_OK && !excluded; k++) {
        json_t *t = json_object_get(c, *k);
        if (!json_is_string(t)) continue; /* the case schema reports a missing or ill-typed name */
        char *s = NULL;
        if ((st = subst(&s, json_string_value(t), vars, *k, path)) != DP_OK) break;
        if (json_object_set_new(c, *k, json_string(s)) != 0) st = dp_error(DP_ERR_NOMEM, "out of memory");
        dp_free(s);
    }
    if (st == DP_OK && !excluded && json_object_set(c, "name", json_object_get(vars, "name")) != 0)
        st = dp_error(DP_ERR_NOMEM, "out of memory");
    json_decref(vars);
    if (st != DP_OK || excluded) { json_decref(c); return st; }
    *out = c;
    return DP_OK;
}

dp_status conf_matrix_expand(json_t **out, const char *path) {
    *out = NULL;
    char *buf = NULL;
    size_t len = 0;
    DP_TRY(dp_read_file_max(&buf, &len, "case matrix", path, DP_MAX_TEXT_INPUT));
    char what[600];
    snprintf(what, sizeof what, "case matrix %.500s", path);
    dp_status st = dp_json_numbers_check(buf, len, what);
    json_error_t err;
    json_t *root = st == DP_OK ? json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err) : NULL;
    dp_free(buf);
    if (st != DP_OK) return st;
    if (!root) return dp_error(DP_ERR_FORMAT, "case matrix %s: invalid JSON at line %d: %s", path, err.line, err.text);
    static const char *const known[] = {"matrix", "comment", "vars", "case", "axes", "rules", NULL};
    json_t *axes = NULL, *cases = json_array(), *m = json_object_get(root, "matrix"), *base = json_object_get(root, "case"),
           *rules = json_object_get(root, "rules"), *cm = json_object_get(root, "comment"), *vars0 = json_object_get(root, "vars");
    if (!cases) st = dp_error(DP_ERR_NOMEM, "out of memory");
    else if (!json_is_object(root)) st = MERR("the root must be an object");
    else if ((st = keys_check(root, known, "the root", path)) != DP_OK) {
    } else if (!json_is_string(m) || !name_ok(json_string_value(m))) st = MERR("'matrix' must be the family's name [a-z_][a-z0-9_]*");
    else if (cm && !json_is_string(cm)) st = MERR("'comment' must be a string");
    else if (!json_is_object(base) || !json_is_string(json_object_get(base, "name")))
        st = MERR("'case' must be an object with a 'name' template");
    else if (vars0 && (st = vars_check(vars0, "the root", path)) != DP_OK) {
    } else if (rules && (st = rules_check(rules, path)) != DP_OK) {
    } else if ((st = axes_check(&axes, json_object_get(root, "axes"), path)) == DP_OK && rules)
        st = when_check(rules, axes, vars0, path);
    size_t idx[CONF_MATRIX_MAX_AXES] = {0}, na = axes ? json_array_size(axes) : 0, total = 1;
    for (size_t a = 0; a < na; a++) total *= json_array_size(json_object_get(json_array_get(axes, a), "values"));
    if (st == DP_OK && total > CONF_MATRIX_MAX_CASES)
        st = MERR("%zu combinations (at most %d)", total, CONF_MATRIX_MAX_CASES);
    /* the first axis varies slowest (nested loops in the order of "axes") */
    for (size_t n = 0; st == DP_OK && n < total; n++) {
        json_t *c = NULL;
        if ((st = expand_one(&c, axes, idx, base, vars0, rules, path)) != DP_OK) break;
        if (c && json_array_append_new(cases, c) != 0) st = dp_error(DP_ERR_NOMEM, "out of memory");
        for (size_t a = na; a-- > 0;) {
            if (++idx[a] < json_array_size(json_object_get(json_array_get(axes, a), "values"))) break;
            idx[a] = 0;
        }
    }
    if (st == DP_OK && json_array_size(cases) == 0) st = MERR("every combination is excluded");
    json_decref(axes);
    json_decref(root);
    if (st != DP_OK) { json_decref(cases); return st; }
    *out = cases;
    return DP_OK;
}

char *conf_case_canonical(const json_t *c, size_t flags) {
    const char *keys[64];
    size_t n = 0;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)c, k, v) {
        if (n == sizeof keys / sizeof keys[0]) return NULL;
        keys[n++] = k;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: a case has about twenty keys */
        for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    json_t *o = json_object();
    for (size_t i = 0; o && i < n; i++)
        if (json_object_set(o, keys[i], json_object_get(c, keys[i])) != 0) { json_decref(o); o = NULL; }
    char *s = o ? json_dumps(o, flags) : NULL;
    json_decref(o);
    return s;
}

/* conformance/tests/test_cases.c — the strict case-file schema (issue 15, class 7): argument
 * values are passed whole (no fixed-size buffer: a 300-character value survives), absent keys
 * are not encoded as -1 (a valid case without sigma passes no --sigma), every committed case
 * loads, and hostile values are refused naming the key (negative controls: each must fail).
 * Case matrices (docs/conformance.md "Case matrices"): the expansion order, the merge (a key
 * keeps its place, null removes it, the order of args is the command line's), rules (vars
 * seen by later rules, exclusion, the variable "name") and templates. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "conformance/conform/conform.h"
#include "optimized/strategy.h"

static const char *write_case(const char *body) {
    static char path[] = "test_cases_tmp.json";
    FILE *f = fopen(path, "w");
    if (!f) return NULL;
    fputs(body, f);
    fclose(f);
    return path;
}

static int has_arg(const conf_case *c, const char *opt, const char *val) {
    for (size_t i = 0; i + 1 < c->nargs; i++)
        if (strcmp(c->args[i], opt) == 0 && (!val || strcmp(c->args[i + 1], val) == 0)) return 1;
    return 0;
}

/* Args of an expanded case as "k=v;..." in their order. */
static void args_text(char *buf, size_t len, const json_t *c) {
    const char *k;
    json_t *v;
    buf[0] = 0;
    json_object_foreach(json_object_get(c, "args"), k, v) {
        char one[64];
        if (json_is_integer(v)) snprintf(one, sizeof one, "%s=%lld;", k, (long long)json_integer_value(v));
        else snprintf(one, sizeof one, "%s=%s;", k, json_is_string(v) ? json_string_value(v) : "?");
        strncat(buf, one, len - strlen(buf) - 1);
    }
}

static void test_matrix(void) {
    const char *m =
        "{\"matrix\": \"t\", \"vars\": {\"x\": \"\"},"
        " \"case\": {\"name\": \"m-{a}-{b}\", \"description\": \"{a}/{b}{x}\", \"suites\": [\"s\"],"
        "   \"algorithm\": \"dpsgd\", \"args\": {\"seed\": 1, \"model\": \"mlp\", \"lr\": 3}},"
        " \"axes\": [{\"axis\": \"a\", \"values\": [{\"value\": \"p\", \"case\": {\"args\": {\"seed\": 2, \"tied\": 1}}}, \"q\"]},"
        "          {\"axis\": \"b\", \"values\": [\"u\", {\"value\": \"v\", \"vars\": {\"y\": \"1\"}}]}],"
        " \"rules\": [{\"when\": {\"a\": \"q\", \"b\": \"u\"}, \"exclude\": true},"
        "            {\"when\": {\"y\": \"1\"}, \"vars\": {\"x\": \"!\"}, \"case\": {\"args\": {\"lr\": null, \"seed\": 9}}},"
        "            {\"when\": {\"x\": \"!\", \"name\": [\"m-p-v\"]}, \"case\": {\"suites\": [\"t\"]}}]}";
    const char *p = write_case(m);
    json_t *cs = NULL;
    T_OK(conf_matrix_expand(&cs, p));
    /* p-u, p-v, q-v (q-u excluded), the first axis slowest */
    T_CHECK(cs && json_array_size(cs) == 3, "3 cases expanded (got %zu)", cs ? json_array_size(cs) : 0);
    static const char *const names[] = {"m-p-u", "m-p-v", "m-q-v"}, *const descs[] = {"p/u", "p/v!", "q/v!"},
                             *const args[] = {"seed=2;model=mlp;lr=3;tied=1;", "seed=9;model=mlp;tied=1;",
                                              "seed=9;model=mlp;"},
                             *const suites[] = {"s", "t", "s"};
    for (size_t i = 0; cs && i < 3 && i < json_array_size(cs); i++) {
        json_t *c = json_array_get(cs, i);
        char a[256];
        args_text(a, sizeof a, c);
        T_CHECK(strcmp(json_string_value(json_object_get(c, "name")), names[i]) == 0, "case %zu name %s", i,
                json_string_value(json_object_get(c, "name")));
        T_CHECK(strcmp(json_string_value(json_object_get(c, "description")), descs[i]) == 0, "case %zu description %s",
                i, json_string_value(json_object_get(c, "description")));
        T_CHECK(strcmp(a, args[i]) == 0, "case %zu args in order: %s (expected %s)", i, a, args[i]);
        T_CHECK(strcmp(json_string_value(json_array_get(json_object_get(c, "suites"), 0)), suites[i]) == 0,
                "case %zu suite", i);
    }
    json_decref(cs);
    /* "values": "@strategies": one case per entry of the engine's registry, each setting the key
     * named by the axis, in the registry's order */
    cs = NULL;
    T_OK(conf_matrix_expand(&cs, write_case("{\"matrix\": \"t\", \"case\": {\"name\": \"r-{strategy}\"},"
                                            " \"axes\": [{\"axis\": \"strategy\", \"values\": \"@strategies\"}]}")));
    size_t nreg = 0;
    while (opt_strategy_names[nreg]) nreg++;
    T_CHECK(cs && json_array_size(cs) == nreg && nreg >= 5, "@strategies: %zu cases for %zu strategies",
            cs ? json_array_size(cs) : 0, nreg);
    for (size_t i = 0; cs && i < json_array_size(cs) && i < nreg; i++) {
        const char *sv = json_string_value(json_object_get(json_array_get(cs, i), "strategy"));
        T_CHECK(sv && strcmp(sv, opt_strategy_names[i]) == 0, "@strategies case %zu sets strategy %s (want %s)", i,
                sv ? sv : "(none)", opt_strategy_names[i]);
    }
    json_decref(cs);
    /* negative controls: each refused naming the problem */
    static const char *const bad[][2] = {
        {"{\"matrix\": \"t\", \"case\": {\"name\": \"n-{zz}\"}, \"axes\": [{\"axis\": \"a\", \"values\": [\"x\"]}]}", "{zz}"},
        {"{\"matrix\": \"t\", \"case\": {\"name\": \"n\"}, \"axes\": [{\"axis\": \"a\", \"values\": [\"x\"], \"extra\": 1}]}", "'extra'"},
        {"{\"matrix\": \"t\", \"case\": {\"name\": \"n\"}, \"axes\": [{\"axis\": \"a\", \"values\": [\"x\", \"x\"]}]}", "twice"},
        {"{\"matrix\": \"t\", \"case\": {\"name\": \"n\"}, \"axes\": [{\"axis\": \"a\", \"values\": [\"x\"]}],"
         " \"rules\": [{\"when\": {\"a\": \"x\"}, \"exclude\": true}]}", "excluded"},
        {"{\"matrix\": \"t\", \"case\": {\"name\": \"n\"}, \"axes\": [{\"axis\": \"a\", \"values\": [{\"value\": \"x\", \"vars\": {\"name\": \"y\"}}]}]}", "reserved"},
        {"{\"matrix\": \"t\", \"case\": {\"name\": \"n\"}, \"axes\": [], \"x\": 1}", "'x'"},
        {"{\"matrix\": \"t\", \"case\": {\"name\": \"n-{a}\"}, \"axes\": [{\"axis\": \"a\", \"values\": \"@nope\"}]}", "'@nope'"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        cs = NULL;
        dp_status st = conf_matrix_expand(&cs, write_case(bad[k][0]));
        T_CHECK(st == DP_ERR_FORMAT && strstr(dp_last_error(), bad[k][1]) && strstr(dp_last_error(), "test_cases_tmp.json"),
                "bad matrix %zu: status %d, message '%s' should name %s", k, st, dp_last_error(), bad[k][1]);
        json_decref(cs);
        dp_clear_error();
    }
}

int main(void) {
    test_matrix();
    char longv[301];
    memset(longv, 'g', 300);
    longv[300] = 0;
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\": \"p\", \"suites\": [\"x\"], \"algorithm\": \"dpsgd\", \"steps\": 3, "
             "\"args\": {\"model\": \"mlp\", \"groups\": \"%s\"}}",
             longv);
    conf_case c;
    const char *p = write_case(body);
    T_OK(conf_case_load(&c, p));
    T_CHECK(has_arg(&c, "--groups", longv), "the 300-character value is passed whole");
    T_CHECK(has_arg(&c, "--steps", "3"), "steps passed as --steps 3");
    T_CHECK(!has_arg(&c, "--sigma", NULL) && !has_arg(&c, "--clip", NULL), "absent sigma/clip pass nothing");
    conf_case_free(&c);

    static const char *const bad[][2] = {
        {"\"sigma\": -0.5", "sigma"},        {"\"steps\": -5", "steps"},          {"\"steps\": 2.5", "steps"},
        {"\"dataset_size\": 16.7", "dataset_size"}, {"\"micro_batches\": 1e300", "micro_batches"},
        {"\"description\": 5", "description"}, {"\"strategy\": \"nope\"", "strategy"}, {"\"extra\": 1", "extra"},
        {"\"q\": 0", "'q'"},                  {"\"steps\": 4294967296", "steps"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(body, sizeof body, "{\"name\": \"p\", \"suites\": [\"x\"], \"algorithm\": \"dpsgd\", %s}", bad[k][0]);
        p = write_case(body);
        dp_status st = conf_case_load(&c, p);
        T_CHECK(st == DP_ERR_FORMAT && strstr(dp_last_error(), bad[k][1]), "%s: status %d, message '%s'", bad[k][0], st,
                dp_last_error());
        dp_clear_error();
    }
    const char *root = getenv("DPCERT_ROOT");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/conformance/cases", root ? root : ".");
    conf_case *cs = NULL;
    size_t n = 0;
    T_OK(conf_cases_load_suite(&cs, &n, dir, "all"));
    T_CHECK(n > 50, "every committed case loads (%zu)", n);
    for (size_t i = 0; i < n; i++) conf_case_free(&cs[i]);
    free(cs);
    remove("test_cases_tmp.json");
    return t_finish();
}

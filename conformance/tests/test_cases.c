/* conformance/tests/test_cases.c — the strict case-file schema (issue 15, class 7): argument
 * values are passed whole (no fixed-size buffer: a 300-character value survives), absent keys
 * are not encoded as -1 (a valid case without sigma passes no --sigma), every committed case
 * loads, and hostile values are refused naming the key (negative controls: each must fail). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/test.h"
#include "conformance/conform/conform.h"

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

int main(void) {
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

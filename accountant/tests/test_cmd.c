/* accountant/tests/test_cmd.c — the subcommands called directly (so the test does not depend on
 * how the dpcert binary links them): exit codes, JSON output, bad input naming the field and row,
 * audit verdicts on crafted claims, the DP-ZO table reproduction. Deterministic. */
#include <jansson.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accountant/acct.h"
#include "common/test.h"

int dp_cmd_account(int argc, char **argv);
int dp_cmd_audit_accounting(int argc, char **argv);

static char out_buf[1 << 20], err_buf[1 << 16];

/* run fn(argv...) with stdout and stderr captured into out_buf / err_buf */
static int run(int (*fn)(int, char **), const char *a0, ...) {
    char *argv[64];
    int argc = 0;
    va_list ap;
    va_start(ap, a0);
    for (const char *a = a0; a; a = va_arg(ap, const char *)) argv[argc++] = (char *)a;
    va_end(ap);
    fflush(stdout);
    fflush(stderr);
    int so = dup(1), se = dup(2);
    FILE *fo = tmpfile(), *fe = tmpfile();
    dup2(fileno(fo), 1);
    dup2(fileno(fe), 2);
    int rc = fn(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so);
    close(se);
    rewind(fo);
    rewind(fe);
    size_t n = fread(out_buf, 1, sizeof out_buf - 1, fo);
    out_buf[n] = 0;
    n = fread(err_buf, 1, sizeof err_buf - 1, fe);
    err_buf[n] = 0;
    fclose(fo);
    fclose(fe);
    return rc;
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

static double jget(json_t *o, const char *a, const char *b) {
    json_t *x = json_object_get(o, a);
    if (b) x = json_object_get(x, b);
    return json_is_number(x) ? json_number_value(x) : NAN;
}

int main(void) {
    char dir[] = "/tmp/acct_cmd_XXXXXX";
    const char *tmpd = getenv("TMPDIR");
    char base[4096];
    snprintf(base, sizeof base, "%s/acct_cmd_XXXXXX", tmpd && *tmpd ? tmpd : "/tmp");
    char *d = mkdtemp(base);
    if (!d) d = mkdtemp(dir);
    T_CHECK(d != NULL, "mkdtemp");
    if (!d) return t_finish();
    char p1[4200], p2[4200], p3[4200], p4[4200], p5[4200], p6[4200];

    /* ---- account ---- */
    int rc = run(dp_cmd_account, "--q", "0.004", "--sigma", "2", "--steps", "75000", "--delta", "1e-5", "--certified", "--json", NULL);
    T_CHECK(rc == 0, "account rc %d: %s", rc, err_buf);
    json_t *j = json_loads(out_buf, 0, NULL);
    T_CHECK(j != NULL, "account --json output is not JSON: %.200s", out_buf);
    if (j) {
        json_t *res = json_object_get(j, "results");
        double rdp = jget(res, "rdp", "epsilon"), cert = jget(res, "rdp", "certified_epsilon_upper");
        double lo = jget(res, "pld", "epsilon_lower"), up = jget(res, "pld", "epsilon_upper");
        T_CHECK(rdp > 2.5 && rdp < 2.7 && cert >= rdp && lo <= up && up < rdp && up > 2.3, "account numbers rdp %g cert %g pld [%g, %g]", rdp, cert, lo, up);
        T_CHECK(json_is_string(json_object_get(j, "neighbouring_relation")), "neighbouring relation missing");
        const char *lab = json_string_value(json_object_get(json_object_get(res, "gdp"), "label"));
        T_CHECK(lab && strstr(lab, "approximate"), "GDP must be labelled approximate");
        T_CHECK(json_object_get(json_object_get(res, "pure"), "not_applicable") != NULL, "pure must be n/a for the Gaussian");
        json_decref(j);
    }
    /* invalid inputs fail before anything is printed (stdout empty, exit 2) */
    rc = run(dp_cmd_account, "--target-epsilon", "0", "--q", "0.01", "--steps", "10", "--delta", "1e-5", NULL);
    T_CHECK(rc == 2 && out_buf[0] == 0 && strstr(err_buf, "--target-epsilon"), "target 0: rc %d stdout '%s'", rc, out_buf);
    rc = run(dp_cmd_account, "--target-epsilon", "8", "--precision", "2", "--q", "0.01", "--steps", "10", "--delta", "1e-5", NULL);
    T_CHECK(rc == 2 && out_buf[0] == 0 && strstr(err_buf, "--precision"), "precision 2: rc %d stdout '%s'", rc, out_buf);
    /* certified RDP of the subsampled Laplace is labelled as the looser RR route */
    rc = run(dp_cmd_account, "--mechanism", "laplace", "--q", "0.01", "--scale", "2", "--steps", "1000", "--delta", "1e-5", "--certified", "--accountant", "rdp", NULL);
    T_CHECK(rc == 0 && strstr(out_buf, "certified via the pure-DP/RR bound, looser than the Laplace RDP above"), "certified label: %s", out_buf);
    rc = run(dp_cmd_account, "--q", "0.01", "--sigma", "1", "--steps", "100", "--delta", "1e-5", "--certified", "--accountant", "rdp", NULL);
    T_CHECK(rc == 0 && !strstr(out_buf, "looser"), "gaussian certified must not carry the RR label: %s", out_buf);
    /* implementation delta of the bounded samplers, and the PLD fp-budget line */
    rc = run(dp_cmd_account, "--q", "0.01", "--sigma", "1", "--steps", "100", "--delta", "1e-5", "--accountant", "pld", NULL);
    T_CHECK(rc == 0 && strstr(out_buf, "implementation delta") && strstr(out_buf, "per coordinate") && strstr(out_buf, "porosity")
            && strstr(out_buf, "with the floating-point budget"), "sampler / fp lines: %s", out_buf);
    rc = run(dp_cmd_account, "--q", "0.01", "--sigma", "1", "--steps", "100", "--epsilon", "1", "--accountant", "pld", NULL);
    T_CHECK(rc == 0 && strstr(out_buf, "delta in ["), "account --epsilon rc %d: %s", rc, out_buf);
    rc = run(dp_cmd_account, "--q", "0.01", "--sigma", "1", "--steps", "100", "--delta", "1e-5", "--neighbouring", "replace-one", NULL);
    T_CHECK(rc == 0 && strstr(out_buf, "replace-one"), "replace-one must be stated: %s", out_buf);
    rc = run(dp_cmd_account, "--mechanism", "laplace", "--q", "0.016", "--scale", "16.3", "--steps", "75000", "--delta", "1e-5", NULL);
    T_CHECK(rc == 0 && strstr(out_buf, "exact (randomized-response composition) 1.037"), "laplace account: %s", out_buf);
    rc = run(dp_cmd_account, "--q", "0.04", "--sigma", "1", "--steps", "2250", "--delta", "1e-5", "--target-epsilon", "8",
             "--accountant", "rdp", "--orders", "opacus", "--json", NULL);
    j = json_loads(out_buf, 0, NULL);
    double sg = j ? jget(json_object_get(j, "results"), "rdp", "sigma") : NAN;
    T_CHECK(rc == 0 && fabs(sg - 1.416) < 2e-3, "calibration rc %d sigma %g (opacus 1.416): %s", rc, sg, err_buf);
    json_decref(j);
    snprintf(p1, sizeof p1, "%s/sched.json", d);
    write_file(p1, "[{\"mechanism\":\"gaussian\",\"q\":0.02,\"sigma\":1.2,\"steps\":100},"
                   "{\"mechanism\":\"gaussian\",\"q\":0.02,\"sigma\":1.2,\"steps\":200}]");
    rc = run(dp_cmd_account, "--schedule", p1, "--delta", "1e-5", "--accountant", "rdp", "--json", NULL);
    j = json_loads(out_buf, 0, NULL);
    double es = j ? jget(json_object_get(j, "results"), "rdp", "epsilon") : NAN;
    json_decref(j);
    rc += run(dp_cmd_account, "--q", "0.02", "--sigma", "1.2", "--steps", "300", "--delta", "1e-5", "--accountant", "rdp", "--json", NULL);
    j = json_loads(out_buf, 0, NULL);
    double e1 = j ? jget(json_object_get(j, "results"), "rdp", "epsilon") : NAN;
    json_decref(j);
    T_CHECK(rc == 0 && fabs(es - e1) <= 1e-12 * e1, "schedule %g vs single segment %g", es, e1);

    /* bad input: exit 2 and the message names the option */
    struct { const char *opt, *val, *name; } bad[] = {
        {"--q", "0", "--q"}, {"--q", "1.5", "--q"}, {"--sigma", "-1", "--sigma"}, {"--sigma", "nan", "--sigma"},
        {"--delta", "1", "--delta"}, {"--delta", "-0.1", "--delta"}, {"--steps", "0", "--steps"}, {"--pld-h", "-1", "--pld-h"}, {"--sigma", "1e-400", "--sigma"}, {"--orders", "0.5,2", "--orders"},
        {"--accountant", "foo", "--accountant"}, {"--bogus", "1", "--bogus"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        const char *a[12] = {"--q", "0.01", "--sigma", "1", "--steps", "10", "--delta", "1e-5"};
        int n = 8;
        for (int i = 0; i < 8; i += 2) if (strcmp(a[i], bad[k].opt) == 0) { a[i + 1] = bad[k].val; n = 8; goto have; }
        a[8] = bad[k].opt; a[9] = bad[k].val; n = 10;
    have:
        rc = n == 8 ? run(dp_cmd_account, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], NULL)
                    : run(dp_cmd_account, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], NULL);
        T_CHECK(rc == 2 && strstr(err_buf, bad[k].name), "%s %s: rc %d, stderr '%s'", bad[k].opt, bad[k].val, rc, err_buf);
    }
    rc = run(dp_cmd_account, "--q", "0.01", "--sigma", "1", "--steps", NULL);
    T_CHECK(rc == 2, "missing value: rc %d", rc);
    write_file(p1, "[{\"mechanism\":\"gaussian\",\"q\":0.02,\"sigma\":-1,\"steps\":100}]");
    rc = run(dp_cmd_account, "--schedule", p1, "--delta", "1e-5", NULL);
    T_CHECK(rc == 2 && strstr(err_buf, "segment 1") && strstr(err_buf, "sigma"), "bad schedule: rc %d '%s'", rc, err_buf);

    /* ---- audit-accounting ---- */
    snprintf(p2, sizeof p2, "%s/claims.csv", d);
    write_file(p2, "mechanism,q,sigma,steps,delta,epsilon,label\n"
                   "gaussian,0.004,2.0,75000,1e-5,3.0,generous\n"
                   "gaussian,0.004,2.0,75000,1e-5,2.0,too-small\n"
                   "laplace,0.016,4.6,75000,1e-5,4.0,dpzo-laplace\n"
                   "laplace,0.004,2.3,2000,0,4.0,dpzo-table8-row5\n"
                   "pure,0.1,1.0,100,1e-5,100,basic\n");
    rc = run(dp_cmd_audit_accounting, "--json", p2, NULL);
    T_CHECK(rc == 1, "audit with an under-reported claim: rc %d (%s)", rc, err_buf);
    j = json_loads(out_buf, 0, NULL);
    T_CHECK(j != NULL, "audit JSON");
    const char *want[] = {"CONSISTENT", "UNDER-REPORTED", "CONSISTENT", "UNDER-REPORTED", "CONSISTENT"};
    double mid = NAN;
    if (j) {
        json_t *cl = json_object_get(j, "claims");
        T_CHECK(json_array_size(cl) == 5, "5 claims");
        for (size_t k = 0; k < 5 && k < json_array_size(cl); k++) {
            const char *v = json_string_value(json_object_get(json_array_get(cl, k), "verdict"));
            T_CHECK(v && strcmp(v, want[k]) == 0, "claim %zu: %s (want %s)", k + 1, v ? v : "?", want[k]);
            json_t *ck = json_array_get(cl, k);
            const char *by = json_string_value(json_object_get(ck, "decided_by"));
            T_CHECK(by != NULL, "claim %zu: decided_by missing", k + 1);
            /* the upper bound of a verdict is a certified one: never the plain PLD upper */
            double pu = jget(ck, "pld_upper", NULL), pf = jget(ck, "pld_upper_fp", NULL), eu = jget(ck, "epsilon_upper", NULL);
            if (!isnan(pu)) T_CHECK(pf > pu && eu <= pf && (strcmp(by ? by : "", "pld-upper(+fp budget)") != 0 || eu > pu),
                                    "claim %zu: upper %g, pld %g, pld+fp %g (%s)", k + 1, eu, pu, pf, by ? by : "?");
        }
        T_CHECK(strcmp(json_string_value(json_object_get(json_array_get(cl, 0), "decided_by")), "pld-upper(+fp budget)") == 0,
                "claim 1 decided by the PLD upper with its fp budget");
        json_t *c0 = json_array_get(cl, 0);
        mid = 0.5 * (jget(c0, "epsilon_lower", NULL) + jget(c0, "epsilon_upper", NULL));
        T_CHECK(jget(c0, "epsilon_lower", NULL) < jget(c0, "epsilon_upper", NULL), "bounds");
        json_decref(j);
    }
    /* a claim between the bounds is INCONCLUSIVE; JSON input; exit 0 without under-reporting */
    snprintf(p3, sizeof p3, "%s/claims.json", d);
    char txt[512];
    snprintf(txt, sizeof txt, "{\"claims\": [{\"mechanism\":\"gaussian\",\"q\":0.004,\"sigma\":2.0,\"steps\":75000,\"delta\":1e-5,\"epsilon\":%.17g,\"label\":\"mid\"}]}", mid);
    write_file(p3, txt);
    rc = run(dp_cmd_audit_accounting, p3, NULL);
    T_CHECK(rc == 0 && strstr(out_buf, "INCONCLUSIVE"), "midpoint claim: rc %d %s", rc, out_buf);
    /* UNDER-REPORTED uses the optimistic PLD lower bound: 2.37 lies below it (~2.3795 at the audit
     * grid) but above the former coupling lower bound (~2.358 there), so only the new bound flags it */
    snprintf(txt, sizeof txt, "{\"claims\": [{\"mechanism\":\"gaussian\",\"q\":0.004,\"sigma\":2.0,\"steps\":75000,\"delta\":1e-5,\"epsilon\":2.37,\"label\":\"close\"}]}");
    write_file(p3, txt);
    rc = run(dp_cmd_audit_accounting, "--json", p3, NULL);
    T_CHECK(rc == 1 && strstr(out_buf, "UNDER-REPORTED"), "claim 2.37 below the optimistic lower bound: rc %d %s", rc,
            out_buf);
    j = json_loads(out_buf, 0, NULL);
    if (j) {
        json_t *c0 = json_array_get(json_object_get(j, "claims"), 0);
        double lo = jget(c0, "epsilon_lower", NULL), up = jget(c0, "epsilon_upper", NULL);
        T_CHECK(lo > 2.37 && lo <= up && up - lo <= 0.005, "audit bounds [%.9f, %.9f]", lo, up);
        json_decref(j);
    } else T_CHECK(0, "audit JSON (close claim)");
    /* invalid rows: verdict INVALID, message names field and row, exit 2 */
    snprintf(p4, sizeof p4, "%s/bad.csv", d);
    /* one row convention (docs §8): row N = the N-th claim, header/blank/comment lines not counted; CSV adds the line */
    write_file(p4, "mechanism,q,sigma,steps,delta,epsilon\n\n# comment\ngaussian,1.5,1,10,1e-5,1\ngaussian,0.1,1,10,1e-5,nan\n");
    rc = run(dp_cmd_audit_accounting, p4, NULL);
    T_CHECK(rc == 2 && strstr(err_buf, "row 1 (line 4): field 'q'") && strstr(err_buf, "row 2 (line 5): field 'epsilon'") && strstr(out_buf, "INVALID"),
            "invalid rows: rc %d err '%s'", rc, err_buf);
    T_CHECK(strstr(out_buf, "\n1    ") && strstr(out_buf, "\n2    ") && !strstr(out_buf, "\n4    "), "table rows 1, 2: %s", out_buf);
    rc = run(dp_cmd_audit_accounting, "--json", p4, NULL);
    j = json_loads(out_buf, 0, NULL);
    if (j) {
        json_t *c1 = json_array_get(json_object_get(j, "claims"), 1);
        T_CHECK(jget(c1, "row", NULL) == 2 && jget(c1, "line", NULL) == 5, "JSON row/line of claim 2: %g %g", jget(c1, "row", NULL), jget(c1, "line", NULL));
        json_decref(j);
    } else T_CHECK(0, "audit JSON (invalid rows)");
    /* RFC-4180 quoting: quoted fields, "" escapes, commas inside quotes; a stray quote is INVALID with a message */
    write_file(p4, "\"mechanism\",q,sigma,steps,delta,epsilon,label\n\"gaussian\",0.01,1,100,1e-5,100,\"a, \"\"b\"\"\"\ngauss\"ian,0.01,1,100,1e-5,100,x\n");
    rc = run(dp_cmd_audit_accounting, "--json", p4, NULL);
    j = json_loads(out_buf, 0, NULL);
    T_CHECK(rc == 2 && j && strstr(err_buf, "row 2 (line 3): malformed CSV"), "quoted CSV: rc %d err '%s'", rc, err_buf);
    if (j) {
        json_t *c0 = json_array_get(json_object_get(j, "claims"), 0);
        const char *v = json_string_value(json_object_get(c0, "verdict")), *lb = json_string_value(json_object_get(c0, "label"));
        T_CHECK(v && strcmp(v, "CONSISTENT") == 0 && lb && strcmp(lb, "a, \"b\"") == 0, "quoted row: %s label '%s'", v ? v : "?", lb ? lb : "?");
        json_decref(j);
    }
    snprintf(p5, sizeof p5, "%s/malformed.csv", d);
    write_file(p5, "mechanism,q,steps\ngaussian,0.1,10\n");
    rc = run(dp_cmd_audit_accounting, p5, NULL);
    T_CHECK(rc == 2 && strstr(err_buf, "sigma"), "missing column: rc %d '%s'", rc, err_buf);
    snprintf(p6, sizeof p6, "%s/malformed.json", d);
    write_file(p6, "[{\"mechanism\": \"gaussian\", ");
    rc = run(dp_cmd_audit_accounting, p6, NULL);
    T_CHECK(rc == 2, "malformed JSON: rc %d", rc);
    rc = run(dp_cmd_audit_accounting, "/nonexistent/claims.csv", NULL);
    T_CHECK(rc == 2, "missing file: rc %d", rc);

    unlink(p1); unlink(p2); unlink(p3); unlink(p4); unlink(p5); unlink(p6);
    rmdir(d);
    return t_finish();
}

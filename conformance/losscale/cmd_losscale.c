/* conformance/losscale/cmd_losscale.c — `dpcert losscale`: the loss-scaling pipelines of DP-ZeRO
 * Table 4 side by side on the same seeded batches (and batches near fp16's overflow and
 * underflow limits), with the losscale check's verdict per row, Table 3 derived, and the
 * neighbouring-datasets demonstration; `--check REF CAND` runs the losscale check on two
 * dpsgd exports (docs/precision.md "Loss scaling"). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/alloc.h"
#include "common/fsutil.h"
#include "conformance/losscale/losscale.h"

int dp_cmd_losscale(int argc, char **argv);

static int run_check(const char *ref, const char *cand, const char *dtype, int json) {
    static const char *const dts[] = {"f64", "f32", "bf16", "fp16", NULL};
    static const dp_dtype dtv[] = {DP_F64, DP_F32, DP_BF16, DP_F16};
    int di = 0;
    dp_status st = dp_parse_choice(&di, "--dtype", dtype, dts);
    if (st != DP_OK) return dp_cli_fail("losscale", st);
    ls_verdict v;
    char diag[512];
    st = ls_check_exports(&v, diag, sizeof diag, ref, cand, dtv[di], json ? NULL : stdout);
    if (st != DP_OK) return dp_cli_fail("losscale", st);
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "check", json_string("losscale"));
        json_object_set_new(o, "reference", json_string(ref));
        json_object_set_new(o, "candidate", json_string(cand));
        json_object_set_new(o, "verdict", json_string(ls_verdict_name(v)));
        json_object_set_new(o, "diagnosis", json_string(diag));
        json_dumpf(o, stdout, JSON_INDENT(1) | JSON_ENSURE_ASCII);
        printf("\n");
        json_decref(o);
    } else {
        printf("losscale: %s%s%s\n", ls_verdict_name(v), diag[0] ? " — " : "", diag);
    }
    return ls_verdict_fails(v) ? 1 : 0;
}

int dp_cmd_losscale(int argc, char **argv) {
    const char *scale_s = "1024", *dtype = NULL, *report = NULL, *pipes = NULL;
    int json = 0, help = 0, check = 0, scale_seen = 0;
    uint64_t seed = 1;
    double clip = 1.0;
    int64_t bsz = 16;
    dp_opt opts[] = {
        {"--seed", DP_OPT_U64, &seed, NULL, "public seed of the batches (default 1)"},
        {"--loss-scale", DP_OPT_STRING, &scale_s, &scale_seen,
         "static loss scale S: a positive power of two, e.g. 1024 or 2^10 (default 2^10, DP-ZeRO's 10^3)"},
        {"--clip", DP_OPT_DOUBLE, &clip, NULL, "clipping threshold C (default 1)"},
        {"--batch-size", DP_OPT_INT, &bsz, NULL, "examples per batch (default 16, at most 100000)"},
        {"--dtype", DP_OPT_STRING, &dtype, NULL,
         "half type: fp16, bf16 or both (default both); with --check the candidate's: f64, f32, bf16, fp16"},
        {"--pipelines", DP_OPT_STRING, &pipes, NULL, "only print these pipelines (comma-separated names)"},
        {"--json", DP_OPT_FLAG, &json, NULL, "print JSON instead of the table"},
        {"--report", DP_OPT_STRING, &report, NULL, "also write DIR/losscale.json"},
        {"--check", DP_OPT_FLAG, &check, NULL, "run the losscale check on two exports: --check REFERENCE CANDIDATE"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    char *pos[2];
    int npos = 0;
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, pos, 2, &npos, &help);
    if (st != DP_OK) return dp_cli_fail("losscale", st);
    if (help) {
        printf("usage: dpcert losscale [OPTIONS]              the pipelines side by side\n"
               "       dpcert losscale --check REF CAND [--dtype T] [--json]   the losscale check on exports\n"
               "Pipelines (DP-ZeRO Table 4 steps: 1 forward, 2 scale loss, 3 backward, 4 clip, 4* clip at S C,\n"
               "5 unscale, 6 update):");
        for (int p = 0; p < LS_COUNT; p++) printf(" %s (%s)", ls_pipelines[p].name, ls_pipelines[p].steps);
        printf("\nExit 0 every row as derived in docs/precision.md (--check: PASS), 1 otherwise, 2 bad input.\n");
        dp_opts_print_help(opts, nopts);
        return 0;
    }
    if (check) {
        if (npos != 2)
            return dp_cli_fail("losscale", dp_error(DP_ERR_USAGE, "--check needs two exports (REFERENCE CANDIDATE), got %d", npos));
        return run_check(pos[0], pos[1], dtype ? dtype : "f32", json);
    }
    if (npos) return dp_cli_fail("losscale", dp_error(DP_ERR_USAGE, "unexpected argument '%s' (positional arguments "
                                                                    "only with --check)", pos[0]));
    double S;
    if ((st = dp_parse_pow2(&S, "--loss-scale", scale_s)) != DP_OK) return dp_cli_fail("losscale", st);
    if (S > 16777216.0)
        return dp_cli_fail("losscale", dp_error(DP_ERR_INVALID, "--loss-scale must be at most 2^24 (got %g)", S));
    if ((st = dp_check_range("--clip", clip, 0, 0, 1e6, 1)) != DP_OK) return dp_cli_fail("losscale", st);
    if ((st = dp_check_range("--batch-size", (double)bsz, 1, 1, 100000, 1)) != DP_OK) return dp_cli_fail("losscale", st);
    int mask = 3;
    if (dtype) {
        static const char *const dn[] = {"fp16", "bf16", "both", NULL};
        int di;
        if ((st = dp_parse_choice(&di, "--dtype", dtype, dn)) != DP_OK) return dp_cli_fail("losscale", st);
        mask = di == 0 ? 1 : di == 1 ? 2 : 3;
    }
    int keep[LS_COUNT];
    for (int p = 0; p < LS_COUNT; p++) keep[p] = pipes == NULL;
    if (pipes) {
        char *dup = dp_strdup(pipes), *save = NULL;
        if (!dup) return dp_cli_fail("losscale", dp_error(DP_ERR_NOMEM, "losscale: out of memory"));
        for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int pi;
            if ((st = dp_parse_choice(&pi, "--pipelines", t, ls_pipeline_names)) != DP_OK) { dp_free(dup); return dp_cli_fail("losscale", st); }
            keep[pi] = 1;
        }
        dp_free(dup);
    }
    json_t *root = json_object();
    int nfail = 0;
    st = ls_report(root, &nfail, seed, S, clip, bsz, mask, pipes ? keep : NULL, json ? NULL : stdout);
    if (st == DP_OK && !json)
        printf("losscale: %s\n", nfail ? "rows differ from the derivation (docs/precision.md)" : "every row as derived");
    if (st == DP_OK && json) {
        json_dumpf(root, stdout, JSON_INDENT(1) | JSON_ENSURE_ASCII);
        printf("\n");
    }
    if (st == DP_OK && report) {
        char path[4200];
        char *s = json_dumps(root, JSON_INDENT(1) | JSON_ENSURE_ASCII);
        st = s ? dp_mkdir_p("--report", report) : dp_error(DP_ERR_NOMEM, "losscale: out of memory");
        if (st == DP_OK && snprintf(path, sizeof path, "%s/losscale.json", report) >= (int)sizeof path)
            st = dp_error(DP_ERR_INVALID, "--report: path too long");
        if (st == DP_OK) st = dp_write_file_atomic("--report", path, s, strlen(s));
        dp_free(s);
    }
    json_decref(root);
    if (st != DP_OK) return dp_cli_fail("losscale", st);
    return nfail ? 1 : 0;
}

/* conformance/compare/cmd_compare.c — `dpcert compare A B`: compare a candidate export B with
 * a reference export A (files or step directories) under the derived tolerances. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "conformance/compare/compare.h"


int dp_cmd_compare(int argc, char **argv) {
    const char *dtype = "f64";
    const char *precision = NULL;
    int json = 0, help = 0, verbose = 0, shares = 0, dtype_seen = 0, model_k_seen = 0, noise_ranks_seen = 0;
    int precision_seen = 0, stages = 0;
    double warn = 0.5;
    int64_t model_k = 0, noise_ranks = 0;
    dp_opt opts[] = {
        {"--dtype", DP_OPT_STRING, &dtype, &dtype_seen, "candidate working precision: f64 (default), f32, bf16"},
        {"--precision", DP_OPT_STRING, &precision, &precision_seen,
         "bf16 | fp16: the mixed-precision recipe of docs/precision.md (half storage, f32 compute and master weights)"},
        {"--json", DP_OPT_FLAG, &json, NULL, "print the per-tensor results as JSON"},
        {"--warn", DP_OPT_DOUBLE, &warn, NULL, "MARGINAL above this fraction of the budget (default 0.5)"},
        {"--noise-shares", DP_OPT_FLAG, &shares, NULL,
         "the candidate's noise is independent per-rank shares: recomputed from the reference's noise_key"},
        {"--noise-ranks", DP_OPT_INT, &noise_ranks, &noise_ranks_seen,
         "R of --noise-shares when the candidate's metadata lacks 'ranks' (1..255)"},
        {"--model-k", DP_OPT_INT, &model_k, &model_k_seen, "reduction length K of the model (default: from the export)"},
        {"--verbose", DP_OPT_FLAG, &verbose, NULL, "also list skipped tensors"},
        {"--stages", DP_OPT_FLAG, &stages, NULL,
         "print the comparison's stages (tensor family, where docs/tolerances.md derives its bound) and exit"},
    };
    const size_t nopts = sizeof opts / sizeof opts[0];
    char *pos[2];
    int npos = 0;
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, pos, 2, &npos, &help);
    if (st != DP_OK) return dp_cli_fail("compare", st);
    if (help) {
        printf("usage: dpcert compare REFERENCE CANDIDATE [OPTIONS]\n"
               "  REFERENCE, CANDIDATE: two safetensors exports of one step, or two export directories\n"
               "  (step-NNNNNN.safetensors). Exit 0 agree (PASS/MARGINAL), 1 a tensor FAILs or a required check\n"
               "  could not run (INCOMPLETE: e.g. noise shares that cannot be recomputed), 2 bad input.\n");
        dp_opts_print_help(opts, nopts);
        return 0;
    }
    if (stages) {
        if (npos != 0) return dp_cli_fail("compare", dp_error(DP_ERR_USAGE, "--stages takes no exports (got %d)", npos));
        conf_compare_stages_print(stdout);
        return 0;
    }
    if (npos != 2) return dp_cli_fail("compare", dp_error(DP_ERR_USAGE, "expected two exports (REFERENCE CANDIDATE), got %d", npos));
    conf_cmp_opts o;
    conf_cmp_opts_default(&o);
    static const char *const dts[] = {"f64", "f32", "bf16", NULL};
    static const dp_dtype dtv[] = {DP_F64, DP_F32, DP_BF16};
    int di = 0;
    if ((st = dp_parse_choice(&di, "--dtype", dtype, dts)) != DP_OK) return dp_cli_fail("compare", st);
    o.cand_dtype = dtv[di];
    if (precision_seen) {
        static const char *const hps[] = {"bf16", "fp16", NULL};
        int hi = 0;
        if ((st = dp_parse_choice(&hi, "--precision", precision, hps)) != DP_OK) return dp_cli_fail("compare", st);
        if (dtype_seen && o.cand_dtype != DP_F32)
            return dp_cli_fail("compare", dp_error(DP_ERR_USAGE, "--precision %s computes in f32: --dtype %s contradicts it",
                                                   precision, dtype));
        o.mixed = 1;
        o.half_dtype = hi == 0 ? DP_BF16 : DP_F16;
        o.cand_dtype = DP_F32;
    }
    if ((st = dp_check_range("--warn", warn, 0, 0, 1, 0)) != DP_OK) return dp_cli_fail("compare", st);
    /* --model-k K enters gamma_K = K u / (1 - K u) (docs/tolerances.md), defined for K u < 1
     * with u = u_cand + u_f64: a larger K has no finite bound, so it is refused here. */
    if (model_k_seen) {
        double u = conf_unit_roundoff(o.cand_dtype) + conf_unit_roundoff(DP_F64);
        double kmax = floor(nextafter(1.0 / u, 0.0));
        if (model_k < 1 || (double)model_k > kmax)
            return dp_cli_fail("compare", dp_error(DP_ERR_INVALID,
                                                   "--model-k must be in [1, %.0f] for --dtype %s (K u < 1, "
                                                   "docs/tolerances.md; got %lld)",
                                                   kmax, dtype, (long long)model_k));
    }
    o.warn = warn;
    o.model_k = model_k;
    o.noise_statistical = shares;
    if (noise_ranks_seen && (noise_ranks < 1 || noise_ranks > 255)) return dp_cli_fail("compare", dp_error(DP_ERR_INVALID, "--noise-ranks must be in [1, 255], got %lld", (long long)noise_ranks));
    if (noise_ranks && !shares) return dp_cli_fail("compare", dp_error(DP_ERR_USAGE, "--noise-ranks needs --noise-shares"));
    o.noise_ranks = noise_ranks;
    o.dtype_given = dtype_seen || precision_seen; /* else the candidate's declared precision */
    conf_cmp_result r;
    conf_cmp_result_init(&r);
    st = conf_compare_paths(&r, pos[0], pos[1], &o);
    if (st != DP_OK) {
        conf_cmp_result_free(&r);
        return dp_cli_fail("compare", st);
    }
    if (json) {
        json_t *j = conf_cmp_json(&r);
        json_object_set_new(j, "reference", json_string(pos[0]));
        json_object_set_new(j, "candidate", json_string(pos[1]));
        json_object_set_new(j, "dtype", json_string(dtype));
        json_object_set_new(j, "overall", json_string(conf_cmp_overall(&r)));
        if (r.incomplete) json_object_set_new(j, "incomplete", json_string(r.incomplete_why));
        json_dumpf(j, stdout, JSON_INDENT(1) | JSON_ENSURE_ASCII);
        printf("\n");
        json_decref(j);
    } else {
        conf_cmp_print(&r, stdout, verbose);
    }
    int rc = r.status == CONF_FAIL || r.incomplete ? 1 : 0; /* INCOMPLETE: never a pass by omission */
    if (r.ncompared == 0) {
        fprintf(stderr, "dpcert compare: no tensor compared (nothing in common between the exports)\n");
        rc = 1;
    }
    conf_cmp_result_free(&r);
    return rc;
}

/* attacks/audit_cmd.c — `dpcert audit`: the white-box step audit and the one-run audit of
 * a DP-SGD or DP-ZO release (docs/audits.md). Exit 0 PASS, 1 FAIL, 2 bad input, 3 internal. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attacks/audit.h"
#include "attacks/audit_candidate.h"
#include "attacks/audit_html.h"
#include "attacks/audit_report.h"
#include "common/cli.h"
#include "common/fsutil.h"
#include "common/proc.h"
#include "optimized/dpsgd.h"
#include "reference/model_cli.h"

#define CMD "audit"

typedef struct audit_cli audit_cli;
static int audit_main(audit_cli *ap);

struct audit_cli {
    ref_model_cli m;
    const char *algo, *impl, *backend, *strategy, *candidate, *canary, *canary_param, *plant, *level, *report, *work;
    const char *cand_mode;
    double timeout;
    int seen_impl;
    double canary_scale, q, clip, sigma, delta, phi, confidence, calib_frac;
    int64_t canary_elem, trials, threads, onerun_m, onerun_r, onerun_k, steps;
    uint64_t seed, key;
    int seen_canary, seen_trials, seen_key, seen_level, quiet;
};

static dp_status cli_finish(audit_config *c, const audit_cli *a) {
    int k;
    audit_config_default(c);
    DP_TRY(dp_parse_choice(&k, "--algo", a->algo, audit_algo_names));
    c->algo = (audit_algo)k;
    DP_TRY(dp_parse_choice(&k, "--impl", a->impl, audit_impl_names));
    c->impl = (audit_impl)k;
    if (a->candidate && !a->seen_impl) c->impl = AUDIT_IMPL_CANDIDATE; /* --candidate alone */
    if (a->candidate && c->impl != AUDIT_IMPL_CANDIDATE)
        return dp_error(DP_ERR_USAGE, "--candidate goes with --impl candidate (got --impl %s)", a->impl);
    c->work = a->work;
    c->timeout_s = a->timeout;
    DP_TRY(dp_cand_mode_parse(&c->candidate_persistent, "--candidate-mode", a->cand_mode));
    const char *const *backends = opt_backend_builtin_names;
    DP_TRY(dp_parse_choice(&k, "--backend", a->backend, backends));
    c->backend = backends[k];
    DP_TRY(dp_parse_choice(&k, "--strategy", a->strategy, opt_strategy_names));
    c->strategy = k;
    c->candidate = a->candidate;
    c->canary = (c->impl == AUDIT_IMPL_REFERENCE && c->algo == AUDIT_ALGO_DPSGD) ? AUDIT_CANARY_DIRAC
                                                                                 : AUDIT_CANARY_INPUT;
    if (a->seen_canary) {
        DP_TRY(dp_parse_choice(&k, "--canary", a->canary, audit_canary_names));
        c->canary = (audit_canary)k;
    }
    DP_TRY(dp_parse_choice(&k, "--plant", a->plant, audit_plant_names));
    c->plant = (audit_plant)k;
    if (c->plant != AUDIT_PLANT_NONE) {
        const char *e = getenv("DPCERT_TEST_INJECT");
        if (!e || strcmp(e, "1") != 0)
            return dp_error(DP_ERR_USAGE, "--plant %s is a test-only broken release: it needs DPCERT_TEST_INJECT=1",
                            a->plant);
    }
    DP_TRY(dp_parse_choice(&k, "--level", a->level, audit_level_names));
    if (k == AUDIT_LEVEL_CUSTOM && !a->seen_trials)
        return dp_error(DP_ERR_USAGE, "--level custom needs --trials");
    if (a->seen_trials && a->seen_level && k != AUDIT_LEVEL_CUSTOM)
        return dp_error(DP_ERR_USAGE, "--trials sets its own count: use it with --level custom (or alone)");
    c->trials = a->seen_trials ? a->trials : k == AUDIT_LEVEL_CERTIFY ? AUDIT_TRIALS_CERTIFY : AUDIT_TRIALS_CI;
    DP_TRY(ref_model_cli_finish(&c->mc, &a->m));
    c->n = a->m.n;
    c->canary_scale = a->canary_scale;
    c->canary_elem = a->canary_elem;
    c->q = a->q;
    c->clip = a->clip;
    c->sigma = a->sigma;
    c->delta = a->delta;
    c->steps = a->steps;
    c->phi = a->phi;
    c->confidence = a->confidence;
    c->calib_frac = a->calib_frac;
    c->seed.k = a->seed;
    if (a->threads < 1 || a->threads > 256)
        return dp_error(DP_ERR_INVALID, "--threads must be in [1, 256] (got %lld)", (long long)a->threads);
    c->threads = (int)a->threads;
    c->progress = !a->quiet;
    if (a->seen_key) c->key.k = a->key;
    else DP_TRY(dp_noise_key_random(&c->key));
    if (a->canary_param) {
        ref_model m;
        DP_TRY(ref_model_init(&m, &c->mc, c->seed));
        c->canary_param = ref_model_find(&m, a->canary_param);
        ref_model_free(&m);
        if (c->canary_param < 0)
            return dp_error(DP_ERR_INVALID, "--canary-param %s: the model has no such parameter (the canary cannot "
                                            "be represented)", a->canary_param);
    }
    return audit_config_check(c);
}

static json_t *test_json(const audit_test *t) {
    json_t *o = json_object();
    json_object_set_new(o, "threshold", audit_json_num(t->tau));
    json_object_set_new(o, "false_positives", json_integer(t->fp));
    json_object_set_new(o, "negatives", json_integer(t->n_neg));
    json_object_set_new(o, "false_negatives", json_integer(t->fn));
    json_object_set_new(o, "positives", json_integer(t->n_pos));
    json_object_set_new(o, "fpr_upper", audit_json_num(t->fpr_hi));
    json_object_set_new(o, "fnr_upper", audit_json_num(t->fnr_hi));
    return o;
}

static json_t *report_json(const audit_config *c, const audit_result *r, const audit_onerun_result *o, int onerun,
                           audit_verdict v) {
    json_t *root = json_object(), *cfg = json_object(), *wb = json_object();
    json_object_set_new(root, "format", json_string("dpcert-audit-report/1"));
    json_object_set_new(root, "verdict", json_string(audit_verdict_names[v]));
    json_object_set_new(cfg, "algo", json_string(audit_algo_names[c->algo]));
    json_object_set_new(cfg, "impl", json_string(audit_impl_names[c->impl]));
    if (c->impl == AUDIT_IMPL_OPTIMIZED) {
        json_object_set_new(cfg, "backend", json_string(c->backend));
        json_object_set_new(cfg, "strategy", json_string(opt_strategy_names[c->strategy]));
    }
    if (c->impl == AUDIT_IMPL_CANDIDATE) json_object_set_new(cfg, "candidate", json_string(c->candidate));
    if (c->impl == AUDIT_IMPL_CANDIDATE)
        json_object_set_new(cfg, "candidate_mode", json_string(c->candidate_persistent ? "persistent" : "one-call"));
    json_object_set_new(cfg, "canary", json_string(audit_canary_names[c->canary]));
    json_object_set_new(cfg, "canary_scale", json_real(c->canary_scale));
    json_object_set_new(cfg, "plant", json_string(audit_plant_names[c->plant]));
    json_object_set_new(cfg, "dataset_size", json_integer(c->n));
    json_object_set_new(cfg, "q", json_real(c->q));
    json_object_set_new(cfg, "clip", json_real(c->clip));
    json_object_set_new(cfg, "sigma", json_real(c->sigma));
    json_object_set_new(cfg, "delta", json_real(c->delta));
    json_object_set_new(cfg, "steps", json_integer(c->steps));
    if (c->algo == AUDIT_ALGO_DPZO) json_object_set_new(cfg, "phi", json_real(c->phi));
    json_object_set_new(cfg, "trials_per_side", json_integer(c->trials));
    json_object_set_new(cfg, "confidence", json_real(c->confidence));
    json_object_set_new(cfg, "calibration_fraction", json_real(c->calib_frac));
    json_object_set_new(cfg, "seed", json_integer((json_int_t)c->seed.k));
    json_object_set_new(cfg, "threads", json_integer(c->threads));
    json_object_set_new(root, "config", cfg);
    json_object_set_new(wb, "verdict", json_string(audit_verdict_names[r->verdict]));
    json_object_set_new(wb, "message", json_string(r->message));
    json_object_set_new(wb, "epsilon_claimed", audit_json_num(r->eps_claim));
    json_object_set_new(wb, "mu_claimed", audit_json_num(r->mu_claim));
    json_object_set_new(wb, "epsilon_lb_standard", audit_json_num(r->eps_lb_std));
    json_object_set_new(wb, "mu_lb", audit_json_num(r->mu_lb));
    json_object_set_new(wb, "epsilon_lb_gaussian", audit_json_num(r->eps_lb_gauss));
    json_object_set_new(wb, "gaussian_binding", json_boolean(r->gauss_binding));
    json_object_set_new(wb, "tightness", audit_json_num(r->tightness));
    json_object_set_new(wb, "test_standard", test_json(&r->std));
    json_object_set_new(wb, "test_gaussian", test_json(&r->gauss));
    json_object_set_new(wb, "calibration_trials_per_side", json_integer(r->n_cal));
    json_object_set_new(wb, "evaluation_trials_per_side", json_integer(r->n_eval));
    json_object_set_new(wb, "auc", audit_json_num(r->auc));
    json_object_set_new(wb, "seconds", audit_json_num(r->seconds));
    json_object_set_new(wb, "trials_per_second", audit_json_num(r->trials_per_s));
    json_object_set_new(wb, "roc", audit_json_roc(r->roc_fpr, r->roc_tpr, r->roc_n));
    json_object_set_new(root, "white_box", wb);
    if (onerun) {
        json_t *j = json_object();
        json_object_set_new(j, "verdict", json_string(audit_verdict_names[o->verdict]));
        json_object_set_new(j, "message", json_string(o->message));
        json_object_set_new(j, "canaries", json_integer(o->m));
        json_object_set_new(j, "included", json_integer(o->included));
        json_object_set_new(j, "guesses", json_integer(o->r));
        json_object_set_new(j, "correct", json_integer(o->v));
        json_object_set_new(j, "steps", json_integer(o->steps));
        json_object_set_new(j, "epsilon_lb", audit_json_num(o->eps_lb));
        json_object_set_new(j, "epsilon_claimed", audit_json_num(o->eps_claim));
        json_object_set_new(j, "canary", json_string(o->canary));
        json_object_set_new(j, "impl", json_string(audit_impl_names[c->impl]));
        json_object_set_new(j, "seconds", audit_json_num(o->seconds));
        json_object_set_new(root, "one_run", j);
    } else {
        json_object_set_new(root, "one_run", json_null());
    }
    return root;
}

static void print_result(const audit_config *c, const audit_result *r) {
    printf("audit %s %s: canary %s, %lld trials per side (%lld calibration), %.2f s, %.0f trials/s, %d thread%s\n",
           audit_algo_names[c->algo], audit_impl_names[c->impl], audit_canary_names[c->canary], (long long)c->trials,
           (long long)r->n_cal, r->seconds, r->trials_per_s, c->threads, c->threads > 1 ? "s" : "");
    printf("  claimed epsilon %.4f at delta %g (PLD accountant: q %g, sigma %g, %lld step%s)\n", r->eps_claim,
           c->delta, c->q, c->sigma, (long long)c->steps, c->steps > 1 ? "s" : "");
    printf("  standard: FP %lld/%lld FN %lld/%lld, FPR <= %.4g FNR <= %.4g -> epsilon_LB %.4f\n",
           (long long)r->std.fp, (long long)r->std.n_neg, (long long)r->std.fn, (long long)r->std.n_pos, r->std.fpr_hi,
           r->std.fnr_hi, r->eps_lb_std);
    printf("  Gaussian trade-off: FPR <= %.4g FNR <= %.4g -> mu_LB %.4f -> epsilon_LB %.4f%s, "
           "epsilon_LB/epsilon_claimed %.3f\n",
           r->gauss.fpr_hi, r->gauss.fnr_hi, r->mu_lb, r->eps_lb_gauss, r->gauss_binding ? "" : " (estimate: q < 1)",
           r->tightness);
    printf("  white-box: %s (%s)\n", audit_verdict_names[r->verdict], r->message);
}

/* A fresh temporary work directory (candidate runs), removed with its files at the end. */
static char g_tmpdir[512];
static void cleanup_tmp(void) {
    if (!g_tmpdir[0]) return;
    const char *f[] = {"audit-D.safetensors", "audit-Dprime.safetensors"};
    char p[600];
    for (size_t i = 0; i < 2; i++) { snprintf(p, sizeof p, "%s/%s", g_tmpdir, f[i]); unlink(p); }
    rmdir(g_tmpdir);
    g_tmpdir[0] = 0;
}

int dp_cmd_audit(int argc, char **argv) {
    if (argc > 0 && strcmp(argv[0], "reference-candidate") == 0) return audit_cmd_reference_candidate(argc - 1, argv + 1);
    audit_cli a;
    memset(&a, 0, sizeof a);
    ref_model_cli_init(&a.m, 16);
    a.algo = "dpsgd"; a.impl = "reference"; a.backend = "host"; a.strategy = "grad-sample";
    a.plant = "none"; a.level = "ci"; a.cand_mode = "one-call";
    a.canary_scale = 4; a.q = 1; a.clip = 1; a.sigma = 1; a.delta = 1e-5; a.phi = 1;
    a.confidence = 0.95; a.calib_frac = 0.1; a.threads = 2; a.timeout = 120;
    a.onerun_m = 1000; a.onerun_r = 200; a.onerun_k = 1; a.steps = 1;
    a.m.model = "mlp";
    dp_opt opts[64];
    size_t n = 0;
    dp_status st = ref_model_cli_add_opts(opts, &n, 64, &a.m, "|D| (default 16)");
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    for (size_t i = 0; i < n; i++) /* the audit has a default model (docs/audits.md): say so, not "required" */
        if (strcmp(opts[i].name, "--model") == 0) opts[i].help = "mlp | llama (default mlp: in 16, hidden 32,32, classes 10)";
    const dp_opt mine[] = {
        {"--algo", DP_OPT_STRING, &a.algo, NULL, "dpsgd|dpzo (default dpsgd)"},
        {"--impl", DP_OPT_STRING, &a.impl, &a.seen_impl, "reference|optimized|candidate (default reference)"},
        {"--backend", DP_OPT_STRING, &a.backend, NULL, "optimized: host|cuda|cuda-emu (default host)"},
        {"--strategy", DP_OPT_STRING, &a.strategy, NULL, "optimized DP-SGD strategy (default grad-sample)"},
        {"--candidate", DP_OPT_STRING, &a.candidate, NULL, "candidate command CMD, run as CMD IN OUT (docs/audits.md)"},
        {"--work", DP_OPT_STRING, &a.work, NULL, "candidate: directory for vectors/outputs (default: a fresh temp dir)"},
        {"--timeout", DP_OPT_DOUBLE, &a.timeout, NULL, "candidate: seconds per run (default 120)"},
        {"--candidate-mode", DP_OPT_STRING, &a.cand_mode, NULL, "candidate: one-call (default) | persistent (one process "
                                                               "per thread serves its trials)"},
        {"--canary", DP_OPT_STRING, &a.canary, &a.seen_canary, "dirac|anti|input (default dirac on the reference, "
                                                               "else input)"},
        {"--canary-scale", DP_OPT_DOUBLE, &a.canary_scale, NULL, "canary size in units of --clip, >= 1 (default 4)"},
        {"--canary-param", DP_OPT_STRING, &a.canary_param, NULL, "dirac: parameter name (default the last)"},
        {"--canary-elem", DP_OPT_INT, &a.canary_elem, NULL, "dirac: element index (default 0)"},
        {"--plant", DP_OPT_STRING, &a.plant, NULL, "test-only broken release (needs DPCERT_TEST_INJECT=1)"},
        {"--level", DP_OPT_STRING, &a.level, &a.seen_level, "ci (4000 trials/side) | certify (50000) | custom"},
        {"--trials", DP_OPT_INT, &a.trials, &a.seen_trials, "trials per side (custom level)"},
        {"--confidence", DP_OPT_DOUBLE, &a.confidence, NULL, "of the lower bounds, in (0, 1) (default 0.95)"},
        {"--calib-frac", DP_OPT_DOUBLE, &a.calib_frac, NULL, "trials per side used to pick the threshold (0.1)"},
        {"--q", DP_OPT_DOUBLE, &a.q, NULL, "Poisson rate (default 1)"},
        {"--clip", DP_OPT_DOUBLE, &a.clip, NULL, "clipping norm C (default 1)"},
        {"--sigma", DP_OPT_DOUBLE, &a.sigma, NULL, "noise multiplier, > 0 (default 1)"},
        {"--delta", DP_OPT_DOUBLE, &a.delta, NULL, "claimed delta, in (0, 1) (default 1e-5)"},
        {"--steps", DP_OPT_INT, &a.steps, NULL, "K steps per trial (DP-SGD reference/engine; default 1)"},
        {"--phi", DP_OPT_DOUBLE, &a.phi, NULL, "DP-ZO perturbation scale (default 1)"},
        {"--seed", DP_OPT_U64, &a.seed, NULL, "public seed: model, data, canary (default 0)"},
        {"--noise-key", DP_OPT_U64, &a.key, &a.seen_key, "secret audit key (default: fresh from OpenSSL)"},
        {"--threads", DP_OPT_INT, &a.threads, NULL, "threads across trials (default 2)"},
        {"--onerun-canaries", DP_OPT_INT, &a.onerun_m, NULL, "one-run audit: m canaries, 0 = off (default 1000)"},
        {"--onerun-guesses", DP_OPT_INT, &a.onerun_r, NULL, "one-run audit: r guesses (default 200)"},
        {"--onerun-steps", DP_OPT_INT, &a.onerun_k, NULL, "one-run audit: K training steps (default 1)"},
        {"--report", DP_OPT_STRING, &a.report, NULL, "DIR: report.json, report.html and roc.svg"},
        {"--quiet", DP_OPT_FLAG, &a.quiet, NULL, "no progress lines"},
    };
    for (size_t i = 0; i < sizeof mine / sizeof mine[0]; i++) opts[n++] = mine[i];
    int help = 0;
    st = dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    if (help) {
        printf("usage: dpcert audit [OPTIONS]   white-box step audit (+ one-run audit), docs/audits.md\n");
        dp_opts_print_help(opts, n);
        return 0;
    }
    if (!a.m.seen_model) a.m.seen_model = 1; /* --model defaults to mlp here */
    if (a.candidate) {
        dp_status sst = dp_proc_install_signal_forwarding();
        if (sst != DP_OK) return dp_cli_fail(CMD, sst);
    }
    if (a.candidate && !a.work) {
        dp_status tst = audit_work_tmpdir(g_tmpdir, sizeof g_tmpdir, CMD);
        if (tst != DP_OK) return dp_cli_fail(CMD, tst);
        a.work = g_tmpdir;
    }
    int rc = audit_main(&a);
    cleanup_tmp();
    if (a.candidate && dp_proc_interrupted()) return 128 + dp_proc_interrupted();
    return rc;
}

static int audit_main(audit_cli *ap) {
    audit_cli a = *ap;
    dp_status st;
    audit_config c;
    st = cli_finish(&c, &a);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    int onerun = a.onerun_m > 0 && (c.impl == AUDIT_IMPL_REFERENCE || c.impl == AUDIT_IMPL_OPTIMIZED) &&
                 c.algo == AUDIT_ALGO_DPSGD && c.plant != AUDIT_PLANT_CLIP_AFTER_SUM;
    if (a.onerun_m < 0) return dp_cli_fail(CMD, dp_error(DP_ERR_INVALID, "--onerun-canaries must be >= 0"));
    if (a.report) {
        st = dp_mkdir_p("--report", a.report);
        if (st != DP_OK) return dp_cli_fail(CMD, st);
    }
    audit_result r;
    st = audit_run(&r, &c);
    if (st == DP_ERR_CHECK_FAILED) { /* the candidate failed: no verdict on privacy */
        printf("verdict: INVALID (%s)\n", dp_last_error());
        return 1;
    }
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    print_result(&c, &r);
    audit_onerun_result o;
    memset(&o, 0, sizeof o);
    if (onerun) {
        st = audit_onerun(&o, &c, a.onerun_m, a.onerun_r, a.onerun_k);
        if (st != DP_OK) return dp_cli_fail(CMD, st);
        printf("  %s: %s\n", audit_verdict_names[o.verdict], o.message);
    } else {
        printf("  one-run: not run (%s)\n", a.onerun_m == 0 ? "--onerun-canaries 0"
                                                            : "it runs DP-SGD on the reference or the engine");
    }
    audit_verdict v = r.verdict;
    if (onerun && o.verdict == AUDIT_FAIL) v = AUDIT_FAIL;
    printf("verdict: %s\n", audit_verdict_names[v]);
    if (a.report) {
        json_t *root = report_json(&c, &r, &o, onerun, v);
        st = audit_write_json(a.report, "report.json", root);
        if (st == DP_OK) st = audit_report_html(a.report, root);
        json_decref(root);
        audit_curve cv = {"white-box statistic (evaluation trials)", r.roc_fpr, r.roc_tpr, r.roc_n};
        if (st == DP_OK) st = audit_write_roc_svg(a.report, "roc.svg", "dpcert audit: ROC of the canary test", &cv, 1);
        if (st != DP_OK) return dp_cli_fail(CMD, st);
    }
    st = dp_stdout_finish("the audit result");
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    return v == AUDIT_PASS ? 0 : 1;
}

/* attacks/mia_cmd.c — `dpcert mia`: membership-inference sanity runs (docs/audits.md).
 * Exit 0 PASS, 1 FAIL (a DP bound violated) or INVALID (the non-DP control does not leak),
 * 2 bad input, 3 internal error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attacks/audit_html.h"
#include "attacks/audit_candidate.h"
#include "attacks/audit_report.h"
#include "attacks/mia.h"
#include "common/cli.h"
#include "common/fsutil.h"
#include "common/proc.h"

#define CMD "mia"

static const char *run_name(const mia_run_result *r, char *buf, size_t n) {
    if (r->kind == MIA_RUN_NONDP) snprintf(buf, n, "non-DP control");
    else snprintf(buf, n, "%s eps %.3g (sigma %.4g)", r->kind == MIA_RUN_DPZO ? "DP-ZO" : "DP-SGD", r->eps_target,
                  r->sigma);
    return buf;
}

static json_t *attack_json(const mia_attack_result *a) {
    json_t *o = json_object(), *pts = json_array();
    json_object_set_new(o, "auc", audit_json_num(a->auc));
    json_object_set_new(o, "auc_se", audit_json_num(a->auc_se));
    json_object_set_new(o, "auc_lower", audit_json_num(a->auc_lo));
    json_object_set_new(o, "auc_upper", audit_json_num(a->auc_hi));
    for (int k = 0; k < MIA_NFPR; k++) {
        const mia_fpr_point *p = &a->at[k];
        json_t *q = json_object();
        json_object_set_new(q, "fpr_target", json_real(mia_fpr_targets[k]));
        json_object_set_new(q, "threshold", audit_json_num(p->t.tau));
        json_object_set_new(q, "tpr", json_real(1.0 - (double)p->t.fn / (double)p->t.n_pos));
        json_object_set_new(q, "tpr_lower", audit_json_num(p->tpr_lo));
        json_object_set_new(q, "tpr_upper", audit_json_num(p->tpr_hi));
        json_object_set_new(q, "fpr", json_real((double)p->t.fp / (double)p->t.n_neg));
        json_object_set_new(q, "fpr_upper", audit_json_num(p->fpr_hi));
        json_object_set_new(q, "dp_bound", audit_json_num(p->bound));
        json_object_set_new(q, "violated", json_boolean(p->violated));
        json_array_append_new(pts, q);
    }
    json_object_set_new(o, "at_fpr", pts);
    json_object_set_new(o, "roc", audit_json_roc(a->roc_fpr, a->roc_tpr, a->roc_n));
    return o;
}

static json_t *report_json(const mia_config *c, const mia_result *r) {
    json_t *root = json_object(), *cfg = json_object(), *runs = json_array();
    json_object_set_new(root, "format", json_string("dpcert-mia-report/1"));
    json_object_set_new(root, "verdict", json_string(audit_verdict_names[r->verdict]));
    json_object_set_new(root, "message", json_string(r->message));
    char dname[1200];
    if (c->data) snprintf(dname, sizeof dname, "%s (standardised features)", c->data_name);
    json_object_set_new(cfg, "data", json_string(c->data ? dname : "generated mlp inputs, uniform random labels (docs/models.md)"));
    json_object_set_new(cfg, "dataset", c->data ? json_string(c->data_name) : json_null());
    json_object_set_new(cfg, "features", json_integer(c->mc.in));
    json_object_set_new(cfg, "classes", json_integer(c->mc.classes));
    json_object_set_new(cfg, "impl", json_string(c->reference ? "reference" : c->candidate ? "candidate" : "optimized"));
    json_object_set_new(cfg, "candidate", c->candidate ? json_string(c->candidate) : json_null());
    json_object_set_new(cfg, "candidate_mode", json_string(c->candidate_persistent ? "persistent" : "one-call"));
    json_object_set_new(cfg, "population", json_integer(c->pop));
    json_object_set_new(cfg, "models_per_run", json_integer(c->models));
    json_object_set_new(cfg, "steps", json_integer(c->steps));
    json_object_set_new(cfg, "dpzo_steps", json_integer(c->zo_steps));
    json_object_set_new(cfg, "q", json_real(c->q));
    json_object_set_new(cfg, "lr", json_real(c->lr));
    json_object_set_new(cfg, "clip", json_real(c->clip));
    json_object_set_new(cfg, "delta", json_real(c->delta));
    json_object_set_new(cfg, "alpha_leak", json_real(c->alpha));
    json_object_set_new(cfg, "confidence", json_real(c->confidence));
    json_object_set_new(cfg, "seed", json_integer((json_int_t)c->seed.k));
    json_object_set_new(cfg, "threads", json_integer(c->threads));
    json_object_set_new(root, "config", cfg);
    json_object_set_new(root, "seconds", json_real(r->seconds));
    json_object_set_new(root, "models_per_second", audit_json_num(r->models_per_s));
    for (int k = 0; k < r->nruns; k++) {
        const mia_run_result *rr = &r->run[k];
        json_t *o = json_object(), *at = json_object();
        json_object_set_new(o, "kind", json_string(rr->kind == MIA_RUN_NONDP ? "non-dp"
                                                   : rr->kind == MIA_RUN_DPZO ? "dpzo" : "dpsgd"));
        json_object_set_new(o, "epsilon_target", audit_json_num(rr->eps_target));
        json_object_set_new(o, "epsilon", audit_json_num(rr->eps));
        json_object_set_new(o, "sigma", json_real(rr->sigma));
        json_object_set_new(o, "train_accuracy", json_real(rr->train_acc));
        json_object_set_new(o, "verdict", json_string(audit_verdict_names[rr->verdict]));
        json_object_set_new(o, "message", json_string(rr->message));
        json_object_set_new(o, "auc_near_half", json_boolean(rr->auc_near_half));
        for (int a = 0; a < MIA_NATTACKS; a++) json_object_set_new(at, mia_attack_names[a], attack_json(&rr->a[a]));
        json_object_set_new(o, "attacks", at);
        json_array_append_new(runs, o);
    }
    json_object_set_new(root, "runs", runs);
    return root;
}

/* A fresh temporary work directory (--candidate without --work), removed at the end. */
static char g_tmpdir[512];
static ref_dataset g_data; /* --dataset: the loaded population */

static int mia_main(int argc, char **argv);

int dp_cmd_mia(int argc, char **argv) {
    int rc = mia_main(argc, argv);
    if (g_tmpdir[0]) rmdir(g_tmpdir);
    ref_dataset_free(&g_data);
    g_tmpdir[0] = 0;
    if (rc != 2 && dp_proc_interrupted()) return 128 + dp_proc_interrupted();
    return rc;
}
/* Over 150 lines (one reason): one table of options and their cross-checks in one place. */

static int mia_main(int argc, char **argv) {
    mia_config c;
    mia_config_default(&c);
    const char *level = "ci", *eps = NULL, *report = NULL, *plant = NULL, *impl = "optimized", *cand_mode = "one-call";
    int64_t models = 0, threads = 2, hidden = c.mc.hidden[0];
    int seen_models = 0, seen_key = 0, quiet = 0, no_dpzo = 0, seen_impl = 0, seen_pop = 0;
    uint64_t seed = 0, key = 0;
    const dp_opt opts[] = {
        {"--level", DP_OPT_STRING, &level, NULL, "ci (8 models per run) | certify (32)"},
        {"--impl", DP_OPT_STRING, &impl, &seen_impl, "optimized (the host engine, default) | reference"},
        {"--candidate", DP_OPT_STRING, &c.candidate, NULL, "CMD: DP-SGD private gradients from a certification candidate"},
        {"--work", DP_OPT_STRING, &c.work, NULL, "candidate: directory for vectors/outputs (default: a fresh temp dir)"},
        {"--timeout", DP_OPT_DOUBLE, &c.timeout_s, NULL, "candidate: seconds per call (default 120)"},
        {"--candidate-mode", DP_OPT_STRING, &cand_mode, NULL, "candidate: one-call (default) | persistent (one process "
                                                             "per model trained)"},
        {"--models", DP_OPT_INT, &models, &seen_models, "models per run (target + shadows), even >= 4"},
        {"--population", DP_OPT_INT, &c.pop, &seen_pop, "|P|: generated examples (default 256), or the first |P| of --dataset (default all)"},
        {"--dataset", DP_OPT_STRING, &c.data_name, NULL, "NAME (breast-cancer) | FILE: a real tabular data set (docs/audits.md)"},
        {"--hidden", DP_OPT_INT, &hidden, NULL, "mlp hidden width (default 64)"},
        {"--steps", DP_OPT_INT, &c.steps, NULL, "DP-SGD steps per model (default 300)"},
        {"--q", DP_OPT_DOUBLE, &c.q, NULL, "Poisson rate (default 0.25)"},
        {"--lr", DP_OPT_DOUBLE, &c.lr, NULL, "learning rate (default 0.5, momentum 0.9)"},
        {"--clip", DP_OPT_DOUBLE, &c.clip, NULL, "clipping norm of the DP runs (default 1)"},
        {"--delta", DP_OPT_DOUBLE, &c.delta, NULL, "delta, in (0, 1) (default 1e-5)"},
        {"--epsilons", DP_OPT_STRING, &eps, NULL, "target epsilons of the DP runs (default 1,8)"},
        {"--no-dpzo", DP_OPT_FLAG, &no_dpzo, NULL, "skip the DP-ZO run"},
        {"--zo-steps", DP_OPT_INT, &c.zo_steps, NULL, "DP-ZO steps (default 300)"},
        {"--alpha", DP_OPT_DOUBLE, &c.alpha, NULL, "level of the non-DP leak check (default 1e-3)"},
        {"--confidence", DP_OPT_DOUBLE, &c.confidence, NULL, "of the intervals and bound checks (default 0.95)"},
        {"--seed", DP_OPT_U64, &seed, NULL, "public seed: data, init (default 0)"},
        {"--noise-key", DP_OPT_U64, &key, &seen_key, "secret key: membership, noise (default: fresh)"},
        {"--threads", DP_OPT_INT, &threads, NULL, "threads across models (default 2)"},
        {"--plant", DP_OPT_STRING, &plant, NULL, "test-only: no-noise (needs DPCERT_TEST_INJECT=1)"},
        {"--report", DP_OPT_STRING, &report, NULL, "DIR: report.json, report.html and roc.svg"},
        {"--signals", DP_OPT_STRING, &c.signals, NULL, "FILE: every model's losses and membership (safetensors)"},
        {"--quiet", DP_OPT_FLAG, &quiet, NULL, "no progress lines"},
    };
    size_t n = sizeof opts / sizeof opts[0];
    int help = 0;
    dp_status st = dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    if (help) {
        printf("usage: dpcert mia [OPTIONS]   membership-inference sanity runs, docs/audits.md\n");
        dp_opts_print_help(opts, n);
        return 0;
    }
    static const char *const levels[] = {"ci", "certify", NULL};
    int lv;
    st = dp_parse_choice(&lv, "--level", level, levels);
    static const char *const impls[] = {"optimized", "reference", NULL};
    int im = 0;
    if (st == DP_OK) st = dp_parse_choice(&im, "--impl", impl, impls);
    c.reference = im == 1;
    if (st == DP_OK) st = dp_cand_mode_parse(&c.candidate_persistent, "--candidate-mode", cand_mode);
    if (st == DP_OK && c.candidate && seen_impl)
        st = dp_error(DP_ERR_USAGE, "--candidate and --impl exclude each other (the candidate is the implementation)");
    if (st == DP_OK && eps) {
        size_t ne = 0;
        st = dp_parse_double_list(c.eps, MIA_MAX_EPS, &ne, "--epsilons", eps);
        c.neps = (int)ne;
    }
    if (st == DP_OK && plant) {
        const char *e = getenv("DPCERT_TEST_INJECT");
        if (strcmp(plant, "no-noise") != 0) st = dp_error(DP_ERR_USAGE, "--plant: unknown '%s' (expected no-noise)", plant);
        else if (!e || strcmp(e, "1") != 0)
            st = dp_error(DP_ERR_USAGE, "--plant no-noise is a test-only broken run: it needs DPCERT_TEST_INJECT=1");
        c.plant_no_noise = 1;
    }
    if (st == DP_OK && (threads < 1 || threads > 256))
        st = dp_error(DP_ERR_INVALID, "--threads must be in [1, 256] (got %lld)", (long long)threads);
    if (st == DP_OK && (hidden < 1 || hidden > 1 << 16))
        st = dp_error(DP_ERR_INVALID, "--hidden must be in [1, 65536] (got %lld)", (long long)hidden);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    c.models = seen_models ? models : lv == 1 ? MIA_MODELS_CERTIFY : MIA_MODELS_CI;
    c.mc.hidden[0] = (int)hidden;
    c.dpzo = !no_dpzo && !c.candidate; /* the certification protocol has no DP-ZO step */
    c.threads = (int)threads;
    c.progress = !quiet;
    c.seed.k = seed;
    if (seen_key) c.key.k = key;
    else if ((st = dp_noise_key_random(&c.key)) != DP_OK) return dp_cli_fail(CMD, st);
    if (c.data_name) {
        int classes = 0;
        if (seen_pop && c.pop < 8)
            return dp_cli_fail(CMD, dp_error(DP_ERR_INVALID, "--population must be >= 8 (got %lld)", (long long)c.pop));
        if ((st = mia_dataset_load(&g_data, &classes, c.data_name, seen_pop ? c.pop : 0)) != DP_OK)
            return dp_cli_fail(CMD, st);
        c.data = &g_data;
        c.pop = g_data.n;
        c.mc.in = g_data.in;
        c.mc.classes = classes;
    }
    if (c.candidate && !c.work) {
        if ((st = audit_work_tmpdir(g_tmpdir, sizeof g_tmpdir, CMD)) != DP_OK) return dp_cli_fail(CMD, st);
        c.work = g_tmpdir;
    } else if (c.candidate && (st = dp_mkdir_p("--work", c.work)) != DP_OK)
        return dp_cli_fail(CMD, st);
    if (c.candidate && (st = dp_proc_install_signal_forwarding()) != DP_OK) return dp_cli_fail(CMD, st);
    st = mia_config_check(&c);
    if (st == DP_OK && report) st = dp_mkdir_p("--report", report);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    mia_result r;
    st = mia_run_all(&r, &c);
    if (st == DP_ERR_CHECK_FAILED && c.candidate) { /* the candidate failed: no verdict on privacy */
        printf("verdict: INVALID (%s)\n", dp_last_error());
        return 1;
    }
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    printf("mia (%s%s): %d runs x %lld models on %lld %s%s, %.1f s, %.2f models/s\n",
           c.reference ? "reference" : c.candidate ? "candidate " : "host engine", c.candidate ? c.candidate : "",
           r.nruns, (long long)c.models, (long long)c.pop, c.data ? "examples of " : "generated examples (random labels)",
           c.data ? c.data_name : "", r.seconds, r.models_per_s);
    if (c.candidate)
        printf("  (DP-SGD only: the certification protocol has no DP-ZO step; %s)\n",
               c.candidate_persistent ? "one candidate process per model, one request per step" : "one candidate call per step");
    char name[128];
    for (int k = 0; k < r.nruns; k++) {
        const mia_run_result *rr = &r.run[k];
        printf("  %s: train accuracy %.3f, %s\n", run_name(rr, name, sizeof name), rr->train_acc,
               audit_verdict_names[rr->verdict]);
        for (int a = 0; a < MIA_NATTACKS; a++) {
            const mia_attack_result *x = &rr->a[a];
            printf("    %-15s AUC %.4f [%.4f, %.4f]", mia_attack_names[a], x->auc, x->auc_lo, x->auc_hi);
            for (int f = 0; f < MIA_NFPR; f++)
                printf("  TPR@%g %.4f [%.4f, %.4f]", mia_fpr_targets[f],
                       1.0 - (double)x->at[f].t.fn / (double)x->at[f].t.n_pos, x->at[f].tpr_lo, x->at[f].tpr_hi);
            printf("\n");
        }
        if (rr->kind == MIA_RUN_DPZO)
            printf("    DP-ZO AUC ~ 0.5 (every attack's %g-level interval contains 0.5): %s\n", MIA_HALF_ALPHA,
                   rr->auc_near_half ? "yes" : "no");
        printf("    %s\n", rr->message);
    }
    printf("verdict: %s (%s)\n", audit_verdict_names[r.verdict], r.message);
    if (report) {
        json_t *root = report_json(&c, &r);
        st = audit_write_json(report, "report.json", root);
        if (st == DP_OK) st = mia_report_html(report, root);
        json_decref(root);
        audit_curve cv[MIA_MAX_EPS + 2];
        char labels[MIA_MAX_EPS + 2][160];
        for (int k = 0; k < r.nruns; k++) {
            snprintf(labels[k], sizeof labels[k], "%s, LiRA online", run_name(&r.run[k], name, sizeof name));
            const mia_attack_result *x = &r.run[k].a[MIA_ATTACK_LIRA_ONLINE];
            cv[k] = (audit_curve){labels[k], x->roc_fpr, x->roc_tpr, x->roc_n};
        }
        if (st == DP_OK) st = audit_write_roc_svg(report, "roc.svg", "dpcert mia: ROC per run", cv, (size_t)r.nruns);
        if (st != DP_OK) return dp_cli_fail(CMD, st);
    }
    st = dp_stdout_finish("the mia result");
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    return r.verdict == AUDIT_PASS ? 0 : 1;
}

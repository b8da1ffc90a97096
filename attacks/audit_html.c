/* attacks/audit_html.c — report.html of `audit` and `mia` from their report.json objects
 * (audit_html.h, docs/reports.md). Plots are common/html.h specifications (kind "roc"). */
#include "attacks/audit_html.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "attacks/audit_stats.h"
#include "common/html.h"

#define jget json_object_get
static double num(const json_t *o, const char *k) {
    const json_t *v = jget(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}
static long long ival(const json_t *o, const char *k) { return (long long)json_integer_value(jget(o, k)); }
static const char *str(const json_t *o, const char *k) {
    const char *s = json_string_value(jget(o, k));
    return s ? s : "";
}

/* a "roc" spec with the (eps, delta) bound (eps not finite: none) */
static json_t *roc_plot(json_t *plots, const char *title, double eps, double delta) {
    json_t *p = dp_html_plot_new(plots, "roc", title, "false positive rate", "true positive rate", 0, 0);
    json_object_set_new(p, "epsilon", isfinite(eps) ? json_real(eps) : json_null());
    json_object_set_new(p, "delta", json_real(delta));
    return p;
}

/* a report's {"fpr": [...], "tpr": [...]} as a series */
static void roc_series(json_t *plot, const char *name, const json_t *roc, int dashed) {
    json_t *s = json_object();
    json_object_set_new(s, "name", json_string(name));
    json_object_set(s, "x", jget(roc, "fpr"));
    json_object_set(s, "y", jget(roc, "tpr"));
    if (dashed) json_object_set_new(s, "dashed", json_true());
    json_array_append_new(jget(plot, "series"), s);
}

/* key/value rows for a two-column table */
static void kv(json_t *rows, const char *what, json_t *value) {
    json_array_append_new(rows, json_pack("{s:s, s:o}", "quantity", what, "value", value));
}

static dp_status page_begin(dp_afile *af, const char *dir, const char *title, const json_t *report) {
    DP_TRY(dp_html_open_in(af, dir));
    const char *v = str(report, "verdict");
    char line[700];
    snprintf(line, sizeof line, "%s%s%.600s", v, json_is_string(jget(report, "message")) ? ": " : "",
             str(report, "message"));
    dp_html_begin(af->f, title, line, strcmp(v, "PASS") == 0);
    return DP_OK;
}

static dp_status end_page(dp_afile *af, json_t *plots, dp_status st) {
    json_decref(plots);
    dp_html_end(af->f);
    return dp_html_commit(af, st);
}

dp_status audit_report_html(const char *dir, const json_t *report) {
    const json_t *cfg = jget(report, "config"), *wb = jget(report, "white_box"), *one = jget(report, "one_run");
    char t[600];
    snprintf(t, sizeof t, "dpcert audit %s %s", str(cfg, "algo"), str(cfg, "impl"));
    dp_afile af;
    DP_TRY(page_begin(&af, dir, t, report));
    FILE *f = af.f;
    const double eps = num(wb, "epsilon_claimed"), delta = num(cfg, "delta"), mu = num(wb, "mu_claimed");
    snprintf(t, sizeof t, "canary %s (scale %g), plant %s; |D| %lld, q %g, clip %g, sigma %g, %lld steps, delta %g; "
                          "%lld trials per side (%lld for calibration), confidence %g",
             str(cfg, "canary"), num(cfg, "canary_scale"), str(cfg, "plant"), ival(cfg, "dataset_size"), num(cfg, "q"),
             num(cfg, "clip"), num(cfg, "sigma"), ival(cfg, "steps"), delta, ival(cfg, "trials_per_side"),
             ival(wb, "calibration_trials_per_side"), num(cfg, "confidence"));
    dp_html_para(f, t);
    /* the ROC of the white-box statistic, the (eps, delta) bound of the claim, and the claimed
       Gaussian trade-off TPR = Phi(Phi^-1(FPR) + mu) (dashed) */
    json_t *plots = json_array();
    snprintf(t, sizeof t, "white-box canary test (evaluation trials): ROC, AUC %.4f", num(wb, "auc"));
    json_t *p = roc_plot(plots, t, eps, delta);
    roc_series(p, "white-box statistic", jget(wb, "roc"), 0);
    if (isfinite(mu) && mu > 0) {
        double x[201], y[201];
        for (int i = 0; i <= 200; i++) {
            x[i] = pow(10.0, -6.0 + 6.0 * i / 200); /* dense near 0, where the curve rises */
            y[i] = audit_phi(audit_phi_inv(x[i]) + mu);
        }
        x[0] = y[0] = 0;
        x[200] = y[200] = 1;
        char nm[120];
        snprintf(nm, sizeof nm, "Gaussian trade-off of the claimed mu = %.4g", mu);
        dp_html_plot_series(p, nm, x, y, 201, 1);
    }
    dp_status st = dp_html_plots(f, "ROC against the claim", plots);
    dp_html_heading(f, "White-box audit");
    json_t *cols = json_pack("[ss]", "quantity", "value"), *rows = json_array();
    kv(rows, "verdict", json_string(str(wb, "verdict")));
    kv(rows, "claimed epsilon (PLD)", json_real(eps));
    kv(rows, "epsilon lower bound, standard (FPR, FNR) test", json_deep_copy(jget(wb, "epsilon_lb_standard")));
    kv(rows, "claimed mu", json_deep_copy(jget(wb, "mu_claimed")));
    kv(rows, "mu lower bound (Gaussian trade-off)", json_deep_copy(jget(wb, "mu_lb")));
    kv(rows, "epsilon lower bound, Gaussian trade-off", json_deep_copy(jget(wb, "epsilon_lb_gaussian")));
    kv(rows, "tightness (lower bound / claim)", json_deep_copy(jget(wb, "tightness")));
    kv(rows, "AUC", json_deep_copy(jget(wb, "auc")));
    kv(rows, "message", json_string(str(wb, "message")));
    dp_html_table(f, cols, rows);
    json_decref(rows);
    dp_html_heading(f, "One-run audit (Steinke, Nasr and Jagielski 2023)");
    if (json_is_object(one)) {
        rows = json_array();
        static const char *const k[] = {"verdict", "canaries", "included", "guesses", "correct", "steps", "epsilon_lb",
                                        "epsilon_claimed", "message"};
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) kv(rows, k[i], json_deep_copy(jget(one, k[i])));
        dp_html_table(f, cols, rows);
        json_decref(rows);
    } else {
        dp_html_para(f, "not run (it needs the DP-SGD reference's gradient hook, or --onerun-canaries was 0)");
    }
    json_decref(cols);
    return end_page(&af, plots, st);
}

dp_status mia_report_html(const char *dir, const json_t *report) {
    const json_t *cfg = jget(report, "config"), *runs = jget(report, "runs");
    dp_afile af;
    DP_TRY(page_begin(&af, dir, "dpcert mia", report));
    FILE *f = af.f;
    const double delta = num(cfg, "delta");
    char t[400];
    snprintf(t, sizeof t, "%s; population %lld, %lld models per run, %lld DP-SGD steps, q %g, clip %g, delta %g; "
                          "intervals at confidence %g",
             str(cfg, "data"), ival(cfg, "population"), ival(cfg, "models_per_run"), ival(cfg, "steps"), num(cfg, "q"),
             num(cfg, "clip"), delta, num(cfg, "confidence"));
    dp_html_para(f, t);
    json_t *plots = json_array(), *rows = json_array();
    for (size_t k = 0; k < json_array_size(runs); k++) {
        const json_t *r = json_array_get(runs, k), *at = jget(r, "attacks");
        const double eps = num(r, "epsilon");
        char name[160];
        if (isfinite(eps)) snprintf(name, sizeof name, "%s, epsilon %.3g", str(r, "kind"), eps);
        else snprintf(name, sizeof name, "%s (no DP bound)", str(r, "kind"));
        snprintf(t, sizeof t, "run %zu: %s: ROC per attack", k + 1, name);
        json_t *p = roc_plot(plots, t, eps, delta);
        const char *an;
        const json_t *a;
        json_object_foreach((json_t *)at, an, a) {
            roc_series(p, an, jget(a, "roc"), 0);
            const json_t *pts = jget(a, "at_fpr");
            json_t *row = json_pack("{s:s, s:s, s:O, s:O, s:O}", "run", name, "attack", an, "auc", jget(a, "auc"),
                                    "auc_lower", jget(a, "auc_lower"), "auc_upper", jget(a, "auc_upper"));
            for (size_t i = 0; i < json_array_size(pts); i++) { /* TPR [lo, hi] at each FPR target and the bound there */
                const json_t *q = json_array_get(pts, i);
                char key[64], cell[160];
                snprintf(key, sizeof key, "TPR at FPR %g", num(q, "fpr_target"));
                char bound[48] = "no DP bound";
                if (isfinite(num(q, "dp_bound"))) snprintf(bound, sizeof bound, "DP bound %.4g", num(q, "dp_bound"));
                snprintf(cell, sizeof cell, "%.4f [%.4f, %.4f]; %s%s", num(q, "tpr"), num(q, "tpr_lower"),
                         num(q, "tpr_upper"), bound, json_is_true(jget(q, "violated")) ? ": VIOLATED" : "");
                json_object_set_new(row, key, json_string(cell));
            }
            json_object_set_new(row, "verdict", json_string(str(r, "verdict")));
            json_array_append_new(rows, row);
        }
    }
    dp_html_para(f, "Dashed black: the (epsilon, delta)-DP bound on any membership test, TPR <= min(1, e^eps FPR + "
                    "delta, 1 - e^-eps (1 - delta - FPR)); grey: chance.");
    dp_status st = dp_html_plots(f, "ROC curves", plots);
    dp_html_heading(f, "AUC with intervals, TPR at low FPR against the DP bound");
    json_t *cols = json_pack("[sssss]", "run", "attack", "auc", "auc_lower", "auc_upper");
    const json_t *r0 = json_array_get(rows, 0);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)r0, key, val) /* the TPR-at-FPR columns, in the report's order */
        if (strncmp(key, "TPR at", 6) == 0) json_array_append_new(cols, json_string(key));
    json_array_append_new(cols, json_string("verdict"));
    dp_html_table(f, cols, rows);
    json_decref(cols);
    json_decref(rows);
    dp_html_heading(f, "Runs");
    json_t *msgs = json_array();
    for (size_t k = 0; k < json_array_size(runs); k++) {
        const json_t *r = json_array_get(runs, k);
        snprintf(t, sizeof t, "run %zu (%s): %s: %.300s", k + 1, str(r, "kind"), str(r, "verdict"), str(r, "message"));
        json_array_append_new(msgs, json_string(t));
    }
    dp_html_list(f, msgs);
    json_decref(msgs);
    return end_page(&af, plots, st);
}

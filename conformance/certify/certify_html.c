/* conformance/certify/certify_html.c — the data behind `certify`'s plots (certify_figs.h), the plot
 * specifications stored in report.json, and BUNDLE/report.html (certify_html.h,
 * docs/reports.md). The page is written before report.json, which lists its SHA-256, so a
 * signed report covers the page (docs/certification.md §4). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "common/html.h"
#include "conformance/certify/certify_figs.h"
#include "conformance/certify/certify_html.h"

/* ---- plot specifications ---- */
static void set_hist(json_t *p, const double *edges, const double *h, size_t nb) {
    json_object_set_new(p, "edges", dp_html_num_array(edges, nb + 1));
    json_object_set_new(p, "heights", dp_html_num_array(h, nb));
}

static void residual_plot(json_t *plots, const cert_figs *g) {
    double e[CERT_ZHIST_BINS + 1], h[CERT_ZHIST_BINS], x[121], y[121];
    const double w = 2 * CERT_ZHIST_R / CERT_ZHIST_BINS;
    for (int i = 0; i <= CERT_ZHIST_BINS; i++) e[i] = -CERT_ZHIST_R + i * w;
    for (int i = 0; i < CERT_ZHIST_BINS; i++) h[i] = (double)g->zbin[i];
    for (int i = 0; i <= 120; i++) { /* expected count per bin under N(0, 1): n w phi(x) */
        x[i] = -CERT_ZHIST_R + i * (2 * CERT_ZHIST_R / 120);
        y[i] = (double)g->zn * w * exp(-0.5 * x[i] * x[i]) / sqrt(2 * M_PI);
    }
    char t[200];
    snprintf(t, sizeof t, "noise residuals z, all step vectors and repeats (n = %lld; %lld below %g, %lld above %g)",
             (long long)g->zn, (long long)g->zbelow, -CERT_ZHIST_R, (long long)g->zabove, CERT_ZHIST_R);
    json_t *p = dp_html_plot_new(plots, "histogram", t, "standardized residual z = (qN G - S_ref) / (sigma C)",
                                 "count per bin", 0, 0);
    set_hist(p, e, h, CERT_ZHIST_BINS);
    dp_html_plot_series(p, "N(0, 1) density x n x bin width", x, y, 121, 0);
}

static double log_binom_pmf(int64_t k, int64_t n, double q) {
    return lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) + (double)k * log(q) +
           (double)(n - k) * log1p(-q);
}

static dp_status batch_plot(json_t *plots, const cert_batch_fig *b) {
    /* bins: every observed size and the binomial's mean +- 4 standard deviations */
    const double mu = (double)b->N * b->q, sd = sqrt(mu * (1 - b->q));
    int64_t lo = (int64_t)fmax(0, floor(mu - 4 * sd)), hi = (int64_t)fmin((double)b->N, ceil(mu + 4 * sd));
    for (int64_t k = 0; k <= b->N; k++)
        if (b->count[k]) { if (k < lo) lo = k; if (k > hi) hi = k; }
    size_t nb = (size_t)(hi - lo + 1);
    double *e = dp_malloc((nb + 1) * sizeof *e), *h = dp_malloc(nb * sizeof *h), *x = dp_malloc(nb * sizeof *x),
           *y = dp_malloc(nb * sizeof *y);
    dp_status st = (!e || !h || !x || !y) ? DP_ERR_NOMEM : DP_OK;
    for (size_t i = 0; st == DP_OK && i < nb; i++) {
        int64_t k = lo + (int64_t)i;
        e[i] = (double)k - 0.5;
        e[i + 1] = (double)k + 0.5;
        h[i] = (double)b->count[k];
        x[i] = (double)k;
        y[i] = (double)b->steps * exp(log_binom_pmf(k, b->N, b->q));
    }
    if (st == DP_OK) {
        char t[300];
        snprintf(t, sizeof t, "batch sizes of %.120s (%lld steps, N = %lld, q = %g)", b->vector, (long long)b->steps,
                 (long long)b->N, b->q);
        json_t *p = dp_html_plot_new(plots, "histogram", t, "batch size", "steps", 0, 0);
        set_hist(p, e, h, nb);
        dp_html_plot_series(p, "Binomial(N, q) x steps", x, y, nb, 0);
    }
    dp_free(e); dp_free(h); dp_free(x); dp_free(y);
    return st;
}

/* RDP epsilon (Balle et al. conversion) of the reference run of cert_implied_epsilon
 * (Poisson q 0.01, delta 1e-5) after `steps` steps at noise multiplier sigma; NaN when
 * it cannot be computed (a point the plot leaves out), DP_ERR_NOMEM propagated. The last
 * point (1000 steps) equals report.json's noise.implied epsilons (checked by
 * conformance/tests/certify_html.sh). */
static dp_status eps_at(double *eps_out, double sigma, int64_t steps) {
    *eps_out = NAN;
    if (!(sigma > 0)) return DP_OK;
    acct_schedule s;
    memset(&s, 0, sizeof s);
    s.n = 1;
    s.seg[0].mech = ACCT_GAUSSIAN;
    s.seg[0].q = 0.01;
    s.seg[0].param = sigma;
    s.seg[0].steps = steps;
    double orders[ACCT_MAX_ORDERS], eps = NAN, ord;
    size_t n = acct_orders_grid(orders, ACCT_GRID_DEFAULT);
    dp_status st = acct_rdp_epsilon(&eps, &ord, &s, orders, n, 1e-5, ACCT_CONV_BALLE);
    if (st == DP_ERR_NOMEM) return st;
    if (st != DP_OK) { dp_clear_error(); return DP_OK; }
    *eps_out = eps;
    return DP_OK;
}

static dp_status epsilon_plot(json_t *plots, const cert_result *r) {
    static const int64_t steps[] = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};
    enum { NS = sizeof steps / sizeof steps[0] };
    double x[NS], y[NS];
    json_t *p = dp_html_plot_new(plots, "line", "epsilon vs steps of the reference run (Poisson q 0.01, delta 1e-5, RDP)",
                                 "steps", "epsilon", 10, 10);
    for (int i = 0; i < NS; i++) {
        x[i] = (double)steps[i];
        DP_TRY(eps_at(&y[i], 1.0, steps[i]));
    }
    dp_html_plot_series(p, "claimed noise multiplier 1", x, y, NS, 0);
    if (r->noise_n) {
        char nm[120];
        snprintf(nm, sizeof nm, "measured noise, multiplier >= %.5f (99.9%%)", r->ratio_lo);
        for (int i = 0; i < NS; i++) DP_TRY(eps_at(&y[i], r->ratio_lo, steps[i]));
        dp_html_plot_series(p, nm, x, y, NS, 1);
    }
    return DP_OK;
}

json_t *cert_plots_json(const cert_result *r) {
    json_t *plots = json_array();
    if (!plots) return NULL;
    if (r->figs.zn) residual_plot(plots, &r->figs);
    /* a plot that cannot be drawn from its data becomes a note when the page is drawn (dp_html_plot);
     * out of memory building one is the run's failure (exit 3), never a note or a silent gap */
    dp_status st = DP_OK;
    for (size_t i = 0; i < r->figs.nbatch && st == DP_OK; i++) st = batch_plot(plots, &r->figs.batch[i]);
    if (st == DP_OK) st = epsilon_plot(plots, r);
    if (st != DP_OK) {
        json_decref(plots);
        return NULL;
    }
    return plots;
}

/* ---- the page ---- */
/* printf into a buffer of the needed size (dp_free it); NULL with the error recorded when out of memory */
static char *para_alloc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *para_alloc(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = dp_malloc(len < 0 ? 1 : (size_t)len + 1);
    if (!s || len < 0) {
        if (s) s[0] = '\0';
        return s;
    }
    va_start(ap, fmt);
    vsnprintf(s, (size_t)len + 1, fmt, ap);
    va_end(ap);
    return s;
}

dp_status cert_report_html(const char *bundle, const cert_result *r, const cert_opts *o, const json_t *plots) {
    dp_afile af;
    DP_TRY(dp_html_open_in(&af, bundle));
    FILE *f = af.f;
    char t[400], v[720];
    snprintf(t, sizeof t, "dpcert certify --suite %s", cert_suite_name(o->suite));
    snprintf(v, sizeof v, "%s%s%s", cert_verdict_name(r->verdict), r->first[0] ? ": " : "", r->first);
    dp_html_begin(f, t, v, r->verdict == CERT_PASS);
    double asum = 0;
    for (size_t i = 0; i < r->n; i++) asum += r->items[i].alpha;
    /* the candidate command and the declared conventions whole: no fixed buffer cuts them (issue 29) */
    char *run = para_alloc("candidate: %s; %lld repeats, alpha %.1e per test, false-reject bound (union) %.3g; "
                           "declared conventions: %s", o->candidate ? o->candidate : "", (long long)o->repeats,
                           o->alpha, asum, r->conventions[0] ? r->conventions : "(none)");
    if (!run) return dp_html_commit(&af, DP_ERR_NOMEM);
    dp_html_para(f, run);
    dp_free(run);
    if (r->noise_n) {
        snprintf(v, sizeof v, "measured noise std / claimed: %.5f (99.9%% interval [%.5f, %.5f]) over %lld draws; "
                              "the reference run (q 0.01, 1000 steps, delta 1e-5) has epsilon %.4g at the claimed "
                              "multiplier 1, and the measured noise supports epsilon %.4g",
                 r->sigma_eff_ratio, r->ratio_lo, r->ratio_hi, (long long)r->noise_n, r->eps_claimed,
                 r->eps_supported);
        dp_html_para(f, v);
    } else {
        dp_html_para(f, "no private gradient could be read: the noise was not tested (no residual histogram)");
    }
    dp_html_plots(f, "Plots", plots); /* never fails: a plot that cannot be drawn is a note */
    dp_html_heading(f, "Checks");
    json_t *cols = json_pack("[sssssssss]", "check", "scope", "status", "statistic", "accept_lo", "accept_hi", "alpha",
                             "n", "message"),
           *rows = cert_checks_json(r);
    dp_html_table(f, cols, rows);
    json_decref(cols);
    json_decref(rows);
    dp_html_end(f);
    return dp_html_commit(&af, DP_OK);
}

/* accountant/acct_cmd.c — `dpcert account` (audit-accounting: acct_audit_cmd.c). Exit codes:
 * 0 ok, 1 a claim is under-reported, 2 bad usage or input, 3 internal error. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/fsutil.h"

int dp_cmd_account(int argc, char **argv);

/* The accountant's JSON number: a real, or "nan", "inf", "-inf" (acct.h). */
json_t *acct_json_num(double x) { return isfinite(x) ? json_real(x) : json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"); }
#define jnum acct_json_num

static json_t *schedule_json(const acct_schedule *s) {
    json_t *a = json_array();
    for (int i = 0; i < s->n; i++) {
        const acct_segment *g = &s->seg[i];
        json_t *o = json_object();
        json_object_set_new(o, "mechanism", json_string(acct_mech_name(g->mech)));
        json_object_set_new(o, "q", json_real(g->q));
        json_object_set_new(o, g->mech == ACCT_GAUSSIAN ? "sigma" : g->mech == ACCT_LAPLACE ? "scale" : "epsilon0",
                            json_real(g->param));
        json_object_set_new(o, "steps", json_integer((json_int_t)g->steps));
        json_array_append_new(a, o);
    }
    return a;
}

static void print_schedule(FILE *txt, const acct_schedule *s) {
    for (int i = 0; i < s->n; i++) {
        const acct_segment *g = &s->seg[i];
        fprintf(txt, "segment %d: %s q=%.10g %s=%.10g steps=%lld\n", i + 1, acct_mech_name(g->mech), g->q,
               g->mech == ACCT_GAUSSIAN ? "sigma" : g->mech == ACCT_LAPLACE ? "scale" : "epsilon0", g->param,
               (long long)g->steps);
    }
}

static const char *const ACC_NAMES[] = {"rdp", "pld", "pure", "gdp", "all", NULL};

/* one accountant's answer in text and JSON; failures that only mean "not applicable" are reported, not fatal */
static int report_na(FILE *txt, json_t *res, const char *name, dp_status st, int json) {
    if (st == DP_ERR_NOT_SUPPORTED) {
        if (!json) fprintf(txt, "%-5s n/a: %s\n", name, dp_last_error());
        json_t *o = json_object();
        json_object_set_new(o, "not_applicable", json_string(dp_last_error()));
        json_object_set_new(res, name, o);
        dp_clear_error();
        return 0;
    }
    return 1;
}

/* epsilon at delta = 0: the pure accountant's basic composition is exact (the largest losses add up);
 * a Gaussian segment has an unbounded privacy loss, so every accountant's answer is +inf, said so;
 * RDP and GDP give no finite epsilon at delta = 0 for any mechanism (+inf is their correct bound). */
static int account_delta0(FILE *txt, json_t *res, const acct_schedule *s, const int *want, int json) {
    double basic = INFINITY;
    dp_status st = acct_pure_basic(&basic, s);
    const char *why = st == DP_OK ? NULL : "a Gaussian segment: the privacy loss is unbounded, no finite epsilon at delta = 0";
    dp_clear_error();
    static const char *const why_acc[4] = {"RDP gives no finite epsilon at delta = 0",
                                           "the PLD accountant needs delta > 0; the pure accountant answers",
                                           NULL, "GDP gives no finite epsilon at delta = 0"};
    for (int k = 0; k < 4; k++) {
        if (!want[k]) continue;
        json_t *o = json_object();
        double v = (k == 2 || (k == 1 && !why)) ? basic : INFINITY;
        const char *reason = why ? why : why_acc[k];
        if (k == 1 && !why) reason = "pure basic composition at delta = 0, an upper bound";
        json_object_set_new(o, "epsilon", jnum(v));
        if (reason) json_object_set_new(o, "reason", json_string(reason));
        json_object_set_new(res, ACC_NAMES[k], o);
        if (!json) fprintf(txt, "%-5s epsilon = %.10g%s%s%s\n", ACC_NAMES[k], v, reason ? " (" : "", reason ? reason : "",
                           reason ? ")" : "");
    }
    return 0;
}

/* One `account` run: the options, what they resolve to, and the outputs being built. */
typedef struct {
    const char *mech_s, *acc_s, *orders_s, *sched_path, *conv_s, *nb_s;
    double q, sigma, scale, eps0, delta, epsq, target, pld_h, prec;
    int64_t steps;
    int certified, json, help, seen_q, seen_steps, seen_mech, seen_sigma, seen_scale, seen_eps0, seen_delta, seen_eps,
        seen_target;
    int acc, mech, conv_i, nb;
    double orders[ACCT_MAX_ORDERS];
    size_t norders;
    acct_schedule s0, s; /* as given; with the neighbouring relation applied */
    int want[4];         /* rdp, pld, pure, gdp requested */
    acct_pld_opts po;
    FILE *txt;           /* the text output, buffered: written only on success */
    json_t *root, *res;
} account_run;

/* The options and their checks; the schedule. 0, or the exit code (usage printed: -1). */
static int account_parse(account_run *a, int argc, char **argv) {
    a->mech_s = "gaussian"; a->acc_s = "all"; a->orders_s = "dp-accounting"; a->conv_s = "balle"; a->nb_s = "add-remove";
    a->q = 1.0; a->sigma = a->scale = a->eps0 = a->delta = a->epsq = a->target = NAN; a->prec = 1e-3;
    a->steps = 1;
    dp_opt opts[] = {
        {"--mechanism", DP_OPT_STRING, &a->mech_s, &a->seen_mech, "gaussian|laplace|pure (default gaussian)"},
        {"--q", DP_OPT_DOUBLE, &a->q, &a->seen_q, "Poisson sampling rate in (0,1] (default 1)"},
        {"--sigma", DP_OPT_DOUBLE, &a->sigma, &a->seen_sigma, "Gaussian noise multiplier"},
        {"--scale", DP_OPT_DOUBLE, &a->scale, &a->seen_scale, "Laplace scale b"},
        {"--epsilon0", DP_OPT_DOUBLE, &a->eps0, &a->seen_eps0, "per-step epsilon of a pure-DP mechanism"},
        {"--steps", DP_OPT_INT, &a->steps, &a->seen_steps, "number of steps T (default 1)"},
        {"--delta", DP_OPT_DOUBLE, &a->delta, &a->seen_delta, "report epsilon(delta)"},
        {"--epsilon", DP_OPT_DOUBLE, &a->epsq, &a->seen_eps, "report delta(epsilon) instead"},
        {"--target-epsilon", DP_OPT_DOUBLE, &a->target, &a->seen_target, "calibrate the noise for this epsilon"},
        {"--precision", DP_OPT_DOUBLE, &a->prec, NULL, "relative precision of the calibration (default 1e-3)"},
        {"--accountant", DP_OPT_STRING, &a->acc_s, NULL, "rdp|pld|pure|gdp|all (default all)"},
        {"--orders", DP_OPT_STRING, &a->orders_s, NULL, "RDP orders: opacus|dp-accounting|tf-privacy|LIST"},
        {"--conversion", DP_OPT_STRING, &a->conv_s, NULL, "RDP to (eps,delta): balle (default) | classic"},
        {"--certified", DP_OPT_FLAG, &a->certified, NULL, "also the MPFR outward-rounded RDP bound"},
        {"--schedule", DP_OPT_STRING, &a->sched_path, NULL, "JSON schedule of segments (instead of the options above)"},
        {"--neighbouring", DP_OPT_STRING, &a->nb_s, NULL, "add-remove (default) | replace-one (doubles sensitivity)"},
        {"--pld-h", DP_OPT_DOUBLE, &a->pld_h, NULL, "PLD grid spacing (default automatic)"},
        {"--json", DP_OPT_FLAG, &a->json, NULL, "JSON output"},
    };
    size_t nopts = sizeof opts / sizeof opts[0];
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, NULL, 0, NULL, &a->help);
    if (st != DP_OK) return dp_cli_fail("account", st);
    if (a->help) {
        printf("usage: dpcert account --mechanism M --q Q --sigma S|--scale B|--epsilon0 E0 --steps T --delta D [options]\n");
        dp_opts_print_help(opts, nopts);
        return -1;
    }
    static const char *const MECHS[] = {"gaussian", "laplace", "pure", NULL};
    static const char *const CONVS[] = {"balle", "classic", NULL};
    static const char *const NBS[] = {"add-remove", "replace-one", NULL};
    if ((st = dp_parse_choice(&a->acc, "--accountant", a->acc_s, ACC_NAMES)) != DP_OK) return dp_cli_fail("account", st);
    if ((st = dp_parse_choice(&a->mech, "--mechanism", a->mech_s, MECHS)) != DP_OK) return dp_cli_fail("account", st);
    if ((st = dp_parse_choice(&a->conv_i, "--conversion", a->conv_s, CONVS)) != DP_OK) return dp_cli_fail("account", st);
    if ((st = dp_parse_choice(&a->nb, "--neighbouring", a->nb_s, NBS)) != DP_OK) return dp_cli_fail("account", st);
    if ((st = acct_orders_parse(a->orders, &a->norders, a->orders_s)) != DP_OK) return dp_cli_fail("account", st);
    if (a->seen_delta + a->seen_eps != 1)
        return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "give exactly one of --delta and --epsilon"));
    if (a->seen_delta && (st = dp_check_range("--delta", a->delta, 0, 1, 1, 0)) != DP_OK) return dp_cli_fail("account", st);
    if (a->seen_target && a->delta == 0)
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--target-epsilon needs --delta > 0"));
    if (a->seen_eps && (st = dp_check_min("--epsilon", a->epsq, 0, 1)) != DP_OK) return dp_cli_fail("account", st);
    if (a->seen_target && !a->seen_delta)
        return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "--target-epsilon needs --delta"));
    if (a->seen_target && !(a->target > 0 && isfinite(a->target)))
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--target-epsilon must be > 0 and finite (got %g)", a->target));
    if (a->seen_target && !(a->prec >= ACCT_CALIB_MIN_PREC && a->prec < 1))
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--precision must be in [%g, 1) (got %g)",
                                               ACCT_CALIB_MIN_PREC, a->prec));
    if (!(a->pld_h >= 0))
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--pld-h must be > 0 (or 0 for automatic; got %g)", a->pld_h));
    /* --target-epsilon with --epsilon cannot reach here: it needs --delta, and --delta excludes --epsilon */
    memset(&a->s0, 0, sizeof a->s0);
    if (a->sched_path) {
        if (a->seen_q || a->seen_steps || a->seen_mech || a->seen_sigma || a->seen_scale || a->seen_eps0)
            return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "--schedule excludes --mechanism/--q/--sigma/--scale/--epsilon0/--steps"));
        if ((st = acct_schedule_read_json(&a->s0, a->sched_path)) != DP_OK) return dp_cli_fail("account", st);
    } else {
        double par = a->mech == 0 ? a->sigma : a->mech == 1 ? a->scale : a->eps0;
        const char *pn = a->mech == 0 ? "--sigma" : a->mech == 1 ? "--scale" : "--epsilon0";
        /* With --target-epsilon the noise parameter is what is calibrated: a value given on
         * the command line is only the search's starting point, and 1 is used without one. */
        if (a->seen_target && a->seen_sigma + a->seen_scale + a->seen_eps0 == 0) {
            par = 1.0;
            if (a->mech == 0) a->seen_sigma = 1; else if (a->mech == 1) a->seen_scale = 1; else a->seen_eps0 = 1;
        }
        if (a->seen_sigma + a->seen_scale + a->seen_eps0 != 1 || (a->mech == 0 && !a->seen_sigma) || (a->mech == 1 && !a->seen_scale) ||
            (a->mech == 2 && !a->seen_eps0))
            return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "--mechanism %s needs %s (and no other noise option)",
                                                   a->mech_s, pn));
        if ((st = dp_check_range("--q", a->q, 0, 0, 1, 1)) != DP_OK) return dp_cli_fail("account", st);
        if ((st = dp_check_min(pn, par, 0, 0)) != DP_OK) return dp_cli_fail("account", st);
        if (a->steps < 1) return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--steps must be >= 1 (got %lld)", (long long)a->steps));
        a->s0.n = 1;
        a->s0.seg[0] = (acct_segment){(acct_mech)a->mech, a->q, par, a->steps};
        if ((st = acct_schedule_validate(&a->s0)) != DP_OK) return dp_cli_fail("account", st);
    }
    acct_schedule_adjacency(&a->s, &a->s0, (acct_adjacency)a->nb);
    acct_pld_default_opts(&a->po);
    a->po.h = a->pld_h;
    for (int k = 0; k < 4; k++) a->want[k] = a->acc == k || a->acc == 4;
    return 0;
}

/* The noise parameter that meets --target-epsilon at --delta, by each requested accountant. */
static int account_calibrate(account_run *a) {
    dp_status st;
    json_object_set_new(a->root, "delta", json_real(a->delta));
    json_object_set_new(a->root, "target_epsilon", json_real(a->target));
    if (!a->json) fprintf(a->txt, "delta = %g, target epsilon = %g\n", a->delta, a->target);
    for (int k = 0; k < 4; k++) {
        if (!a->want[k]) continue;
        double p, e;
        const char *nm = ACC_NAMES[k];
        st = acct_calibrate(&p, &e, &a->s, (acct_kind)k, a->target, a->delta, a->prec, a->orders, a->norders);
        if (st != DP_OK) {
            if (report_na(a->txt, a->res, nm, st, a->json) && st != DP_ERR_INVALID) return dp_cli_fail("account", st);
            if (st == DP_ERR_INVALID) return dp_cli_fail("account", st);
            continue;
        }
        /* report the parameter in the user's terms (undo the replace-one scaling) */
        double user = a->nb == 1 ? (a->s.seg[0].mech == ACCT_PURE ? p / 2.0 : p * 2.0) : p;
        const char *pn = a->s.seg[0].mech == ACCT_GAUSSIAN ? "sigma" : a->s.seg[0].mech == ACCT_LAPLACE ? "scale" : "epsilon0";
        json_t *o = json_object();
        json_object_set_new(o, pn, json_real(user));
        json_object_set_new(o, "epsilon_at_parameter", jnum(e));
        json_object_set_new(o, "relative_precision", json_real(a->prec));
        if (k == 3) json_object_set_new(o, "label", json_string("approximate, not a bound"));
        json_object_set_new(a->res, nm, o);
        if (!a->json)
            fprintf(a->txt, "%-5s %s = %.8g (epsilon there = %.8g, relative precision %g)%s\n", nm, pn, user, e, a->prec,
                   k == 3 ? "  [GDP: approximate, not a bound]" : "");
    }
    return 0;
}

/* What is asked (delta or epsilon) and the implementation delta of dpcert's own samplers. */
static void account_header(account_run *a) {
    if (a->seen_delta) {
        json_object_set_new(a->root, "delta", json_real(a->delta));
        if (!a->json) fprintf(a->txt, "delta = %g\n", a->delta);
    } else {
        json_object_set_new(a->root, "epsilon", json_real(a->epsq));
        if (!a->json) fprintf(a->txt, "epsilon = %g\n", a->epsq);
    }
    {
        double dtot, dstep;
        if (acct_sampler_delta(&dtot, &dstep, &a->s) == DP_OK) {
            json_t *o = json_object();
            json_object_set_new(o, "delta_impl_per_step", jnum(dstep));
            json_object_set_new(o, "delta_impl_total", jnum(dtot));
            json_object_set_new(o, "note", json_string("dpcert's own samplers are bounded (Laplace |x| <= 52 ln2 b, Gaussian "
                                                       "|z| <= 8.57 sigma): add delta_impl_total to delta for the implemented "
                                                       "mechanism (gaussian: per coordinate, times the dimension); floating-point "
                                                       "porosity (Mironov 2012) is NOT covered; docs/accounting.md §8b"));
            json_object_set_new(a->root, "sampler_implementation", o);
            if (!a->json)
                fprintf(a->txt, "implementation delta (dpcert's bounded samplers, docs §8b): %.3g per step (max), %.3g over all "
                             "steps%s; add it to delta for the implemented mechanism; floating-point porosity (Mironov "
                             "2012) not covered\n", dstep, dtot, a->s.seg[0].mech == ACCT_GAUSSIAN ? " per coordinate (times the dimension)" : "");
        } else dp_clear_error();
    }
}

/* RDP: epsilon(delta) or delta(epsilon) at the optimal order; with --certified the MPFR bound. */
static int account_rdp(account_run *a) {
    dp_status st;
    double v, order;
    st = a->seen_delta ? acct_rdp_epsilon(&v, &order, &a->s, a->orders, a->norders, a->delta, (acct_conv)a->conv_i)
                    : acct_rdp_delta(&v, &order, &a->s, a->orders, a->norders, a->epsq, (acct_conv)a->conv_i);
    if (st != DP_OK) { if (report_na(a->txt, a->res, "rdp", st, a->json)) return dp_cli_fail("account", st); }
    else {
        json_t *o = json_object();
        json_object_set_new(o, a->seen_delta ? "epsilon" : "delta", jnum(v));
        json_object_set_new(o, "optimal_order", jnum(order));
        json_object_set_new(o, "orders", json_string(a->orders_s));
        json_object_set_new(o, "conversion", json_string(a->conv_s));
        if (!a->json && isinf(v))
            fprintf(a->txt, "rdp   %s = inf (no finite bound: the RDP of every order of %s is beyond the double range "
                         "or too large to convert)\n", a->seen_delta ? "epsilon" : "delta", a->orders_s);
        else if (!a->json) fprintf(a->txt, "rdp   %s = %.10g (optimal order %g, orders %s, conversion %s)\n", a->seen_delta ? "epsilon" : "delta", v, order, a->orders_s, a->conv_s);
        if (a->certified && a->seen_delta) {
            double c, ca;
            st = acct_rdp_epsilon_certified(&c, &ca, &a->s, a->orders, a->norders, a->delta);
            if (st != DP_OK) { if (report_na(a->txt, o, "certified", st, a->json)) { json_decref(o); return dp_cli_fail("account", st); } }
            else {
                int via_rr = 0; /* subsampled Laplace: certified through the RR bound (docs §3) */
                for (int i = 0; i < a->s.n; i++) if (a->s.seg[i].mech == ACCT_LAPLACE && a->s.seg[i].q < 1.0) via_rr = 1;
                json_object_set_new(o, "certified_epsilon_upper", jnum(c));
                json_object_set_new(o, "certified_order", jnum(ca));
                json_object_set_new(o, "certified_method",
                                    json_string(via_rr ? "via the pure-DP/RR bound of the amplified epsilon (subsampled Laplace), looser than the Laplace RDP above"
                                                       : "the RDP formulas above in MPFR with outward rounding"));
                if (!a->json) fprintf(a->txt, "rdp   certified epsilon <= %.10g (MPFR outward rounding, integer order %g)%s\n", c, ca,
                                  via_rr ? "; certified via the pure-DP/RR bound, looser than the Laplace RDP above" : "");
            }
        }
        json_object_set_new(a->res, "rdp", o);
    }
    return 0;
}

/* PLD: the interval [lower, upper] and the same widened by the floating-point budget. */
static int account_pld(account_run *a) {
    dp_status st;
    acct_pld_result r;
    st = a->seen_delta ? acct_pld_epsilon(&r, &a->s, a->delta, &a->po) : acct_pld_delta(&r, &a->s, a->epsq, &a->po);
    if (st != DP_OK) { if (report_na(a->txt, a->res, "pld", st, a->json)) return dp_cli_fail("account", st); }
    else {
        json_t *o = json_object();
        json_object_set_new(o, a->seen_delta ? "epsilon_lower" : "delta_lower", jnum(r.lower));
        json_object_set_new(o, a->seen_delta ? "epsilon_upper" : "delta_upper", jnum(r.upper));
        json_object_set_new(o, "grid_h", json_real(r.h));
        json_object_set_new(o, "fft_points", json_integer((json_int_t)r.n_fft));
        json_object_set_new(o, "tail_mass", jnum(r.tail_mass));
        json_object_set_new(o, "mass_error", jnum(r.mass_error));
        json_object_set_new(o, "fp_budget_delta", jnum(r.fp_budget));
        json_object_set_new(o, a->seen_delta ? "epsilon_lower_fp" : "delta_lower_fp", jnum(r.lower_fp));
        json_object_set_new(o, a->seen_delta ? "epsilon_upper_fp" : "delta_upper_fp", jnum(r.upper_fp));
        json_object_set_new(a->res, "pld", o);
        if (!a->json) {
            fprintf(a->txt, "pld   %s in [%.10g, %.10g] (h=%.3g, %zu FFT points, tail mass %.3g, mass error %.2g)\n",
                   a->seen_delta ? "epsilon" : "delta", r.lower, r.upper, r.h, r.n_fft, r.tail_mass, r.mass_error);
            fprintf(a->txt, "pld   with the floating-point budget (%.3g in delta, docs §4; rigorous): [%.10g, %.10g]\n",
                    r.fp_budget, r.lower_fp, r.upper_fp);
        }
    }
    return 0;
}

/* Pure DP: basic, advanced and exact (randomized-response) composition. */
static int account_pure(account_run *a) {
    dp_status st;
    double basic, ex = NAN, adv = NAN;
    st = acct_pure_basic(&basic, &a->s);
    if (st != DP_OK) { if (report_na(a->txt, a->res, "pure", st, a->json)) return dp_cli_fail("account", st); }
    else {
        json_t *o = json_object();
        json_object_set_new(o, "basic_epsilon", jnum(basic));
        if (a->seen_delta) {
            if (acct_pure_advanced(&adv, &a->s, a->delta) == DP_OK) json_object_set_new(o, "advanced_epsilon", jnum(adv));
            st = acct_pure_exact(&ex, &a->s, a->delta);
            char exs[DP_ERR_MAX + 8] = "", advs[32] = "n/a"; /* the exact value, or n/a and why (never "nan") */
            if (st == DP_OK) { json_object_set_new(o, "exact_rr_epsilon", jnum(ex)); snprintf(exs, sizeof exs, "%.10g", ex); }
            else {
                json_object_set_new(o, "exact_rr", json_string(dp_last_error()));
                snprintf(exs, sizeof exs, "n/a (%s)", dp_last_error());
                dp_clear_error();
            }
            if (!isnan(adv)) snprintf(advs, sizeof advs, "%.10g", adv);
            if (!a->json) fprintf(a->txt, "pure  epsilon: basic %.10g, advanced %s, exact (randomized-response composition) %s\n", basic, advs, exs);
        } else {
            double e0 = 0;
            int64_t T = 0;
            int uni = 1;
            for (int i = 0; i < a->s.n; i++) {
                double e;
                acct_pure_step_eps(&e, &a->s.seg[i]);
                if (i && e != e0) uni = 0;
                e0 = e;
                T += a->s.seg[i].steps;
            }
            double d = NAN;
            if (uni && acct_rr_delta(&d, e0, T, a->epsq) == DP_OK) json_object_set_new(o, "exact_rr_delta", jnum(d));
            dp_clear_error();
            if (!a->json) fprintf(a->txt, "pure  basic epsilon %.10g; exact (randomized-response) delta(%g) = %.10g\n", basic, a->epsq, d);
        }
        json_object_set_new(a->res, "pure", o);
    }
    return 0;
}

/* GDP: mu and its epsilon or delta (exact for q = 1, else approximate, not a bound). */
static int account_gdp(account_run *a) {
    dp_status st;
    double mu;
    st = acct_gdp_mu(&mu, &a->s);
    if (st != DP_OK) { if (report_na(a->txt, a->res, "gdp", st, a->json)) return dp_cli_fail("account", st); }
    else {
        double v = a->seen_delta ? acct_gdp_epsilon(mu, a->delta) : acct_gdp_delta(mu, a->epsq);
        json_t *o = json_object();
        json_object_set_new(o, a->seen_delta ? "epsilon" : "delta", jnum(v));
        json_object_set_new(o, "mu", jnum(mu));
        int exact = 1;
        for (int i = 0; i < a->s.n; i++) if (a->s.seg[i].q < 1.0) exact = 0;
        json_object_set_new(o, "label", json_string(exact ? "exact (analytic Gaussian, q = 1)" : "approximate, not a bound"));
        json_object_set_new(a->res, "gdp", o);
        if (!a->json) fprintf(a->txt, "gdp   %s ~ %.10g (mu = %.6g) [%s]\n", a->seen_delta ? "epsilon" : "delta", v, mu,
                          exact ? "exact: analytic Gaussian, q = 1" : "GDP/CLT: approximate, not a bound");
    }
    return 0;
}

/* Every requested accountant n/a: no answer is not a success (exit 2, the reasons named). */
static int account_answered(const account_run *a) {
    const char *k;
    json_t *v;
    int answered = 0;
    char why[1024] = "";
    json_object_foreach(a->res, k, v) {
        json_t *na = json_object_get(v, "not_applicable");
        if (!na) answered = 1;
        else {
            size_t l = strlen(why);
            snprintf(why + l, sizeof why - l, "%s%s: %s", l ? "; " : "", k, json_string_value(na));
        }
    }
    if (!answered) return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "no accountant could answer: %s", why));
    return 0;
}

int dp_cmd_account(int argc, char **argv) {
    account_run run, *a = &run;
    memset(a, 0, sizeof *a);
    int rc = account_parse(a, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    const char *nbname = acct_adjacency_name((acct_adjacency)a->nb);
    /* all validation is done above; the text output is still buffered and written only on
     * success, so a failure later (an internal error, a calibration without answer) prints
     * nothing on stdout */
    char *tbuf = NULL;
    size_t tlen = 0;
    a->txt = open_memstream(&tbuf, &tlen);
    if (!a->txt) return dp_cli_fail("account", dp_error(DP_ERR_NOMEM, "out of memory"));
    a->root = json_object();
    a->res = json_object();
    json_object_set_new(a->root, "neighbouring_relation", json_string(nbname));
    json_object_set_new(a->root, "schedule", schedule_json(&a->s0));
    if (!a->json) {
        fprintf(a->txt, "neighbouring relation: %s\n", nbname);
        print_schedule(a->txt, &a->s0);
        if (a->seen_target && !a->sched_path)
            fprintf(a->txt, "(the noise parameter above is the calibration's starting point, not its answer)\n");
    }
    if (a->seen_target) rc = account_calibrate(a);
    else {
        account_header(a);
        if (a->seen_delta && a->delta == 0) /* only pure DP has a finite epsilon at delta = 0 */
            rc = account_delta0(a->txt, a->res, &a->s, a->want, a->json);
        else {
            int (*const acc[4])(account_run *) = {account_rdp, account_pld, account_pure, account_gdp};
            for (int k = 0; k < 4 && rc == 0; k++)
                if (a->want[k]) rc = acc[k](a);
        }
    }
    if (rc == 0) rc = account_answered(a);
    fclose(a->txt);
    if (!a->json && rc == 0) fwrite(tbuf, 1, tlen, stdout);
    dp_free(tbuf);
    json_object_set_new(a->root, "results", a->res);
    if (a->json && rc == 0) {
        char *txt = json_dumps(a->root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        if (txt) { puts(txt); dp_free(txt); }
    }
    json_decref(a->root);
    return rc;
}

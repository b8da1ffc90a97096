/* accountant/acct_cmd.c — `dpcert account` and `dpcert audit-accounting FILE`. Exit codes:
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
int dp_cmd_audit_accounting(int argc, char **argv);

static json_t *jnum(double x) { return isfinite(x) ? json_real(x) : json_string(isnan(x) ? "nan" : x > 0 ? "inf" : "-inf"); }

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

int dp_cmd_account(int argc, char **argv) {
    const char *mech_s = "gaussian", *acc_s = "all", *orders_s = "dp-accounting", *sched_path = NULL,
               *conv_s = "balle", *nb_s = "add-remove";
    double q = 1.0, sigma = NAN, scale = NAN, eps0 = NAN, delta = NAN, epsq = NAN, target = NAN, pld_h = 0,
           prec = 1e-3;
    int64_t steps = 1;
    int certified = 0, json = 0, help = 0, seen_q = 0, seen_steps = 0, seen_mech = 0, seen_sigma = 0, seen_scale = 0,
        seen_eps0 = 0, seen_delta = 0, seen_eps = 0, seen_target = 0;
    dp_opt opts[] = {
        {"--mechanism", DP_OPT_STRING, &mech_s, &seen_mech, "gaussian|laplace|pure (default gaussian)"},
        {"--q", DP_OPT_DOUBLE, &q, &seen_q, "Poisson sampling rate in (0,1] (default 1)"},
        {"--sigma", DP_OPT_DOUBLE, &sigma, &seen_sigma, "Gaussian noise multiplier"},
        {"--scale", DP_OPT_DOUBLE, &scale, &seen_scale, "Laplace scale b"},
        {"--epsilon0", DP_OPT_DOUBLE, &eps0, &seen_eps0, "per-step epsilon of a pure-DP mechanism"},
        {"--steps", DP_OPT_INT, &steps, &seen_steps, "number of steps T (default 1)"},
        {"--delta", DP_OPT_DOUBLE, &delta, &seen_delta, "report epsilon(delta)"},
        {"--epsilon", DP_OPT_DOUBLE, &epsq, &seen_eps, "report delta(epsilon) instead"},
        {"--target-epsilon", DP_OPT_DOUBLE, &target, &seen_target, "calibrate the noise for this epsilon"},
        {"--precision", DP_OPT_DOUBLE, &prec, NULL, "relative precision of the calibration (default 1e-3)"},
        {"--accountant", DP_OPT_STRING, &acc_s, NULL, "rdp|pld|pure|gdp|all (default all)"},
        {"--orders", DP_OPT_STRING, &orders_s, NULL, "RDP orders: opacus|dp-accounting|tf-privacy|LIST"},
        {"--conversion", DP_OPT_STRING, &conv_s, NULL, "RDP to (eps,delta): balle (default) | classic"},
        {"--certified", DP_OPT_FLAG, &certified, NULL, "also the MPFR outward-rounded RDP bound"},
        {"--schedule", DP_OPT_STRING, &sched_path, NULL, "JSON schedule of segments (instead of the options above)"},
        {"--neighbouring", DP_OPT_STRING, &nb_s, NULL, "add-remove (default) | replace-one (doubles sensitivity)"},
        {"--pld-h", DP_OPT_DOUBLE, &pld_h, NULL, "PLD grid spacing (default automatic)"},
        {"--json", DP_OPT_FLAG, &json, NULL, "JSON output"},
    };
    size_t nopts = sizeof opts / sizeof opts[0];
    dp_status st = dp_opts_parse(opts, nopts, argc, argv, NULL, 0, NULL, &help);
    if (st != DP_OK) return dp_cli_fail("account", st);
    if (help) {
        printf("usage: dpcert account --mechanism M --q Q --sigma S|--scale B|--epsilon0 E0 --steps T --delta D [options]\n");
        dp_opts_print_help(opts, nopts);
        return 0;
    }
    int acc, mech, conv_i, nb;
    static const char *const MECHS[] = {"gaussian", "laplace", "pure", NULL};
    static const char *const CONVS[] = {"balle", "classic", NULL};
    static const char *const NBS[] = {"add-remove", "replace-one", NULL};
    if ((st = dp_parse_choice(&acc, "--accountant", acc_s, ACC_NAMES)) != DP_OK) return dp_cli_fail("account", st);
    if ((st = dp_parse_choice(&mech, "--mechanism", mech_s, MECHS)) != DP_OK) return dp_cli_fail("account", st);
    if ((st = dp_parse_choice(&conv_i, "--conversion", conv_s, CONVS)) != DP_OK) return dp_cli_fail("account", st);
    if ((st = dp_parse_choice(&nb, "--neighbouring", nb_s, NBS)) != DP_OK) return dp_cli_fail("account", st);
    double orders[ACCT_MAX_ORDERS];
    size_t norders;
    if ((st = acct_orders_parse(orders, &norders, orders_s)) != DP_OK) return dp_cli_fail("account", st);
    if (seen_delta + seen_eps != 1)
        return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "give exactly one of --delta and --epsilon"));
    if (seen_delta && (st = dp_check_range("--delta", delta, 0, 1, 1, 0)) != DP_OK) return dp_cli_fail("account", st);
    if (seen_target && delta == 0)
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--target-epsilon needs --delta > 0"));
    if (seen_eps && (st = dp_check_min("--epsilon", epsq, 0, 1)) != DP_OK) return dp_cli_fail("account", st);
    if (seen_target && !seen_delta)
        return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "--target-epsilon needs --delta"));
    if (seen_target && !(target > 0 && isfinite(target)))
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--target-epsilon must be > 0 and finite (got %g)", target));
    if (seen_target && !(prec >= ACCT_CALIB_MIN_PREC && prec < 1))
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--precision must be in [%g, 1) (got %g)",
                                               ACCT_CALIB_MIN_PREC, prec));
    if (!(pld_h >= 0))
        return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--pld-h must be > 0 (or 0 for automatic; got %g)", pld_h));
    if (seen_target && seen_eps)
        return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "--target-epsilon excludes --epsilon"));
    acct_schedule s0, s;
    memset(&s0, 0, sizeof s0);
    if (sched_path) {
        if (seen_q || seen_steps || seen_mech || seen_sigma || seen_scale || seen_eps0)
            return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "--schedule excludes --mechanism/--q/--sigma/--scale/--epsilon0/--steps"));
        if ((st = acct_schedule_read_json(&s0, sched_path)) != DP_OK) return dp_cli_fail("account", st);
    } else {
        double par = mech == 0 ? sigma : mech == 1 ? scale : eps0;
        const char *pn = mech == 0 ? "--sigma" : mech == 1 ? "--scale" : "--epsilon0";
        /* With --target-epsilon the noise parameter is what is calibrated: a value given on
         * the command line is only the search's starting point, and 1 is used without one. */
        if (seen_target && seen_sigma + seen_scale + seen_eps0 == 0) {
            par = 1.0;
            if (mech == 0) seen_sigma = 1; else if (mech == 1) seen_scale = 1; else seen_eps0 = 1;
        }
        if (seen_sigma + seen_scale + seen_eps0 != 1 || (mech == 0 && !seen_sigma) || (mech == 1 && !seen_scale) ||
            (mech == 2 && !seen_eps0))
            return dp_cli_fail("account", dp_error(DP_ERR_USAGE, "--mechanism %s needs %s (and no other noise option)",
                                                   mech_s, pn));
        if ((st = dp_check_range("--q", q, 0, 0, 1, 1)) != DP_OK) return dp_cli_fail("account", st);
        if ((st = dp_check_min(pn, par, 0, 0)) != DP_OK) return dp_cli_fail("account", st);
        if (steps < 1) return dp_cli_fail("account", dp_error(DP_ERR_INVALID, "--steps must be >= 1 (got %lld)", (long long)steps));
        s0.n = 1;
        s0.seg[0] = (acct_segment){(acct_mech)mech, q, par, steps};
        if ((st = acct_schedule_validate(&s0)) != DP_OK) return dp_cli_fail("account", st);
    }
    acct_schedule_adjacency(&s, &s0, (acct_adjacency)nb);
    const char *nbname = acct_adjacency_name((acct_adjacency)nb);
    /* all validation is done above; the text output is still buffered and written only on
     * success, so a failure later (an internal error, a calibration without answer) prints
     * nothing on stdout */
    char *tbuf = NULL;
    size_t tlen = 0;
    FILE *txt = open_memstream(&tbuf, &tlen);
    if (!txt) return dp_cli_fail("account", dp_error(DP_ERR_NOMEM, "out of memory"));
    json_t *root = json_object(), *res = json_object();
    json_object_set_new(root, "neighbouring_relation", json_string(nbname));
    json_object_set_new(root, "schedule", schedule_json(&s0));
    if (!json) {
        fprintf(txt, "neighbouring relation: %s\n", nbname);
        print_schedule(txt, &s0);
        if (seen_target && !sched_path)
            fprintf(txt, "(the noise parameter above is the calibration's starting point, not its answer)\n");
    }
    int rc = 0;
    acct_pld_opts po;
    acct_pld_default_opts(&po);
    po.h = pld_h;
    int want[4] = {acc == 0 || acc == 4, acc == 1 || acc == 4, acc == 2 || acc == 4, acc == 3 || acc == 4};

    if (seen_target) {
        json_object_set_new(root, "delta", json_real(delta));
        json_object_set_new(root, "target_epsilon", json_real(target));
        if (!json) fprintf(txt, "delta = %g, target epsilon = %g\n", delta, target);
        for (int k = 0; k < 4; k++) {
            if (!want[k]) continue;
            double p, e;
            const char *nm = ACC_NAMES[k];
            st = acct_calibrate(&p, &e, &s, (acct_kind)k, target, delta, prec, orders, norders);
            if (st != DP_OK) {
                if (report_na(txt, res, nm, st, json) && st != DP_ERR_INVALID) { rc = dp_cli_fail("account", st); goto out; }
                if (st == DP_ERR_INVALID) { rc = dp_cli_fail("account", st); goto out; }
                continue;
            }
            /* report the parameter in the user's terms (undo the replace-one scaling) */
            double user = nb == 1 ? (s.seg[0].mech == ACCT_PURE ? p / 2.0 : p * 2.0) : p;
            const char *pn = s.seg[0].mech == ACCT_GAUSSIAN ? "sigma" : s.seg[0].mech == ACCT_LAPLACE ? "scale" : "epsilon0";
            json_t *o = json_object();
            json_object_set_new(o, pn, json_real(user));
            json_object_set_new(o, "epsilon_at_parameter", jnum(e));
            json_object_set_new(o, "relative_precision", json_real(prec));
            if (k == 3) json_object_set_new(o, "label", json_string("approximate, not a bound"));
            json_object_set_new(res, nm, o);
            if (!json)
                fprintf(txt, "%-5s %s = %.8g (epsilon there = %.8g, relative precision %g)%s\n", nm, pn, user, e, prec,
                       k == 3 ? "  [GDP: approximate, not a bound]" : "");
        }
        goto out;
    }

    if (seen_delta) {
        json_object_set_new(root, "delta", json_real(delta));
        if (!json) fprintf(txt, "delta = %g\n", delta);
    } else {
        json_object_set_new(root, "epsilon", json_real(epsq));
        if (!json) fprintf(txt, "epsilon = %g\n", epsq);
    }
    {
        double dtot, dstep;
        if (acct_sampler_delta(&dtot, &dstep, &s) == DP_OK) {
            json_t *o = json_object();
            json_object_set_new(o, "delta_impl_per_step", jnum(dstep));
            json_object_set_new(o, "delta_impl_total", jnum(dtot));
            json_object_set_new(o, "note", json_string("dpcert's own samplers are bounded (Laplace |x| <= 52 ln2 b, Gaussian "
                                                       "|z| <= 8.57 sigma): add delta_impl_total to delta for the implemented "
                                                       "mechanism (gaussian: per coordinate, times the dimension); floating-point "
                                                       "porosity (Mironov 2012) is NOT covered; docs/accounting.md §8b"));
            json_object_set_new(root, "sampler_implementation", o);
            if (!json)
                fprintf(txt, "implementation delta (dpcert's bounded samplers, docs §8b): %.3g per step (max), %.3g over all "
                             "steps%s; add it to delta for the implemented mechanism; floating-point porosity (Mironov "
                             "2012) not covered\n", dstep, dtot, s.seg[0].mech == ACCT_GAUSSIAN ? " per coordinate (times the dimension)" : "");
        } else dp_clear_error();
    }
    if (seen_delta && delta == 0) { /* only pure DP has a finite epsilon at delta = 0 */
        rc = account_delta0(txt, res, &s, want, json);
        goto out;
    }
    if (want[0]) {
        double v, a;
        st = seen_delta ? acct_rdp_epsilon(&v, &a, &s, orders, norders, delta, (acct_conv)conv_i)
                        : acct_rdp_delta(&v, &a, &s, orders, norders, epsq, (acct_conv)conv_i);
        if (st != DP_OK) { if (report_na(txt, res, "rdp", st, json)) { rc = dp_cli_fail("account", st); goto out; } }
        else {
            json_t *o = json_object();
            json_object_set_new(o, seen_delta ? "epsilon" : "delta", jnum(v));
            json_object_set_new(o, "optimal_order", jnum(a));
            json_object_set_new(o, "orders", json_string(orders_s));
            json_object_set_new(o, "conversion", json_string(conv_s));
            if (!json && isinf(v))
                fprintf(txt, "rdp   %s = inf (no finite bound: the RDP of every order of %s is beyond the double range "
                             "or too large to convert)\n", seen_delta ? "epsilon" : "delta", orders_s);
            else if (!json) fprintf(txt, "rdp   %s = %.10g (optimal order %g, orders %s, conversion %s)\n", seen_delta ? "epsilon" : "delta", v, a, orders_s, conv_s);
            if (certified && seen_delta) {
                double c, ca;
                st = acct_rdp_epsilon_certified(&c, &ca, &s, orders, norders, delta);
                if (st != DP_OK) { if (report_na(txt, o, "certified", st, json)) { json_decref(o); rc = dp_cli_fail("account", st); goto out; } }
                else {
                    int via_rr = 0; /* subsampled Laplace: certified through the RR bound (docs §3) */
                    for (int i = 0; i < s.n; i++) if (s.seg[i].mech == ACCT_LAPLACE && s.seg[i].q < 1.0) via_rr = 1;
                    json_object_set_new(o, "certified_epsilon_upper", jnum(c));
                    json_object_set_new(o, "certified_order", jnum(ca));
                    json_object_set_new(o, "certified_method",
                                        json_string(via_rr ? "via the pure-DP/RR bound of the amplified epsilon (subsampled Laplace), looser than the Laplace RDP above"
                                                           : "the RDP formulas above in MPFR with outward rounding"));
                    if (!json) fprintf(txt, "rdp   certified epsilon <= %.10g (MPFR outward rounding, integer order %g)%s\n", c, ca,
                                      via_rr ? "; certified via the pure-DP/RR bound, looser than the Laplace RDP above" : "");
                }
            }
            json_object_set_new(res, "rdp", o);
        }
    }
    if (want[1]) {
        acct_pld_result r;
        st = seen_delta ? acct_pld_epsilon(&r, &s, delta, &po) : acct_pld_delta(&r, &s, epsq, &po);
        if (st != DP_OK) { if (report_na(txt, res, "pld", st, json)) { rc = dp_cli_fail("account", st); goto out; } }
        else {
            json_t *o = json_object();
            json_object_set_new(o, seen_delta ? "epsilon_lower" : "delta_lower", jnum(r.lower));
            json_object_set_new(o, seen_delta ? "epsilon_upper" : "delta_upper", jnum(r.upper));
            json_object_set_new(o, "grid_h", json_real(r.h));
            json_object_set_new(o, "fft_points", json_integer((json_int_t)r.n_fft));
            json_object_set_new(o, "tail_mass", jnum(r.tail_mass));
            json_object_set_new(o, "mass_error", jnum(r.mass_error));
            json_object_set_new(o, "fp_budget_delta", jnum(r.fp_budget));
            json_object_set_new(o, seen_delta ? "epsilon_lower_fp" : "delta_lower_fp", jnum(r.lower_fp));
            json_object_set_new(o, seen_delta ? "epsilon_upper_fp" : "delta_upper_fp", jnum(r.upper_fp));
            json_object_set_new(res, "pld", o);
            if (!json) {
                fprintf(txt, "pld   %s in [%.10g, %.10g] (h=%.3g, %zu FFT points, tail mass %.3g, mass error %.2g)\n",
                       seen_delta ? "epsilon" : "delta", r.lower, r.upper, r.h, r.n_fft, r.tail_mass, r.mass_error);
                fprintf(txt, "pld   with the floating-point budget (%.3g in delta, docs §4; rigorous): [%.10g, %.10g]\n",
                        r.fp_budget, r.lower_fp, r.upper_fp);
            }
        }
    }
    if (want[2]) {
        double basic, ex = NAN, adv = NAN;
        st = acct_pure_basic(&basic, &s);
        if (st != DP_OK) { if (report_na(txt, res, "pure", st, json)) { rc = dp_cli_fail("account", st); goto out; } }
        else {
            json_t *o = json_object();
            json_object_set_new(o, "basic_epsilon", jnum(basic));
            if (seen_delta) {
                if (acct_pure_advanced(&adv, &s, delta) == DP_OK) json_object_set_new(o, "advanced_epsilon", jnum(adv));
                st = acct_pure_exact(&ex, &s, delta);
                if (st == DP_OK) json_object_set_new(o, "exact_rr_epsilon", jnum(ex));
                else { json_object_set_new(o, "exact_rr", json_string(dp_last_error())); dp_clear_error(); }
                if (!json) fprintf(txt, "pure  epsilon: basic %.10g, advanced %.10g, exact (randomized-response composition) %.10g\n", basic, adv, ex);
            } else {
                double e0 = 0;
                int64_t T = 0;
                int uni = 1;
                for (int i = 0; i < s.n; i++) {
                    double e;
                    acct_pure_step_eps(&e, &s.seg[i]);
                    if (i && e != e0) uni = 0;
                    e0 = e;
                    T += s.seg[i].steps;
                }
                double d = NAN;
                if (uni && acct_rr_delta(&d, e0, T, epsq) == DP_OK) json_object_set_new(o, "exact_rr_delta", jnum(d));
                dp_clear_error();
                if (!json) fprintf(txt, "pure  basic epsilon %.10g; exact (randomized-response) delta(%g) = %.10g\n", basic, epsq, d);
            }
            json_object_set_new(res, "pure", o);
        }
    }
    if (want[3]) {
        double mu;
        st = acct_gdp_mu(&mu, &s);
        if (st != DP_OK) { if (report_na(txt, res, "gdp", st, json)) { rc = dp_cli_fail("account", st); goto out; } }
        else {
            double v = seen_delta ? acct_gdp_epsilon(mu, delta) : acct_gdp_delta(mu, epsq);
            json_t *o = json_object();
            json_object_set_new(o, seen_delta ? "epsilon" : "delta", jnum(v));
            json_object_set_new(o, "mu", jnum(mu));
            int exact = 1;
            for (int i = 0; i < s.n; i++) if (s.seg[i].q < 1.0) exact = 0;
            json_object_set_new(o, "label", json_string(exact ? "exact (analytic Gaussian, q = 1)" : "approximate, not a bound"));
            json_object_set_new(res, "gdp", o);
            if (!json) fprintf(txt, "gdp   %s ~ %.10g (mu = %.6g) [%s]\n", seen_delta ? "epsilon" : "delta", v, mu,
                              exact ? "exact: analytic Gaussian, q = 1" : "GDP/CLT: approximate, not a bound");
        }
    }
out:
    if (rc == 0) { /* every requested accountant n/a: no answer is not a success (exit 2, reasons named) */
        const char *k;
        json_t *v;
        int answered = 0;
        char why[1024] = "";
        json_object_foreach(res, k, v) {
            json_t *na = json_object_get(v, "not_applicable");
            if (!na) answered = 1;
            else {
                size_t l = strlen(why);
                snprintf(why + l, sizeof why - l, "%s%s: %s", l ? "; " : "", k, json_string_value(na));
            }
        }
        if (!answered) rc = dp_cli_fail("account", dp_error(DP_ERR_INVALID, "no accountant could answer: %s", why));
    }
    fclose(txt);
    if (!json && rc == 0) fwrite(tbuf, 1, tlen, stdout);
    dp_free(tbuf);
    json_object_set_new(root, "results", res);
    if (json && rc == 0) {
        char *txt = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        if (txt) { puts(txt); dp_free(txt); }
    }
    json_decref(root);
    return rc;
}

/* ------------------------------------------------------------ audit ---- */
typedef struct {
    acct_segment seg;
    double delta, claim;
    int line; /* CSV: file line of the record (0 for JSON) */
    char label[128];
    char err[256];
} claim_t;

/* bounds for one claim (docs §8): upper = the smallest of the rigorous upper bounds — the PLD upper
 * widened by its floating-point budget, the certified (MPFR) RDP, the log-space RR composition at
 * delta (1 - 1e-9) (its documented relative precision, with margin) — and *by names the one that
 * decided; lower = the largest of the rigorous lower bounds: the PLD optimistic lower bound
 * narrowed by the same budget, one step alone (acct_one_step_lower), the exact RR composition for
 * q = 1 pure (pure exact for delta = 0). Where PLD cannot answer (outside its domain, a grid over
 * its point cap: DP_ERR_NOT_SUPPORTED) the others answer and "pld" says why (docs §12). */
static dp_status claim_bounds(double *lo, double *up, const char **by, const char **lby, json_t *detail, const claim_t *c) {
    acct_schedule s = {.n = 1};
    s.seg[0] = c->seg;
    double upper = INFINITY, lower = 0;
    *lby = "none (0)";
    if (c->delta == 0) {
        double b;
        if (c->seg.mech == ACCT_GAUSSIAN) { /* the Gaussian loss is unbounded: no finite epsilon at delta = 0 */
            json_object_set_new(detail, "pure_epsilon", jnum(INFINITY));
            *lo = *up = INFINITY;
            *by = *lby = "exact (a Gaussian segment at delta = 0: the privacy loss is unbounded, epsilon = +inf)";
            return DP_OK;
        }
        DP_TRY(acct_pure_basic(&b, &s));
        json_object_set_new(detail, "pure_epsilon", jnum(b)); /* exact for delta = 0: the largest loss adds up */
        *lo = b; *up = b;
        *by = *lby = "exact (pure basic composition, delta = 0)";
        return DP_OK;
    }
    acct_pld_result r;
    acct_pld_opts po;
    acct_pld_default_opts(&po);
    po.target_points = (size_t)1 << 19;
    dp_status pst = acct_pld_epsilon(&r, &s, c->delta, &po);
    if (pst == DP_OK) {
        json_object_set_new(detail, "pld_lower", jnum(r.lower));
        json_object_set_new(detail, "pld_upper", jnum(r.upper));
        json_object_set_new(detail, "pld_fp_budget_delta", jnum(r.fp_budget));
        json_object_set_new(detail, "pld_lower_fp", jnum(r.lower_fp));
        json_object_set_new(detail, "pld_upper_fp", jnum(r.upper_fp));
        upper = r.upper_fp;
        *by = "pld-upper(+fp budget)";
        lower = r.lower_fp;
        *lby = "pld-lower(-fp budget)";
    } else if (pst == DP_ERR_NOT_SUPPORTED) {
        json_object_set_new(detail, "pld", json_sprintf("n/a: %s", dp_last_error()));
        *by = "none (no accountant gave a finite upper bound)";
        dp_clear_error();
    } else {
        return pst;
    }
    double o[ACCT_MAX_ORDERS];
    size_t n = acct_orders_grid(o, ACCT_GRID_DPACCOUNTING);
    double ce;
    dp_status st = acct_rdp_epsilon_certified(&ce, NULL, &s, o, n, c->delta);
    if (st == DP_OK) {
        json_object_set_new(detail, "rdp_certified_upper", jnum(ce));
        if (ce < upper || (pst != DP_OK && ce <= upper)) { upper = ce; *by = "rdp-certified"; }
    } else if (st == DP_ERR_NOMEM) {
        return st;
    } else dp_clear_error();
    if (c->seg.mech != ACCT_GAUSSIAN) {
        double ex;
        if ((st = acct_pure_exact(&ex, &s, c->delta * (1.0 - 1e-9))) == DP_OK) {
            json_object_set_new(detail, "pure_exact_rr_upper", jnum(ex));
            if (ex < upper) { upper = ex; *by = "exact (randomized-response composition, log space)"; }
        } else if (st == DP_ERR_NOMEM) return st;
        else dp_clear_error();
        /* q = 1 pure: the accountant's model IS randomized response (docs §5), so its exact composition
         * is also a lower bound (at delta (1 + 1e-9), the same margin); it stays valid where the PLD
         * grid cannot resolve eps0 (e.g. eps0 = 1e308, PLD lower 0) */
        if (c->seg.mech == ACCT_PURE && c->seg.q >= 1.0 && (st = acct_pure_exact(&ex, &s, c->delta * (1.0 + 1e-9))) == DP_OK) {
            json_object_set_new(detail, "pure_exact_rr_lower", jnum(ex));
            if (ex > lower) { lower = ex; *lby = "exact (randomized-response composition, q = 1)"; }
        } else if (st == DP_ERR_NOMEM) return st;
        else dp_clear_error();
    }
    double l1;
    DP_TRY(acct_one_step_lower(&l1, &c->seg, c->delta));
    json_object_set_new(detail, "one_step_lower", jnum(l1));
    if (l1 > lower) { lower = l1; *lby = "one step alone (certified lower bound)"; }
    *lo = lower;
    *up = upper;
    return DP_OK;
}

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = 0;
    size_t i = 0;
    while (isspace((unsigned char)s[i])) i++;
    if (i) memmove(s, s + i, strlen(s + i) + 1);
}

static int parse_mech(const char *m) {
    return strcmp(m, "gaussian") == 0 ? ACCT_GAUSSIAN : strcmp(m, "laplace") == 0 ? ACCT_LAPLACE
         : strcmp(m, "pure") == 0 ? ACCT_PURE : -1;
}

/* where a claim is: "row N" (the N-th claim, from 1, the header and blank/comment lines not
 * counted), plus "(line L)" for CSV — the one convention of every audit message and column */
static void where(char *b, size_t n, int row, int line) {
    if (line > 0) snprintf(b, n, "row %d (line %d)", row, line);
    else snprintf(b, n, "row %d", row);
}

/* validate one claim's values into c->err (empty when valid) */
static void check_claim(claim_t *c, int row) {
    const char *f = NULL;
    double v = 0;
    if (!(c->seg.q > 0 && c->seg.q <= 1)) { f = "q"; v = c->seg.q; }
    else if (!(c->seg.param > 0) || !isfinite(c->seg.param)) { f = "sigma"; v = c->seg.param; }
    else if (c->seg.steps < 1) { f = "steps"; v = (double)c->seg.steps; }
    else if (!(c->delta >= 0 && c->delta < 1)) { f = "delta"; v = c->delta; }
    else if (!(c->claim >= 0) || !isfinite(c->claim)) { f = "epsilon"; v = c->claim; }
    char w[64];
    where(w, sizeof w, row, c->line);
    if (f) snprintf(c->err, sizeof c->err, "%s: field '%s' out of range (got %g)", w, f, v);
}

/* Split one CSV record (RFC 4180 dialect, docs §8) in place: fields separated by ','; a field may be
 * enclosed in double quotes, inside which ',' is literal and '""' is one '"'; whitespace around a
 * field (outside the quotes) is ignored. Returns the number of fields, or -1 with *why set. */
static int csv_split(char **fields, int maxf, char *line, const char **why) {
    int nf = 0;
    char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t') p++;
        char *start = p, *w = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) { *why = "unterminated quoted field (a newline inside quotes is not supported)"; return -1; }
                if (*p == '"') {
                    if (p[1] == '"') { *w++ = '"'; p += 2; continue; }
                    p++;
                    break;
                }
                *w++ = *p++;
            }
            while (*p == ' ' || *p == '\t') p++;
            if (*p && *p != ',') { *why = "text after the closing quote of a quoted field"; return -1; }
        } else {
            while (*p && *p != ',') {
                if (*p == '"') { *why = "a double quote inside an unquoted field (quote the whole field, '\"\"' for a quote)"; return -1; }
                *w++ = *p++;
            }
            while (w > start && (w[-1] == ' ' || w[-1] == '\t')) w--;
        }
        char end = *p;
        *w = 0;
        if (nf < maxf) fields[nf] = start;
        nf++;
        if (!end) break;
        p++;
    }
    return nf;
}

/* One CSV line into line[cap] (the '\n' kept): 1 read, 0 end of file, or an error naming the line:
 * a NUL byte (a CSV file is text) or a line of cap - 2 characters or more. */
static int csv_line(dp_status *st, char *line, size_t cap, FILE *fp, const char *path, int lineno) {
    size_t n = 0;
    int ch;
    while ((ch = getc(fp)) != EOF) {
        if (ch == 0) { *st = dp_error(DP_ERR_FORMAT, "%s: line %d: a NUL byte (a claims file is text)", path, lineno); return -1; }
        if (n + 2 >= cap) { *st = dp_error(DP_ERR_FORMAT, "%s: line %d: longer than %zu characters", path, lineno, cap - 3); return -1; }
        line[n++] = (char)ch;
        if (ch == '\n') break;
    }
    line[n] = 0;
    if (ferror(fp)) { *st = dp_error(DP_ERR_IO, "%s: read error", path); return -1; }
    return n > 0;
}

static dp_status read_claims_csv(claim_t **out, int *n, FILE *fp, const char *path) {
    char line[4096];
    int cols[7] = {-1, -1, -1, -1, -1, -1, -1}; /* mechanism q param steps delta epsilon label */
    static const char *const NAMES[7] = {"mechanism", "q", "sigma", "steps", "delta", "epsilon", "label"};
    dp_status rst = DP_OK;
    int got = csv_line(&rst, line, sizeof line, fp, path, 1);
    if (got < 0) return rst;
    if (!got) return dp_error(DP_ERR_FORMAT, "%s: empty file", path);
    trim(line);
    char *hf[64];
    const char *why = NULL;
    int nc = csv_split(hf, 64, line, &why);
    if (nc < 0) return dp_error(DP_ERR_FORMAT, "%s: header (line 1): %s", path, why);
    if (nc > 64) return dp_error(DP_ERR_FORMAT, "%s: header (line 1): more than 64 columns", path);
    for (int i = 0; i < nc; i++) {
        const char *t = hf[i];
        for (int k = 0; k < 7; k++)
            if (strcmp(t, NAMES[k]) == 0 || (k == 2 && (strcmp(t, "scale") == 0 || strcmp(t, "epsilon0") == 0 || strcmp(t, "param") == 0)) || (k == 5 && strcmp(t, "claimed_epsilon") == 0)) {
                /* a column named twice (or two names of one column: sigma and scale) is ambiguous */
                if (cols[k] >= 0)
                    return dp_error(DP_ERR_FORMAT, "%s: header (line 1): column '%s' (column %d) duplicates '%s' (column %d)",
                                    path, t, i + 1, hf[cols[k]], cols[k] + 1);
                cols[k] = i;
            }
    }
    for (int k = 0; k < 6; k++)
        if (cols[k] < 0) return dp_error(DP_ERR_FORMAT, "%s: header (line 1): missing column '%s'", path, NAMES[k]);
    int cap = 16, m = 0, lineno = 1;
    claim_t *c = dp_calloc((size_t)cap, sizeof *c);
    if (!c) return DP_ERR_NOMEM;
    for (;;) {
        lineno++;
        got = csv_line(&rst, line, sizeof line, fp, path, lineno);
        if (got < 0) { dp_free(c); return rst; }
        if (!got) break;
        trim(line);
        if (!line[0] || line[0] == '#') continue;
        if (m == cap) {
            claim_t *nc2 = dp_realloc(c, (size_t)cap * 2 * sizeof *c);
            if (!nc2) { dp_free(c); return dp_error(DP_ERR_NOMEM, "out of memory"); }
            c = nc2; cap *= 2;
        }
        claim_t *x = &c[m];
        memset(x, 0, sizeof *x);
        x->line = lineno;
        int row = m + 1;
        m++;
        char w[64];
        where(w, sizeof w, row, lineno);
        char *fields[64];
        int nf = csv_split(fields, 64, line, &why);
        if (nf < 0) { snprintf(x->err, sizeof x->err, "%s: malformed CSV: %s", w, why); continue; }
        if (nf > 64) nf = 64;
        int bad = 0;
        for (int k = 0; k < 6 && !bad; k++) {
            if (cols[k] >= nf) { snprintf(x->err, sizeof x->err, "%s: missing field '%s'", w, NAMES[k]); bad = 1; break; }
            const char *v = fields[cols[k]];
            if (k == 0) {
                int mm = parse_mech(v);
                if (mm < 0) { snprintf(x->err, sizeof x->err, "%s: field 'mechanism': unknown '%s' (expected gaussian, laplace or pure)", w, v); bad = 1; }
                else x->seg.mech = (acct_mech)mm;
                continue;
            }
            double d; /* the option parser's rules: finite, no ERANGE underflow (1e-400 is not 0) */
            char fw[40];
            snprintf(fw, sizeof fw, "field '%s'", NAMES[k]);
            if (dp_parse_double(&d, fw, v) != DP_OK) {
                snprintf(x->err, sizeof x->err, "%s: %s", w, dp_last_error());
                dp_clear_error();
                bad = 1;
                break;
            }
            if (k == 1) x->seg.q = d;
            else if (k == 2) x->seg.param = d;
            else if (k == 3) {
                if (d != floor(d) || d < 1 || d > 1e12) { snprintf(x->err, sizeof x->err, "%s: field 'steps': must be an integer >= 1 (got %s)", w, v); bad = 1; }
                else x->seg.steps = (int64_t)d;
            } else if (k == 4) x->delta = d;
            else x->claim = d;
        }
        if (cols[6] >= 0 && cols[6] < nf) snprintf(x->label, sizeof x->label, "%s", fields[cols[6]]);
        if (!bad) check_claim(x, row);
    }
    *out = c;
    *n = m;
    return DP_OK;
}

static dp_status read_claims_json(claim_t **out, int *n, const char *buf, size_t len, const char *path) {
    json_error_t err;
    DP_TRY(dp_json_numbers_check(buf, len, path));
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) return dp_error(DP_ERR_FORMAT, "%s: line %d: %s", path, err.line, err.text);
    json_t *arr = json_is_object(root) ? json_object_get(root, "claims") : root;
    if (!json_is_array(arr)) { json_decref(root); return dp_error(DP_ERR_FORMAT, "%s: expected an array of claims (or {\"claims\": [...]})", path); }
    size_t m = json_array_size(arr);
    claim_t *c = dp_calloc(m ? m : 1, sizeof *c);
    if (!c) { json_decref(root); return DP_ERR_NOMEM; }
    for (size_t i = 0; i < m; i++) {
        json_t *o = json_array_get(arr, i);
        claim_t *x = &c[i];
        int row = (int)i + 1;
        if (!json_is_object(o)) { snprintf(x->err, sizeof x->err, "row %d: not an object", row); continue; }
        json_t *mm = json_object_get(o, "mechanism");
        int mech = json_is_string(mm) ? parse_mech(json_string_value(mm)) : -1;
        if (mech < 0) { snprintf(x->err, sizeof x->err, "row %d: field 'mechanism': missing or unknown", row); continue; }
        x->seg.mech = (acct_mech)mech;
        const char *keys[5] = {"q", mech == 0 ? "sigma" : mech == 1 ? "scale" : "epsilon0", "steps", "delta", "epsilon"};
        int bad = 0;
        for (int k = 0; k < 5 && !bad; k++) {
            json_t *v = json_object_get(o, keys[k]);
            if (!v && k == 1) v = json_object_get(o, "sigma");
            if (!v && k == 4) v = json_object_get(o, "claimed_epsilon");
            if (!json_is_number(v)) { snprintf(x->err, sizeof x->err, "row %d: field '%s': missing or not a number", row, keys[k]); bad = 1; break; }
            double d = json_number_value(v);
            if (k == 0) x->seg.q = d;
            else if (k == 1) x->seg.param = d;
            else if (k == 2) {
                if (d != floor(d) || d < 1 || d > 1e12) { snprintf(x->err, sizeof x->err, "row %d: field 'steps': must be an integer >= 1 (got %g)", row, d); bad = 1; }
                else x->seg.steps = (int64_t)d;
            } else if (k == 3) x->delta = d;
            else x->claim = d;
        }
        json_t *lb = json_object_get(o, "label");
        if (json_is_string(lb)) snprintf(x->label, sizeof x->label, "%s", json_string_value(lb));
        if (!bad) check_claim(x, row);
    }
    json_decref(root);
    *out = c;
    *n = (int)m;
    return DP_OK;
}

/* A claims file image: JSON when its first non-blank byte is '[' or '{', else CSV. */
static dp_status read_claims(claim_t **out, int *n, const char *buf, size_t len, const char *path) {
    size_t i = 0;
    while (i < len && isspace((unsigned char)buf[i])) i++;
    if (i < len && (buf[i] == '[' || buf[i] == '{')) return read_claims_json(out, n, buf, len, path);
    if (len == 0) return dp_error(DP_ERR_FORMAT, "%s: empty file", path);
    FILE *fp = fmemopen((void *)buf, len, "r");
    if (!fp) return dp_error(DP_ERR_NOMEM, "%s: out of memory", path);
    dp_status st = read_claims_csv(out, n, fp, path);
    fclose(fp);
    return st;
}

dp_status acct_claims_parse(int *nclaims, int *ninvalid, const char *buf, size_t len, const char *name) {
    claim_t *cl = NULL;
    int n = 0;
    DP_TRY(read_claims(&cl, &n, buf, len, name));
    int bad = 0;
    for (int i = 0; i < n; i++) bad += cl[i].err[0] != 0;
    dp_free(cl);
    *nclaims = n;
    *ninvalid = bad;
    return DP_OK;
}

int dp_cmd_audit_accounting(int argc, char **argv) {
    int json = 0, help = 0, npos = 0;
    char *pos[1];
    dp_opt opts[] = {{"--json", DP_OPT_FLAG, &json, NULL, "JSON output"}};
    dp_status st = dp_opts_parse(opts, 1, argc, argv, pos, 1, &npos, &help);
    if (st != DP_OK) return dp_cli_fail("audit-accounting", st);
    if (help || npos != 1) {
        printf("usage: dpcert audit-accounting [--json] FILE (CSV with header mechanism,q,sigma,steps,delta,epsilon[,label] or JSON array)\n");
        return help ? 0 : 2;
    }
    const char *path = pos[0];
    char *img = NULL;
    size_t ilen = 0;
    claim_t *cl = NULL;
    int n = 0;
    if ((st = dp_read_file_max(&img, &ilen, "claims file", path, DP_MAX_TEXT_INPUT)) != DP_OK)
        return dp_cli_fail("audit-accounting", st);
    st = read_claims(&cl, &n, img, ilen, path);
    dp_free(img);
    if (st != DP_OK) return dp_cli_fail("audit-accounting", st);
    if (n == 0) { dp_free(cl); return dp_cli_fail("audit-accounting", dp_error(DP_ERR_FORMAT, "%s: no claims", path)); }
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "neighbouring_relation", json_string(acct_adjacency_name(ACCT_ADD_REMOVE)));
    int under = 0, invalid = 0, internal = 0;
    if (!json) printf("neighbouring relation: %s\nrow = the N-th claim (from 1; header, blank and '#' lines not counted)\n%-4s %-24s %-9s %-9s %-8s %-9s %-10s %-12s %-12s %s\n", acct_adjacency_name(ACCT_ADD_REMOVE), "row", "label", "mechanism", "q", "param", "steps", "delta", "claimed_eps", "bounds", "verdict");
    for (int i = 0; i < n; i++) {
        claim_t *c = &cl[i];
        json_t *o = json_object();
        const char *verdict;
        double lo = NAN, up = NAN;
        const char *by = NULL;
        char wh[64];
        where(wh, sizeof wh, i + 1, c->line);
        json_object_set_new(o, "row", json_integer(i + 1));
        if (c->line > 0) json_object_set_new(o, "line", json_integer(c->line));
        json_object_set_new(o, "label", json_string(c->label));
        if (c->err[0]) {
            verdict = "INVALID";
            invalid++;
            json_object_set_new(o, "error", json_string(c->err));
            dp_error(DP_ERR_FORMAT, "%s: %s", path, c->err); /* escaped */
            fprintf(stderr, "dpcert audit-accounting: %s\n", dp_last_error());
        } else {
            json_object_set_new(o, "mechanism", json_string(acct_mech_name(c->seg.mech)));
            json_object_set_new(o, "q", json_real(c->seg.q));
            json_object_set_new(o, "param", json_real(c->seg.param));
            json_object_set_new(o, "steps", json_integer((json_int_t)c->seg.steps));
            json_object_set_new(o, "delta", json_real(c->delta));
            json_object_set_new(o, "claimed_epsilon", json_real(c->claim));
            const char *lby = NULL;
            st = claim_bounds(&lo, &up, &by, &lby, o, c);
            if (st != DP_OK) {
                verdict = st == DP_ERR_INVALID ? "INVALID" : "ERROR";
                if (st == DP_ERR_INVALID) invalid++; else internal++;
                json_object_set_new(o, "error", json_string(dp_last_error()));
                dp_error_context(st, "%s: %s", path, wh);
                fprintf(stderr, "dpcert audit-accounting: %s\n", dp_last_error());
            } else {
                json_object_set_new(o, "epsilon_lower", jnum(lo));
                json_object_set_new(o, "epsilon_upper", jnum(up));
                json_object_set_new(o, "upper_decided_by", json_string(by));
                if (c->claim >= up) verdict = "CONSISTENT";
                else if (c->claim < lo) { verdict = "UNDER-REPORTED"; under++; by = lby; }
                else { verdict = "INCONCLUSIVE"; by = "between the bounds"; }
                json_object_set_new(o, "decided_by", json_string(by));
            }
        }
        json_object_set_new(o, "verdict", json_string(verdict));
        json_array_append_new(arr, o);
        if (!json) {
            if (c->err[0] || isnan(lo)) printf("%-4d %-24.24s %s %s\n", i + 1, c->label, verdict, c->err);
            else printf("%-4d %-24.24s %-9s %-9.4g %-8.4g %-9lld %-10.3g %-12.6g [%.6g, %.6g] %s\n", i + 1, c->label,
                        acct_mech_name(c->seg.mech), c->seg.q, c->seg.param, (long long)c->seg.steps, c->delta, c->claim,
                        lo, up, verdict);
            if (!(c->err[0] || isnan(lo))) printf("     decided by: %s\n", by);
        }
    }
    json_object_set_new(root, "claims", arr);
    json_object_set_new(root, "under_reported", json_integer(under));
    json_object_set_new(root, "invalid", json_integer(invalid));
    if (json) {
        char *txt = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        if (txt) { puts(txt); dp_free(txt); }
    } else {
        printf("%d claims: %d under-reported, %d invalid\n", n, under, invalid);
    }
    json_decref(root);
    dp_free(cl);
    return internal ? 3 : invalid ? 2 : under ? 1 : 0;
}

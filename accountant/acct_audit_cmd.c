/* accountant/acct_audit_cmd.c — `dpcert audit-accounting FILE`: each claimed (epsilon, delta)
 * against the rigorous lower and upper bounds of the accountants (docs/accounting.md section 8).
 * Exit codes: 0 every claim consistent, 1 a claim is under-reported, 2 bad usage or input
 * (an INVALID claim), 3 internal error. */
#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "accountant/acct_claims.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/fsutil.h"

#define jnum acct_json_num

/* bounds for one claim (docs §8): upper = the smallest of the rigorous upper bounds — the PLD upper
 * widened by its floating-point budget, the certified (MPFR) RDP, the log-space RR composition at
 * delta (1 - 1e-9) (its documented relative precision, with margin) — and *by names the one that
 * decided; lower = the largest of the rigorous lower bounds: the PLD optimistic lower bound
 * narrowed by the same budget, one step alone (acct_one_step_lower), the exact RR composition for
 * q = 1 pure (pure exact for delta = 0). Where PLD cannot answer (outside its domain, a grid over
 * its point cap: DP_ERR_NOT_SUPPORTED) the others answer and "pld" says why (docs §12). */
static dp_status claim_bounds(double *lo, double *up, const char **by, const char **lby, json_t *detail, const acct_claim *c) {
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
    acct_claim *cl = NULL;
    int n = 0;
    if ((st = dp_read_file_max(&img, &ilen, "claims file", path, DP_MAX_TEXT_INPUT)) != DP_OK)
        return dp_cli_fail("audit-accounting", st);
    st = acct_claims_read(&cl, &n, img, ilen, path);
    dp_free(img);
    if (st != DP_OK) return dp_cli_fail("audit-accounting", st);
    if (n == 0) { dp_free(cl); return dp_cli_fail("audit-accounting", dp_error(DP_ERR_FORMAT, "%s: no claims", path)); }
    json_t *root = json_object(), *arr = json_array();
    json_object_set_new(root, "neighbouring_relation", json_string(acct_adjacency_name(ACCT_ADD_REMOVE)));
    int under = 0, invalid = 0, internal = 0;
    if (!json) printf("neighbouring relation: %s\nrow = the N-th claim (from 1; header, blank and '#' lines not counted)\n%-4s %-24s %-9s %-9s %-8s %-9s %-10s %-12s %-12s %s\n", acct_adjacency_name(ACCT_ADD_REMOVE), "row", "label", "mechanism", "q", "param", "steps", "delta", "claimed_eps", "bounds", "verdict");
    for (int i = 0; i < n; i++) {
        acct_claim *c = &cl[i];
        json_t *o = json_object();
        const char *verdict;
        double lo = NAN, up = NAN;
        const char *by = NULL;
        char wh[64];
        acct_claim_where(wh, sizeof wh, i + 1, c->line);
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

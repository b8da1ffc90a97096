/* accountant/acct_pld_grid.c — the PLD accountant's grid choice, driver and queries
 * (docs/accounting.md §4 "Automatic grid", "Evaluation"): the per-direction segment lists, the
 * pilot (loss ranges, Chernoff window of the composition), the grid spacing h and the atoms'
 * grid offsets, the discretisation and composition of both directions (acct_pld.c), and the
 * epsilon(delta) / delta(epsilon) intervals. The default grid is chosen for accuracy: a first
 * composition on ACCT_PLD_FIRST_POINTS points, then, while the interval is wider than
 * max(ACCT_PLD_WIDTH_ABS, min(ACCT_PLD_WIDTH_REL * upper, ACCT_PLD_WIDTH_CAP)) and the upper bound has
 * not converged to a quarter of that, a finer one. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "accountant/acct_internal.h"
#include "common/alloc.h"
#include "accountant/acct_pld_int.h"

/* The accuracy-driven default grid (docs/accounting.md §4 "Automatic grid"). */
#define ACCT_PLD_FIRST_POINTS 2048.0 /* points of the composed window on the first grid */
#define ACCT_PLD_WIDTH_ABS 1e-4      /* interval width aimed at: max(abs, rel * upper) */
#define ACCT_PLD_WIDTH_REL 1e-3
#define ACCT_PLD_WIDTH_CAP 1e-2      /* ... and at most this: max(abs, min(rel * upper, cap)) */
#define ACCT_PLD_MAX_ROUNDS 5        /* refinements after the first grid */
#define ACCT_PLD_TAU_REL 1e-6    /* epsilon queries: tail mass cut per side, relative to delta */
#define ACCT_PLD_COARSE_DELTA 1e-4 /* coarse tails: delta moved, relative to delta */
#define ACCT_PLD_FIXED_POINTS ((size_t)1 << 17) /* the fixed rule (delta queries, upper_only) */

void acct_pld_default_opts(acct_pld_opts *o) {
    o->h = 0;
    o->upper_only = 0;
    o->max_points = (size_t)1 << 22;
    o->target_points = 0; /* 0: the accuracy-driven grid (epsilon queries) */
}

/* largest mean shift of the split per atom: max_u h (1-e^{-u})/(1-e^{-h}) - u */
static double split_mmax(double h) {
    double emh = -expm1(-h), u = log(h / emh);
    return h * (-expm1(-u)) / emh - u;
}

typedef struct {
    acct_lossdef d;
    int64_t steps;
    double lo, hi;
    double phi; /* grid offset (cells) that puts the segment's atoms on grid points */
} segdef;

/* Build per-direction segment lists; q = 1 Gaussians are merged exactly (sigma_eff = (sum T/s^2)^{-1/2}). */
static dp_status build_segs(segdef *sd, int *nsd, const acct_schedule *s, int dir) {
    int n = 0;
    double g_prec = 0; /* sum T / sigma^2 of q = 1 Gaussian segments */
    for (int i = 0; i < s->n; i++) {
        const acct_segment *g = &s->seg[i];
        /* sigma^2 must be a normal double for the loss (2z - 1) / (2 sigma^2) and its range
         * (docs/accounting.md §4, domain): outside, a clear refusal (the RDP accountant answers) */
        if (g->mech == ACCT_GAUSSIAN && !(g->param >= ACCT_PLD_SIGMA_MIN && g->param <= ACCT_PLD_SIGMA_MAX))
            return dp_error(DP_ERR_NOT_SUPPORTED, "PLD: segment %d: sigma=%g outside the PLD domain [%g, %g] (sigma^2 "
                            "must be a normal double); use --accountant rdp", i + 1, g->param, ACCT_PLD_SIGMA_MIN,
                            ACCT_PLD_SIGMA_MAX);
        if (g->mech == ACCT_GAUSSIAN && g->q >= 1.0) { g_prec += (double)g->steps / (g->param * g->param); continue; }
        double par = g->param, q = g->q;
        if (g->mech == ACCT_PURE) { DP_TRY(acct_pure_step_eps(&par, g)); q = 1.0; }
        acct_lossdef d = acct_pld_lossdef(g->mech, q, par, dir);
        sd[n] = (segdef){d, g->steps, 0, 0, 0};
        n++;
    }
    if (g_prec > 0) {
        acct_lossdef d = acct_pld_lossdef(ACCT_GAUSSIAN, 1.0, 1.0 / sqrt(g_prec), dir);
        sd[n] = (segdef){d, 1, 0, 0, 0};
        n++;
    }
    *nsd = n;
    return DP_OK;
}

/* What the pilot learns once per query, whatever h is then tried. */
typedef struct {
    segdef sd[2][ACCT_MAX_SEGMENTS + 1];
    int nsd[2];
    double tau_w, maxrange, T;
    double coarse_delta;          /* epsilon queries: delta (coarse tails allowed); 0: none */
    double width;                 /* Chernoff window of the composed loss (pilot grid), max over directions */
    double lam_lo[2], lam_hi[2];  /* its minimising lambdas */
} pldprep;

static dp_status pld_prepare(pldprep *pp, const acct_schedule *s, double tau_w) {
    memset(pp, 0, sizeof *pp);
    DP_TRY(acct_schedule_validate(s));
    double Ttot = 0;
    for (int i = 0; i < s->n; i++) Ttot += (double)s->seg[i].steps;
    const double tau = tau_w / (4.0 * Ttot); /* per-step tail */
    pp->tau_w = tau_w;
    pp->T = Ttot;
    for (int dir = 0; dir < 2; dir++) {
        DP_TRY(build_segs(pp->sd[dir], &pp->nsd[dir], s, dir));
        for (int j = 0; j < pp->nsd[dir]; j++) {
            segdef *g = &pp->sd[dir][j];
            acct_pld_loss_range(&g->lo, &g->hi, &g->d, tau);
            if (g->hi - g->lo > pp->maxrange) pp->maxrange = g->hi - g->lo;
        }
    }
    /* pilot: a coarse grid, the Chernoff window of the composition (lambdas reused on the final grid) */
    double h0 = pp->maxrange / 2048.0;
    if (!(h0 > 0)) h0 = 1e-3;
    for (int dir = 0; dir < 2; dir++) {
        pp->lam_lo[dir] = pp->lam_hi[dir] = 1;
        acct_steppmf pm[ACCT_MAX_SEGMENTS + 1];
        const int ns = pp->nsd[dir];
        for (int j = 0; j < ns; j++) {
            const segdef *g = &pp->sd[dir][j];
            const dp_status e = acct_pld_discretise(&pm[j], NULL, &g->d, g->lo, g->hi, h0, 0, g->steps, (size_t)1 << 20, 0);
            if (e != DP_OK) { /* out of memory stays out of memory (exit 3 naming it) */
                for (int k = 0; k < j; k++) dp_free(pm[k].p);
                return e == DP_ERR_NOMEM ? dp_error(DP_ERR_NOMEM, "PLD: out of memory on the pilot grid (h=%g)", h0)
                                         : dp_error_context(e, "PLD: the pilot grid (h=%g)", h0);
            }
        }
        double fmin = 0, fmax = 0, ul, uh;
        for (int j = 0; j < ns; j++) {
            fmin += (double)pm[j].steps * (double)pm[j].kmin * h0;
            fmax += (double)pm[j].steps * (double)(pm[j].kmin + (int64_t)pm[j].n - 1) * h0;
        }
        acct_pld_chernoff_window(&ul, &uh, &pp->lam_lo[dir], &pp->lam_hi[dir], pm, ns, h0, tau_w);
        if (ul < fmin) ul = fmin;
        if (uh > fmax) uh = fmax;
        if (uh - ul > pp->width) pp->width = uh - ul;
        for (int j = 0; j < ns; j++) dp_free(pm[j].p);
    }
    return DP_OK;
}

/* Atoms on the grid: the segments that have atoms (Laplace, pure) need h to divide the distance
 * between their two atoms; then each segment's offset phi puts its lower atom (so both) on a grid
 * point, in both directions. Returns 0 (every phi = 0: the atoms lie off the grid) when some
 * distance is not a multiple of h (within 1e-9). */
static int pld_set_phi(pldprep *pp, double h) {
    double at[2];
    int ok = 1;
    for (int dir = 0; dir < 2; dir++)
        for (int j = 0; j < pp->nsd[dir]; j++) {
            pp->sd[dir][j].phi = 0;
            if (acct_pld_atoms(at, &pp->sd[dir][j].d) == 2) {
                double k = (at[1] - at[0]) / h;
                if (fabs(k - floor(k + 0.5)) > 1e-9 * k) ok = 0;
            }
        }
    for (int dir = 0; ok && dir < 2; dir++)
        for (int j = 0; j < pp->nsd[dir]; j++)
            if (acct_pld_atoms(at, &pp->sd[dir][j].d) == 2) {
                double k = at[0] / h;
                pp->sd[dir][j].phi = k - floor(k);
            }
    if (!ok)
        for (int dir = 0; dir < 2; dir++)
            for (int j = 0; j < pp->nsd[dir]; j++) pp->sd[dir][j].phi = 0;
    return ok;
}

/* The automatic h lowered to d_min / ceil(d_min / h) (d_min the smallest atom distance) when every
 * atom distance is then a multiple of it; the offsets set accordingly. */
static double pld_snap(pldprep *pp, double h) {
    double dmin = INFINITY, at[2];
    for (int j = 0; j < pp->nsd[0]; j++)
        if (acct_pld_atoms(at, &pp->sd[0][j].d) == 2 && at[1] - at[0] < dmin) dmin = at[1] - at[0];
    if (isfinite(dmin) && dmin > 0) {
        const double hs = dmin / ceil(dmin / h);
        if (pld_set_phi(pp, hs)) return hs;
    }
    pld_set_phi(pp, INFINITY); /* no snapping: every phi = 0 */
    return h;
}

/* h for a window of `points` points of the composed loss, clamped (docs §4), then snapped */
static double pld_h_points(pldprep *pp, double points, const acct_pld_opts *o, double hmax) {
    double h = pp->width / points;
    const double hr = pp->maxrange / (double)(o->max_points / 2);
    if (h < hr) h = hr;
    if (h > hmax) h = hmax;
    if (h < 1e-7) h = 1e-7;
    return pld_snap(pp, h);
}

typedef struct {
    acct_composed c[2];  /* pessimistic, per direction */
    acct_composed co[2]; /* optimistic, per direction (p == NULL when only the upper bound was asked) */
    double h;
    double cshift, eta; /* coupling lower bound (fallback): shift c and eta_E + eta_z per direction */
    double eta_e[2];
} pldstate;

static void pldstate_free(pldstate *st) {
    for (int d = 0; d < 2; d++) { dp_free(st->c[d].p); dp_free(st->co[d].p); }
    memset(st, 0, sizeof *st);
}

/* Discretise and compose the directions with use[dir] (both passes unless upper_only) at h. */
static dp_status pld_build_at(pldstate *st, const pldprep *pp, double h, const acct_pld_opts *o, const int use[2]) {
    memset(st, 0, sizeof *st);
    st->h = h;
    /* coarse tails (docs §4): the P-mass eta per step and side they may move by at most
     * ACCT_PLD_COARSE cells changes the composed delta by at most 2 T eta (e^{K h} - 1) =
     * ACCT_PLD_COARSE_DELTA * delta (epsilon queries; none for delta queries) */
    const double eta = pp->coarse_delta > 0
                           ? ACCT_PLD_COARSE_DELTA * pp->coarse_delta / (2.0 * pp->T * expm1(ACCT_PLD_COARSE * h))
                           : 0;
    acct_pldfft *fw = acct_pld_fft_acquire();
    dp_status e = DP_OK;
    for (int dir = 0; dir < 2 && e == DP_OK; dir++) {
        if (!use[dir]) continue;
        acct_steppmf pm[ACCT_MAX_SEGMENTS + 1], pmo[ACCT_MAX_SEGMENTS + 1];
        const int opt = !o->upper_only, ns = pp->nsd[dir];
        int j;
        for (j = 0; j < ns; j++) {
            const segdef *g = &pp->sd[dir][j];
            e = acct_pld_discretise(&pm[j], opt ? &pmo[j] : NULL, &g->d, g->lo, g->hi, h, g->phi, g->steps,
                                    o->max_points, eta);
            if (e != DP_OK) break;
        }
        if (e == DP_OK)
            e = acct_pld_compose(&st->c[dir], fw, pm, ns, h, pp->tau_w, o->max_points, pp->lam_lo[dir], pp->lam_hi[dir]);
        if (e == DP_OK && opt)
            e = acct_pld_compose(&st->co[dir], fw, pmo, ns, h, pp->tau_w, o->max_points, pp->lam_lo[dir],
                                 pp->lam_hi[dir]);
        double eta = 0;
        for (int k = 0; k < j; k++) eta += (double)pm[k].steps * (pm[k].p_inf + pm[k].p_trunc);
        st->eta_e[dir] = eta;
        for (int k = 0; k < j; k++) { dp_free(pm[k].p); if (opt) dp_free(pmo[k].p); }
    }
    acct_pld_fft_release(fw);
    if (e != DP_OK) { pldstate_free(st); return e; }
    /* coupling lower bound of the pessimistic pmf (kept as a fallback; the reported lower bound is
     * the larger of the two): shift c = sum T m_max + h sqrt(T log(1/eta_z) / 2), eta_z = 1e-12 */
    double Teff = 0, eta_z = 1e-12;
    for (int j = 0; j < pp->nsd[0]; j++) Teff += (double)pp->sd[0][j].steps;
    st->cshift = Teff * split_mmax(h) + h * sqrt(Teff * log(1.0 / eta_z) / 2.0);
    st->eta = eta_z;
    return DP_OK;
}

/* One direction's answer: bounds (up, lo), fp-widened bounds (upr, lor), diagnostics. */
typedef struct {
    int have;
    double up, lo, upr, lor, fpb, tail, mass_err, h;
    size_t n_fft;
} pld_dirres;

/* Add/remove: both directions are composed and the worse one is reported (each direction's
 * bounds are bounds of that direction, at whatever grid it was composed on). */
static void pld_fold(acct_pld_result *r, const pld_dirres dr[2]) {
    memset(r, 0, sizeof *r);
    for (int dir = 0; dir < 2; dir++) {
        const pld_dirres *d = &dr[dir];
        if (!d->have) continue;
        if (d->up > r->upper) r->upper = d->up;
        if (d->lo > r->lower) r->lower = d->lo;
        if (d->upr > r->upper_fp) r->upper_fp = d->upr;
        if (d->lor > r->lower_fp) r->lower_fp = d->lor;
        if (d->fpb > r->fp_budget) r->fp_budget = d->fpb;
        if (d->tail > r->tail_mass) r->tail_mass = d->tail;
        if (d->mass_err > r->mass_error) r->mass_error = d->mass_err;
        if (d->n_fft > r->n_fft) r->n_fft = d->n_fft;
        if (d->h > r->h) r->h = d->h;
    }
}

static void dirres_diag(pld_dirres *d, const acct_composed *c, const acct_composed *co, double h) {
    d->have = 1;
    d->fpb = co->p && co->fpb > c->fpb ? co->fpb : c->fpb;
    d->tail = c->p_inf + c->A;
    d->mass_err = c->mass_err;
    d->n_fft = c->n;
    d->h = h;
}

/* acct_pmf_epsilon (acct_pure.c) at several deltas of one pmf in one scan from the top: out[k]
 * is exactly acct_pmf_epsilon(c, delta[k]) (the same operations, in the same order). */
static void pmf_epsilons(double *out, const double *delta, int nd, const acct_composed *c, double h) {
    int left = 0;
    for (int k = 0; k < nd; k++) {
        out[k] = NAN;
        if (c->p_inf > delta[k]) out[k] = INFINITY;
        else left++;
    }
    double s1 = 0.0, s2 = 0.0, ref = NAN;
    for (size_t j = c->n; left > 0 && j-- > 0;) {
        const double l = c->l0 + (double)j * h, pj = c->p[j];
        if (pj > 0) {
            s1 += pj;
            if (isnan(ref)) ref = l;
            double ex = ref - l;
            if (ex > 600.0) { s2 *= exp(-ex); ref = l; ex = 0.0; }
            s2 += pj * exp(ex);
        }
        const double lo = j == 0 ? -INFINITY : l - h, x = lo > 0.0 ? lo : 0.0;
        const double d = s2 > 0 ? c->p_inf + s1 - s2 * exp(x - ref) : c->p_inf;
        for (int k = 0; k < nd; k++) {
            if (!isnan(out[k])) continue;
            if (d > delta[k]) {
                double e = log(c->p_inf + s1 - delta[k]) - (log(s2) - ref);
                out[k] = e < x ? x : e;
                left--;
            } else if (lo <= 0.0) {
                out[k] = 0.0;
                left--;
            }
        }
    }
    for (int k = 0; k < nd; k++)
        if (isnan(out[k])) out[k] = 0.0;
}

/* The epsilon bounds at delta of the built directions (docs §4 "Evaluation"). */
static void pld_eval_epsilon(pld_dirres dr[2], const pldstate *st, double delta) {
    for (int dir = 0; dir < 2; dir++) {
        const acct_composed *c = &st->c[dir], *co = &st->co[dir];
        if (!c->p) continue;
        /* pessimistic pmf: up (delta - A), up with the floating-point budget (rigorous), and the
         * coupling fallback's two deltas (docs §4) */
        const double dp[4] = {delta - c->A, delta - c->A - c->fpb, delta + c->A + st->eta_e[dir] + st->eta,
                              delta + c->A + c->fpb + st->eta_e[dir] + st->eta};
        double ep[4];
        pmf_epsilons(ep, dp, 4, c, st->h);
        double up = dp[0] > 0 ? ep[0] : INFINITY, upr = dp[1] > 0 ? ep[1] : INFINITY;
        if (upr < up) upr = up;
        /* lower: the optimistic composition; its computed delta exceeds the discrete one by at most A */
        double lo = 0, lor = 0;
        if (co->p) {
            const double dq[2] = {delta + co->A, delta + co->A + co->fpb};
            double eq[2];
            pmf_epsilons(eq, dq, 2, co, st->h);
            lo = eq[0];
            lor = eq[1];
        }
        /* fallback: the coupling bound (larger only when the optimistic pass loses O(h) per step at
         * atoms off the grid) */
        const double lc = ep[2] - st->cshift, lcr = ep[3] - st->cshift;
        if (co->p && lc > lo) lo = lc;
        if (!(lo > 0)) lo = 0;
        if (lo > up) lo = up; /* equal up to rounding (atoms on the grid: both discretisations exact) */
        if (co->p && lcr > lor) lor = lcr;
        if (!(lor > 0)) lor = 0;
        if (lor > lo) lor = lo;
        pld_dirres *d = &dr[dir];
        dirres_diag(d, c, co, st->h);
        d->up = up; d->lo = lo; d->upr = upr; d->lor = lor;
    }
}

/* A composed loss beyond the doubles (sum of T times each step's largest loss above 1e300, e.g. pure
 * DP with epsilon0 1e308): no grid holds it. When every step's top atom (pure, Laplace) together has
 * P-mass above delta, the loss exceeds any double with probability > delta, so epsilon(delta) is
 * above every double: *inf = 1 (lower bound DBL_MAX, the largest double below it; upper bound
 * +inf). Otherwise NOT_SUPPORTED naming the range. */
static dp_status pld_beyond_double(int *inf, const pldprep *pp, double delta) {
    *inf = 0;
    for (int dir = 0; dir < 2; dir++) {
        double top = 0, logp = 0;
        int atoms = 1;
        for (int j = 0; j < pp->nsd[dir]; j++) {
            const segdef *g = &pp->sd[dir][j];
            double al[2], aP[2], hi = fmax(g->hi, 0.0);
            if (acct_pld_atoms_mass(al, aP, &g->d) == 2 && aP[1] > 0) {
                logp += (double)g->steps * log(aP[1]);
                hi = fmax(hi, al[1]); /* the loss range's bisection stops at 1e9 */
            } else
                atoms = 0;
            top += (double)g->steps * hi;
        }
        if (!(top > 1e300)) continue;
        if (atoms && logp > log(delta)) { *inf = 1; return DP_OK; }
        return dp_error(DP_ERR_NOT_SUPPORTED, "PLD: the composed privacy loss reaches %g, beyond the doubles a grid "
                        "can hold", top);
    }
    return DP_OK;
}

dp_status acct_pld_epsilon(acct_pld_result *r, const acct_schedule *s, double delta, const acct_pld_opts *o) {
    acct_pld_opts d;
    if (!o) { acct_pld_default_opts(&d); o = &d; }
    if (!(delta > 0 && delta < 1)) return dp_error(DP_ERR_INVALID, "delta must be in (0, 1) (got %g)", delta);
    const double tau_w = ACCT_PLD_TAU_REL * delta; /* truncation per side, docs §4 "Grid and range" */
    pldprep *pp = dp_malloc(sizeof *pp);
    if (!pp) return DP_ERR_NOMEM;
    dp_status e = pld_prepare(pp, s, tau_w);
    pp->coarse_delta = delta;
    if (e == DP_OK) {
        int inf = 0;
        e = pld_beyond_double(&inf, pp, delta);
        if (e == DP_OK && inf) { /* the composed loss leaves the doubles, and beyond them with mass > delta */
            memset(r, 0, sizeof *r);
            r->lower = r->lower_fp = DBL_MAX; /* a double not above epsilon(delta) */
            r->upper = r->upper_fp = INFINITY;
            dp_free(pp);
            return DP_OK;
        }
    }
    pldstate st;
    pld_dirres dr[2] = {{0}, {0}};
    int use[2] = {1, 1};
    if (e == DP_OK && (o->h > 0 || o->target_points || o->upper_only)) { /* a given h, or the fixed rule */
        double h = o->h;
        if (h > 0) pld_set_phi(pp, h); /* a given h is used as given; atoms on it when it divides them */
        else h = pld_h_points(pp, (double)(o->target_points ? o->target_points : ACCT_PLD_FIXED_POINTS), o, 1e-2);
        e = pld_build_at(&st, pp, h, o, use);
        if (e == DP_OK) { pld_eval_epsilon(dr, &st, delta); pldstate_free(&st); }
    } else if (e == DP_OK) {
        /* the accuracy-driven default (docs §4 "Automatic grid"): a first grid of
         * ACCT_PLD_FIRST_POINTS points of the composed window, then finer ones until the interval is
         * narrower than the aim, or the upper bound has converged to within a quarter of it (its
         * change between the last two grids, extrapolated as h^k); a direction whose upper bound is
         * below the other's lower bound no longer decides either bound and is not refined */
        double h = pld_h_points(pp, ACCT_PLD_FIRST_POINTS, o, 0.05), ph = NAN, pw = NAN, pup = NAN;
        for (int round = 0;; round++) {
            e = pld_build_at(&st, pp, h, o, use);
            if (e != DP_OK) break;
            pld_eval_epsilon(dr, &st, delta);
            pldstate_free(&st);
            pld_fold(r, dr);
            const double w = r->upper - r->lower, aim = fmax(ACCT_PLD_WIDTH_ABS, fmin(ACCT_PLD_WIDTH_REL * r->upper, ACCT_PLD_WIDTH_CAP));
            double k = 2.0; /* width ~ h^k: 2 (smooth losses) until two grids measure it, in [1.5, 4] */
            if (isfinite(pw) && pw > w && w > 0 && ph > h) k = fmin(4.0, fmax(1.5, log(pw / w) / log(ph / h)));
            /* the upper bound's distance to its limit, from its change since the last grid: the split
             * moves each step's loss by at most m(h) ~ h^2 / 8, so the upper bound converges as h^2 */
            const double conv = isfinite(pup) ? fabs(pup - r->upper) / ((ph / h) * (ph / h) - 1.0) : INFINITY;
            if (w <= aim || conv <= 0.25 * aim || round == ACCT_PLD_MAX_ROUNDS) break;
            /* the milder of the refinements that meet either aim (width ~ h^k, convergence ~ h^k) */
            double f = 0.5; /* the first refinement halves h, so that the next can extrapolate */
            if (isfinite(conv)) {
                f = isfinite(w) && w > 0 ? 0.9 * pow(aim / w, 1.0 / k) : 1.0 / 16.0;
                if (conv > 0) f = fmax(f, 0.9 * sqrt(0.25 * aim / conv));
                f = fmin(0.7, fmax(f, 1.0 / 16.0));
            }
            const double hmin = fmax(1e-7, pp->maxrange / (double)(o->max_points / 2));
            if (h <= hmin * 1.000001) break; /* the finest grid the cap allows */
            for (int dir = 0; dir < 2; dir++) use[dir] = !(dr[dir].up < dr[1 - dir].lo);
            ph = h;
            pw = w;
            pup = r->upper;
            h = pld_snap(pp, fmax(h * f, hmin));
        }
    }
    if (e == DP_OK) pld_fold(r, dr);
    dp_free(pp);
    return e;
}

dp_status acct_pld_delta(acct_pld_result *r, const acct_schedule *s, double eps, const acct_pld_opts *o) {
    acct_pld_opts d;
    if (!o) { acct_pld_default_opts(&d); o = &d; }
    if (!(eps >= 0) || !isfinite(eps)) return dp_error(DP_ERR_INVALID, "epsilon must be >= 0 and finite (got %g)", eps);
    pldprep *pp = dp_malloc(sizeof *pp);
    if (!pp) return DP_ERR_NOMEM;
    dp_status e = pld_prepare(pp, s, 1e-20);
    pldstate st;
    double h = 0;
    if (e == DP_OK) {
        /* a given h, or the fixed rule: window / target (2^17 points by default) */
        h = o->h > 0 ? o->h
                     : pld_h_points(pp, (double)(o->target_points ? o->target_points : ACCT_PLD_FIXED_POINTS), o, 1e-2);
        if (o->h > 0) pld_set_phi(pp, h);
        const int use[2] = {1, 1};
        e = pld_build_at(&st, pp, h, o, use);
    }
    dp_free(pp);
    if (e != DP_OK) return e;
    pld_dirres dr[2] = {{0}, {0}};
    for (int dir = 0; dir < 2; dir++) {
        const acct_composed *c = &st.c[dir], *co = &st.co[dir];
        double up = acct_pmf_delta(c->p, c->n, c->l0, st.h, c->p_inf, eps) + c->A;
        double lo = co->p ? acct_pmf_delta(co->p, co->n, co->l0, st.h, co->p_inf, eps) - co->A : 0;
        double lc = acct_pmf_delta(c->p, c->n, c->l0, st.h, c->p_inf, eps + st.cshift) - c->A - st.eta_e[dir] - st.eta;
        if (co->p && lc > lo) lo = lc;
        if (up > 1) up = 1;
        if (!(lo > 0)) lo = 0;
        if (lo > up) lo = up;
        double upr = up + c->fpb > 1 ? 1 : up + c->fpb;
        double lor = lo - (co->p ? co->fpb : c->fpb);
        if (!(lor > 0)) lor = 0;
        pld_dirres *d = &dr[dir];
        dirres_diag(d, c, co, st.h);
        d->up = up; d->lo = lo; d->upr = upr; d->lor = lor;
    }
    pldstate_free(&st);
    pld_fold(r, dr);
    return DP_OK;
}

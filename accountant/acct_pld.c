/* accountant/acct_pld.c — privacy loss distributions: one step's loss on the grid and the FFT
 * composition of the steps (FFTW). The grid choice, the driver and the queries are
 * acct_pld_grid.c; docs/accounting.md §4 defines every step.
 *
 * Per step and per direction (remove: P = mixture, Q = base; add: P = base,
 * Q = mixture) the loss L = log(P/Q)(x), x ~ P, is discretised on the grid
 * l_k = (k + phi) h by "connect the dots": the P-mass of each cell (l_k, l_{k+1}] is split
 * between its two ends so that mass and E[e^{-L}] (the Q-mass) are preserved.
 * The split curve dominates the true delta(eps) curve (chord above a convex
 * function), so the composition is a rigorous upper bound. The lower bound comes
 * from an optimistic pmf on the same grid, obtained from the true pair by garbling
 * (randomised merging of neighbouring cells so that each merged atom sits exactly on a
 * grid point) and by lowering losses only, composed by the same FFT path; the older
 * coupling bound is kept as a fallback (acct_pld_grid.c). The offset phi puts the atoms of a
 * mechanism (Laplace's saturation atoms, pure DP's +-e) on grid points when h divides their
 * distance; the optimistic pass then keeps each atom exactly where it is. */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct_pld_int.h"
#include "common/alloc.h"

/* ------------------------------------------------------------------ one step ---- */
static double Phi(double x) { return 0.5 * erfc(-x / M_SQRT2); }
static double Phic(double x) { return 0.5 * erfc(x / M_SQRT2); }
/* both Phi(x) and Phic(x) with one erfc; the smaller one is computed directly */
static void Phi2(double x, double *lo, double *up) {
    if (x > 0) { *up = Phic(x); *lo = 1.0 - *up; }
    else { *lo = Phi(x); *up = 1.0 - *lo; }
}
static double lapF(double x, double b) { return x < 0 ? 0.5 * exp(x / b) : 1.0 - 0.5 * exp(-x / b); }
static double lapS(double x, double b) { return x < 0 ? 1.0 - 0.5 * exp(x / b) : 0.5 * exp(-x / b); }

/* log((e^l - 1 + q) / q) for l > log(1-q); q = 1 gives l */
static double log_ratio(double l, double q) {
    if (q >= 1.0) return l;
    if (l > 30.0) return l + log1p((q - 1.0) * exp(-l)) - log(q);
    return log(expm1(l) + q) - log(q);
}

/* P(L > l), Q(L > l), P(L <= l), Q(L <= l) */
static void tails(const acct_lossdef *d, double l, double *Pg, double *Qg, double *Pl, double *Ql) {
    double q = d->q;
    double l1q = q < 1.0 ? log1p(-q) : -INFINITY;
    int all = 0, none = 0;
    if (d->mech == ACCT_GAUSSIAN) {
        double s = d->par;
        if (d->dir == 0 || q >= 1.0) {
            if (l <= l1q) all = 1;
            else {
                double x = s * s * log_ratio(l, q) + 0.5; /* L > l  <=>  x > this (x ~ mixture) */
                double a0, a1, b0, b1;
                Phi2(x / s, &a0, &a1);
                Phi2((x - 1.0) / s, &b0, &b1);
                *Pg = (1.0 - q) * a1 + q * b1;
                *Qg = a1;
                *Pl = (1.0 - q) * a0 + q * b0;
                *Ql = a0;
                return;
            }
        } else {
            if (-l <= l1q) none = 1;
            else {
                double x = s * s * log_ratio(-l, q) + 0.5; /* L > l  <=>  x < this (x ~ N(0, s^2)) */
                double a0, a1, b0, b1;
                Phi2(x / s, &a0, &a1);
                Phi2((x - 1.0) / s, &b0, &b1);
                *Pg = a0;
                *Qg = (1.0 - q) * a0 + q * b0;
                *Pl = a1;
                *Ql = (1.0 - q) * a1 + q * b1;
                return;
            }
        }
    } else if (d->mech == ACCT_LAPLACE) {
        /* the saturation atoms bot, top bound the loss exactly (their doubles are the grid points
         * of acct_pld_discretise): compared with l, never through t's rounding */
        double b = d->par;
        if (d->dir == 0) {
            if (l < d->bot) all = 1;
            else if (l >= d->top) none = 1;
            else {
                double t = b * log_ratio(l, q); /* L > l <=> |x|-|x-1| > t, t in [-1, 1) */
                if (t < -1.0) t = -1.0;
                if (t >= 1.0) t = nextafter(1.0, 0.0);
                double x = 0.5 * (t + 1.0);
                *Pg = (1.0 - q) * lapS(x, b) + q * lapS(x - 1.0, b);
                *Qg = lapS(x, b);
                *Pl = (1.0 - q) * lapF(x, b) + q * lapF(x - 1.0, b);
                *Ql = lapF(x, b);
                return;
            }
        } else {
            if (l < -d->top) all = 1;
            else if (l >= -d->bot) none = 1;
            else {
                double t = b * log_ratio(-l, q); /* L > l <=> |x|-|x-1| < t, t in (-1, 1] */
                if (t > 1.0) t = 1.0;
                if (t <= -1.0) t = nextafter(-1.0, 0.0);
                double x = 0.5 * (t + 1.0);
                *Pg = lapF(x, b);
                *Qg = (1.0 - q) * lapF(x, b) + q * lapF(x - 1.0, b);
                *Pl = lapS(x, b);
                *Ql = (1.0 - q) * lapS(x, b) + q * lapS(x - 1.0, b);
                return;
            }
        }
    } else { /* randomized response with epsilon par: L = +e w.p. p, -e w.p. 1-p under P */
        double e = d->par, p = 1.0 / (1.0 + exp(-e)), pc = 1.0 / (1.0 + exp(e));
        if (l < -e) all = 1;
        else if (l >= e) none = 1;
        else { *Pg = p; *Qg = pc; *Pl = pc; *Ql = p; return; }
    }
    if (all) { *Pg = 1; *Qg = 1; *Pl = 0; *Ql = 0; }
    else { (void)none; *Pg = 0; *Qg = 0; *Pl = 1; *Ql = 1; }
}


static double Pgt(const acct_lossdef *d, double l) { double a, b, c, e; tails(d, l, &a, &b, &c, &e); return a; }
static double Ple(const acct_lossdef *d, double l) { double a, b, c, e; tails(d, l, &a, &b, &c, &e); return c; }

void acct_pld_loss_range(double *lo, double *hi, const acct_lossdef *d, double tau) {
    double b = 0.5;
    while (Pgt(d, b) > tau && b < 1e9) b *= 2.0;
    double a = -1e9;
    for (int it = 0; it < 200 && b - a > 1e-12 * (fabs(b) + 1e-300); it++) {
        double m = 0.5 * (a + b);
        if (Pgt(d, m) > tau) a = m; else b = m;
    }
    *hi = b;
    a = -0.5;
    while (Ple(d, a) > tau && a > -1e9) a *= 2.0;
    b = 1e9;
    for (int it = 0; it < 200 && b - a > 1e-12 * (fabs(a) + 1e-300); it++) {
        double m = 0.5 * (a + b);
        if (Ple(d, m) > tau) b = m; else a = m;
    }
    *lo = a;
    if (*lo > *hi) *lo = *hi;
}

/* The atoms of one step: loss, P-mass, Q-mass (in increasing loss). Laplace (any q): z >= 1 gives
 * the top atom log(1 - q + q e^{1/b}), z <= 0 the bottom one log(1 - q + q e^{-1/b}) (remove; the
 * add direction negates the losses and swaps the roles of P and Q); pure / RR: +-e. */
static int atoms_of(double *loss, double *P, double *Q, const acct_lossdef *d) {
    if (d->mech == ACCT_GAUSSIAN) return 0;
    double top_l = d->top, bot_l = d->bot, top_p, top_q, bot_p, bot_q; /* remove direction */
    if (d->mech == ACCT_LAPLACE) {
        const double b = d->par, q = d->q;
        top_q = lapS(1.0, b);
        top_p = (1.0 - q) * top_q + q * lapS(0.0, b);
        bot_q = lapF(0.0, b);
        bot_p = (1.0 - q) * bot_q + q * lapF(-1.0, b);
    } else {
        const double e = d->par;
        top_p = bot_q = 1.0 / (1.0 + exp(-e));
        top_q = bot_p = 1.0 / (1.0 + exp(e));
    }
    if (d->dir == 0) {
        loss[0] = bot_l; P[0] = bot_p; Q[0] = bot_q;
        loss[1] = top_l; P[1] = top_p; Q[1] = top_q;
    } else { /* add: P = base, Q = mixture, L = -(remove loss) */
        loss[0] = -top_l; P[0] = top_q; Q[0] = top_p;
        loss[1] = -bot_l; P[1] = bot_q; Q[1] = bot_p;
    }
    return 2;
}

acct_lossdef acct_pld_lossdef(acct_mech mech, double q, double par, int dir) {
    acct_lossdef d = {mech, q, par, dir, 0, 0};
    if (mech == ACCT_LAPLACE) {
        d.top = q >= 1.0 ? 1.0 / par : log1p(q * expm1(1.0 / par));
        d.bot = q >= 1.0 ? -1.0 / par : log1p(q * expm1(-1.0 / par));
    } else if (mech == ACCT_PURE) {
        d.top = par;
        d.bot = -par;
    }
    return d;
}

int acct_pld_atoms(double out[2], const acct_lossdef *d) {
    double P[2], Q[2];
    return atoms_of(out, P, Q, d);
}

int acct_pld_atoms_mass(double loss[2], double P[2], const acct_lossdef *d) {
    double Q[2];
    return atoms_of(loss, P, Q, d);
}

/* Optimistic discretisation of one step (docs/accounting.md §4, "Optimistic discretisation"):
 * a garbling of the true pair onto the grid, followed by pointwise loss decreases only.
 * Atoms in increasing loss order: the merged cells c_i = (P_c, Q_c) (loss log(P_c/Q_c) in
 * (l_i, l_{i+1}]; a mechanism's atom on a grid point is fed on its own, after the rest of its
 * cell) and the upper tail U = (P(L > l_top), Q(L > l_top)); the lower tail P(L <= l_0) is
 * dropped (loss lowered to -inf) unless it is an atom on l_0. A carry (Pr, Qr) heads for the grid
 * point g at or above its loss; its deficit D = e^{l_g} Qr - Pr >= 0 is filled with a fraction
 * alpha = D / E_a of the next atom (excess E_a = P_a - e^{l_g} Q_a > 0), so that the mixture
 * has loss exactly l_g (randomised merging = garbling); the rest of the atom is the next
 * carry. An atom too small to fill D is merged whole. What cannot be balanced (the top, or
 * atoms whose Q-mass underflowed) is placed at the grid point at or below its loss. Every
 * step only merges (garbling) or lowers losses, so the composed hockey-stick curve is below
 * the true one. Only P-masses are stored (the FFT path needs nothing else). */
typedef struct {
    double *po;
    const double *el; /* e^{l_i} of every grid point (inf above 700) */
    double h, phi;
    int64_t kmin;
    size_t n;
    size_t g;      /* target grid index of the carry */
    double Pr, Qr; /* carry */
} optsweep;

static double grid_l(const optsweep *w, size_t i) { return ((double)(w->kmin + (int64_t)i) + w->phi) * w->h; }

/* e^{l_i} Q - P, from the grid's e^{l_i} (log space above e^690, where it may overflow) */
static double excess_at(const optsweep *w, double P, double Q, size_t i) {
    if (!(Q > 0)) return -P;
    const double el = w->el[i];
    return el < 1e300 ? el * Q - P : exp(grid_l(w, i) + log(Q)) - P;
}

/* place the carry at the grid point at or below its loss (pointwise decrease) */
static void opt_flush(optsweep *w) {
    if (!(w->Pr > 0)) { w->Pr = w->Qr = 0; return; }
    double D = w->g < w->n ? excess_at(w, w->Pr, w->Qr, w->g) : 0;
    size_t idx;
    /* loss >= l_g, or below it only by rounding (|D| <= 64 u Pr: a relative loss error ~1e-14,
     * e.g. an atom that lies exactly on the grid): placed at l_g (float budget, docs §4) */
    if (w->g < w->n && D <= 64.0 * DBL_EPSILON * w->Pr) idx = w->g;
    else if (w->g >= w->n) idx = w->n - 1; /* above the grid: lowered to the top point */
    else if (w->Qr > 0) {                  /* loss below l_g: the point at or below it */
        double k = floor((log(w->Pr) - log(w->Qr)) / w->h - w->phi) - (double)w->kmin;
        if (k < 0) { w->Pr = w->Qr = 0; return; } /* below the grid: dropped */
        idx = k >= (double)w->g ? w->g - 1 : (size_t)k;
    } else idx = w->g > 0 ? w->g - 1 : 0;
    w->po[idx] += w->Pr;
    w->Pr = w->Qr = 0;
}

/* feed the next atom (P, Q) whose loss lies above grid index i (i.e. in (l_i, l_{i+1}]), or on
 * l_i itself */
static void opt_atom(optsweep *w, double P, double Q, size_t i) {
    if (!(P > 0)) return;
    if (!(Q > 0) || !isfinite(log(Q)) || Q < 1e-290) {
        /* Q-mass underflowed: its loss is only known to be in (l_i, l_{i+1}]: lower it to l_i */
        opt_flush(w);
        w->po[i < w->n ? i : w->n - 1] += P;
        w->g = i + 1;
        return;
    }
    if (w->g > i) w->g = i; /* cannot happen for ordered atoms; keeps the invariant l_g <= loss */
    if (i < w->n && -excess_at(w, P, Q, i) <= 64.0 * DBL_EPSILON * P) {
        /* the atom lies on l_i up to rounding (an atom on the grid, e.g. pure DP): keep it there */
        opt_flush(w);
        w->po[i] += P;
        w->g = i + 1;
        return;
    }
    double D = excess_at(w, w->Pr, w->Qr, w->g);
    if (!(w->Pr > 0) || D <= 0) {
        opt_flush(w);
        w->Pr = P; w->Qr = Q; w->g = i + 1;
        return;
    }
    double E = -excess_at(w, P, Q, w->g);
    if (E >= D) {
        double a = D / E;
        w->po[w->g] += w->Pr + a * P;
        w->Pr = (1.0 - a) * P; w->Qr = (1.0 - a) * Q; w->g = i + 1;
    } else {
        w->Pr += P; w->Qr += Q; /* merged whole; still below l_g */
    }
}

/* Which grid index an atom of loss a lies on (phi and h snapped), or -1. */
static int64_t atom_index(double a, int64_t kmin, size_t n, double h, double phi) {
    double k = a / h - phi, kr = floor(k + 0.5);
    if (!(fabs(k - kr) <= 1e-9 * (fabs(k) + 1.0))) return -1;
    const double i = kr - (double)kmin; /* in doubles: an atom far off the grid does not fit an int64 */
    return i >= 0 && i < (double)n ? (int64_t)i : -1;
}

/* place P at grid index j (<= its loss): a pointwise decrease (optimistic coarse tail cells) */
static void opt_lower(optsweep *w, double P, size_t j) {
    if (!(P > 0)) return;
    opt_flush(w);
    w->po[j] += P;
    if (w->g < j + 1) w->g = j + 1;
}

dp_status acct_pld_discretise(acct_steppmf *o, acct_steppmf *oo, const acct_lossdef *d, double lo, double hi,
                              double h, double phi, int64_t steps, size_t max_points, double eta) {
    /* the point count in double first: lo / h may be far outside int64 (--pld-h 1e-300) */
    double klo = floor(lo / h - phi), khi = ceil(hi / h - phi), npts = (khi > klo ? khi - klo : 1) + 1;
    if (!(npts <= (double)max_points))
        return dp_error(DP_ERR_NOT_SUPPORTED, "PLD: one step needs %.3g grid points at h=%g (cap %zu); use a coarser "
                        "--pld-h", npts, h, max_points);
    int64_t kmin = (int64_t)klo, kmax = (int64_t)khi;
    if (kmax <= kmin) kmax = kmin + 1;
    size_t n = (size_t)(kmax - kmin + 1);
    double *p = dp_calloc(n, sizeof *p);
    double *po = oo ? dp_calloc(n, sizeof *po) : NULL;
    double *t = dp_malloc(5 * n * sizeof *t), *el = t ? t + 4 * n : NULL;
    size_t *ev = dp_malloc(n * sizeof *ev); /* the evaluated grid indices, increasing */
    if (!p || !t || !ev || (oo && !po)) { dp_free(p); dp_free(po); dp_free(t); dp_free(ev); return DP_ERR_NOMEM; }
    /* atoms on grid points: their tails are taken at the atom's exact loss (the grid point is the
     * atom), so each atom lies in the cell it closes (P(L > a) excludes it) */
    double al[2], aP[2], aQ[2];
    int64_t ai[2] = {-1, -1};
    const int na = atoms_of(al, aP, aQ, d);
    for (int k = 0; k < na; k++) ai[k] = atom_index(al[k], kmin, n, h, phi);
    /* coarse tails (docs §4 "Coarse tails"): below fa the P-mass is at most eta, above fb too; there
     * the tails are taken every ACCT_PLD_COARSE-th point only, and a coarse cell's whole mass goes to
     * its upper end (pessimistic: raised) or its lower end (optimistic: lowered) */
    size_t fa = 0, fb = n - 1, K = 1;
    if (eta > 0) {
        double la, lb;
        acct_pld_loss_range(&la, &lb, d, eta);
        const double ia = floor(la / h - phi) - (double)kmin, ib = ceil(lb / h - phi) - (double)kmin;
        fa = ia > 0 ? (ia < (double)(n - 1) ? (size_t)ia : n - 1) : 0;
        fb = ib < (double)(n - 1) ? (ib > (double)fa ? (size_t)ib : fa) : n - 1;
        K = ACCT_PLD_COARSE;
    }
    size_t ne = 0;
    for (size_t i = 0; i < n; i++) {
        int atom = 0;
        for (int k = 0; k < na; k++) atom |= ai[k] >= 0 && (ai[k] == (int64_t)i || ai[k] == (int64_t)i + 1);
        if (i == 0 || i == n - 1 || (i >= fa && i <= fb) || atom || (i < fa ? i % K == 0 : (i - fb) % K == 0)) ev[ne++] = i;
    }
    for (size_t e = 0; e < ne; e++) {
        const size_t i = ev[e];
        double l = ((double)(kmin + (int64_t)i) + phi) * h;
        for (int k = 0; k < na; k++)
            if (ai[k] == (int64_t)i) l = al[k];
        tails(d, l, &t[4 * i], &t[4 * i + 1], &t[4 * i + 2], &t[4 * i + 3]);
        el[i] = l < 690.0 ? exp(l) : INFINITY;
    }
    double emh = -expm1(-h); /* 1 - e^{-h} */
    /* float budget of the split (docs §4): 16 u e^{2h} sum_k (min tail of P + e^{l_k} min tail of Q),
     * e^{2 K h} where coarse cells are K points wide */
    double fps = 0;
    for (size_t e = 0; e < ne; e++) {
        const size_t i = ev[e];
        double tp = fmin(t[4 * i], t[4 * i + 2]), tq = fmin(t[4 * i + 1], t[4 * i + 3]);
        if (tq > 0) tp += el[i] < 1e300 ? el[i] * tq : exp(((double)(kmin + (int64_t)i) + phi) * h + log(tq));
        fps += tp;
    }
    fps *= 16.0 * DBL_EPSILON / 2.0 * exp(2.0 * h * (double)K);
    /* P(L <= l_kmin) (<= tau): moved up to l_kmin (pessimistic). Optimistic: kept at l_kmin if it is
     * an atom there (up to rounding), else dropped (loss lowered to -inf); merging it with the mass
     * above could cost far more, since its Q-mass can be large (e.g. q = 1 Gaussians). */
    optsweep w = {po, el, h, phi, kmin, n, 0, 0, 0};
    if (po && t[2] > 0 && excess_at(&w, t[2], t[3], 0) <= 64.0 * DBL_EPSILON * t[2]) po[0] = t[2];
    p[0] = t[2];
    for (size_t e = 0; e + 1 < ne; e++) {
        const size_t i = ev[e], j = ev[e + 1]; /* the cell (l_i, l_j] */
        double Pc = t[4 * i] < 0.5 ? t[4 * i] - t[4 * j] : t[4 * j + 2] - t[4 * i + 2];
        double Qc = t[4 * i + 1] < 0.5 ? t[4 * i + 1] - t[4 * j + 1] : t[4 * j + 3] - t[4 * i + 3];
        if (Pc <= 0) continue;
        if (Qc < 0) Qc = 0;
        if (j > i + 1) { /* a coarse tail cell: raised whole (pessimistic), lowered whole (optimistic) */
            p[j] += Pc;
            if (po) opt_lower(&w, Pc, i);
            continue;
        }
        if (po) {
            int k = na > 0 && ai[0] == (int64_t)j ? 0 : na > 1 && ai[1] == (int64_t)j ? 1 : -1;
            if (k >= 0 && aP[k] <= Pc * (1.0 + 1e-12)) { /* the cell's rest, then the atom on l_j */
                opt_atom(&w, fmax(Pc - aP[k], 0.0), fmax(Qc - aQ[k], 0.0), i);
                opt_atom(&w, aP[k], fmin(aQ[k], Qc), j);
            } else opt_atom(&w, Pc, Qc, i);
        }
        /* upper end gets b = (P_c - e^{l_k} Q_c) / (1 - e^{-h}); clamp rounding */
        double bm = (Pc - (el[i] < 1e300 ? el[i] * Qc : exp(((double)(kmin + (int64_t)i) + phi) * h + log(Qc)))) / emh;
        if (!(bm >= 0)) bm = 0;
        if (bm > Pc) bm = Pc;
        p[i] += Pc - bm;
        p[j] += bm;
    }
    if (po) {
        opt_atom(&w, t[4 * (n - 1)], t[4 * (n - 1) + 1], n - 1); /* upper tail: above l_top, lowered at the end */
        opt_flush(&w);
        *oo = (acct_steppmf){po, kmin, phi, n, 0, 0, fps, steps};
    }
    *o = (acct_steppmf){p, kmin, phi, n, t[4 * (n - 1)], t[2], fps, steps};
    dp_free(t);
    dp_free(ev);
    return DP_OK;
}

/* ------------------------------------------------------------- composition ---- */
/* An upper bound of K(lambda) = log E[e^{lambda L}; L finite] of one step pmf (the Chernoff
 * bound stays valid with any upper bound of K). With m >= lambda l_i for every point of
 * positive mass (the end of the support in the direction of lambda), K = m + log S,
 * S = sum_i p_i e^{lambda l_i - m} <= n: the factors e^{lambda l_i - m} are formed by blocks of
 * J points, one exp at the block start and then products by r = e^{lambda h} (J |lambda| h <= 30,
 * so a block whose first factor underflows holds only factors below e^-715). Rounding: each
 * factor carries at most J + 2 roundings and the sum n, so S (1 + (J + n + 4) u) plus n DBL_MIN
 * (underflowed terms) bounds the exact sum (docs/accounting.md §4 "Composition"). */
static double log_mgf(const acct_steppmf *s, double h, double lam) {
    size_t i0 = 0, i1 = s->n;
    while (i0 < i1 && !(s->p[i0] > 0)) i0++;
    while (i1 > i0 && !(s->p[i1 - 1] > 0)) i1--;
    if (i0 >= i1) return -INFINITY;
    const double lh = lam * h;
    const double m = lam * ((double)(s->kmin + (int64_t)(lam > 0 ? i1 - 1 : i0)) + s->phi) * h;
    size_t J = fabs(lh) > 0 ? (size_t)fmin(64.0, fmax(1.0, floor(30.0 / fabs(lh)))) : 64;
    const double r = exp(lh);
    double acc = 0;
    for (size_t b = i0; b < i1; b += J) {
        double f = exp(lam * ((double)(s->kmin + (int64_t)b) + s->phi) * h - m);
        size_t e = b + J < i1 ? b + J : i1;
        for (size_t i = b; i < e; i++, f *= r) acc += s->p[i] * f;
    }
    const double u = DBL_EPSILON / 2.0;
    acc = acc * (1.0 + ((double)J + (double)(i1 - i0) + 4.0) * u) + (double)(i1 - i0) * DBL_MIN;
    const double la = log(acc); /* m + la rounded up by a few ulp of each operand */
    return m + la + 4.0 * u * (fabs(la) + fabs(m));
}

/* Chernoff window [u_lo, u_hi] (loss units) for the sum with tail <= tau_w on each side; the
 * minimising lambdas are returned so that the final grid can reuse them (any lambda > 0 gives a
 * valid bound P(S > u) <= exp(sum T K(lambda) - lambda u)). */
void acct_pld_chernoff_window(double *u_lo, double *u_hi, double *lam_lo, double *lam_hi, const acct_steppmf *s,
                              int ns, double h, double tau_w) {
    double best_hi = INFINITY, best_lo = -INFINITY, lt = log(tau_w);
    *lam_lo = *lam_hi = 1.0;
    for (int e = -8; e <= 10; e++) {
        double lam = ldexp(1.0, e), kp = 0, km = 0;
        for (int j = 0; j < ns; j++) {
            kp += (double)s[j].steps * log_mgf(&s[j], h, lam);
            km += (double)s[j].steps * log_mgf(&s[j], h, -lam);
        }
        double uh = (kp - lt) / lam, ul = (lt - km) / lam;
        if (uh < best_hi) { best_hi = uh; *lam_hi = lam; }
        if (ul > best_lo) { best_lo = ul; *lam_lo = lam; }
    }
    *u_lo = best_lo;
    *u_hi = best_hi;
}

static size_t good_size(size_t n) {
    size_t best = (size_t)1 << 62;
    for (size_t a = 1; a < best && a < ((size_t)1 << 40); a *= 2)
        for (size_t b = a; b < best; b *= 3)
            for (size_t c = b; c < best; c *= 5)
                if (c >= n && c < best) best = c;
    return best;
}

static void pldfft_free_buffers(acct_pldfft *w) {
    fftw_free(w->x);
    fftw_free(w->X);
    fftw_free(w->acc);
    dp_free(w->dY);
    w->x = NULL; w->X = w->acc = NULL; w->dY = NULL;
    w->cap = 0;
}

/* Buffers of at least N points (shrunk when a far smaller N follows a large one) and the plans
 * of length N (made once, FFTW_ESTIMATE, on the buffers; FFTW's alignment of every buffer lets
 * them run on later buffers). */
static dp_status pldfft_get(acct_pldfft *w, size_t N) {
    if (w->cap < N || (w->cap > ((size_t)1 << 20) && N < w->cap / 8)) {
        pldfft_free_buffers(w);
        const size_t nc = N / 2 + 1;
        w->x = fftw_alloc_real(N);
        w->X = fftw_alloc_complex(nc);
        w->acc = fftw_alloc_complex(nc);
        w->dY = dp_malloc(nc * sizeof *w->dY);
        if (!w->x || !w->X || !w->acc || !w->dY) {
            pldfft_free_buffers(w);
            return dp_error(DP_ERR_NOMEM, "PLD: out of memory (N=%zu)", N);
        }
        w->cap = N;
    }
    acct_pldplan *slot = &w->plan[0];
    for (int i = 0; i < ACCT_PLD_PLANS; i++) {
        if (w->plan[i].N == N && w->plan[i].fwd) { w->plan[i].used = ++w->clock; w->cur = &w->plan[i]; return DP_OK; }
        if (w->plan[i].used < slot->used) slot = &w->plan[i];
    }
    if (slot->fwd) fftw_destroy_plan(slot->fwd);
    if (slot->bwd) fftw_destroy_plan(slot->bwd);
    memset(slot, 0, sizeof *slot);
    slot->fwd = fftw_plan_dft_r2c_1d((int)N, w->x, w->X, FFTW_ESTIMATE);
    slot->bwd = fftw_plan_dft_c2r_1d((int)N, w->acc, w->x, FFTW_ESTIMATE);
    if (!slot->fwd || !slot->bwd) return dp_error(DP_ERR_INTERNAL, "PLD: no FFTW plan for N=%zu", N);
    slot->N = N;
    slot->used = ++w->clock;
    w->cur = slot;
    return DP_OK;
}
/* Over 150 lines (one reason): the composition by FFT with its error terms accumulated beside
 * each operation (docs/accounting.md section 4), kept together so that no term is lost. */

dp_status acct_pld_compose(acct_composed *out, acct_pldfft *fw, const acct_steppmf *s, int ns, double h,
                           double tau_w, size_t max_points, double lam_lo, double lam_hi) {
    if (ns == 1 && s[0].steps == 1) { /* nothing to compose: the step pmf itself (exact, no FFT) */
        double *p = dp_malloc(s[0].n * sizeof *p), tot = 0;
        if (!p) return DP_ERR_NOMEM;
        memcpy(p, s[0].p, s[0].n * sizeof *p);
        for (size_t i = 0; i < s[0].n; i++) tot += p[i];
        out->p = p;
        out->n = s[0].n;
        out->l0 = ((double)s[0].kmin + s[0].phi) * h;
        out->p_inf = s[0].p_inf;
        out->A = 0;
        out->fpb = s[0].fp_split + 2.0 * (double)s[0].n * (DBL_EPSILON / 2.0);
        out->mass_err = fabs(tot + out->p_inf - 1.0);
        if (!(out->mass_err <= 1e-6)) {
            dp_free(p);
            out->p = NULL;
            return dp_error(DP_ERR_NUMERIC, "PLD: step distribution lost normalisation (|mass - 1| = %g, h=%g)",
                            out->mass_err, h);
        }
        return DP_OK;
    }
    /* full support of the sum */
    double fmin = 0, fmax = 0, Phi = 0; /* Phi: the sum of the steps' grid offsets (cells) */
    for (int j = 0; j < ns; j++) {
        Phi += (double)s[j].steps * s[j].phi;
        fmin += (double)s[j].steps * (double)s[j].kmin;
        fmax += (double)s[j].steps * (double)(s[j].kmin + (int64_t)s[j].n - 1);
    }
    double W0 = fmin, W1 = fmax, A = 0;
    size_t nmax = 1;
    for (int j = 0; j < ns; j++) if (s[j].n > nmax) nmax = s[j].n;
    if (W1 - W0 + 1 > (double)max_points || W1 - W0 + 1 > 4.0 * (double)nmax + 64) {
        /* Chernoff bounds on this grid at the pilot's lambdas (tail <= tau_w each side) */
        double kp = 0, km = 0, lt = log(tau_w);
        for (int j = 0; j < ns; j++) {
            kp += (double)s[j].steps * log_mgf(&s[j], h, lam_hi);
            km += (double)s[j].steps * log_mgf(&s[j], h, -lam_lo);
        }
        double uh = (kp - lt) / lam_hi, ul = (lt - km) / lam_lo;
        double c0 = floor(ul / h - Phi), c1 = ceil(uh / h - Phi);
        if (c0 > W0) { W0 = c0; A += tau_w; }
        if (c1 < W1) { W1 = c1; A += tau_w; }
        if (W1 < W0) W1 = W0;
    }
    double wlen = W1 - W0 + 1;
    if (wlen < (double)nmax) wlen = (double)nmax;
    if (wlen > (double)max_points)
        return dp_error(DP_ERR_NOT_SUPPORTED, "PLD: composition window needs %.0f points at h=%g (cap %zu)", wlen, h,
                        max_points);
    size_t N = good_size((size_t)wlen);
    size_t nc = N / 2 + 1;
    DP_TRY(pldfft_get(fw, N));
    double *x = fw->x, *dY = fw->dY;
    fftw_complex *X = fw->X, *acc = fw->acc;
    /* componentwise FFT error (docs §4): |dX_f| <= eF ||x||_1, eF = 16 u ceil(log2 N) */
    const double u = DBL_EPSILON / 2.0;
    double eF = 16.0 * u * ceil(log2((double)N)), lsplit = 0;
    double log_noinf = 0, base = 0;
    for (int j = 0; j < ns; j++) {
        memset(x, 0, N * sizeof *x);
        memcpy(x, s[j].p, s[j].n * sizeof *x);
        double l1 = 0;
        for (size_t i = 0; i < s[j].n; i++) l1 += fabs(s[j].p[i]);
        fftw_execute_dft_r2c(fw->cur->fwd, x, X);
        const int64_t Ti = s[j].steps;
        double T = (double)Ti, e = eF * l1 * (1.0 + 2.0 * (double)s[j].n * u);
        /* X^T by binary powering (docs §4 "Powers"): the computed power is X^T times a product of
         * T - 1 factors (1 + theta), |theta| <= c = sqrt2 gamma_2 (complex multiplication), so its
         * rounding is at most expm1((T - 1) c) |X^|^T; rb^T (rb >= |exact X|) by a real power,
         * rounded up by (1 - u)^-(T-1). A coefficient with rb < thr = e^{-80/T} (rounded down) has
         * |exact Z| < e^-80: it is dropped and counted whole. */
        const double c = M_SQRT2 * 2.0 * u / (1.0 - 2.0 * u);
        const double erel = expm1((T - 1.0) * c * (1.0 + 1e-9)), gT = exp((T - 1.0) * u * 1.01);
        const double thr = exp(-80.0 / T) * (1.0 - 4.0 * u), ez_drop = exp(-80.0) * (1.0 + 4.0 * u);
        for (size_t f = 0; f < nc; f++) {
            const double re = X[f][0], im = X[f][1];
            const double rb = sqrt(re * re + im * im) * (1.0 + 2.0 * u) + e; /* >= |exact X_f| */
            double zr = 0, zi = 0, zabs, ez;
            if (rb < thr) { /* |exact Z_f| <= rb^T < e^-80: dropped, its whole value in the budget */
                zabs = 0;
                ez = ez_drop;
            } else {
                double br = re, bi = im, pr = 1.0, pi = 0.0, rr = rb, rp = 1.0;
                int first = 1;
                for (int64_t t = Ti;;) {
                    if (t & 1) {
                        if (first) { pr = br; pi = bi; rp = rr; first = 0; }
                        else {
                            double qr = pr * br - pi * bi;
                            pi = pr * bi + pi * br;
                            pr = qr;
                            rp *= rr;
                        }
                    }
                    if (!(t >>= 1)) break;
                    double sr = br * br - bi * bi;
                    bi = 2.0 * br * bi;
                    br = sr;
                    rr *= rr;
                }
                zr = pr; zi = pi;
                const double rbT = rp * gT; /* >= rb^T >= |X^|^T and |exact Z| */
                zabs = rbT * (1.0 + erel);  /* >= |computed Z| */
                /* rounding of the power + perturbation of X^T: T e (|X| + e)^(T-1) */
                ez = rbT * (erel + T * e / rb);
            }
            if (j == 0) { /* acc = 1: the product is z itself, exactly */
                acc[f][0] = zr;
                acc[f][1] = zi;
                dY[f] = ez;
                continue;
            }
            double ar = acc[f][0], ai = acc[f][1], aabs = sqrt(ar * ar + ai * ai) * (1.0 + 2.0 * u);
            acc[f][0] = ar * zr - ai * zi;
            acc[f][1] = ar * zi + ai * zr;
            /* |a'z' - az| <= |a' - a| (|z'| + ez) + |a'| ez + rounding 4u |a'||z'| */
            dY[f] = dY[f] * (zabs + ez) + aabs * ez + 4.0 * u * aabs * zabs;
        }
        log_noinf += T * log1p(-s[j].p_inf);
        base += T * (double)s[j].kmin;
        lsplit += T * log1p(s[j].fp_split);
    }
    double dy2 = 0, y1 = 0;
    for (size_t f = 0; f < nc; f++) {
        double w = f == 0 ? 1.0 : 2.0;
        dy2 += w * dY[f] * dY[f];
        y1 += w * sqrt(acc[f][0] * acc[f][0] + acc[f][1] * acc[f][1]);
    }
    /* ||dy||_1 <= ||dY||_2 (Parseval), inverse transform eF ||Y||_1, division by N and the
     * evaluation sums 2 N u, the split perturbation composed: expm1(sum T log1p(e_split)) */
    double fpb = sqrt(dy2) + (eF + u) * y1 + 2.0 * (double)N * u + expm1(lsplit);
    fftw_execute_dft_c2r(fw->cur->bwd, acc, x);
    double *p = dp_malloc(N * sizeof *p);
    if (!p) return DP_ERR_NOMEM;
    double neg = 0, tot = 0;
    double jm = fmod(W0 - base, (double)N); /* cyclic position of the window start */
    if (jm < 0) jm += (double)N;
    size_t jj = (size_t)jm;
    for (size_t w = 0; w < N; w++) {
        double y = x[jj] / (double)N;
        if (++jj == N) jj = 0;
        if (y < 0) { neg -= y; y = 0; }
        p[w] = y;
        tot += y;
    }
    out->p = p;
    out->n = N;
    out->l0 = (W0 + Phi) * h;
    out->p_inf = -expm1(log_noinf);
    out->A = A + neg;
    out->fpb = fpb;
    out->mass_err = fabs(tot + out->p_inf - 1.0);
    /* mass conservation: the split and the FFT keep it to ~1e-12; anything visible is a bug */
    if (!(out->mass_err <= 1e-6)) {
        dp_free(p);
        out->p = NULL;
        return dp_error(DP_ERR_NUMERIC, "PLD: composed distribution lost normalisation (|mass - 1| = %g, h=%g, N=%zu)",
                        out->mass_err, h, N);
    }
    return DP_OK;
}


/* ----------------------------------------------------- the process-wide FFT workspace ---- */
static acct_pldfft g_fft;
static pthread_mutex_t g_fft_lock = PTHREAD_MUTEX_INITIALIZER;

acct_pldfft *acct_pld_fft_acquire(void) {
    pthread_mutex_lock(&g_fft_lock);
    return &g_fft;
}

void acct_pld_fft_release(acct_pldfft *fw) {
    (void)fw;
    pthread_mutex_unlock(&g_fft_lock);
}

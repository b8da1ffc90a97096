/* accountant/acct_pld.c — privacy loss distributions composed by FFT (FFTW).
 *
 * Per step and per direction (remove: P = mixture, Q = base; add: P = base,
 * Q = mixture) the loss L = log(P/Q)(x), x ~ P, is discretised on the grid
 * l_k = k h by "connect the dots": the P-mass of each cell (l_k, l_{k+1}] is split
 * between its two ends so that mass and E[e^{-L}] (the Q-mass) are preserved.
 * The split curve dominates the true delta(eps) curve (chord above a convex
 * function), so the composition is a rigorous upper bound. The lower bound comes
 * from an optimistic pmf on the same grid, obtained from the true pair by garbling
 * (randomised merging of neighbouring cells so that each merged atom sits exactly on a
 * grid point) and by lowering losses only, composed by the same FFT path; the older
 * coupling bound is kept as a fallback (docs/accounting.md §4). */
#include <fftw3.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accountant/acct.h"
#include "common/alloc.h"
#include "accountant/acct_internal.h"

typedef struct {
    acct_mech mech;
    double q, par; /* par: sigma, b, or the (amplified) pure epsilon */
    int dir;       /* 0 remove, 1 add */
} lossdef;

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
static void tails(const lossdef *d, double l, double *Pg, double *Qg, double *Pl, double *Ql) {
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
        double b = d->par;
        if (d->dir == 0) {
            if (l <= l1q) all = 1;
            else {
                double t = b * log_ratio(l, q); /* L > l <=> |x|-|x-1| > t */
                if (t < -1.0) all = 1;
                else if (t >= 1.0) none = 1;
                else {
                    double x = 0.5 * (t + 1.0);
                    *Pg = (1.0 - q) * lapS(x, b) + q * lapS(x - 1.0, b);
                    *Qg = lapS(x, b);
                    *Pl = (1.0 - q) * lapF(x, b) + q * lapF(x - 1.0, b);
                    *Ql = lapF(x, b);
                    return;
                }
            }
        } else {
            if (-l <= l1q) none = 1;
            else {
                double t = b * log_ratio(-l, q); /* L > l <=> |x|-|x-1| < t */
                if (t > 1.0) all = 1;
                else if (t <= -1.0) none = 1;
                else {
                    double x = 0.5 * (t + 1.0);
                    *Pg = lapF(x, b);
                    *Qg = (1.0 - q) * lapF(x, b) + q * lapF(x - 1.0, b);
                    *Pl = lapS(x, b);
                    *Ql = (1.0 - q) * lapS(x, b) + q * lapS(x - 1.0, b);
                    return;
                }
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

static double Pgt(const lossdef *d, double l) { double a, b, c, e; tails(d, l, &a, &b, &c, &e); return a; }
static double Ple(const lossdef *d, double l) { double a, b, c, e; tails(d, l, &a, &b, &c, &e); return c; }

/* per-step loss range [lo, hi] with P(L <= lo) <= tau and P(L > hi) <= tau */
static void loss_range(double *lo, double *hi, const lossdef *d, double tau) {
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

typedef struct {
    double *p;        /* [n] masses at l = (kmin + i) h */
    int64_t kmin;
    size_t n;
    double p_inf;     /* mass at +infinity per step */
    double p_trunc;   /* mass moved up from below l_kmin per step */
    double fp_split;  /* per-step float budget of the split (delta units, docs §4 "Floating-point budget") */
    int64_t steps;
} steppmf;

/* Optimistic discretisation of one step (docs/accounting.md §4, "Optimistic discretisation"):
 * a garbling of the true pair onto the grid, followed by pointwise loss decreases only.
 * Atoms in increasing loss order: the merged cells c_i = (P_c, Q_c) (loss log(P_c/Q_c) in
 * (l_i, l_{i+1}]) and the upper tail U = (P(L > l_top), Q(L > l_top)); the lower tail
 * P(L <= l_0) is dropped (loss lowered to -inf) unless it is an atom on l_0. A carry (Pr, Qr) heads for the grid point
 * g at or above its loss; its deficit D = e^{l_g} Qr - Pr >= 0 is filled with a fraction
 * alpha = D / E_a of the next atom (excess E_a = P_a - e^{l_g} Q_a > 0), so that the mixture
 * has loss exactly l_g (randomised merging = garbling); the rest of the atom is the next
 * carry. An atom too small to fill D is merged whole. What cannot be balanced (the top, or
 * atoms whose Q-mass underflowed) is placed at the grid point at or below its loss. Every
 * step only merges (garbling) or lowers losses, so the composed hockey-stick curve is below
 * the true one. Only P-masses are stored (the FFT path needs nothing else). */
typedef struct {
    double *po;
    double h;
    int64_t kmin;
    size_t n;
    size_t g;      /* target grid index of the carry */
    double Pr, Qr; /* carry */
} optsweep;

/* e^{l} Q - P without overflow for large l (Q ~ P e^{-L}) */
static double excess_below(double P, double Q, double l) { return Q > 0 ? exp(l + log(Q)) - P : -P; }

/* place the carry at the grid point at or below its loss (pointwise decrease) */
static void opt_flush(optsweep *w) {
    if (!(w->Pr > 0)) { w->Pr = w->Qr = 0; return; }
    double D = w->g < w->n ? excess_below(w->Pr, w->Qr, (double)(w->kmin + (int64_t)w->g) * w->h) : 0;
    size_t idx;
    /* loss >= l_g, or below it only by rounding (|D| <= 64 u Pr: a relative loss error ~1e-14,
     * e.g. an atom that lies exactly on the grid): placed at l_g (float budget, docs §4) */
    if (w->g < w->n && D <= 64.0 * DBL_EPSILON * w->Pr) idx = w->g;
    else if (w->g >= w->n) idx = w->n - 1; /* above the grid: lowered to the top point */
    else if (w->Qr > 0) {                  /* loss below l_g: the point at or below it */
        double k = floor((log(w->Pr) - log(w->Qr)) / w->h) - (double)w->kmin;
        if (k < 0) { w->Pr = w->Qr = 0; return; } /* below the grid: dropped */
        idx = k >= (double)w->g ? w->g - 1 : (size_t)k;
    } else idx = w->g > 0 ? w->g - 1 : 0;
    w->po[idx] += w->Pr;
    w->Pr = w->Qr = 0;
}

/* feed the next atom (P, Q) whose loss lies above grid index i (i.e. in (l_i, l_{i+1}]) */
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
    if (i < w->n && -excess_below(P, Q, (double)(w->kmin + (int64_t)i) * w->h) <= 64.0 * DBL_EPSILON * P) {
        /* the atom lies on l_i up to rounding (an atom on the grid, e.g. pure DP): keep it there */
        opt_flush(w);
        w->po[i] += P;
        w->g = i + 1;
        return;
    }
    double lg = (double)(w->kmin + (int64_t)w->g) * w->h;
    double D = excess_below(w->Pr, w->Qr, lg);
    if (!(w->Pr > 0) || D <= 0) {
        opt_flush(w);
        w->Pr = P; w->Qr = Q; w->g = i + 1;
        return;
    }
    double E = -excess_below(P, Q, lg);
    if (E >= D) {
        double a = D / E;
        w->po[w->g] += w->Pr + a * P;
        w->Pr = (1.0 - a) * P; w->Qr = (1.0 - a) * Q; w->g = i + 1;
    } else {
        w->Pr += P; w->Qr += Q; /* merged whole; still below l_g */
    }
}

/* Discretisation of one step on the grid h: pessimistic "connect the dots" into *o and, when
 * oo != NULL, the optimistic garbling into *oo (same grid, from the same tails). */
static dp_status discretise(steppmf *o, steppmf *oo, const lossdef *d, double lo, double hi, double h, int64_t steps,
                            size_t max_points) {
    /* the point count in double first: lo / h may be far outside int64 (--pld-h 1e-300) */
    double klo = floor(lo / h), khi = ceil(hi / h), npts = (khi > klo ? khi - klo : 1) + 1;
    if (!(npts <= (double)max_points))
        return dp_error(DP_ERR_NOT_SUPPORTED, "PLD: one step needs %.3g grid points at h=%g (cap %zu); use a coarser "
                        "--pld-h", npts, h, max_points);
    int64_t kmin = (int64_t)klo, kmax = (int64_t)khi;
    if (kmax <= kmin) kmax = kmin + 1;
    size_t n = (size_t)(kmax - kmin + 1);
    double *p = dp_calloc(n, sizeof *p);
    double *po = oo ? dp_calloc(n, sizeof *po) : NULL;
    double *t = dp_malloc(4 * n * sizeof *t);
    if (!p || !t || (oo && !po)) { dp_free(p); dp_free(po); dp_free(t); return DP_ERR_NOMEM; }
    for (size_t i = 0; i < n; i++) tails(d, (double)(kmin + (int64_t)i) * h, &t[4 * i], &t[4 * i + 1], &t[4 * i + 2], &t[4 * i + 3]);
    double emh = -expm1(-h); /* 1 - e^{-h} */
    /* float budget of the split (docs §4): 16 u e^{2h} sum_k (min tail of P + e^{l_k} min tail of Q) */
    double fps = 0;
    for (size_t i = 0; i < n; i++) {
        double tp = fmin(t[4 * i], t[4 * i + 2]), tq = fmin(t[4 * i + 1], t[4 * i + 3]);
        fps += tp + (tq > 0 ? exp((double)(kmin + (int64_t)i) * h + log(tq)) : 0.0);
    }
    fps *= 16.0 * DBL_EPSILON / 2.0 * exp(2.0 * h);
    /* P(L <= l_kmin) (<= tau): moved up to l_kmin (pessimistic). Optimistic: kept at l_kmin if it is
     * an atom there (up to rounding), else dropped (loss lowered to -inf); merging it with the mass
     * above could cost far more, since its Q-mass can be large (e.g. q = 1 Gaussians). */
    optsweep w = {po, h, kmin, n, 0, 0, 0};
    if (po && t[2] > 0 && excess_below(t[2], t[3], (double)kmin * h) <= 64.0 * DBL_EPSILON * t[2]) po[0] = t[2];
    p[0] = t[2];
    for (size_t i = 0; i + 1 < n; i++) {
        double Pc = t[4 * i] < 0.5 ? t[4 * i] - t[4 * (i + 1)] : t[4 * (i + 1) + 2] - t[4 * i + 2];
        double Qc = t[4 * i + 1] < 0.5 ? t[4 * i + 1] - t[4 * (i + 1) + 1] : t[4 * (i + 1) + 3] - t[4 * i + 3];
        if (Pc <= 0) continue;
        if (Qc < 0) Qc = 0;
        if (po) opt_atom(&w, Pc, Qc, i);
        double lk = (double)(kmin + (int64_t)i) * h;
        /* upper end gets b = (P_c - e^{l_k} Q_c) / (1 - e^{-h}); clamp rounding */
        double bm = (Pc - exp(lk + log(Qc)) ) / emh;
        if (!(bm >= 0)) bm = 0;
        if (bm > Pc) bm = Pc;
        p[i] += Pc - bm;
        p[i + 1] += bm;
    }
    if (po) {
        opt_atom(&w, t[4 * (n - 1)], t[4 * (n - 1) + 1], n - 1); /* upper tail: above l_top, lowered at the end */
        opt_flush(&w);
        oo->p = po;
        oo->kmin = kmin;
        oo->n = n;
        oo->p_inf = 0;
        oo->p_trunc = 0;
        oo->fp_split = fps;
        oo->steps = steps;
    }
    o->p = p;
    o->kmin = kmin;
    o->n = n;
    o->p_inf = t[4 * (n - 1)];
    o->p_trunc = t[2];
    o->fp_split = fps;
    o->steps = steps;
    dp_free(t);
    return DP_OK;
}

/* log E[e^{lambda L}; L finite] of one step, on a coarsened copy of the pmf: blocks
 * of B points moved to their upper end (lambda > 0) or lower end (lambda < 0), which
 * can only increase the MGF, so the Chernoff bound stays valid for the true pmf. */
static double log_mgf(const steppmf *s, double h, double lam) {
    size_t B = s->n / 262144 + 1;
    double m = -INFINITY, acc = 0; /* running log-sum-exp: sum exp(lb - m), no buffer to allocate */
    size_t nb = (s->n + B - 1) / B;
    for (size_t b = 0; b < nb; b++) {
        double mass = 0;
        size_t i0 = b * B, i1 = i0 + B < s->n ? i0 + B : s->n;
        for (size_t i = i0; i < i1; i++) mass += s->p[i];
        double l = (double)(s->kmin + (int64_t)(lam > 0 ? i1 - 1 : i0)) * h;
        double lb = mass > 0 ? log(mass) + lam * l : -INFINITY;
        if (lb == -INFINITY) continue;
        if (lb > m) { acc = acc * exp(m - lb) + 1.0; m = lb; }
        else acc += exp(lb - m);
    }
    return m == -INFINITY ? -INFINITY : m + log(acc);
}

/* Chernoff window [u_lo, u_hi] (loss units) for the sum with tail <= tau_w on each side; the
 * minimising lambdas are returned so that the final grid can reuse them (any lambda > 0 gives a
 * valid bound P(S > u) <= exp(sum T K(lambda) - lambda u)). */
static void chernoff_window(double *u_lo, double *u_hi, double *lam_lo, double *lam_hi, const steppmf *s, int ns,
                            double h, double tau_w) {
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

/* the composed pmf of one direction on a window */
typedef struct {
    double *p;
    size_t n;
    double l0, p_inf, A, mass_err;
    double fpb; /* floating-point budget in delta (docs §4): FFT + power + split + evaluation */
} composed;

static dp_status compose(composed *out, const steppmf *s, int ns, double h, double tau_w, size_t max_points,
                         double lam_lo, double lam_hi) {
    if (ns == 1 && s[0].steps == 1) { /* nothing to compose: the step pmf itself (exact, no FFT) */
        double *p = dp_malloc(s[0].n * sizeof *p), tot = 0;
        if (!p) return DP_ERR_NOMEM;
        memcpy(p, s[0].p, s[0].n * sizeof *p);
        for (size_t i = 0; i < s[0].n; i++) tot += p[i];
        out->p = p;
        out->n = s[0].n;
        out->l0 = (double)s[0].kmin * h;
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
    double fmin = 0, fmax = 0;
    for (int j = 0; j < ns; j++) {
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
        double c0 = floor(ul / h), c1 = ceil(uh / h);
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
    double *x = fftw_alloc_real(N);
    fftw_complex *X = fftw_alloc_complex(nc), *acc = fftw_alloc_complex(nc);
    double *dY = dp_calloc(nc, sizeof *dY); /* bound on |computed - exact| of the product spectrum */
    if (!x || !X || !acc || !dY) { fftw_free(x); fftw_free(X); fftw_free(acc); dp_free(dY); return dp_error(DP_ERR_NOMEM, "PLD: out of memory (N=%zu)", N); }
    fftw_plan fwd = fftw_plan_dft_r2c_1d((int)N, x, X, FFTW_ESTIMATE);
    fftw_plan bwd = fftw_plan_dft_c2r_1d((int)N, acc, x, FFTW_ESTIMATE);
    for (size_t f = 0; f < nc; f++) { acc[f][0] = 1.0; acc[f][1] = 0.0; }
    /* componentwise FFT error (docs §4): |dX_f| <= eF ||x||_1, eF = 16 u ceil(log2 N) */
    const double u = DBL_EPSILON / 2.0;
    double eF = 16.0 * u * ceil(log2((double)N)), lsplit = 0;
    double log_noinf = 0, base = 0;
    for (int j = 0; j < ns; j++) {
        memset(x, 0, N * sizeof *x);
        memcpy(x, s[j].p, s[j].n * sizeof *x);
        double l1 = 0;
        for (size_t i = 0; i < s[j].n; i++) l1 += fabs(s[j].p[i]);
        fftw_execute(fwd);
        double T = (double)s[j].steps, e = eF * l1 * (1.0 + 2.0 * (double)s[j].n * u);
        for (size_t f = 0; f < nc; f++) {
            double re = X[f][0], im = X[f][1], r2 = re * re + im * im;
            double zr = 0, zi = 0, zabs = 0, ez;
            double rb = sqrt(r2) * (1.0 + 2.0 * u) + e; /* >= |exact X_f| */
            double lrb = T * log(rb);                   /* log of the bound on |exact Z_f| = |X_f|^T */
            if (r2 > 0) {
                double lr = 0.5 * T * log(r2);
                if (lr > -80.0) { /* |z|^T < e^-80: dropped (float-error budget, docs §PLD) */
                    double th = T * atan2(im, re), m = exp(lr);
                    zr = m * cos(th); zi = m * sin(th);
                    zabs = m;
                    ez = m * u * (8.0 + 2.0 * fabs(lr) + 2.0 * fabs(th)); /* rounding of log, products, exp, sincos */
                } else ez = exp(lrb);                                    /* dropped: the whole exact value */
            } else ez = exp(lrb);
            /* perturbation of X^T: T e (|X| + e)^(T-1) */
            ez += T * e * exp(lrb) / rb;
            double ar = acc[f][0], ai = acc[f][1], aabs = sqrt(ar * ar + ai * ai);
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
    dp_free(dY);
    /* ||dy||_1 <= ||dY||_2 (Parseval), inverse transform eF ||Y||_1, division by N and the
     * evaluation sums 2 N u, the split perturbation composed: expm1(sum T log1p(e_split)) */
    double fpb = sqrt(dy2) + (eF + u) * y1 + 2.0 * (double)N * u + expm1(lsplit);
    fftw_execute(bwd);
    double *p = dp_malloc(N * sizeof *p);
    if (!p) { fftw_destroy_plan(fwd); fftw_destroy_plan(bwd); fftw_free(x); fftw_free(X); fftw_free(acc); return DP_ERR_NOMEM; }
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
    fftw_destroy_plan(fwd);
    fftw_destroy_plan(bwd);
    fftw_free(x); fftw_free(X); fftw_free(acc);
    out->p = p;
    out->n = N;
    out->l0 = W0 * h;
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

void acct_pld_default_opts(acct_pld_opts *o) {
    o->h = 0;
    o->upper_only = 0;
    o->max_points = (size_t)1 << 22;
    o->target_points = (size_t)1 << 17;
}

/* largest mean shift of the split per atom: max_u h (1-e^{-u})/(1-e^{-h}) - u */
static double split_mmax(double h) {
    double emh = -expm1(-h), u = log(h / emh);
    return h * (-expm1(-u)) / emh - u;
}

typedef struct {
    lossdef d;
    int64_t steps;
    double lo, hi;
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
        lossdef d = {g->mech, g->q, g->param, dir};
        if (g->mech == ACCT_PURE) { DP_TRY(acct_pure_step_eps(&d.par, g)); d.q = 1.0; }
        sd[n].d = d;
        sd[n].steps = g->steps;
        n++;
    }
    if (g_prec > 0) {
        lossdef d = {ACCT_GAUSSIAN, 1.0, 1.0 / sqrt(g_prec), dir};
        sd[n].d = d;
        sd[n].steps = 1;
        n++;
    }
    *nsd = n;
    return DP_OK;
}

typedef struct {
    composed c[2];  /* pessimistic, per direction */
    composed co[2]; /* optimistic, per direction (p == NULL when only the upper bound was asked) */
    double h;
    double cshift, eta; /* coupling lower bound (fallback): shift c and eta_E + eta_z per direction */
    double eta_e[2];
} pldstate;

static void pldstate_free(pldstate *st) {
    for (int d = 0; d < 2; d++) { dp_free(st->c[d].p); dp_free(st->co[d].p); }
}

static dp_status pld_build(pldstate *st, const acct_schedule *s, double tau_w, const acct_pld_opts *o) {
    memset(st, 0, sizeof *st);
    DP_TRY(acct_schedule_validate(s));
    segdef sd[2][ACCT_MAX_SEGMENTS + 1];
    int nsd[2];
    double Ttot = 0;
    for (int i = 0; i < s->n; i++) Ttot += (double)s->seg[i].steps;
    double tau = tau_w / (4.0 * Ttot); /* per-step tail */
    double maxrange = 0;
    for (int dir = 0; dir < 2; dir++) {
        DP_TRY(build_segs(sd[dir], &nsd[dir], s, dir));
        for (int j = 0; j < nsd[dir]; j++) {
            loss_range(&sd[dir][j].lo, &sd[dir][j].hi, &sd[dir][j].d, tau);
            double r = sd[dir][j].hi - sd[dir][j].lo;
            if (r > maxrange) maxrange = r;
        }
    }
    double h = o->h;
    size_t target = o->target_points ? o->target_points : (size_t)1 << 17;
    double lam_lo[2] = {1, 1}, lam_hi[2] = {1, 1};
    {
        /* pilot: coarse grid, Chernoff window of the composition (lambdas reused on the final
         * grid), then (automatic h) h = width / target */
        double h0 = maxrange / 2048.0, width = 0;
        if (!(h0 > 0)) h0 = 1e-3;
        for (int dir = 0; dir < 2; dir++) {
            steppmf pm[ACCT_MAX_SEGMENTS + 1];
            int ok = 1;
            for (int j = 0; j < nsd[dir]; j++) {
                if (discretise(&pm[j], NULL, &sd[dir][j].d, sd[dir][j].lo, sd[dir][j].hi, h0, sd[dir][j].steps, (size_t)1 << 20) != DP_OK) {
                    for (int k = 0; k < j; k++) dp_free(pm[k].p);
                    ok = 0;
                    break;
                }
            }
            if (!ok) return dp_error_context(DP_ERR_INTERNAL, "PLD pilot grid");
            double fmin = 0, fmax = 0, ul, uh;
            for (int j = 0; j < nsd[dir]; j++) {
                fmin += (double)pm[j].steps * (double)pm[j].kmin * h0;
                fmax += (double)pm[j].steps * (double)(pm[j].kmin + (int64_t)pm[j].n - 1) * h0;
            }
            chernoff_window(&ul, &uh, &lam_lo[dir], &lam_hi[dir], pm, nsd[dir], h0, tau_w);
            if (ul < fmin) ul = fmin;
            if (uh > fmax) uh = fmax;
            if (uh - ul > width) width = uh - ul;
            for (int j = 0; j < nsd[dir]; j++) dp_free(pm[j].p);
        }
        if (h > 0) goto have_h;
        h = width / (double)target;
        double hr = maxrange / (double)(o->max_points / 2);
        if (h < hr) h = hr;
        if (h > 1e-2) h = 1e-2;
        if (h < 1e-7) h = 1e-7;
        /* pure / q = 1 Laplace losses have atoms at +-eps: snap h so that they lie on the grid when
         * their ratios allow it (then no split error at the atoms) */
        int atoms = 1;
        double a0 = 0;
        for (int j = 0; j < nsd[0]; j++) {
            const lossdef *d = &sd[0][j].d;
            if (!(d->mech == ACCT_PURE || (d->mech == ACCT_LAPLACE && d->q >= 1.0))) atoms = 0;
        }
        if (atoms) {
            a0 = INFINITY; /* the smallest atom */
            for (int j = 0; j < nsd[0]; j++) {
                double a = sd[0][j].d.mech == ACCT_PURE ? sd[0][j].d.par : 1.0 / sd[0][j].d.par;
                if (a < a0) a0 = a;
            }
            double hs = a0 / ceil(a0 / h);
            for (int j = 0; j < nsd[0]; j++) {
                const lossdef *d = &sd[0][j].d;
                double a = d->mech == ACCT_PURE ? d->par : 1.0 / d->par, k = a / hs;
                if (fabs(k - floor(k + 0.5)) > 1e-9 * k) atoms = 0;
            }
            if (atoms) h = hs;
        }
    }
have_h:
    st->h = h;
    for (int dir = 0; dir < 2; dir++) {
        steppmf pm[ACCT_MAX_SEGMENTS + 1], pmo[ACCT_MAX_SEGMENTS + 1];
        int opt = !o->upper_only;
        dp_status e = DP_OK;
        int j;
        for (j = 0; j < nsd[dir]; j++) {
            e = discretise(&pm[j], opt ? &pmo[j] : NULL, &sd[dir][j].d, sd[dir][j].lo, sd[dir][j].hi, h,
                           sd[dir][j].steps, o->max_points);
            if (e != DP_OK) break;
        }
        if (e == DP_OK) e = compose(&st->c[dir], pm, nsd[dir], h, tau_w, o->max_points, lam_lo[dir], lam_hi[dir]);
        if (e == DP_OK && opt)
            e = compose(&st->co[dir], pmo, nsd[dir], h, tau_w, o->max_points, lam_lo[dir], lam_hi[dir]);
        double eta = 0;
        for (int k = 0; k < j; k++) eta += (double)pm[k].steps * (pm[k].p_inf + pm[k].p_trunc);
        st->eta_e[dir] = eta;
        for (int k = 0; k < j; k++) { dp_free(pm[k].p); if (opt) dp_free(pmo[k].p); }
        if (e != DP_OK) { pldstate_free(st); return e; }
    }
    /* coupling lower bound of the pessimistic pmf (kept as a fallback; the reported lower bound is
     * the larger of the two): shift c = sum T m_max + h sqrt(T log(1/eta_z) / 2), eta_z = 1e-12 */
    double Teff = 0, eta_z = 1e-12;
    for (int j = 0; j < nsd[0]; j++) Teff += (double)sd[0][j].steps;
    st->cshift = Teff * split_mmax(h) + h * sqrt(Teff * log(1.0 / eta_z) / 2.0);
    st->eta = eta_z;
    return DP_OK;
}

/* Add/remove: both directions are composed and the worse one is reported; fold one
 * direction's bounds (up, lo), fp-widened bounds (upr, lor) and diagnostics into r. */
static void pld_result_worse(acct_pld_result *r, double up, double lo, double upr, double lor, const composed *c,
                             const composed *co) {
    if (up > r->upper) r->upper = up;
    if (lo > r->lower) r->lower = lo;
    if (upr > r->upper_fp) r->upper_fp = upr;
    if (lor > r->lower_fp) r->lower_fp = lor;
    if (c->fpb > r->fp_budget) r->fp_budget = c->fpb;
    if (co->p && co->fpb > r->fp_budget) r->fp_budget = co->fpb;
    if (c->p_inf + c->A > r->tail_mass) r->tail_mass = c->p_inf + c->A;
    if (c->mass_err > r->mass_error) r->mass_error = c->mass_err;
}

dp_status acct_pld_epsilon(acct_pld_result *r, const acct_schedule *s, double delta, const acct_pld_opts *o) {
    acct_pld_opts d;
    if (!o) { acct_pld_default_opts(&d); o = &d; }
    if (!(delta > 0 && delta < 1)) return dp_error(DP_ERR_INVALID, "delta must be in (0, 1) (got %g)", delta);
    double tau_w = delta * 1e-6 < 1e-20 ? delta * 1e-6 : 1e-20;
    pldstate st;
    DP_TRY(pld_build(&st, s, tau_w, o));
    memset(r, 0, sizeof *r);
    r->h = st.h;
    r->n_fft = st.c[0].n > st.c[1].n ? st.c[0].n : st.c[1].n;
    for (int dir = 0; dir < 2; dir++) {
        composed *c = &st.c[dir];
        double up = delta - c->A > 0 ? acct_pmf_epsilon(c->p, c->n, c->l0, st.h, c->p_inf, delta - c->A) : INFINITY;
        /* with the floating-point budget (docs §4): rigorous */
        double upr = delta - c->A - c->fpb > 0 ? acct_pmf_epsilon(c->p, c->n, c->l0, st.h, c->p_inf, delta - c->A - c->fpb)
                                               : INFINITY;
        if (upr < up) upr = up;
        /* lower: the optimistic composition; its computed delta exceeds the discrete one by at most A */
        const composed *co = &st.co[dir];
        double lo = co->p ? acct_pmf_epsilon(co->p, co->n, co->l0, st.h, co->p_inf, delta + co->A) : 0;
        /* fallback: the coupling bound (larger only when the optimistic pass loses O(h) per step at
         * atoms off the grid, e.g. subsampled Laplace) */
        double lc = acct_pmf_epsilon(c->p, c->n, c->l0, st.h, c->p_inf, delta + c->A + st.eta_e[dir] + st.eta) - st.cshift;
        if (co->p && lc > lo) lo = lc;
        if (!(lo > 0)) lo = 0;
        if (lo > up) lo = up; /* equal up to rounding (atoms on the grid: both discretisations exact) */
        double lor = co->p ? acct_pmf_epsilon(co->p, co->n, co->l0, st.h, co->p_inf, delta + co->A + co->fpb) : 0;
        double lcr = acct_pmf_epsilon(c->p, c->n, c->l0, st.h, c->p_inf, delta + c->A + c->fpb + st.eta_e[dir] + st.eta) - st.cshift;
        if (co->p && lcr > lor) lor = lcr;
        if (!(lor > 0)) lor = 0;
        if (lor > lo) lor = lo;
        pld_result_worse(r, up, lo, upr, lor, c, co);
    }
    pldstate_free(&st);
    return DP_OK;
}

dp_status acct_pld_delta(acct_pld_result *r, const acct_schedule *s, double eps, const acct_pld_opts *o) {
    acct_pld_opts d;
    if (!o) { acct_pld_default_opts(&d); o = &d; }
    if (!(eps >= 0) || !isfinite(eps)) return dp_error(DP_ERR_INVALID, "epsilon must be >= 0 and finite (got %g)", eps);
    pldstate st;
    DP_TRY(pld_build(&st, s, 1e-20, o));
    memset(r, 0, sizeof *r);
    r->h = st.h;
    r->n_fft = st.c[0].n > st.c[1].n ? st.c[0].n : st.c[1].n;
    for (int dir = 0; dir < 2; dir++) {
        composed *c = &st.c[dir];
        double up = acct_pmf_delta(c->p, c->n, c->l0, st.h, c->p_inf, eps) + c->A;
        const composed *co = &st.co[dir];
        double lo = co->p ? acct_pmf_delta(co->p, co->n, co->l0, st.h, co->p_inf, eps) - co->A : 0;
        double lc = acct_pmf_delta(c->p, c->n, c->l0, st.h, c->p_inf, eps + st.cshift) - c->A - st.eta_e[dir] - st.eta;
        if (co->p && lc > lo) lo = lc;
        if (up > 1) up = 1;
        if (!(lo > 0)) lo = 0;
        if (lo > up) lo = up;
        double upr = up + c->fpb > 1 ? 1 : up + c->fpb;
        double lor = lo - (co->p ? co->fpb : c->fpb);
        if (!(lor > 0)) lor = 0;
        pld_result_worse(r, up, lo, upr, lor, c, co);
    }
    pldstate_free(&st);
    return DP_OK;
}

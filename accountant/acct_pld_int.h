/* accountant/acct_pld_int.h — the PLD accountant's internals shared by its two files:
 * acct_pld.c (one step's loss on the grid: tails, the pessimistic and optimistic
 * discretisations; the FFT composition of the steps) and acct_pld_grid.c (the grid choice, the
 * driver and the epsilon / delta queries). docs/accounting.md §4. */
#ifndef ACCT_PLD_INT_H
#define ACCT_PLD_INT_H

#include <fftw3.h>
#include <stddef.h>
#include <stdint.h>

#include "accountant/acct.h"

/* One step's pair (P, Q) in one direction: remove (dir 0: P = mixture, Q = base) or add (dir 1). */
typedef struct {
    acct_mech mech;
    double q, par; /* par: sigma, b, or the (amplified) pure epsilon */
    int dir;       /* 0 remove, 1 add */
    double bot, top; /* the remove direction's atom losses (Laplace, pure; 0 for the Gaussian): the
                      * tails compare with these exact doubles, so an atom's side is never rounding's */
} acct_lossdef;
acct_lossdef acct_pld_lossdef(acct_mech mech, double q, double par, int dir);

/* Per-step loss range [lo, hi] with P(L <= lo) <= tau and P(L > hi) <= tau (bisection). */
void acct_pld_loss_range(double *lo, double *hi, const acct_lossdef *d, double tau);

/* The losses of the atoms of a step (remove or add direction): the subsampled Laplace's two
 * saturation atoms, the pure / q = 1 Laplace atoms +-e; returns their count (0: no atom). */
int acct_pld_atoms(double out[2], const acct_lossdef *d);
/* The same with the atoms' P-masses. */
int acct_pld_atoms_mass(double loss[2], double P[2], const acct_lossdef *d);

/* One step's pmf on the grid l_i = (kmin + i + phi) h, i < n. */
typedef struct {
    double *p;        /* [n] masses */
    int64_t kmin;
    double phi;       /* grid offset in cells, in [0, 1) (atoms placed on grid points) */
    size_t n;
    double p_inf;     /* mass at +infinity per step */
    double p_trunc;   /* mass moved up from below l_kmin per step */
    double fp_split;  /* per-step float budget of the split (delta units, docs §4 "Floating-point budget") */
    int64_t steps;
} acct_steppmf;

/* The pessimistic ("connect the dots") pmf of one step into *o and, when oo != NULL, the
 * optimistic garbling into *oo, on the grid (k + phi) h covering [lo, hi]. eta > 0: where the
 * P-mass beyond a point is at most eta, cells of ACCT_PLD_COARSE points (raised whole in *o,
 * lowered whole in *oo: both bounds stay bounds, docs §4 "Coarse tails"). */
#define ACCT_PLD_COARSE 16
dp_status acct_pld_discretise(acct_steppmf *o, acct_steppmf *oo, const acct_lossdef *d, double lo, double hi,
                              double h, double phi, int64_t steps, size_t max_points, double eta);

/* Chernoff window [u_lo, u_hi] (loss units) of the sum of the segments' steps with tail <= tau_w
 * on each side, the minimising lambdas (reused on the final grid). */
void acct_pld_chernoff_window(double *u_lo, double *u_hi, double *lam_lo, double *lam_hi, const acct_steppmf *s,
                              int ns, double h, double tau_w);

/* FFT buffers (grown as needed) and the plans of the last ACCT_PLD_PLANS lengths, executed on the
 * buffers through FFTW's new-array interface (acct_pld.c). */
#define ACCT_PLD_PLANS 8
typedef struct {
    size_t N;
    fftw_plan fwd, bwd;
    unsigned long used; /* last use (LRU) */
} acct_pldplan;
typedef struct {
    size_t cap; /* buffer capacity in points */
    double *x;
    fftw_complex *X, *acc;
    double *dY; /* bound on |computed - exact| of the product spectrum */
    acct_pldplan plan[ACCT_PLD_PLANS];
    unsigned long clock;
    const acct_pldplan *cur; /* the plans of the composition in progress */
} acct_pldfft;

/* The composed pmf of one direction on a window: p[i] at l0 + i h. */
typedef struct {
    double *p;
    size_t n;
    double l0, p_inf, A, mass_err;
    double fpb; /* floating-point budget in delta (docs §4): FFT + power + split + evaluation */
} acct_composed;

/* Composes the segments' step pmfs (each `steps` times) by FFT; fw is the call's FFT workspace
 * (acct_pld_fft_acquire / _release). */
dp_status acct_pld_compose(acct_composed *out, acct_pldfft *fw, const acct_steppmf *s, int ns, double h,
                           double tau_w, size_t max_points, double lam_lo, double lam_hi);
/* The process-wide FFT workspace (plans and buffers kept between calls: FFTW computes the
 * twiddle factors of every new plan): locked for the call, then released (not freed). */
acct_pldfft *acct_pld_fft_acquire(void);
void acct_pld_fft_release(acct_pldfft *fw);

#endif

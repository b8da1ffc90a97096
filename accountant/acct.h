/* accountant/acct.h — privacy accountants: RDP, PLD, pure DP, GDP, certified
 * (MPFR) RDP, calibration. Definitions and guarantees: docs/accounting.md.
 *
 * Conventions: every mechanism has sensitivity 1 (replace-one adjacency doubles
 * it: sigma and b are halved, epsilon0 is doubled, see acct_schedule_adjacency).
 * A schedule is a list of segments (mechanism, q, parameter, steps) composed in
 * sequence. Add/remove adjacency: both directions are tracked and the worse one
 * is reported. Outputs first, inputs next, sizes last. */
#ifndef ACCT_H
#define ACCT_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "common/status.h"

typedef enum { ACCT_GAUSSIAN = 0, ACCT_LAPLACE = 1, ACCT_PURE = 2 } acct_mech;
typedef enum { ACCT_ADD_REMOVE = 0, ACCT_REPLACE_ONE = 1 } acct_adjacency;

typedef struct {
    acct_mech mech;
    double q;      /* Poisson sampling rate in (0, 1]; 1 = no subsampling          */
    double param;  /* gaussian: noise multiplier sigma; laplace: scale b; pure: epsilon0 */
    int64_t steps; /* >= 1                                                         */
} acct_segment;

#define ACCT_MAX_SEGMENTS 64
typedef struct {
    acct_segment seg[ACCT_MAX_SEGMENTS];
    int n;
} acct_schedule;

const char *acct_mech_name(acct_mech m);
const char *acct_adjacency_name(acct_adjacency a);
/* Validates every field; messages name the field and the segment. */
dp_status acct_schedule_validate(const acct_schedule *s);
/* Replace-one: sensitivity 2 => sigma/2, b/2, 2*epsilon0 (explicit request only). */
void acct_schedule_adjacency(acct_schedule *out, const acct_schedule *in, acct_adjacency adj);
/* Read a schedule from a JSON file: [{"mechanism":"gaussian","q":0.01,"sigma":1.0,"steps":100}, ...]
 * ("scale" for laplace, "epsilon0" for pure). */
dp_status acct_schedule_read_json(acct_schedule *out, const char *path);

/* ------------------------------------------------------------------ RDP ---- */
#define ACCT_MAX_ORDERS 1100
typedef enum { ACCT_GRID_DEFAULT = 0, ACCT_GRID_OPACUS, ACCT_GRID_DPACCOUNTING, ACCT_GRID_TFPRIVACY } acct_grid;
/* Fills orders[] (capacity ACCT_MAX_ORDERS) with a named grid. DEFAULT = dp-accounting's
 * grid (1.1..10.9 step 0.1, 11..63, 128, 256, 512, 1024). */
size_t acct_orders_grid(double *orders, acct_grid g);
dp_status acct_orders_parse(double *orders, size_t *n, const char *spec);

/* RDP of ONE step of a segment at order alpha > 1 (add/remove, the worse
 * direction; for the subsampled Gaussian the remove direction dominates,
 * Mironov-Talwar-Zhang 2019); the subsampled Laplace by quadrature, both directions. */
dp_status acct_rdp_step(double *rdp, const acct_segment *seg, double alpha);
/* log A_alpha of the Poisson-subsampled Gaussian; integer alpha by the binomial
 * sum, fractional alpha by the signed two-sided series (log space). */
double acct_rdp_sgm_log_a(double q, double sigma, double alpha);
double acct_rdp_laplace(double b, double alpha);
/* Poisson-subsampled Laplace, max over the two directions (quadrature, docs/accounting.md §2) */
double acct_rdp_laplace_sub(double q, double b, double alpha); /* NaN when its quadrature needs more panels than: */
#define ACCT_LAPLACE_MAX_PANELS 20000 /* 16 nodes each; then acct_rdp_step uses the RR bound of the amplified eps */
double acct_rdp_rr(double eps0, double alpha);
/* 1 when alpha (alpha - 1) / (2 sigma^2) overflows a double: the Gaussian RDP at that order is
 * then reported as +inf (a correct upper bound; the true value is beyond the double range). */
int acct_sgm_exponent_overflows(double sigma, double alpha);
/* Total RDP of a schedule at each order. */
dp_status acct_rdp_schedule(double *rdp, const acct_schedule *s, const double *orders, size_t n);

typedef enum { ACCT_CONV_BALLE = 0, ACCT_CONV_CLASSIC = 1 } acct_conv;
/* epsilon(delta) = min over orders; *opt_order receives the minimising order. */
double acct_rdp_to_eps(double *opt_order, const double *rdp, const double *orders, size_t n, double delta,
                       acct_conv conv);
double acct_rdp_to_delta(double *opt_order, const double *rdp, const double *orders, size_t n, double eps,
                         acct_conv conv);
dp_status acct_rdp_epsilon(double *eps, double *opt_order, const acct_schedule *s, const double *orders, size_t n,
                           double delta, acct_conv conv);
dp_status acct_rdp_delta(double *delta, double *opt_order, const acct_schedule *s, const double *orders, size_t n,
                         double eps, acct_conv conv);

/* Certified (MPFR, outward rounding): integer orders only (fractional ones are
 * skipped, which can only raise the minimum). The result is a proven upper bound. */
dp_status acct_rdp_epsilon_certified(double *eps, double *opt_order, const acct_schedule *s, const double *orders,
                                     size_t n, double delta);
/* Certified upper bound on the RDP of one step at integer order alpha. */
dp_status acct_rdp_step_certified(double *rdp_up, const acct_segment *seg, int64_t alpha);

/* ------------------------------------------------------------------ PLD ---- */
typedef struct {
    double h;          /* grid spacing of the privacy loss (0 = automatic)         */
    int upper_only;    /* 1: skip the optimistic pass (lower = 0); calibration uses it  */
    size_t max_points; /* FFT size cap (default 1<<22)                              */
    size_t target_points; /* automatic h: composed window / target (default 1<<17) */
} acct_pld_opts;
typedef struct {
    double lower, upper; /* rigorous interval (up to the documented float error): upper from the
                          * pessimistic, lower from the optimistic discretisation */
    double h;            /* grid spacing used                                      */
    size_t n_fft;        /* FFT length                                             */
    double tail_mass;    /* mass sent to +inf / truncated, both directions (max)   */
    double mass_error;   /* |total mass - 1| after composition (max over directions) */
    double fp_budget;    /* floating-point error budget in delta (FFT, power, split, evaluation;
                          * docs/accounting.md §4), max over directions and passes */
    double lower_fp, upper_fp; /* the interval widened by fp_budget (in delta): rigorous, used for
                                * audit verdicts */
} acct_pld_result;
/* Gaussian sigma the PLD accountant accepts (sigma^2 and 1/sigma^2 normal doubles, with room
 * for the loss range); outside it refuses (DP_ERR_NOT_SUPPORTED, the RDP accountant answers). */
#define ACCT_PLD_SIGMA_MIN 1e-150
#define ACCT_PLD_SIGMA_MAX 1e150
void acct_pld_default_opts(acct_pld_opts *o);
/* epsilon interval at delta. */
dp_status acct_pld_epsilon(acct_pld_result *r, const acct_schedule *s, double delta, const acct_pld_opts *o);
/* delta interval at epsilon (lower, upper are deltas). */
dp_status acct_pld_delta(acct_pld_result *r, const acct_schedule *s, double eps, const acct_pld_opts *o);

/* A certified lower bound on the epsilon at delta of any schedule containing seg, from one
 * step alone (accountant/acct_lower.c, docs/accounting.md §8): Gaussian by the event z > 1/2,
 * pure eps0 by randomized response (its model, docs §5); Laplace 0. Never above the truth
 * (margins for floating point); 0 when the step gives nothing at this delta. */
dp_status acct_one_step_lower(double *eps, const acct_segment *seg, double delta);

/* ----------------------------------------------------------- pure / GDP ---- */
/* Per-step pure epsilon of a segment (Laplace: 1/b; pure: epsilon0; amplified by
 * log(1 + q (e^eps - 1)) when q < 1). Gaussian has none (DP_ERR_NOT_SUPPORTED). */
dp_status acct_pure_step_eps(double *eps, const acct_segment *seg);
dp_status acct_pure_basic(double *eps, const acct_schedule *s);
/* Advanced composition (Dwork-Rothblum-Vadhan / Kairouz et al. form), single-segment only. */
dp_status acct_pure_advanced(double *eps, const acct_schedule *s, double delta);
/* Exact optimal composition (randomized response), log space; heterogeneous
 * schedules are supported only with a common per-step epsilon. */
dp_status acct_rr_delta(double *delta, double eps0, int64_t T, double eps);
dp_status acct_rr_epsilon(double *eps, double eps0, int64_t T, double delta);
dp_status acct_pure_exact(double *eps, const acct_schedule *s, double delta);

/* Implementation gap of dpcert's own samplers (docs/accounting.md §8b): the Laplace sampler is
 * bounded at |x| <= 52 ln 2 b, Box-Muller at |z| <= sqrt(2 * 53 ln 2) sigma, so the implemented
 * mechanism has an extra privacy-loss atom at +inf of mass <= delta_impl per step:
 * Laplace q * 0.5 exp(-(52 ln2 - 1/b)), Gaussian q * Q(8.57 - 1/sigma) per coordinate. *total =
 * sum_steps delta_impl (composition adds them), *step_max the largest per-step value. pure: not
 * applicable (DP_ERR_NOT_SUPPORTED when every segment is pure). Floating-point porosity is not covered. */
#define ACCT_LAPLACE_SAMPLER_BOUND (52.0 * 0.69314718055994530942)
#define ACCT_GAUSS_SAMPLER_BOUND 8.5716743486529050 /* sqrt(2 * 53 * ln 2) */
dp_status acct_sampler_delta(double *total, double *step_max, const acct_schedule *s);

/* Analytic Gaussian (Balle-Wang 2018): mu-GDP trade-off, delta(eps) and eps(delta). */
double acct_gdp_delta(double mu, double eps);
double acct_gdp_epsilon(double mu, double delta);
/* GDP/CLT approximation (Bu et al. 2020), LABELLED APPROXIMATE: mu of the schedule. */
dp_status acct_gdp_mu(double *mu, const acct_schedule *s);

/* --------------------------------------------------------- calibration ---- */
typedef enum { ACCT_RDP = 0, ACCT_PLD = 1, ACCT_PURE_ACC = 2, ACCT_GDP = 3 } acct_kind;
/* Smallest sigma (or b, or largest epsilon0 for pure) with eps(sigma) <= target,
 * to relative precision rel_prec: returns sigma_hi with eps(sigma_hi) <= target
 * verified and eps(sigma_hi / (1 + rel_prec)) > target (or the search bound). The
 * parameter of every segment is scaled by the same factor relative to seg[0]. */
#define ACCT_CALIB_MIN_PREC 1e-12 /* finest --precision: well above the double spacing (2.2e-16) */
#define ACCT_CALIB_MAX_ITER 200   /* bisection cap (64 passes suffice from a 1e16 bracket) */
dp_status acct_calibrate(double *param, double *eps_at, const acct_schedule *s, acct_kind kind, double target_eps,
                         double delta, double rel_prec, const double *orders, size_t n_orders);
/* epsilon of a schedule by one accountant (PLD: the upper end). */
dp_status acct_epsilon_by(double *eps, const acct_schedule *s, acct_kind kind, double delta, const double *orders,
                          size_t n_orders);

/* The accountant's JSON number: a real, or the strings "nan", "inf", "-inf" (acct_cmd.c). */
struct json_t;
struct json_t *acct_json_num(double x);
/* Parse a claims file image (CSV or JSON, docs §8) as `audit-accounting` does, without judging
 * the claims: *nclaims rows, *ninvalid of them INVALID. The fuzz target's and corpus replay's entry. */
dp_status acct_claims_parse(int *nclaims, int *ninvalid, const char *buf, size_t len, const char *name);

#endif

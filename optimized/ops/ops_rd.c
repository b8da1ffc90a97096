/* optimized/ops/ops_rd.c — midpoint-radius arithmetic of the operation harness
 * (optimized/ops/ops.h; the rules are derived in docs/tolerances.md "Operation harness").
 *
 * A value is (v, r): v the operation's definition evaluated in double on the rounded
 * inputs, r a bound on |x - v| for the value x any implementation with the declared
 * arithmetic computes. Each rule adds the inputs' radii as propagated by the exact
 * operation (a bound over the whole input intervals, not a first-order estimate) and the
 * rounding of the result: u (|v| + r) for +, -, *, / (u = the declared u_eff plus the
 * reference's 2^-53), plus eta for * and / (underflow: sums of floating-point numbers are
 * exact when they underflow), libm u for an elementary function. A radius that cannot be
 * bounded (a divisor interval containing 0, a logarithm of an interval reaching 0) is +inf. */
#include <math.h>

#include "optimized/ops/ops.h"

opt_rd opt_rd_x(double x) { return (opt_rd){x, 0}; }

/* A radius that reaches past the dtype's largest finite value: an implementation may
 * overflow there, so the value is not bounded (+inf: not compared unless it is NaN/inf). */
static opt_rd bounded(const opt_rd_env *e, double v, double r) {
    if (isnan(r) || fabs(v) + r > e->maxf) r = INFINITY;
    return (opt_rd){v, r};
}
static opt_rd rnd(const opt_rd_env *e, double v, double r, int under) {
    return bounded(e, v, r + e->u * (fabs(v) + r) + (under ? e->eta : 0));
}

opt_rd opt_rd_scalar(const opt_rd_env *e, double x) { return (opt_rd){x, e->scal > 0 ? e->scal * fabs(x) + e->eta : 0}; }
opt_rd opt_rd_in(const opt_rd_env *e, double x) { return (opt_rd){x, e->u_in > 0 ? e->u_in * fabs(x) + e->eta : 0}; }
opt_rd opt_rd_in_rd(const opt_rd_env *e, opt_rd a) {
    return e->u_in > 0 ? (opt_rd){a.v, a.r + e->u_in * (fabs(a.v) + a.r) + e->eta} : a;
}
opt_rd opt_rd_max(opt_rd a, opt_rd b) {
    if (isnan(a.v) || isnan(b.v)) return (opt_rd){NAN, INFINITY};
    return (opt_rd){a.v > b.v ? a.v : b.v, a.r > b.r ? a.r : b.r};
}
opt_rd opt_rd_neg(opt_rd a) { return (opt_rd){-a.v, a.r}; }
opt_rd opt_rd_add(const opt_rd_env *e, opt_rd a, opt_rd b) { return rnd(e, a.v + b.v, a.r + b.r, 0); }
opt_rd opt_rd_sub(const opt_rd_env *e, opt_rd a, opt_rd b) { return rnd(e, a.v - b.v, a.r + b.r, 0); }
opt_rd opt_rd_mul(const opt_rd_env *e, opt_rd a, opt_rd b) {
    /* |(a + s)(b + t) - ab| <= |a| |t| + |b| |s| + |s t| */
    return rnd(e, a.v * b.v, fabs(a.v) * b.r + fabs(b.v) * a.r + a.r * b.r, 1);
}
opt_rd opt_rd_div(const opt_rd_env *e, opt_rd a, opt_rd b) {
    /* |(a + s) / (b + t) - a / b| = |s - (a/b) t| / |b + t| <= (r_a + |a/b| r_b) / (|b| - r_b) */
    double q = a.v / b.v;
    if (!(b.r < fabs(b.v))) return (opt_rd){q, INFINITY};
    return rnd(e, q, (a.r + fabs(q) * b.r) / (fabs(b.v) - b.r), 1);
}

static double gamma_n(double n, double u) { return n * u < 1 ? n * u / (1 - n * u) : INFINITY; }

opt_rd opt_rd_acc(const opt_rd_env *e, opt_rd start, const opt_rd *t, int64_t n) {
    /* Higham eq. 4.4 for any order and tree: |fl(sum) - sum| <= gamma_{m-1} sum |x_i| over
     * the m = n + 1 terms (x_i the implementation's operands: |x_i| <= |v_i| + r_i) */
    double v = start.v, r = start.r, a = fabs(start.v) + start.r;
    for (int64_t i = 0; i < n; i++) {
        v += t[i].v;
        r += t[i].r;
        a += fabs(t[i].v) + t[i].r;
    }
    return bounded(e, v, r + gamma_n((double)n, e->u) * a);
}
opt_rd opt_rd_sum(const opt_rd_env *e, const opt_rd *t, int64_t n) {
    if (n <= 0) return (opt_rd){0, 0};
    return opt_rd_acc(e, t[0], t + 1, n - 1);
}

opt_rd opt_rd_mono(const opt_rd_env *e, double (*f)(double), opt_rd a) {
    double v = f(a.v);
    if (a.r == INFINITY) return (opt_rd){v, INFINITY};
    double lo = f(a.v - a.r), hi = f(a.v + a.r);
    double d = fmax(fabs(lo - v), fabs(hi - v));
    if (isnan(d) || (a.r > 0 && (isnan(lo) || isnan(hi)))) d = INFINITY;
    if (a.r == 0) d = 0;
    return bounded(e, v, d + e->libm * e->u * (fabs(v) + d) + e->eta);
}
opt_rd opt_rd_exp(const opt_rd_env *e, opt_rd a) { return opt_rd_mono(e, exp, a); }
opt_rd opt_rd_log(const opt_rd_env *e, opt_rd a) {
    if (!(a.v - a.r > 0)) return (opt_rd){log(a.v), INFINITY};
    return opt_rd_mono(e, log, a);
}
opt_rd opt_rd_sqrt(const opt_rd_env *e, opt_rd a) {
    if (!(a.v - a.r >= 0)) { /* the lower end below 0: sqrt(max(x, 0)) is still 1/2-Hoelder */
        double v = sqrt(fmax(a.v, 0));
        double d = fmax(v, sqrt(a.v + a.r) - v);
        return (opt_rd){v, d + e->libm * e->u * (v + d) + e->eta};
    }
    return opt_rd_mono(e, sqrt, a);
}
opt_rd opt_rd_tanh(const opt_rd_env *e, opt_rd a) { return opt_rd_mono(e, tanh, a); }
static opt_rd lip1(const opt_rd_env *e, double v, double r) {
    double d = fmin(r, 2.0);
    return (opt_rd){v, d + e->libm * e->u * (fabs(v) + d) + e->eta};
}
opt_rd opt_rd_sin(const opt_rd_env *e, opt_rd a) { return lip1(e, sin(a.v), a.r); }
opt_rd opt_rd_cos(const opt_rd_env *e, opt_rd a) { return lip1(e, cos(a.v), a.r); }
opt_rd opt_rd_sigmoid(const opt_rd_env *e, opt_rd a) {
    opt_rd ex = opt_rd_exp(e, opt_rd_neg(a));
    return opt_rd_div(e, opt_rd_x(1), opt_rd_add(e, opt_rd_x(1), ex));
}
opt_rd opt_rd_max_exact(const opt_rd *t, int64_t n) {
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (t[i].v > m) m = t[i].v;
    return (opt_rd){m, 0};
}
static opt_rd dot_(const opt_rd_env *e, const double *a, int64_t sa, const double *b, int64_t sb, int64_t n, int gemm) {
    double v = 0, r = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        opt_rd p = gemm ? opt_rd_mul(e, opt_rd_in(e, a[i * sa]), opt_rd_in(e, b[i * sb]))
                        : opt_rd_mul(e, opt_rd_x(a[i * sa]), opt_rd_x(b[i * sb]));
        v += p.v;
        r += p.r;
        m += fabs(p.v) + p.r;
    }
    if (n <= 1) return (opt_rd){v, r};
    return bounded(e, v, r + gamma_n((double)(n - 1), e->u) * m);
}
opt_rd opt_rd_dot(const opt_rd_env *e, const double *a, int64_t sa, const double *b, int64_t sb, int64_t n) {
    return dot_(e, a, sa, b, sb, n, 1);
}
opt_rd opt_rd_dot_plain(const opt_rd_env *e, const double *a, int64_t sa, const double *b, int64_t sb, int64_t n) {
    return dot_(e, a, sa, b, sb, n, 0);
}

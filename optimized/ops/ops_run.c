/* optimized/ops/ops_run.c — running one harness sub-case (optimized/ops/ops.h): inputs
 * generated and rounded, buffers uploaded with guard elements, the operation invoked once
 * per run of the determinism check, outputs downloaded and compared with the reference
 * under its radius. Every rank runs the same sequence of calls whatever the outcome, so
 * a failure never leaves a collective waiting. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tensor.h"
#include "common/alloc.h"
#include "optimized/ops/ops.h"

const char *volatile opt_ops_current = NULL;

#define GUARD_BYTE 0xA5

void opt_ops_case_init(opt_ops_case *c, opt_ops_h *h, opt_op op, const char *fmt, ...) {
    memset(c, 0, sizeof *c);
    c->h = h;
    c->op = op;
    c->expect = DP_OK;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->label, sizeof c->label, fmt, ap);
    va_end(ap);
}

double opt_ops_round(const opt_ops_h *h, double x) {
    switch (h->vdtype) {
    case DP_F32: return (double)(float)x;
    case DP_BF16: return (double)dp_bf16_to_f32(dp_f32_to_bf16((float)x));
    case DP_F16: return (double)dp_f16_to_f32(dp_f32_to_f16((float)x));
    default: return x;
    }
}
double opt_ops_draw_normal(opt_ops_h *h) { return dp_rng_gaussian(&h->rng, h->draws++); }
double opt_ops_draw_unit(opt_ops_h *h) { return dp_rng_uniform(&h->rng, h->draws++); }
uint64_t opt_ops_draw_below(opt_ops_h *h, uint64_t n) { return dp_rng_below(&h->rng, h->draws++, n); }

double opt_ops_huge(const opt_ops_h *h) {
    return ldexp(1.0, h->vdtype == DP_F64 ? 500 : h->vdtype == DP_F16 ? 12 : 55);
}

/* smallest positive normal of the value type, times 16 */
static double tiny_scale(const opt_ops_h *h) {
    switch (h->vdtype) {
    case DP_F32: return ldexp(1.0, -126 + 4);
    case DP_BF16: return ldexp(1.0, -126 + 4);
    case DP_F16: return ldexp(1.0, -14 + 4);
    default: return ldexp(1.0, -1022 + 4);
    }
}

static opt_ops_buf *new_buf(opt_ops_case *c, const char *name, opt_ops_role role, int64_t n) {
    if (c->nbuf == OPT_OPS_MAXBUF || n < 0) return NULL;
    opt_ops_buf *b = &c->buf[c->nbuf++];
    memset(b, 0, sizeof *b);
    b->name = name;
    b->role = role;
    b->n = n;
    return b;
}

double *opt_ops_buf_f(opt_ops_case *c, const char *name, opt_ops_role role, int64_t n, opt_ops_fill fill, double scale) {
    opt_ops_buf *b = new_buf(c, name, role, n);
    if (!b || !(b->host = dp_calloc((size_t)n + 1, sizeof(double)))) return NULL;
    opt_ops_h *h = c->h;
    for (int64_t i = 0; i < n; i++) {
        double x = 0;
        switch (fill) {
        case OPT_FILL_NORMAL: x = opt_ops_draw_normal(h) * scale; break;
        case OPT_FILL_POS: x = fabs(opt_ops_draw_normal(h)) * scale + scale / 16; break;
        case OPT_FILL_ZERO: x = 0; break;
        case OPT_FILL_POISON: x = NAN; break;
        case OPT_FILL_UNIT: x = (2 * opt_ops_draw_unit(h) - 1) * scale; break;
        case OPT_FILL_TINY: x = opt_ops_draw_normal(h) * tiny_scale(h); break;
        case OPT_FILL_SPECIAL: {
            static const double sp[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
            uint64_t k = opt_ops_draw_below(h, 4);
            x = k == 0 ? sp[opt_ops_draw_below(h, 5)] : opt_ops_draw_normal(h) * scale;
            break;
        }
        }
        b->host[i] = opt_ops_round(h, x);
    }
    return b->host;
}

int32_t *opt_ops_buf_i(opt_ops_case *c, const char *name, int64_t n) {
    opt_ops_buf *b = new_buf(c, name, OPT_OPS_IN, n);
    if (!b || !(b->ihost = dp_calloc((size_t)n + 1, sizeof(int32_t)))) return NULL;
    b->is_int = 1;
    return b->ihost;
}

int opt_ops_has(const opt_ops_h *h, opt_op op) { return opt_backend_supports(h->be, op); }

static void res_fail(opt_ops_h *h, opt_op op, const char *msg) {
    opt_ops_result *r = &h->res[op];
    if (!r->failed) snprintf(r->detail, sizeof r->detail, "%s", msg);
    r->failed = 1;
}

void opt_ops_fail(opt_ops_h *h, opt_op op, const char *fmt, ...) {
    char m[480];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m, sizeof m, fmt, ap);
    va_end(ap);
    res_fail(h, op, m);
}

void opt_ops_pass(opt_ops_h *h, opt_op op) { h->res[op].nchecked++; }

/* ---- memory: the backend's operations, or host memory directly (DPCERT_MEMORY_HOST
 * backends that leave them NULL) ---- */
static dp_status mem_alloc(const opt_ops_h *h, opt_backend *be, void **p, size_t bytes) {
    if (h->own_mem) return OPS_CALL(be, alloc, p, bytes);
    *p = dp_calloc(1, bytes ? bytes : 1);
    return *p ? DP_OK : dp_error(DP_ERR_NOMEM, "ops: out of memory");
}
static void mem_free(const opt_ops_h *h, opt_backend *be, void *p) {
    if (h->own_mem) OPS_CALL(be, free, p);
    else dp_free(p);
}
static dp_status mem_put(const opt_ops_h *h, opt_backend *be, void *dst, const void *src, size_t bytes) {
    if (h->own_mem) return OPS_CALL(be, to_device, dst, src, bytes);
    memcpy(dst, src, bytes);
    return DP_OK;
}
static dp_status mem_get(const opt_ops_h *h, opt_backend *be, void *dst, const void *src, size_t bytes) {
    if (h->own_mem) return OPS_CALL(be, to_host, dst, src, bytes);
    memcpy(dst, src, bytes);
    return DP_OK;
}

dp_status opt_ops_dev_put(const opt_ops_h *h, void **dev, const void *host, size_t nbytes) {
    *dev = NULL;
    DP_TRY(mem_alloc(h, h->be, dev, nbytes));
    if (host && nbytes) {
        dp_status st = mem_put(h, h->be, *dev, host, nbytes);
        if (st != DP_OK) { mem_free(h, h->be, *dev); *dev = NULL; return st; }
    }
    return DP_OK;
}
dp_status opt_ops_dev_get(const opt_ops_h *h, void *host, const void *dev, size_t nbytes) {
    return nbytes ? mem_get(h, h->be, host, dev, nbytes) : DP_OK;
}
void opt_ops_dev_free(const opt_ops_h *h, void *dev) {
    if (dev) mem_free(h, h->be, dev);
}

static size_t buf_esize(const opt_ops_h *h, const opt_ops_buf *b) { return b->is_int ? 4 : dp_dtype_size(h->dtype); }

/* host bytes of b: its values in the dtype, then the guard */
static unsigned char *buf_bytes(const opt_ops_h *h, const opt_ops_buf *b) {
    size_t es = buf_esize(h, b);
    unsigned char *p = dp_malloc(((size_t)b->n + OPT_OPS_GUARD) * es);
    if (!p) return NULL;
    for (int64_t i = 0; i < b->n; i++) {
        if (b->is_int) memcpy(p + i * es, &b->ihost[i], 4);
        else if (h->dtype == DP_F64) memcpy(p + i * es, &b->host[i], 8);
        else { float f = (float)b->host[i]; memcpy(p + i * es, &f, 4); }
    }
    memset(p + (size_t)b->n * es, GUARD_BYTE, OPT_OPS_GUARD * es);
    return p;
}

static double elem(const opt_ops_h *h, const unsigned char *p, int64_t i) {
    if (h->dtype == DP_F64) { double d; memcpy(&d, p + i * 8, 8); return d; }
    float f;
    memcpy(&f, p + i * 4, 4);
    return f;
}

/* One run on backend be into got (outputs and inputs downloaded, n + guard elements). */
static void run_once(opt_ops_case *c, opt_backend *be, unsigned char **got, const char *which) {
    opt_ops_h *h = c->h;
    void *dev[OPT_OPS_MAXBUF] = {0};
    dp_status st = DP_OK;
    for (int i = 0; i < c->nbuf; i++) {
        const opt_ops_buf *b = &c->buf[i];
        size_t bytes = ((size_t)b->n + OPT_OPS_GUARD) * buf_esize(h, b);
        unsigned char *hb = buf_bytes(h, b);
        if (!hb) st = dp_error(DP_ERR_NOMEM, "ops: out of memory");
        if (st == DP_OK) st = mem_alloc(h, be, &dev[i], bytes);
        if (st == DP_OK) st = mem_put(h, be, dev[i], hb, bytes);
        dp_free(hb);
        if (st != DP_OK) {
            opt_ops_fail(h, c->op, "case %s (%s): cannot upload buffer %s: %s", c->label, which, b->name, dp_last_error());
            break;
        }
    }
    dp_status os = DP_ERR_INTERNAL;
    if (st == DP_OK) {
        dp_clear_error();
        opt_ops_current = opt_op_name(c->op);
        os = c->invoke(c, be, dev);
        opt_ops_current = NULL;
        if (os != c->expect) {
            c->bad_status = 1;
            opt_ops_fail(h, c->op, "case %s (%s): returned '%s'%s%s (expected '%s')", c->label, which, dp_status_name(os),
                         dp_last_error()[0] ? ": " : "", dp_last_error(), dp_status_name(c->expect));
        }
    }
    for (int i = 0; i < c->nbuf; i++) {
        const opt_ops_buf *b = &c->buf[i];
        size_t bytes = ((size_t)b->n + OPT_OPS_GUARD) * buf_esize(h, b);
        if (st == DP_OK && dev[i] && (got[i] = dp_malloc(bytes))) {
            dp_status gs = mem_get(h, be, got[i], dev[i], bytes);
            if (gs != DP_OK) {
                opt_ops_fail(h, c->op, "case %s (%s): cannot download %s: %s", c->label, which, b->name, dp_last_error());
                dp_free(got[i]);
                got[i] = NULL;
            }
        }
        if (dev[i]) mem_free(h, be, dev[i]);
    }
}

static int same_elem(const opt_ops_h *h, const opt_ops_buf *b, const unsigned char *x, const unsigned char *y, int64_t i) {
    size_t es = buf_esize(h, b);
    if (memcmp(x + i * es, y + i * es, es) == 0) return 1;
    return !b->is_int && isnan(elem(h, x, i)) && isnan(elem(h, y, i)); /* NaN payloads are not specified */
}

dp_status opt_ops_exec(opt_ops_case *c) {
    opt_ops_h *h = c->h;
    for (int i = 0; i < c->nbuf; i++)
        if (!c->buf[i].host && !c->buf[i].ihost) return dp_error(DP_ERR_NOMEM, "ops: case %s: buffer %d not made", c->label, i);
    h->res[c->op].ncases++;
    static const char *const which[3] = {"run 1", "run 2", "other thread count"};
    int nrun = 1 + (h->det >= DPCERT_DET_RUN_TO_RUN) + (h->det == DPCERT_DET_BITWISE && h->alt);
    for (int k = 0; k < nrun; k++) {
        unsigned char *got[OPT_OPS_MAXBUF] = {0};
        run_once(c, k == 2 ? h->alt : h->be, got, which[k]);
        for (int i = 0; i < c->nbuf; i++) c->buf[i].got[k] = got[i];
    }
    c->ran = 1;
    for (int i = 0; i < c->nbuf; i++) {
        opt_ops_buf *b = &c->buf[i];
        if (!b->got[0]) continue;
        unsigned char *ref = buf_bytes(h, b);
        if (!ref) return dp_error(DP_ERR_NOMEM, "ops: out of memory");
        size_t es = buf_esize(h, b);
        for (int k = 0; k < nrun; k++) {
            if (!b->got[k]) continue;
            if (memcmp(b->got[k] + (size_t)b->n * es, ref + (size_t)b->n * es, OPT_OPS_GUARD * es) != 0)
                opt_ops_fail(h, c->op, "case %s (%s): wrote past the end of %s (%lld elements; guard changed)", c->label,
                             which[k], b->name, (long long)b->n);
            if (b->role == OPT_OPS_IN && memcmp(b->got[k], ref, (size_t)b->n * es) != 0)
                opt_ops_fail(h, c->op, "case %s (%s): changed its input %s", c->label, which[k], b->name);
            if (k > 0 && b->role != OPT_OPS_IN)
                for (int64_t e = 0; e < b->n; e++)
                    if (!same_elem(h, b, b->got[0], b->got[k], e)) {
                        opt_ops_fail(h, c->op, "case %s: determinism: declared %s, but %s[%lld] = %.17g on run 1 and "
                                     "%.17g on %s", c->label, opt_decl_det_name(h->det), b->name, (long long)e,
                                     elem(h, b->got[0], e), elem(h, b->got[k], e), which[k]);
                        break;
                    }
        }
        dp_free(ref);
        if (b->role == OPT_OPS_IN || b->is_int || c->expect != DP_OK) continue;
        if (!(b->val = dp_calloc((size_t)b->n + 1, sizeof(double))) || !(b->ref = dp_calloc((size_t)b->n + 1, sizeof(opt_rd))))
            return dp_error(DP_ERR_NOMEM, "ops: out of memory");
        for (int64_t e = 0; e < b->n; e++) {
            b->val[e] = elem(h, b->got[0], e);
            b->ref[e] = opt_rd_x(b->host[e]);
        }
    }
    return DP_OK;
}

void opt_ops_skip(opt_ops_case *c, const char *fmt, ...) {
    opt_ops_result *r = &c->h->res[c->op];
    r->ncases++;
    r->nskipped++;
    if (!r->detail[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->detail, sizeof r->detail, fmt, ap);
        va_end(ap);
    }
    c->ran = 0;
    opt_ops_finish(c);
}

/* the fraction of the bound used; +inf for a mismatch that no bound covers; NAN: not compared */
static double frac_of(const opt_ops_h *h, double got, opt_rd ref) {
    double v = ref.v, r = ref.r;
    if (isnan(v)) return isnan(got) ? 0 : INFINITY;
    if (isinf(v)) return got == v ? 0 : INFINITY;
    if (isnan(got)) return INFINITY;
    if (isinf(got)) /* overflow is correct only where the interval reaches past the largest finite value */
        return (fabs(v) + r >= h->env.maxf && (got > 0) == (v > 0)) ? 0 : INFINITY;
    if (r == INFINITY) return NAN; /* an intermediate may overflow: not compared */
    double d = fabs(got - v);
    if (d == 0) return 0;
    return r > 0 ? d / r : INFINITY;
}

void opt_ops_finish(opt_ops_case *c) {
    opt_ops_h *h = c->h;
    opt_ops_result *R = &h->res[c->op];
    if (c->ran && c->expect != DP_OK && !c->bad_status) R->nchecked++; /* the refusal was the check */
    for (int i = 0; c->ran && i < c->nbuf; i++) {
        opt_ops_buf *b = &c->buf[i];
        if (!b->val || !b->ref) continue;
        for (int64_t e = 0; e < b->n; e++) {
            double f = frac_of(h, b->val[e], b->ref[e]);
            if (isnan(f)) { R->nunchecked++; continue; }
            R->nchecked++;
            if (f > R->worst) {
                R->worst = f;
                snprintf(R->worst_case, sizeof R->worst_case, "%s, %s[%lld]", c->label, b->name, (long long)e);
            }
            if (f > 1)
                opt_ops_fail(h, c->op, "case %s: %s[%lld] = %.17g, expected %.17g +- %.3g (%s)", c->label, b->name,
                             (long long)e, b->val[e], b->ref[e].v, b->ref[e].r,
                             isinf(f) ? "no bound admits it" : "outside the bound");
        }
    }
    for (int i = 0; i < c->nbuf; i++) {
        opt_ops_buf *b = &c->buf[i];
        dp_free(b->host);
        dp_free(b->ihost);
        for (int k = 0; k < 3; k++) dp_free(b->got[k]);
        dp_free(b->val);
        dp_free(b->ref);
    }
    c->nbuf = 0;
}

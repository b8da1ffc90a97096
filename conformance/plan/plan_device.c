/* conformance/plan/plan_device.c — a device's per-operation costs for `dpcert plan` (docs/plan.md §5):
 * the built-in GPU constants with their sources, the host's calibration (the host backend's own
 * operations timed at the job's shapes, capped), and the device as a JSON file. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fsutil.h"
#include "common/alloc.h"
#include "common/memlimit.h"
#include "conformance/plan/plan.h"
#include "optimized/backend.h"

/* ----------------------------------------------------------------- built-ins ---- */
static void link_set(plan_link *l, const char *name, double bw, double lat) {
    snprintf(l->name, sizeof l->name, "%s", name);
    l->bw = bw;
    l->lat = lat;
}

int plan_device_builtin(plan_device *out, const char *name) {
    memset(out, 0, sizeof *out);
    if (strcmp(name, "h100") == 0 || strcmp(name, "h200") == 0) {
        const int h200 = name[3] == '2';
        snprintf(out->name, sizeof out->name, "%s", h200 ? "H200 SXM (141 GB)" : "H100 SXM (80 GB)");
        snprintf(out->source, sizeof out->source,
                 "planning constants of ../shared/notes/performance-anchors.md §2: 750 TFLOP/s achieved bf16 GEMM "
                 "(MAMF 794.5 measured by stas00/ml-engineering), attention at the same rate (an assumption), "
                 "HBM %s TB/s achieved; NVLink 4: 370 GB/s busBw for ring reduce-scatter/all-gather "
                 "(NVIDIA/nccl-tests#212); capacity %s", h200 ? "4.0 (3.0 x 4.8 / 3.35, unmeasured)" : "3.0",
                 h200 ? "141e9 B" : "80e9 B (the papers' 80 GB)");
        out->flops = out->flops_attn = 750e12;
        out->mem_bw = h200 ? 4.0e12 : 3.0e12;
        out->capacity = h200 ? 141e9 : 80e9;
        link_set(&out->intra, "nvlink", 370e9, 5e-6);
        link_set(&out->inter, "ib", 50e9, 10e-6);
        out->devices_per_node = 8;
        out->ring = 1;
        return 1;
    }
    if (strcmp(name, "a100") == 0) { /* DP-ZeRO's Figure 8 runs: A100 80 GB */
        snprintf(out->name, sizeof out->name, "A100 SXM (80 GB)");
        snprintf(out->source, sizeof out->source,
                 "312 TFLOP/s dense bf16 (NVIDIA A100 datasheet) at the 80 %% of peak that cuBLAS reaches on H100 "
                 "(performance-anchors.md §2: 794.5 / 989), 2.0 TB/s HBM x 84 %% achieved (the H100 copy kernel's "
                 "ratio, vllm PR #48110); NVLink 3 600 GB/s x 0.62 busBw ratio of H100; capacity 80e9 B");
        out->flops = out->flops_attn = 0.8 * 312e12;
        out->mem_bw = 0.84 * 2.0e12;
        out->capacity = 80e9;
        link_set(&out->intra, "nvlink", 0.62 * 300e9, 5e-6);
        link_set(&out->inter, "ib", 25e9, 10e-6);
        out->devices_per_node = 8;
        out->ring = 1;
        return 1;
    }
    if (strcmp(name, "host") == 0) { /* the per-operation costs come from plan_calibrate */
        snprintf(out->name, sizeof out->name, "host (this machine, one rank per core)");
        snprintf(out->source, sizeof out->source, "measured by plan_calibrate for every layout (host backend, one thread)");
        out->measured = 1;
        uint64_t avail = 0;
        if (dp_mem_available(&avail) == DP_OK) out->capacity = (double)avail;
        link_set(&out->intra, "shm", 2e9, 20e-6); /* MPI over shared memory; --link shm:BW overrides */
        link_set(&out->inter, "net", 1e9, 50e-6);
        out->devices_per_node = 1 << 20;
        out->ring = 0;
        out->cores = 2;
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------- calibration ---- */
/* CPU seconds of this thread: the per-operation cost of a dedicated core, whatever else runs */
static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    opt_backend *be;
    void *buf[8];
    int32_t *labels; /* the cross-entropy's labels [rows] (freed with the buffers: a failed op returns early) */
} calib;

/* Before each timed run, the step's working set (its memory projection, at most 64 MiB) is written
 * once: in a step, the rest of the working set passes through the caches between two uses of an
 * operation's operands, which the previous run of the same call would otherwise have left warm. */
static double median5(double *t) {
    for (int i = 1; i < 5; i++)
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) { double x = t[j]; t[j] = t[j - 1]; t[j - 1] = x; }
    return t[2];
}

static unsigned char *g_flush;
static size_t g_flush_bytes;
static void cache_flush(void) {
    if (!g_flush && g_flush_bytes) g_flush = dp_malloc(g_flush_bytes);
    if (g_flush) for (size_t i = 0; i < g_flush_bytes; i += 64) g_flush[i]++;
}

/* the median of 5 runs of one operation, after a warm-up call, each after the working set passed
 * through the caches (the median: the other tenants of a shared machine also pass through the
 * shared cache during a step) */
#define TIME_OP(out, expr)                                                                          \
    do {                                                                                            \
        double ts_[5];                                                                              \
        DP_TRY(expr);                                                                               \
        for (int r_ = 0; r_ < 5; r_++) {                                                            \
            cache_flush();                                                                          \
            double t0_ = now_s();                                                                   \
            DP_TRY(expr);                                                                           \
            ts_[r_] = now_s() - t0_;                                                                \
        }                                                                                           \
        (out) = median5(ts_);                                                                       \
    } while (0)

static dp_status calib_bufs(calib *c, size_t n0, size_t n1, size_t n2, size_t n3) {
    const size_t es = opt_backend_esize(c->be), n[4] = {n0, n1, n2, n3};
    for (int i = 0; i < 4; i++) {
        c->be->ops.free(c->be->ctx, c->buf[i]);
        c->buf[i] = NULL;
        DP_TRY(c->be->ops.alloc(c->be->ctx, &c->buf[i], es * (n[i] > 0 ? n[i] : 1)));
    }
    return DP_OK;
}

static dp_status calib_run(plan_device *dev, calib *c, const plan_job *job, int64_t chunk) {
    const opt_cost_llama *m = &job->model;
    opt_backend *be = c->be;
    void *ctx = be->ctx;
    const int64_t D = m->dim, F = m->ffn, V = m->vocab, H = m->heads, hd = D / H, L = m->layers;
    const int64_t T = job->seq < 256 ? job->seq : 256; /* capped shapes (docs/plan.md §5) */
    const int64_t B = chunk < 1 ? 1 : chunk > 64 ? 64 : chunk, rows = B * T < 2048 ? B * T : 2048;
    const int64_t Dc = D < 512 ? D : 512, Fc = F < 1024 ? F : 1024, Vc = V < 4096 ? V : 4096;
    /* the widest of D and F (F < D is allowed: the buffers hold either as a row), and with V */
    const int64_t Wc = Dc > Fc ? Dc : Fc, VWc = Vc > Wc ? Vc : Wc;
    /* GEMMs of the program: per layer 4 [D, D], 2 [F, D], 1 [D, F], the head [V, D]; each in its
     * three orientations (forward, input gradient, summed weight gradient) */
    {
        const int64_t sh[4][3] = {{Dc, Dc, 4 * L}, {Fc, Dc, 2 * L}, {Dc, Fc, L}, {Vc, Dc, 1}};
        double t = 0, fl = 0;
        DP_TRY(calib_bufs(c, (size_t)(rows * VWc), (size_t)(rows * Wc), (size_t)(VWc * Wc), 1));
        for (int s = 0; s < 4; s++) {
            const int64_t p = sh[s][0], d = sh[s][1];
            double a, b2, w;
            TIME_OP(a, be->ops.gemm(ctx, c->buf[0], c->buf[1], c->buf[2], 0, 1, rows, p, d, 1.0, 0.0, 1, 0, 0, 0));
            TIME_OP(b2, be->ops.gemm(ctx, c->buf[1], c->buf[0], c->buf[2], 0, 0, rows, d, p, 1.0, 0.0, 1, 0, 0, 0));
            TIME_OP(w, be->ops.gemm(ctx, c->buf[2], c->buf[0], c->buf[1], 1, 0, p, d, rows, 1.0, 1.0, 1, 0, 0, 0));
            t += (double)sh[s][2] * (a + b2 + w);
            fl += (double)sh[s][2] * 3.0 * 2.0 * (double)(rows * p * d);
        }
        dev->sec_per_unit[PLAN_OP_GEMM] = t / fl;
    }
    /* per-example GEMMs: batch of examples, [p, d] = G_b^T A_b over T rows */
    {
        const int64_t Bb = B < 8 ? B : 8, sh[3][3] = {{Dc, Dc, 4 * L}, {Fc, Dc, 2 * L}, {Dc, Fc, L}};
        double t = 0, fl = 0;
        DP_TRY(calib_bufs(c, (size_t)(Bb * T * Wc), (size_t)(Bb * T * Wc), (size_t)(Bb * Wc * Wc), 1));
        for (int s = 0; s < 3; s++) {
            const int64_t p = sh[s][0], d = sh[s][1];
            double a;
            TIME_OP(a, be->ops.gemm(ctx, c->buf[2], c->buf[0], c->buf[1], 1, 0, p, d, T, 1.0, 0.0, Bb, T * p, T * d,
                                    p * d));
            t += (double)sh[s][2] * a;
            fl += (double)sh[s][2] * 2.0 * (double)(Bb * T * p * d);
        }
        dev->sec_per_unit[PLAN_OP_BGEMM] = t / fl;
    }
    /* attention: forward + backward of one layer */
    {
        const int64_t Ba = B < 2 ? B : 2, n = Ba * T * D;
        DP_TRY(calib_bufs(c, (size_t)(8 * n), (size_t)(Ba * H * T * T), (size_t)n, 1));
        char *q = c->buf[0];
        const size_t es = opt_backend_esize(be);
        void *k = q + es * (size_t)n, *v = q + 2 * es * (size_t)n, *o = q + 3 * es * (size_t)n;
        void *dq = q + 4 * es * (size_t)n, *dk = q + 5 * es * (size_t)n, *dv = q + 6 * es * (size_t)n;
        double a, b2;
        TIME_OP(a, be->ops.attn_fwd(ctx, o, c->buf[1], q, k, v, Ba, T, H, hd));
        TIME_OP(b2, be->ops.attn_bwd(ctx, dq, dk, dv, c->buf[2], q, k, v, c->buf[1], Ba, T, H, hd));
        dev->sec_per_unit[PLAN_OP_ATTN] = (a + b2) / (12.0 * (double)(Ba * T * T * D));
    }
    /* ghost norms of a [D, D] layer */
    {
        const int64_t Bg = B < 4 ? B : 4;
        DP_TRY(calib_bufs(c, (size_t)(Bg * T * Dc), (size_t)(Bg * T * Dc), (size_t)Bg, 1));
        double a;
        TIME_OP(a, be->ops.ghost_sqnorm(ctx, c->buf[2], c->buf[0], c->buf[1], Bg, T, Dc, Dc));
        dev->sec_per_unit[PLAN_OP_GHOST] = a / (double)(Bg * T * T * (4 * Dc + 1));
    }
    /* elementwise: the program's mix of norms, rope, adds, swiglu and the cross-entropy */
    {
        const int64_t r = rows, Bt = r / T > 0 ? r / T : 1;
        DP_TRY(calib_bufs(c, (size_t)(r * VWc), (size_t)(r * VWc), (size_t)(r * VWc), (size_t)(r * Wc)));
        int32_t *y = c->labels = dp_calloc((size_t)r, sizeof *y);
        if (!y) return DP_ERR_NOMEM;
        double rf, rb, ro, rob, ad, sf, sb, xf, xb;
        TIME_OP(rf, be->ops.rmsnorm_fwd(ctx, c->buf[0], c->buf[3], c->buf[1], c->buf[2], 1e-6, r, Dc));
        TIME_OP(rb, be->ops.rmsnorm_bwd(ctx, c->buf[0], c->buf[3], c->buf[1], c->buf[2], c->buf[3], c->buf[2], r, Dc));
        TIME_OP(ro, be->ops.rope_fwd(ctx, c->buf[0], c->buf[1], 10000.0, Bt, T, H, Dc / H));
        TIME_OP(rob, be->ops.rope_bwd(ctx, c->buf[0], c->buf[1], 10000.0, Bt, T, H, Dc / H));
        TIME_OP(ad, be->ops.add(ctx, c->buf[0], c->buf[1], c->buf[2], r * Dc));
        TIME_OP(sf, be->ops.swiglu_fwd(ctx, c->buf[0], c->buf[1], c->buf[2], r * Fc));
        TIME_OP(sb, be->ops.swiglu_bwd(ctx, c->buf[0], c->buf[1], c->buf[2], c->buf[3], c->buf[1], r * Fc));
        TIME_OP(xf, be->ops.xent_fwd(ctx, c->buf[3], c->buf[0], y, c->buf[2], r, Vc));
        TIME_OP(xb, be->ops.xent_bwd(ctx, c->buf[1], c->buf[0], y, c->buf[2], r, Vc));
        dp_free(y);
        c->labels = NULL;
        const double t = (double)L * (2 * rf + 2 * rb + 2 * ro + 2 * rob + 4 * ad + sf + sb) + rf + rb + xf + xb;
        const double el = (double)r * ((double)L * (12.0 * (double)Dc + 3.0 * (double)Fc) + 4.0 * (double)Dc +
                                       2.0 * (double)Vc);
        dev->sec_per_unit[PLAN_OP_ELEM] = t / el;
    }
    /* per-example parameter-sized passes, noise, the update (+ the host copies of S and Z) */
    {
        const int64_t n = 1 << 16, Bp = B < 8 ? B : 8;
        DP_TRY(calib_bufs(c, (size_t)(Bp * n), (size_t)(2 * n), (size_t)(2 * n), (size_t)(2 * n)));
        double a, b2, nz, ad, dl;
        TIME_OP(a, be->ops.sqnorm_rows(ctx, c->buf[1], c->buf[0], Bp, n));
        TIME_OP(b2, be->ops.clip_accum(ctx, c->buf[1], c->buf[0], c->buf[2], Bp, n));
        dev->sec_per_unit[PLAN_OP_PEELEM] = (a + b2) / (2.0 * (double)(Bp * n));
        dp_noise_key key = {12345};
        TIME_OP(nz, be->ops.noise_add(ctx, c->buf[1], key, 1, 0, 1.0, 0, n));
        dev->sec_per_unit[PLAN_OP_NOISE] = nz / (double)n;
        double *host = dp_malloc(sizeof(double) * (size_t)(2 * n));
        if (!host) return DP_ERR_NOMEM;
        dp_status st = DP_OK;
        ad = dl = INFINITY;
        for (int r = 0; r < 6 && st == DP_OK; r++) {
            cache_flush();
            double t0 = now_s();
            st = be->ops.adamw(ctx, c->buf[1], c->buf[2], c->buf[3], c->buf[0], 1e-3, 0.9, 0.999, 1e-8, 0.0, 1, n);
            double t1 = now_s();
            ad = r > 0 ? fmin(ad, t1 - t0) : ad;
            cache_flush();
            t1 = now_s();
            if (st == DP_OK) st = be->ops.download_f64(ctx, host, c->buf[1], 2 * n);
            if (r > 0) dl = fmin(dl, now_s() - t1); /* run 0: warm-up */
        }
        dp_free(host);
        DP_TRY(st);
        dev->sec_per_unit[PLAN_OP_OPTIM] = (ad + dl) / (3.0 * (double)n); /* n updates + 2 n copies */
    }
    /* fresh zeroed step buffers: a pass arena's 16 buffers allocated, written once and freed, minus
     * the same writes on warm buffers (the median of 5: page faults vary) */
    {
        const size_t nb = (size_t)1 << 20;
        double fresh[5], warm[5];
        void *p[16];
        for (int r = 0; r < 5; r++) {
            double t0 = now_s();
            for (int i = 0; i < 16; i++) {
                p[i] = NULL;
                DP_TRY(be->ops.alloc(ctx, &p[i], nb));
                memset(p[i], 1, nb);
            }
            fresh[r] = now_s() - t0;
            t0 = now_s();
            for (int i = 0; i < 16; i++) memset(p[i], 2, nb);
            warm[r] = now_s() - t0;
            for (int i = 0; i < 16; i++) be->ops.free(ctx, p[i]);
        }
        dev->sec_per_unit[PLAN_OP_ALLOC] = fmax(0.0, median5(fresh) - median5(warm)) / (16.0 * (double)nb);
    }
    return DP_OK;
}

dp_status plan_calibrate(plan_device *dev, const plan_job *job, int64_t chunk, double working_set) {
    opt_backend be;
    memset(&be, 0, sizeof be);
    opt_backend_config bc = {.name = "host", .dtype = job->elem_bytes == 4 ? DP_F32 : DP_F64, .threads = 1,
                             .use_mpi = 0};
    DP_TRY(opt_backend_host_create(&be, &bc));
    calib c = {&be, {0}, NULL};
    g_flush_bytes = working_set > 0 ? (size_t)fmin(working_set, 64.0 * (1 << 20)) : 0;
    dp_status st = calib_run(dev, &c, job, chunk);
    dp_free(g_flush);
    g_flush = NULL;
    for (int i = 0; i < 8; i++)
        if (c.buf[i]) be.ops.free(be.ctx, c.buf[i]);
    dp_free(c.labels);
    if (be.ops.destroy) be.ops.destroy(be.ctx);
    if (st == DP_OK) {
        dev->measured = 1;
        snprintf(dev->source, sizeof dev->source, "measured here by plan_calibrate (host backend %s, one thread, "
                 "shapes of the job capped: T <= 256, rows <= 2048, D <= 512, F <= 1024, V <= 4096; a working set of "
                 "%.3g MB passed through the caches before each run)", job->elem_bytes == 4 ? "f32" : "f64", (double)g_flush_bytes / 1e6);
    }
    return st;
}

/* ------------------------------------------------------------------- files ---- */
dp_status plan_device_write(const plan_device *dev, const char *path) {
    json_t *o = json_object(), *ops = json_object();
    json_object_set_new(o, "name", json_string(dev->name));
    json_object_set_new(o, "source", json_string(dev->source));
    json_object_set_new(o, "measured", json_boolean(dev->measured));
    for (int k = 0; k < PLAN_N_OPS; k++) json_object_set_new(ops, plan_op_name((plan_op)k), json_real(dev->sec_per_unit[k]));
    json_object_set_new(o, "seconds_per_unit", ops);
    json_object_set_new(o, "flops", json_real(dev->flops));
    json_object_set_new(o, "flops_attention", json_real(dev->flops_attn));
    json_object_set_new(o, "memory_bandwidth", json_real(dev->mem_bw));
    json_object_set_new(o, "capacity", json_real(dev->capacity));
    json_object_set_new(o, "intra_bw", json_real(dev->intra.bw));
    json_object_set_new(o, "intra_latency", json_real(dev->intra.lat));
    json_object_set_new(o, "inter_bw", json_real(dev->inter.bw));
    json_object_set_new(o, "inter_latency", json_real(dev->inter.lat));
    json_object_set_new(o, "devices_per_node", json_integer(dev->devices_per_node));
    json_object_set_new(o, "ring", json_boolean(dev->ring));
    json_object_set_new(o, "cores", json_real(dev->cores));
    char *s = json_dumps(o, JSON_INDENT(1) | JSON_REAL_PRECISION(17));
    json_decref(o);
    if (!s) return DP_ERR_NOMEM;
    dp_status st = dp_write_file_atomic("plan device", path, s, strlen(s));
    dp_free(s);
    return st;
}

static dp_status num_field(double *out, json_t *o, const char *key, const char *path, double lo) {
    json_t *v = json_object_get(o, key);
    if (!v || !json_is_number(v))
        return dp_error(DP_ERR_INVALID, "%s: field \"%s\" must be a number", path, key);
    *out = json_number_value(v);
    if (!isfinite(*out) || *out < lo)
        return dp_error(DP_ERR_INVALID, "%s: field \"%s\" must be finite and >= %g (got %g)", path, key, lo, *out);
    return DP_OK;
}

dp_status plan_device_read(plan_device *dev, const char *path) {
    char *buf = NULL;
    size_t len = 0;
    DP_TRY(dp_read_file_max(&buf, &len, "plan device", path, DP_MAX_TEXT_INPUT));
    json_error_t err;
    json_t *o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err);
    dp_free(buf);
    if (!o || !json_is_object(o)) {
        if (o) json_decref(o);
        return dp_error(DP_ERR_INVALID, "%s: not a JSON object (line %d: %s)", path, err.line, err.text);
    }
    static const char *const known[] = {"name", "source", "measured", "seconds_per_unit", "flops", "flops_attention",
                                        "memory_bandwidth", "capacity", "intra_bw", "intra_latency", "inter_bw",
                                        "inter_latency", "devices_per_node", "ring", "cores", NULL};
    memset(dev, 0, sizeof *dev);
    dp_status st = DP_OK;
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        int ok = 0;
        for (int i = 0; known[i]; i++) ok |= strcmp(key, known[i]) == 0;
        if (!ok && st == DP_OK) st = dp_error(DP_ERR_INVALID, "%s: unknown field \"%s\"", path, key);
    }
    json_t *nm = json_object_get(o, "name"), *src = json_object_get(o, "source"), *ms = json_object_get(o, "measured");
    json_t *rg = json_object_get(o, "ring"), *dpn = json_object_get(o, "devices_per_node");
    if (st == DP_OK && (!json_is_string(nm) || !json_is_string(src) || !json_is_boolean(ms) || !json_is_boolean(rg) ||
                        !json_is_integer(dpn) || json_integer_value(dpn) < 1))
        st = dp_error(DP_ERR_INVALID, "%s: name and source must be strings, measured and ring booleans, "
                      "devices_per_node a positive integer", path);
    if (st == DP_OK) {
        snprintf(dev->name, sizeof dev->name, "%s", json_string_value(nm));
        snprintf(dev->source, sizeof dev->source, "%s", json_string_value(src));
        dev->measured = json_is_true(ms);
        dev->ring = json_is_true(rg);
        dev->devices_per_node = json_integer_value(dpn);
    }
    if (st == DP_OK) st = num_field(&dev->flops, o, "flops", path, 0);
    if (st == DP_OK) st = num_field(&dev->flops_attn, o, "flops_attention", path, 0);
    if (st == DP_OK) st = num_field(&dev->mem_bw, o, "memory_bandwidth", path, 0);
    if (st == DP_OK) st = num_field(&dev->capacity, o, "capacity", path, 0);
    if (st == DP_OK) st = num_field(&dev->intra.bw, o, "intra_bw", path, 1);
    if (st == DP_OK) st = num_field(&dev->intra.lat, o, "intra_latency", path, 0);
    if (st == DP_OK) st = num_field(&dev->inter.bw, o, "inter_bw", path, 1);
    if (st == DP_OK) st = num_field(&dev->inter.lat, o, "inter_latency", path, 0);
    if (st == DP_OK) st = num_field(&dev->cores, o, "cores", path, 0);
    json_t *ops = json_object_get(o, "seconds_per_unit");
    if (st == DP_OK && !json_is_object(ops)) st = dp_error(DP_ERR_INVALID, "%s: seconds_per_unit must be an object", path);
    for (int k = 0; st == DP_OK && k < PLAN_N_OPS; k++)
        st = num_field(&dev->sec_per_unit[k], ops, plan_op_name((plan_op)k), path, 0);
    if (st == DP_OK && json_object_size(ops) != PLAN_N_OPS)
        st = dp_error(DP_ERR_INVALID, "%s: seconds_per_unit has %zu entries, the operations are %d", path,
                      json_object_size(ops), PLAN_N_OPS);
    if (st == DP_OK && !dev->measured && !(dev->flops > 0 && dev->flops_attn > 0 && dev->mem_bw > 0))
        st = dp_error(DP_ERR_INVALID, "%s: a roofline device needs flops, flops_attention and memory_bandwidth > 0", path);
    snprintf(dev->intra.name, sizeof dev->intra.name, "intra");
    snprintf(dev->inter.name, sizeof dev->inter.name, "inter");
    json_decref(o);
    return st;
}

/* optimized/bench/bench_gpu_dp.c — the GPU ratios G1-G3 of issue 7, each measured side
 * by side in this process with CUDA events (median of -n timed iterations, default 20, after
 * -w warm-up runs, default 3), printed with the device name. Exits 77 without a GPU.
 * One iteration: one launch sequence of the row's operation (CUDA events around it). Rows
 * (common/bench.h, docs/benchmarks.md): per layer shape the non-DP dW GEMM (the baseline),
 * fused, flat, ghost+bk; then the D2D copy (the baseline) and the noise. After each group its
 * verdict lines ("G1 ... ratio R target <= X MET|NOT MET").
 *
 *   G1  fused per-layer DP weight gradient (bf16 in, f32 out) / cuBLAS non-DP dW GEMM
 *       shapes (d, p) in {4096x4096, 4096x14336, 14336x4096}, B*T = 16384, T in {512, 2048};
 *       target <= 1.30 at T = 512, <= 1.15 at T >= 2048.
 *   G2  flat clipping (mixed: ghost norm if T (p + d) < p d, else per-example norms; then
 *       clip factors + book-keeping reweighted bf16 GEMM + Philox noise) / non-DP dW GEMM;
 *       target <= 1.1 (1 + min(T (p + d) / (p d), 1)); ghost scratch is O(B) (printed).
 *   G3  Philox Gaussian noise added in place to N f32 / device-to-device copy of 4N bytes;
 *       target <= 1.2.
 *   G4  end to end needs the engine's trainer on the cuda backend: not measured here.
 *
 * usage: bench_gpu_dp [-w W] [-n N] [--quick]   (--quick: one shape, T = 512 only, N = 2^26)
 * Reproduce: make BUILD=build-gpu bench-gpu, or build-gpu/bench/optimized_bench_gpu_dp -n 20 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench.h"
#include "common/status.h"
#include "common/test.h"
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/dev/cu_dev.h"

typedef enum { OP_GEMM, OP_FUSED, OP_FLAT, OP_GHOSTBK, OP_NOISE, OP_COPY } op_kind;

typedef struct {
    cu_ctx *ctx;
    int B, T, d, p;
    uint16_t *A, *G, *Gs;  /* bf16 [B*T, d], [B*T, p], scratch [B*T, p] */
    float *tmpf;           /* f32 staging for the bf16 inputs */
    float *grad, *c;       /* [p, d], [B] */
    double *sq;            /* [B] */
    float *buf, *buf2;     /* G3 */
    int64_t n;
    int ghost;             /* G2 norm path */
    const dp_bench_opts *bo; /* -w warm-up runs, -n timed runs */
} bench;

static dp_status run(bench *b, op_kind k) {
    switch (k) {
    case OP_GEMM: /* non-DP dW[p, d] = G^T A over K = B*T rows */
        return cu_gemm_bf16(b->ctx, b->grad, b->G, b->A, 1, 0, 1.0f, 0.0f, b->p, b->d, b->B * b->T);
    case OP_FUSED:
        return cu_dp_fused_wgrad_bf16(b->ctx, b->grad, b->sq, b->A, b->G, 1.0, b->B, b->T, b->d, b->p, 0);
    case OP_FLAT:
        if (b->ghost) DP_TRY(cu_dp_ghost_sqnorm_bf16(b->ctx, b->sq, b->A, b->G, 0, b->B, b->T, b->d, b->p));
        else DP_TRY(cu_dp_fused_wgrad_bf16(b->ctx, b->grad, b->sq, b->A, b->G, 1.0, b->B, b->T, b->d, b->p, 0));
        DP_TRY(cu_dp_clip_factors(b->ctx, b->c, b->sq, 1.0, b->B));
        DP_TRY(cu_dp_bk_wgrad_bf16(b->ctx, b->grad, b->Gs, b->A, b->G, b->c, b->B, b->T, b->d, b->p));
        return cu_dp_noise_add(b->ctx, b->grad, 0x1234, 1, 0, 0, 1.0, (int64_t)b->p * b->d);
    case OP_GHOSTBK: /* per-layer clipping as ghost norm + one reweighted GEMM (no per-example tiles) */
        DP_TRY(cu_dp_ghost_sqnorm_bf16(b->ctx, b->sq, b->A, b->G, 0, b->B, b->T, b->d, b->p));
        DP_TRY(cu_dp_clip_factors(b->ctx, b->c, b->sq, 1.0, b->B));
        return cu_dp_bk_wgrad_bf16(b->ctx, b->grad, b->Gs, b->A, b->G, b->c, b->B, b->T, b->d, b->p);
    case OP_NOISE:
        return cu_dp_noise_add(b->ctx, b->buf, 0x1234, 1, 0, 0, 1.0, b->n);
    case OP_COPY:
        return cu_d2d(b->ctx, b->buf2, b->buf, (size_t)b->n * 4);
    }
    return DP_ERR_INTERNAL;
}

/* the statistics (seconds) of bo->iters timed runs after bo->warmup warm-ups */
static dp_status time_op(dp_bench_stats *stats, bench *b, op_kind k) {
    const int iters = b->bo->iters;
    cu_event *e0 = NULL, *e1 = NULL;
    double *sec = calloc((size_t)iters, sizeof(double));
    dp_status st = sec ? DP_OK : dp_error(DP_ERR_NOMEM, "bench: out of memory");
    if (st == DP_OK) st = cu_event_create(&e0);
    if (st == DP_OK) st = cu_event_create(&e1);
    for (int i = 0; st == DP_OK && i < b->bo->warmup; i++) st = run(b, k);
    if (st == DP_OK) st = cu_sync(b->ctx);
    for (int i = 0; st == DP_OK && i < iters; i++) {
        float ms = 0;
        st = cu_event_record(e0, b->ctx);
        if (st == DP_OK) st = run(b, k);
        if (st == DP_OK) st = cu_event_record(e1, b->ctx);
        if (st == DP_OK) st = cu_event_elapsed_ms(&ms, e0, e1);
        sec[i] = 1e-3 * ms;
    }
    if (st == DP_OK) dp_bench_stats_of(stats, sec, iters);
    cu_event_destroy(e0);
    cu_event_destroy(e1);
    free(sec);
    return st;
}

static dp_status alloc0(cu_ctx *ctx, void **p, size_t bytes) {
    DP_TRY(cu_malloc(p, bytes));
    return cu_memset0(ctx, *p, bytes);
}

/* Inputs: small deterministic values (content does not change the timing). */
static dp_status fill_bf16(cu_ctx *ctx, uint16_t *dst, float *tmpf, int64_t n, float scale) {
    /* a ramp in f32 on the host, converted on the device */
    float *h = malloc((size_t)(n < (1 << 24) ? n : (1 << 24)) * sizeof(float));
    if (!h) return dp_error(DP_ERR_NOMEM, "bench: out of memory");
    for (int64_t o = 0; o < n; o += (1 << 24)) {
        int64_t m = n - o < (1 << 24) ? n - o : (1 << 24);
        for (int64_t i = 0; i < m; i++) h[i] = scale * (float)(((o + i) * 2654435761u) % 1000u) / 1000.0f - 0.5f * scale;
        dp_status st = cu_h2d(ctx, tmpf + o, h, (size_t)m * sizeof(float));
        if (st != DP_OK) { free(h); return st; }
    }
    free(h);
    return cu_f32_to_bf16(ctx, dst, tmpf, n);
}

static int failures = 0;
static void verdict(const char *name, double ratio, double target) {
    int ok = ratio <= target;
    failures += !ok;
    printf("  %-44s ratio %.3f  target <= %.3f  %s\n", name, ratio, target, ok ? "MET" : "NOT MET");
}

static dp_status bench_layer(cu_ctx *ctx, int d, int p, int T, const dp_bench_opts *bo) {
    bench b = {0};
    b.ctx = ctx;
    b.bo = bo;
    b.B = 16384 / T;
    b.T = T; b.d = d; b.p = p;
    int64_t rows = (int64_t)b.B * T;
    dp_status st = DP_OK;
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.A, (size_t)rows * d * 2);
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.G, (size_t)rows * p * 2);
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.Gs, (size_t)rows * p * 2);
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.tmpf, (size_t)rows * (d > p ? d : p) * 4);
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.grad, (size_t)p * d * 4);
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.c, (size_t)b.B * 4);
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.sq, (size_t)b.B * 8);
    if (st == DP_OK) st = fill_bf16(ctx, b.A, b.tmpf, rows * d, 1.0f);
    if (st == DP_OK) st = fill_bf16(ctx, b.G, b.tmpf, rows * p, 0.01f);
    cu_free(b.tmpf);
    b.tmpf = NULL;
    dp_bench_stats s_gemm, s_fused, s_flat, s_gbk;
    b.ghost = (double)T * (p + d) < (double)p * d;
    if (st == DP_OK) st = time_op(&s_gemm, &b, OP_GEMM);
    if (st == DP_OK) st = time_op(&s_fused, &b, OP_FUSED);
    if (st == DP_OK) st = time_op(&s_flat, &b, OP_FLAT);
    if (st == DP_OK) st = time_op(&s_gbk, &b, OP_GHOSTBK);
    if (st == DP_OK) {
        /* milliseconds of the medians, for the lines below */
        const double t_gemm = 1e3 * s_gemm.median, t_fused = 1e3 * s_fused.median, t_flat = 1e3 * s_flat.median,
                     t_gbk = 1e3 * s_gbk.median;
        char row[64];
        snprintf(row, sizeof row, "gemm-%dx%d-T%d", d, p, T);
        dp_bench_row(row, &s_gemm, 0, 1, -1, -1);
        snprintf(row, sizeof row, "fused-%dx%d-T%d", d, p, T);
        dp_bench_row(row, &s_fused, s_gemm.median, 0, -1, -1);
        snprintf(row, sizeof row, "flat-%dx%d-T%d", d, p, T);
        dp_bench_row(row, &s_flat, s_gemm.median, 0, -1, -1);
        snprintf(row, sizeof row, "ghost+bk-%dx%d-T%d", d, p, T);
        dp_bench_row(row, &s_gbk, s_gemm.median, 0, -1, -1);
        double tf = 2.0 * rows * (double)p * d / (t_gemm * 1e-3) / 1e12;
        printf("# layer d=%d p=%d T=%d B=%d: non-DP dW GEMM %.3f ms (%.0f TFLOP/s), fused %.3f ms, flat (%s) %.3f ms\n", d,
               p, T, b.B, t_gemm, tf, t_fused, b.ghost ? "ghost norm" : "per-example norms", t_flat);
        if (b.ghost)
            printf("#   ghost scratch: %lld bytes (B x tile pairs doubles; no T x T Gram in global memory)\n",
                   (long long)(b.B * cu_ghost_npairs_tc(T) * 8));
        char name[96];
        snprintf(name, sizeof name, "G1 fused per-layer %dx%d T=%d", d, p, T);
        verdict(name, t_fused / t_gemm, T >= 2048 ? 1.15 : 1.30);
        printf("#   (per-layer alternative: ghost norm + reweighted GEMM %.3f ms, ratio %.3f)\n", t_gbk, t_gbk / t_gemm);
        double share = (double)T * (p + d) / ((double)p * d);
        snprintf(name, sizeof name, "G2 flat clipping %dx%d T=%d", d, p, T);
        verdict(name, t_flat / t_gemm, 1.1 * (1.0 + (share < 1 ? share : 1)));
    }
    cu_free(b.A); cu_free(b.G); cu_free(b.Gs); cu_free(b.tmpf);
    cu_free(b.grad); cu_free(b.c); cu_free(b.sq);
    return st;
}

static dp_status bench_noise(cu_ctx *ctx, int64_t n, const dp_bench_opts *bo) {
    bench b = {0};
    b.ctx = ctx;
    b.bo = bo;
    b.n = n;
    dp_status st = alloc0(ctx, (void **)&b.buf, (size_t)n * 4);
    if (st == DP_OK) st = alloc0(ctx, (void **)&b.buf2, (size_t)n * 4);
    dp_bench_stats s_noise, s_copy;
    if (st == DP_OK) st = time_op(&s_copy, &b, OP_COPY);
    if (st == DP_OK) st = time_op(&s_noise, &b, OP_NOISE);
    if (st == DP_OK) {
        const double t_noise = 1e3 * s_noise.median, t_copy = 1e3 * s_copy.median;
        char row[64];
        snprintf(row, sizeof row, "copy-N%lld", (long long)n);
        dp_bench_row(row, &s_copy, 0, 1, -1, -1);
        snprintf(row, sizeof row, "noise-N%lld", (long long)n);
        dp_bench_row(row, &s_noise, s_copy.median, 0, -1, -1);
        printf("# noise N=%lld: in-place Philox noise %.3f ms (%.0f GB/s of r+w), D2D copy of %lld bytes %.3f ms (%.0f GB/s)\n",
               (long long)n, t_noise, 8.0 * n / (t_noise * 1e-3) / 1e9, (long long)(4 * n), t_copy,
               8.0 * n / (t_copy * 1e-3) / 1e9);
        verdict("G3 noise / copy", t_noise / t_copy, 1.2);
    }
    cu_free(b.buf); cu_free(b.buf2);
    return st;
}

int main(int argc, char **argv) {
    int quick = 0;
    const dp_bench_flag flags[] = {{"--quick", NULL, &quick}};
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse_flags(&bo, &help, argc, argv, 3, 20, "[--quick]", flags, 1) != DP_OK) {
        fprintf(stderr, "bench_gpu_dp: %s\n", dp_last_error());
        return 2;
    }
    if (help) return 0;
    cu_device_info info;
    if (cu_device_probe(&info, -1) != DP_OK) return t_skip(dp_last_error());
    char dev[320];
    snprintf(dev, sizeof dev, "cuda (%s, cc %d.%d, %d SMs, %.1f GiB, driver %d, runtime %d)", info.name, info.cc_major,
             info.cc_minor, info.sm_count, info.global_mem / 1073741824.0, info.driver_version, info.runtime_version);
    dp_bench_header("bench_gpu_dp", "one launch sequence of the row's operation (CUDA events around it)", dev,
                    "bf16 in, f32 out", 1, 1, &bo);
    cu_ctx *ctx = NULL;
    if (cu_ctx_create(&ctx, info.device) != DP_OK) { fprintf(stderr, "bench_gpu_dp: %s\n", dp_last_error()); return 3; }
    static const int shapes[3][2] = {{4096, 4096}, {4096, 14336}, {14336, 4096}};
    static const int Ts[2] = {512, 2048};
    dp_status st = DP_OK;
    for (int s = 0; st == DP_OK && s < (quick ? 1 : 3); s++)
        for (int t = 0; st == DP_OK && t < (quick ? 1 : 2); t++) st = bench_layer(ctx, shapes[s][0], shapes[s][1], Ts[t], &bo);
    if (st == DP_OK) st = bench_noise(ctx, quick ? ((int64_t)1 << 26) : ((int64_t)1 << 28), &bo);
    printf("  G4 end-to-end llama step: not measured by this program (needs 'dpcert train --backend cuda'; docs/gpu-results.md)\n");
    cu_ctx_destroy(ctx);
    if (st != DP_OK) { fprintf(stderr, "bench_gpu_dp: %s\n", dp_last_error()); return 3; }
    printf("%d ratio(s) not met\n", failures);
    dp_bench_reproduce(argv[0], &bo);
    return 0;
}

/* optimized/tests/test_cuda_host.c — host-side tests of the CUDA backend that run
 * without a GPU (and in the SANITIZE=1 build, where CUDA is not compiled):
 *   - the C API reports "no CUDA device" / "built without CUDA" as a status and
 *     never aborts; argument checks fire before any device work;
 *   - the launch-configuration and tiling arithmetic of cu_plan.h;
 *   - the noise kernel's element mapping (cu_noise.h, the same __host__ __device__
 *     code the kernel runs) against the CPU streams of common/rng.h, bit for bit,
 *     with negative controls (wrong step / lane / offset must differ).
 * On a machine with a GPU the device part checks the probe's fields instead. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/rng.h"
#include "common/test.h"
#include "optimized/backend.h"
#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/cu_noise.h"
#include "optimized/cuda/cu_plan.h"
#include "optimized/cuda/dev/cu_dev.h"

static void test_probe(void) {
    cu_device_info info;
    dp_status st = cu_device_probe(&info, -1);
#ifdef DP_HAVE_CUDA
    if (st == DP_OK) {
        printf("device present: %s (cc %d.%d, %d SMs)\n", info.name, info.cc_major, info.cc_minor, info.sm_count);
        T_CHECK(info.count >= 1 && info.sm_count > 0 && info.global_mem > 0, "device info filled");
        T_CHECK(info.cc_major >= 9, "sm_90 or newer");
        cu_ctx *ctx = NULL;
        T_OK(cu_ctx_create(&ctx, info.device));
        cu_ctx_destroy(ctx);
        /* a device index past the end is a clean invalid-argument error */
        T_CHECK(cu_device_probe(&info, 4096) == DP_ERR_INVALID, "device 4096: %s", dp_last_error());
        return;
    }
    printf("probe: %s (%s)\n", dp_status_name(st), dp_last_error());
    T_CHECK(st == DP_ERR_NOT_SUPPORTED, "no device must be NOT_SUPPORTED, got %s", dp_status_name(st));
    T_CHECK(strstr(dp_last_error(), "no CUDA device") != NULL || strstr(dp_last_error(), "compute capability") != NULL,
            "message names the problem: '%s'", dp_last_error());
#else
    printf("probe: %s (%s)\n", dp_status_name(st), dp_last_error());
    T_CHECK(st == DP_ERR_NOT_SUPPORTED, "stub build must be NOT_SUPPORTED, got %s", dp_status_name(st));
    T_CHECK(strstr(dp_last_error(), "built without CUDA") != NULL, "message: '%s'", dp_last_error());
#endif
    /* context creation fails the same way and leaves *out NULL */
    cu_ctx *ctx = (cu_ctx *)&info; /* poison */
    st = cu_ctx_create(&ctx, -1);
    T_CHECK(st == DP_ERR_NOT_SUPPORTED, "ctx_create without device: %s", dp_status_name(st));
    T_CHECK(ctx == NULL, "ctx left NULL on failure");
    cu_ctx_destroy(NULL); /* harmless */
    int dev = -1;
    st = cu_comm_local_device(&dev);
    T_CHECK(st == DP_ERR_NOT_SUPPORTED, "comm_local_device without device: %s", dp_status_name(st));
}

/* Argument checks run before any device access (ctx is never dereferenced on these paths). */
static void test_arg_checks(void) {
#ifdef DP_HAVE_CUDA
    const dp_status bad = DP_ERR_INVALID;
#else
    const dp_status bad = DP_ERR_NOT_SUPPORTED;
#endif
    cu_ctx *ctx = NULL;
    float x = 0;
    T_CHECK(cu_dp_noise_add(ctx, &x, 1, 0, 1u << 24, 0, 1.0, 1) == bad, "lane 2^24: %s", dp_last_error());
    T_CHECK(cu_dp_noise_add(ctx, &x, 1, 0, 0, 0, NAN, 1) == bad, "NaN std: %s", dp_last_error());
    T_CHECK(cu_dp_noise_add(ctx, &x, 1, 0, 0, 0, -1.0, 1) == bad, "negative std: %s", dp_last_error());
    T_CHECK(cu_dp_noise_add(ctx, &x, 1, 0, 0, 0, 1.0, -5) == bad, "negative n: %s", dp_last_error());
    T_CHECK(cu_dp_noise_scale(ctx, &x, &x, 1, 0, 0, 0, 1.0, INFINITY, 1) == bad, "inf scale: %s", dp_last_error());
    T_CHECK(cu_dp_clip_factors(ctx, &x, NULL, NAN, 1) == bad, "NaN clip: %s", dp_last_error());
    T_CHECK(cu_dp_clip_factors(ctx, &x, NULL, 0.0, 1) == bad, "zero clip: %s", dp_last_error());
    T_CHECK(cu_dp_fused_wgrad_bf16(ctx, &x, NULL, NULL, NULL, -1.0, 1, 1, 1, 1, 0) == bad, "negative clip: %s",
            dp_last_error());
    T_CHECK(cu_dp_fused_wgrad_bf16(ctx, &x, NULL, NULL, NULL, 1.0, 1, 0, 1, 1, 0) == bad, "T = 0: %s", dp_last_error());
    T_CHECK(cu_dp_ghost_sqnorm(ctx, NULL, NULL, NULL, 0, -1, 1, 1, 1) == bad, "B < 0: %s", dp_last_error());
    T_CHECK(cu_gemm_f32(ctx, &x, &x, &x, 0, 0, 1, 0, -1, 1, 1) == bad, "M < 0: %s", dp_last_error());
    T_CHECK(cu_gemm_bf16(ctx, &x, NULL, NULL, 0, 0, 1, 0, 1, 1, 0) == bad, "K = 0: %s", dp_last_error());
    T_CHECK(cu_rope(ctx, &x, 10000.0f, 0, 1, 1, 1, 3) == bad, "odd head dim: %s", dp_last_error());
    T_CHECK(cu_rmsnorm_fwd(ctx, &x, &x, &x, &x, NAN, 1, 1) == bad, "NaN eps: %s", dp_last_error());
}

static void test_plan(void) {
    /* grid: enough blocks to cover n (capped), at least one */
    T_CHECK(cu_grid_1d(0, 1) == 1, "empty grid is 1");
    T_CHECK(cu_grid_1d(1, 1) == 1, "n=1");
    T_CHECK(cu_grid_1d(CU_BLOCK, 1) == 1 && cu_grid_1d(CU_BLOCK + 1, 1) == 2, "block boundary");
    T_CHECK(cu_grid_1d((int64_t)CU_BLOCK * 4 * 10, 4) == 10, "per-thread elements");
    T_CHECK(cu_grid_1d((int64_t)1 << 40, 1) == CU_MAX_GRID, "cap");
    /* sqnorm partial blocks cover n exactly */
    for (int64_t n = 1; n < 5 * CU_SQNORM_CHUNK; n += 997) {
        int64_t nb = cu_sqnorm_nblk(n);
        T_CHECK(nb * CU_SQNORM_CHUNK >= n && (nb - 1) * CU_SQNORM_CHUNK < n, "nblk(%lld) = %lld", (long long)n,
                (long long)nb);
    }
    /* ghost tiles: the upper-triangle enumeration visits each (i <= j) exactly once,
     * in row-major order, and the weights 1 (diagonal) / 2 (off) cover the full T x T. */
    for (int T = 1; T <= 200; T += 7) {
        int64_t nt = cu_ghost_ntile(T), np = cu_ghost_npairs(T);
        T_CHECK(nt * CU_GHOST_TILE >= T && (nt - 1) * CU_GHOST_TILE < T, "ntile(%d)", T);
        int seen[16][16];
        memset(seen, 0, sizeof seen);
        int pi = 0, pj = -1, ok = 1;
        int64_t weight = 0;
        for (int64_t k = 0; k < np; k++) {
            int i, j;
            cu_ghost_pair(k, nt, &i, &j);
            if (i < 0 || j < i || j >= nt || nt > 16) { ok = 0; break; }
            if (!(i > pi || (i == pi && j > pj))) ok = 0; /* strictly increasing row-major */
            pi = i; pj = j;
            seen[i][j]++;
            weight += (i == j ? 1 : 2);
        }
        for (int i = 0; i < nt && i < 16; i++)
            for (int j = i; j < nt && j < 16; j++) ok = ok && seen[i][j] == 1;
        T_CHECK(ok, "ghost pairs for T=%d", T);
        T_CHECK(weight == nt * nt, "weights cover the %lld x %lld tile grid", (long long)nt, (long long)nt);
    }
    T_CHECK(cu_ghost_ntile_tc(150) == 3 && cu_ghost_npairs_tc(150) == 6 && cu_ghost_npairs_tc(64) == 1 &&
                cu_ghost_npairs_tc(2048) == 32 * 33 / 2,
            "tensor-core ghost tiles");
    /* fused chunk: within [1, B], fits the workspace when one example fits */
    T_CHECK(cu_fused_chunk(CU_FUSED_WS_BYTES, 8, 4096, 4096) == 8, "8 x 64 MiB in 1 GiB: %d",
            cu_fused_chunk(CU_FUSED_WS_BYTES, 8, 4096, 4096));
    T_CHECK(cu_fused_chunk(CU_FUSED_WS_BYTES, 8, 4096, 14336) == 4, "4096x14336: %d",
            cu_fused_chunk(CU_FUSED_WS_BYTES, 8, 4096, 14336));
    T_CHECK(cu_fused_chunk(16, 8, 4096, 4096) == 1, "at least one example");
    T_CHECK(cu_fused_chunk(CU_FUSED_WS_BYTES, 3, 2, 2) == 3, "at most B");
    /* noise blocks */
    T_CHECK(cu_noise_nblocks(0, 0) == 0, "empty");
    T_CHECK(cu_noise_nblocks(0, 4) == 2 && cu_noise_nblocks(1, 4) == 3 && cu_noise_nblocks(1, 1) == 1 &&
                cu_noise_nblocks(0, 1) == 1 && cu_noise_nblocks(1, 2) == 2,
            "block counts");
}

/* Emulates the noise kernel launch on the host (every work item u), with the same
 * cu_noise.h functions, and compares with the CPU stream element by element. */
static int emulate_noise(float *x, uint64_t key, uint32_t step, uint32_t lane, uint64_t offset, double std, int64_t n,
                         int *covered) {
    int64_t nbk = cu_noise_nblocks(offset, n);
    for (int64_t u = 0; u < nbk; u++) {
        int64_t k0, k1;
        uint64_t j;
        cu_noise_item(&k0, &k1, &j, offset, n, u);
        double z0, z1;
        cu_noise_pair(&z0, &z1, key, step, lane, j);
        if (k0 >= 0) { x[k0] = cu_noise_apply(x[k0], std, z0); covered[k0]++; }
        if (k1 >= 0) { x[k1] = cu_noise_apply(x[k1], std, z1); covered[k1]++; }
    }
    return 0;
}

static void test_noise_mapping(uint64_t seed) {
    dp_stream data;
    T_OK(dp_stream_public(&data, (dp_seed){seed}, DP_PURPOSE_TEST, 7, 0));
    const uint64_t key = seed ^ 0x5DEECE66DULL; /* a test noise key (never the public seed in real use) */
    enum { NMAX = 301 };
    float x[NMAX], ref[NMAX], base[NMAX];
    int covered[NMAX];
    int mism = 0, cover_bad = 0;
    for (int trial = 0; trial < 60; trial++) {
        uint64_t offset = dp_rng_below(&data, 3 * trial, 1000) + (trial & 1); /* odd and even offsets */
        int64_t n = (int64_t)dp_rng_below(&data, 3 * trial + 1, NMAX);
        uint32_t step = (uint32_t)dp_rng_below(&data, 3 * trial + 2, 100000), lane = (uint32_t)(trial * 977 % (1 << 24));
        double std = 0.5 + trial * 0.25;
        for (int64_t k = 0; k < n; k++) base[k] = x[k] = ref[k] = (float)(dp_rng_uniform(&data, 1000 + k) - 0.5);
        memset(covered, 0, sizeof covered);
        emulate_noise(x, key, step, lane, offset, std, n, covered);
        dp_stream s;
        T_OK(dp_stream_secret(&s, (dp_noise_key){key}, DP_PURPOSE_NOISE, step, lane));
        for (int64_t k = 0; k < n; k++) {
            ref[k] = (float)((double)ref[k] + std * dp_rng_gaussian(&s, offset + (uint64_t)k)); /* the host backend's formula */
            if (memcmp(&ref[k], &x[k], sizeof(float)) != 0) mism++;
            if (covered[k] != 1) cover_bad++;
        }
        /* negative controls: a neighbouring step, lane, or offset must change the values */
        if (n >= 4) {
            float y[NMAX];
            int diff_step = 0, diff_lane = 0, diff_off = 0;
            memcpy(y, base, sizeof(float) * (size_t)n);
            emulate_noise(y, key, step + 1, lane, offset, std, n, covered);
            for (int64_t k = 0; k < n; k++) diff_step += y[k] != x[k];
            memcpy(y, base, sizeof(float) * (size_t)n);
            emulate_noise(y, key, step, lane ^ 1, offset, std, n, covered);
            for (int64_t k = 0; k < n; k++) diff_lane += y[k] != x[k];
            memcpy(y, base, sizeof(float) * (size_t)n);
            emulate_noise(y, key, step, lane, offset + 1, std, n, covered);
            for (int64_t k = 0; k < n; k++) diff_off += y[k] != x[k];
            T_CHECK(diff_step >= n - 1 && diff_lane >= n - 1 && diff_off >= n - 1,
                    "negative controls must differ (step %d, lane %d, offset %d of %lld)", diff_step, diff_lane, diff_off,
                    (long long)n);
        }
    }
    T_CHECK(mism == 0, "%d elements differ from the CPU stream", mism);
    T_CHECK(cover_bad == 0, "%d elements not covered exactly once", cover_bad);
    /* the fused-epilogue form equals (x + std z) * scale with the same z */
    dp_stream s;
    T_OK(dp_stream_secret(&s, (dp_noise_key){key}, DP_PURPOSE_NOISE, 3, 5));
    double z0, z1;
    cu_noise_pair(&z0, &z1, key, 3, 5, 21);
    T_CHECK(z0 == dp_rng_gaussian(&s, 42) && z1 == dp_rng_gaussian(&s, 43), "pair = elements 2j, 2j+1");
    float e = cu_noise_apply_scaled(0.75f, 2.0, z1, 0.125);
    T_CHECK(e == (float)((0.75 + 2.0 * z1) * 0.125), "scaled epilogue");
}

/* The engine's registry: "cuda" (f32 and f64) fails cleanly without a device (or without
 * CUDA in the build), and the adapter object is linked through its strong anchor. */
extern const int cu_backend_linked;
static void test_backend_registry(void) {
    cu_device_info info;
    int have_dev = cu_device_probe(&info, -1) == DP_OK;
#ifdef DP_HAVE_CUDA
    T_CHECK(cu_backend_linked == 1, "adapter object linked");
    T_CHECK(opt_backend_cuda_create != NULL, "hook defined once the adapter is linked");
#else
    T_CHECK(cu_backend_linked == 0, "stub build has no adapter");
#endif
    opt_backend_config cfg = {"cuda", DP_F32, 1, 0};
    opt_backend *be = (opt_backend *)&info; /* poison */
    dp_status st = opt_backend_create(&be, &cfg);
    if (have_dev) {
        T_OK(st);
        if (st == DP_OK) {
            T_CHECK(be->dtype == DP_F32 && be->comm.size == 1 && opt_backend_supports(be, OPT_OP_FUSED_CLIP_ACCUM) &&
                        opt_backend_supports(be, OPT_OP_NOISE_ADD) && opt_backend_supports(be, OPT_OP_GHOST_SQNORM),
                    "cuda backend table");
            opt_backend_destroy(be);
        }
    } else {
        printf("backend cuda: %s (%s)\n", dp_status_name(st), dp_last_error());
        T_CHECK(st == DP_ERR_NOT_SUPPORTED, "no device: NOT_SUPPORTED, got %s", dp_status_name(st));
        T_CHECK(be == NULL, "backend pointer left NULL");
    }
    cfg.dtype = DP_F64;
    be = (opt_backend *)&info;
    st = opt_backend_create(&be, &cfg);
    if (have_dev) {
        T_OK(st);
        if (st == DP_OK) {
            T_CHECK(be->dtype == DP_F64, "f64 cuda backend");
            opt_backend_destroy(be);
        }
    } else {
        T_CHECK(st == DP_ERR_NOT_SUPPORTED && be == NULL, "f64 without device: %s (%s)", dp_status_name(st), dp_last_error());
    }
}

int main(void) {
    uint64_t seed = t_seed(20260521);
    test_probe();
    test_arg_checks();
    test_plan();
    test_noise_mapping(seed);
    test_backend_registry();
    return t_finish();
}

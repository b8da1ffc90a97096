/* optimized/tests/test_host_gemm.c — the host GEMM (optimized/host/host_gemm.h) and the
 * persistent thread pool (host_pool.h).
 *
 * Claim tested: every C element is the textbook loop "acc = 0; for k in order:
 * acc = acc + a*b; C = alpha acc (+ beta C)" bit for bit (exact comparison, NaN compared
 * as NaN), for the AVX2 and the portable micro-kernel, all transposes, alpha/beta (the
 * shapes over 1e6 multiply-adds with alpha = 0.5, beta = 2 only, to keep the test short),
 * shapes that cross every block edge (HG_MR, NR, HG_MC and HG_MC / 2, HG_NC, HG_KC), K = 0, empty
 * outputs, strided batches, the symmetric (Gram) mode, the k-scaled (book-keeping)
 * mode and the triangular mode (absent entries never added), in f64 and f32; and the backend ops that run on it (gemm, ghost_sqnorm,
 * bk_gemm, fused_clip_accum, fused_sqnorm, attention, noise_add) give the same bits
 * with 1, 2 and 4 threads, and the same bits as their documented loops (docs/engine.md §2).
 * Negative controls (must differ, or the exact checks could not see an order change):
 * the same sums with k reversed, and with fused multiply-adds, differ from the
 * documented order on these inputs. */
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/philox.h"
#include "common/test.h"
#include "optimized/backend.h"
#include "optimized/tests/opt_test_buf.h"
#include "optimized/host/host_gemm.h"
#include "optimized/host/host_pool.h"
#include "optimized/train.h"

static uint64_t g_seed;
static double urand(uint64_t i) { return 2.0 * dp_stream_uniform(g_seed, DP_PURPOSE_TEST, 11, 0, i) - 1.0; }

/* x and y are the same value: equal bits, or both NaN (NaN payloads are not specified) */
static int same_d(double x, double y) { return memcmp(&x, &y, sizeof x) == 0 || (isnan(x) && isnan(y)); }
static int same_f(float x, float y) { return memcmp(&x, &y, sizeof x) == 0 || (isnan(x) && isnan(y)); }

/* The documented loop, per type. op(A)[i,k], op(B)[k,j] as in host_gemm.h. */
#define NAIVE(R, SFX)                                                                                          \
    static void naive_##SFX(R *C, const R *A, const R *B, int ta, int tb, int64_t M, int64_t N, int64_t K,       \
                            R alpha, R beta, int64_t batch, int64_t sA, int64_t sB, int64_t sC, const R *ks,    \
                            int64_t kdiv, int reverse) {                                                        \
        for (int64_t b = 0; b < batch; b++)                                                                     \
            for (int64_t i = 0; i < M; i++)                                                                     \
                for (int64_t j = 0; j < N; j++) {                                                               \
                    R acc = 0;                                                                                  \
                    for (int64_t kk = 0; kk < K; kk++) {                                                        \
                        int64_t k = reverse ? K - 1 - kk : kk;                                                  \
                        R a = ta ? A[b * sA + k * M + i] : A[b * sA + i * K + k];                               \
                        if (ks) a = ks[k / kdiv] * a;                                                           \
                        R bb = tb ? B[b * sB + j * K + k] : B[b * sB + k * N + j];                              \
                        R prod = a * bb;                                                                        \
                        acc = acc + prod;                                                                       \
                    }                                                                                           \
                    R v = alpha * acc;                                                                          \
                    R *c = &C[b * sC + i * N + j];                                                              \
                    *c = beta == 0 ? v : v + beta * *c;                                                         \
                }                                                                                               \
    }
NAIVE(double, f64)
NAIVE(float, f32)

/* The ISAs this CPU runs, in order generic, AVX2: 1 or 2 (a note names the kernel
 * left untested) */
static int test_nisa(void) {
    int n = (int)opt_hgemm_isa_best(); /* GENERIC = 1, AVX2 = 2 */
    if (n < 2) printf("note: this CPU (or DPCERT_HOST_ISA=generic) has no AVX2: only the portable kernel is tested\n");
    return n;
}

typedef struct { int64_t M, N, K, batch; } shape;
static const shape k_shapes[] = {
    {1, 1, 1, 1},     {5, 7, 3, 2},    {6, 8, 256, 1},  {7, 17, 257, 1}, {97, 257, 300, 1},
    {13, 40, 0, 2},   {0, 5, 4, 1},    {4, 0, 4, 1},    {96, 256, 512, 1}, {30, 33, 520, 3},
    {25, 65, 13, 2},  {12, 32, 9, 1},  {109, 300, 37, 1}, /* odd edges of every panel */
    {385, 513, 7, 1}, /* >= 8 tiles: full-height macro-tiles (hg_mc) */
};

/* one case of the GEMM API against the naive loop; returns the number of differences */
static int64_t run_case_f64(const shape *s, int ta, int tb, double alpha, double beta, opt_hgemm_isa isa, int sym,
                            int kscale, int specials, uint64_t off) {
    int64_t M = s->M, N = sym ? s->M : s->N, K = s->K, nb = s->batch;
    int64_t sA = M * K + 3, sB = sym ? sA : K * N + 5, sC = M * N + 7;
    double *A = malloc(sizeof(double) * (size_t)(nb * sA + 1)), *B = malloc(sizeof(double) * (size_t)(nb * sB + 1));
    double *C = malloc(sizeof(double) * (size_t)(nb * sC + 1)), *W = malloc(sizeof(double) * (size_t)(nb * sC + 1));
    double *ks = malloc(sizeof(double) * (size_t)(K + 1));
    for (int64_t i = 0; i < nb * sA; i++) A[i] = urand(off + (uint64_t)i);
    for (int64_t i = 0; i < nb * sB; i++) B[i] = sym ? A[i] : urand(off + 1000000 + (uint64_t)i);
    for (int64_t i = 0; i < nb * sC; i++) C[i] = W[i] = beta == 0 && i % 5 == 0 ? NAN : urand(off + 2000000 + (uint64_t)i);
    for (int64_t i = 0; i < K; i++) ks[i] = urand(off + 3000000 + (uint64_t)i);
    if (specials && nb * sA > 7 && !sym) { A[1] = INFINITY; A[5] = NAN; A[6] = 0.0; B[0] = -INFINITY; }
    opt_hgemm_problem p = {.C = C, .A = A, .B = sym ? A : B, .ta = ta, .tb = sym ? !ta : tb, .M = M, .N = N, .K = K,
                           .alpha = alpha, .beta = beta, .batch = nb, .sA = sA, .sB = sym ? sA : sB, .sC = sC,
                           .kscale = kscale ? ks : NULL, .kdiv = 2, .sym = sym, .isa = isa};
    void *ws = aligned_alloc(64, (opt_hgemm_ws_bytes(sizeof(double)) + 63) / 64 * 64);
    opt_hgemm_run_f64(&p, 0, opt_hgemm_tiles(&p), ws);
    naive_f64(W, A, sym ? A : B, ta, sym ? !ta : tb, M, N, K, alpha, beta, nb, sA, sym ? sA : sB, sC,
              kscale ? ks : NULL, 2, 0);
    int64_t bad = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t i = 0; i < M * N; i++) bad += !same_d(C[b * sC + i], W[b * sC + i]);
    for (int64_t b = 0; b < nb; b++) /* the gaps between batch entries are untouched */
        for (int64_t i = M * N; i < sC && b * sC + i < nb * sC; i++) bad += !same_d(C[b * sC + i], W[b * sC + i]);
    free(A); free(B); free(C); free(W); free(ks); free(ws);
    return bad;
}

static int64_t run_case_f32(const shape *s, int ta, int tb, double alpha, double beta, opt_hgemm_isa isa, int sym,
                            int kscale, uint64_t off) {
    int64_t M = s->M, N = sym ? s->M : s->N, K = s->K, nb = s->batch;
    int64_t sA = M * K + 1, sB = sym ? sA : K * N + 2, sC = M * N + 3;
    float *A = malloc(sizeof(float) * (size_t)(nb * sA + 1)), *B = malloc(sizeof(float) * (size_t)(nb * sB + 1));
    float *C = malloc(sizeof(float) * (size_t)(nb * sC + 1)), *W = malloc(sizeof(float) * (size_t)(nb * sC + 1));
    float *ks = malloc(sizeof(float) * (size_t)(K + 1));
    for (int64_t i = 0; i < nb * sA; i++) A[i] = (float)urand(off + (uint64_t)i);
    for (int64_t i = 0; i < nb * sB; i++) B[i] = sym ? A[i] : (float)urand(off + 1000000 + (uint64_t)i);
    for (int64_t i = 0; i < nb * sC; i++) C[i] = W[i] = (float)urand(off + 2000000 + (uint64_t)i);
    for (int64_t i = 0; i < K; i++) ks[i] = (float)urand(off + 3000000 + (uint64_t)i);
    opt_hgemm_problem p = {.C = C, .A = A, .B = sym ? A : B, .ta = ta, .tb = sym ? !ta : tb, .M = M, .N = N, .K = K,
                           .alpha = alpha, .beta = beta, .batch = nb, .sA = sA, .sB = sym ? sA : sB, .sC = sC,
                           .kscale = kscale ? ks : NULL, .kdiv = 3, .sym = sym, .isa = isa};
    void *ws = aligned_alloc(64, (opt_hgemm_ws_bytes(sizeof(float)) + 63) / 64 * 64);
    opt_hgemm_run_f32(&p, 0, opt_hgemm_tiles(&p), ws);
    naive_f32(W, A, sym ? A : B, ta, sym ? !ta : tb, M, N, K, (float)alpha, (float)beta, nb, sA, sym ? sA : sB, sC,
              kscale ? ks : NULL, 3, 0);
    int64_t bad = 0;
    for (int64_t i = 0; i < nb * sC; i++) bad += !same_f(C[i], W[i]);
    free(A); free(B); free(C); free(W); free(ks); free(ws);
    return bad;
}

static void test_api(void) {
    opt_hgemm_isa isas[2] = {OPT_HGEMM_ISA_GENERIC, OPT_HGEMM_ISA_AVX2};
    int nisa = test_nisa();
    const double ab[3][2] = {{1, 0}, {0.5, 2.0}, {-1.25, 1}};
    uint64_t off = 0;
    for (int is = 0; is < nisa; is++)
        for (size_t s = 0; s < sizeof k_shapes / sizeof k_shapes[0]; s++)
            for (int t = 0; t < 4; t++)
                for (int a = 0; a < 3; a++) {
                    const shape *h = &k_shapes[s];
                    if ((double)h->M * (double)h->N * (double)h->K * (double)h->batch > 1e6 && a != 1) continue;
                    off += 10000000;
                    int ta = t & 1, tb = t >> 1;
                    int64_t bad = run_case_f64(&k_shapes[s], ta, tb, ab[a][0], ab[a][1], isas[is], 0, 0, s == 1, off);
                    T_CHECK(bad == 0, "f64 %s M=%lld N=%lld K=%lld ta=%d tb=%d alpha=%g beta=%g: %lld differ",
                            opt_hgemm_isa_name(isas[is]), (long long)k_shapes[s].M, (long long)k_shapes[s].N,
                            (long long)k_shapes[s].K, ta, tb, ab[a][0], ab[a][1], (long long)bad);
                    bad = run_case_f32(&k_shapes[s], ta, tb, ab[a][0], ab[a][1], isas[is], 0, 0, off);
                    T_CHECK(bad == 0, "f32 %s M=%lld N=%lld K=%lld ta=%d tb=%d: %lld differ", opt_hgemm_isa_name(isas[is]),
                            (long long)k_shapes[s].M, (long long)k_shapes[s].N, (long long)k_shapes[s].K, ta, tb,
                            (long long)bad);
                }
    for (int is = 0; is < nisa; is++)
        for (size_t s = 0; s < sizeof k_shapes / sizeof k_shapes[0]; s++) {
            off += 10000000;
            int64_t b1 = run_case_f64(&k_shapes[s], 0, 0, 1, 0, isas[is], 1, 0, 0, off);
            int64_t b2 = run_case_f64(&k_shapes[s], 1, 0, 1, 1, isas[is], 0, 1, 0, off);
            int64_t b3 = run_case_f32(&k_shapes[s], 0, 0, 1, 0, isas[is], 1, 0, off);
            int64_t b4 = run_case_f32(&k_shapes[s], 1, 0, 1, 1, isas[is], 0, 1, off);
            T_CHECK(b1 == 0 && b2 == 0 && b3 == 0 && b4 == 0, "%s shape %zu: sym f64 %lld, kscale f64 %lld, sym f32 %lld, kscale f32 %lld differ",
                    opt_hgemm_isa_name(isas[is]), s, (long long)b1, (long long)b2, (long long)b3, (long long)b4);
        }
}

/* Triangular mode (host_gemm.h tri): each C[i,j] is the loop over the k of row i's
 * triangle only, in order. The absent entries of A hold NaN and infinities, so a kernel
 * that multiplied them by zero instead of skipping them would differ (negative control:
 * the loop that adds every k with the absent entries set to zero is also checked to
 * differ from the triangular loop on these inputs, through those NaNs). */
#define TRI_CASE(R, SFX, SAME)                                                                                   \
    static void tri_case_##SFX(int64_t M, int64_t N, int ta, opt_hgemm_tri tri, opt_hgemm_isa isa, uint64_t off, \
                               int64_t *bad, int64_t *leak) {                                                    \
        R *A = malloc(sizeof(R) * (size_t)(M * M)), *B = malloc(sizeof(R) * (size_t)(M * N));                     \
        R *C = malloc(sizeof(R) * (size_t)(M * N));                                                              \
        for (int64_t x = 0; x < M * M; x++) {                                                                    \
            int64_t i = ta ? x % M : x / M, k = ta ? x / M : x % M; /* op(A)[i,k] is A[x] */                     \
            int in = tri == OPT_HGEMM_TRI_LOWER ? k <= i : k >= i;                                               \
            A[x] = in ? (R)urand(off + (uint64_t)x) : (x % 3 == 0 ? (R)NAN : x % 3 == 1 ? (R)INFINITY : (R)-INFINITY); \
        }                                                                                                        \
        for (int64_t x = 0; x < M * N; x++) { B[x] = (R)urand(off + 5000000 + (uint64_t)x); C[x] = (R)NAN; }   \
        opt_hgemm_problem p = {.C = C, .A = A, .B = B, .ta = ta, .M = M, .N = N, .K = M, .alpha = 1, .batch = 1,    \
                               .kdiv = 1, .isa = isa, .tri = tri};                                               \
        void *ws = aligned_alloc(64, (opt_hgemm_ws_bytes(sizeof(R)) + 63) / 64 * 64);                          \
        opt_hgemm_run_##SFX(&p, 0, opt_hgemm_tiles(&p), ws);                                                     \
        for (int64_t i = 0; i < M; i++)                                                                          \
            for (int64_t j = 0; j < N; j++) {                                                                    \
                R acc = 0, all = 0;                                                                              \
                for (int64_t k = 0; k < M; k++) {                                                                \
                    R a = ta ? A[k * M + i] : A[i * M + k];                                                      \
                    int in = tri == OPT_HGEMM_TRI_LOWER ? k <= i : k >= i;                                       \
                    if (in) { R prod = a * B[k * N + j]; acc = acc + prod; }                                     \
                    R prod0 = (in ? a : (R)0 * a) * B[k * N + j];                                                \
                    all = all + prod0;                                                                           \
                }                                                                                                \
                *bad += !SAME(acc, C[i * N + j]);                                                                \
                *leak += !SAME(acc, all);                                                                        \
            }                                                                                                    \
        free(A); free(B); free(C); free(ws);                                                                     \
    }
TRI_CASE(double, f64, same_d)
TRI_CASE(float, f32, same_f)

static void test_tri(void) {
    opt_hgemm_isa isas[2] = {OPT_HGEMM_ISA_GENERIC, OPT_HGEMM_ISA_AVX2};
    int nisa = test_nisa();
    const int64_t sizes[][2] = {{1, 1}, {5, 3}, {7, 17}, {37, 8}, {100, 33}, {263, 19}};
    int64_t leak = 0;
    uint64_t off = 500000000;
    for (int is = 0; is < nisa; is++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int t = 0; t < 4; t++) {
                int ta = t & 1;
                opt_hgemm_tri tri = t >> 1 ? OPT_HGEMM_TRI_UPPER : OPT_HGEMM_TRI_LOWER;
                int64_t b64 = 0, b32 = 0;
                off += 1000000;
                tri_case_f64(sizes[s][0], sizes[s][1], ta, tri, isas[is], off, &b64, &leak);
                tri_case_f32(sizes[s][0], sizes[s][1], ta, tri, isas[is], off, &b32, &leak);
                T_CHECK(b64 == 0 && b32 == 0, "tri %s %s M=%lld N=%lld ta=%d: f64 %lld, f32 %lld elements differ",
                        opt_hgemm_isa_name(isas[is]), tri == OPT_HGEMM_TRI_LOWER ? "lower" : "upper",
                        (long long)sizes[s][0], (long long)sizes[s][1], ta, (long long)b64, (long long)b32);
            }
    printf("tri negative control: multiplying the absent entries by zero changes %lld elements\n", (long long)leak);
    T_CHECK(leak > 0, "tri control: zero-multiplied absent entries changed nothing: the check cannot see a leak");
}

/* Row strides (one head's rows of [T, H, hd]): the same bits as dense copies. */
static void test_strided(void) {
    const int64_t M = 37, N = 29, K = 19, lda = 3 * K + 1, ldb = 2 * K + 5, ldc = N + 4;
    double *A = malloc(sizeof(double) * M * lda), *B = malloc(sizeof(double) * N * ldb);
    double *Ad = malloc(sizeof(double) * M * K), *Bd = malloc(sizeof(double) * N * K);
    double *C = malloc(sizeof(double) * M * ldc), *W = malloc(sizeof(double) * M * N);
    for (int64_t i = 0; i < M * lda; i++) A[i] = urand(9000000 + (uint64_t)i);
    for (int64_t i = 0; i < N * ldb; i++) B[i] = urand(9500000 + (uint64_t)i);
    for (int64_t i = 0; i < M; i++) memcpy(Ad + i * K, A + i * lda, sizeof(double) * K);
    for (int64_t i = 0; i < N; i++) memcpy(Bd + i * K, B + i * ldb, sizeof(double) * K);
    for (int64_t i = 0; i < M * ldc; i++) C[i] = -7.0;
    opt_hgemm_problem p = {.C = C, .A = A, .B = B, .ta = 0, .tb = 1, .M = M, .N = N, .K = K, .alpha = 0.3,
                           .batch = 1, .kdiv = 1, .lda = lda, .ldb = ldb, .ldc = ldc};
    void *ws = aligned_alloc(64, (opt_hgemm_ws_bytes(sizeof(double)) + 63) / 64 * 64);
    opt_hgemm_run_f64(&p, 0, opt_hgemm_tiles(&p), ws);
    naive_f64(W, Ad, Bd, 0, 1, M, N, K, 0.3, 0, 1, 0, 0, 0, NULL, 1, 0);
    int64_t bad = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) bad += !same_d(C[i * ldc + j], j < N ? W[i * N + j] : -7.0);
    T_CHECK(bad == 0, "strided gemm: %lld elements differ (or padding overwritten)", (long long)bad);
    free(A); free(B); free(Ad); free(Bd); free(C); free(W); free(ws);
}

/* Negative controls: on the inputs of the big shape, reversing k or fusing the
 * multiply-adds changes some bits, so the exact checks above can see an order change. */
static void test_controls(void) {
    const int64_t M = 97, N = 57, K = 300;
    double *A = malloc(sizeof(double) * M * K), *B = malloc(sizeof(double) * K * N);
    double *C0 = malloc(sizeof(double) * M * N), *C1 = malloc(sizeof(double) * M * N);
    for (int64_t i = 0; i < M * K; i++) A[i] = urand(7000000 + (uint64_t)i);
    for (int64_t i = 0; i < K * N; i++) B[i] = urand(8000000 + (uint64_t)i);
    naive_f64(C0, A, B, 0, 0, M, N, K, 1, 0, 1, 0, 0, 0, NULL, 1, 0);
    naive_f64(C1, A, B, 0, 0, M, N, K, 1, 0, 1, 0, 0, 0, NULL, 1, 1);
    int64_t drev = 0, dfma = 0;
    for (int64_t i = 0; i < M * N; i++) drev += !same_d(C0[i], C1[i]);
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) acc = fma(A[i * K + k], B[k * N + j], acc);
            dfma += !same_d(acc, C0[i * N + j]);
        }
    printf("negative controls: k reversed differs in %lld of %lld elements, FMA in %lld\n", (long long)drev,
           (long long)(M * N), (long long)dfma);
    T_CHECK(drev > 0, "reversed-k control did not change any bit: the exact checks are blind to the order");
    T_CHECK(dfma > 0, "FMA control did not change any bit: the exact checks are blind to contraction");
    free(A); free(B); free(C0); free(C1);
}

/* ---- backend ops across thread counts, and against their documented loops ---- */
static double *rvec(int64_t n, uint64_t off) {
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t i = 0; i < n; i++) v[i] = urand(off + (uint64_t)i);
    return v;
}

enum { O_GEMM, O_GHOST, O_BK, O_FUSED_W, O_FUSED_SQ, O_FUSED_C, O_SQNORM, O_ATTN, O_DQ, O_CLIPACC, O_SWIGLU, O_SWIGLU_DA,
       O_SQROWS, O_NOUT };
static const char *k_out_names[O_NOUT] = {"gemm", "ghost_sqnorm", "bk_gemm", "fused_clip_accum dW",
                                          "fused_clip_accum sq", "fused_clip_accum c", "fused_sqnorm",
                                          "attn_fwd", "attn_bwd dq", "clip_accum", "swiglu_fwd", "swiglu_bwd da",
                                          "sqnorm_rows"};

typedef struct { double *v[O_NOUT]; int64_t n[O_NOUT]; } op_outs;

/* sizes: B examples of T rows, d inputs, p outputs (crossing the GEMM's block edges) */
enum { XB = 5, XT = 37, XD = 70, XP = 101, XH = 2, XHD = 8 };

static void run_ops(op_outs *o, dp_dtype dt, int threads) {
    opt_backend *be = NULL;
    opt_backend_config c = {"host", dt, threads, 0};
    T_OK(opt_backend_create(&be, &c));
    if (!be) return;
    const int64_t M = 131, N = 270, K = 263;
    double *A = rvec(2 * M * K, 1), *Bm = rvec(2 * K * N, 2), *C0 = rvec(2 * M * N, 3);
    double *Aa = rvec(XB * XT * XD, 4), *Gg = rvec(XB * XT * XP, 5), *cf = rvec(XB, 6), *W0 = rvec(XP * XD, 7);
    double *ex = rvec(XB, 8);
    for (int i = 0; i < XB; i++) { cf[i] = fabs(cf[i]); ex[i] = fabs(ex[i]); }
    const int64_t na = XB * XT * XH * XHD;
    double *q = rvec(na, 9), *k = rvec(na, 10), *v = rvec(na, 11), *dout = rvec(na, 12);
    void *dA = up(be, A, 2 * M * K), *dB = up(be, Bm, 2 * K * N), *dC = up(be, C0, 2 * M * N);
    T_OK(be->ops.gemm(be->ctx, dC, dA, dB, 1, 0, M, N, K, 0.75, 0.5, 2, M * K, K * N, M * N));
    o->v[O_GEMM] = down(be, dC, o->n[O_GEMM] = 2 * M * N);
    void *da = up(be, Aa, XB * XT * XD), *dg = up(be, Gg, XB * XT * XP), *dc = up(be, cf, XB), *dex = up(be, ex, XB);
    void *dsq = up(be, NULL, XB), *dW = up(be, W0, XP * XD), *dW2 = up(be, W0, XP * XD);
    void *dsq2 = up(be, NULL, XB), *dcc = up(be, NULL, XB), *dsq3 = up(be, NULL, XB);
    T_OK(be->ops.ghost_sqnorm(be->ctx, dsq, da, dg, XB, XT, XD, XP));
    T_OK(be->ops.bk_gemm(be->ctx, dW, da, dg, dc, XB, XT, XD, XP));
    T_OK(be->ops.fused_clip_accum(be->ctx, dW2, dsq2, dcc, da, dg, dex, 1.5, OPT_CLIP_ABADI, 0.01, XB, XT, XD, XP));
    T_OK(be->ops.fused_sqnorm(be->ctx, dsq3, da, dg, XB, XT, XD, XP));
    o->v[O_GHOST] = down(be, dsq, o->n[O_GHOST] = XB);
    o->v[O_BK] = down(be, dW, o->n[O_BK] = XP * XD);
    o->v[O_FUSED_W] = down(be, dW2, o->n[O_FUSED_W] = XP * XD);
    o->v[O_FUSED_SQ] = down(be, dsq2, o->n[O_FUSED_SQ] = XB);
    o->v[O_FUSED_C] = down(be, dcc, o->n[O_FUSED_C] = XB);
    o->v[O_SQNORM] = down(be, dsq3, o->n[O_SQNORM] = XB);
    void *dq = up(be, q, na), *dk = up(be, k, na), *dv = up(be, v, na), *dout_ = up(be, dout, na);
    void *dout2 = up(be, NULL, na), *dp = up(be, NULL, XB * XH * XT * XT);
    void *gq = up(be, NULL, na), *gk = up(be, NULL, na), *gv = up(be, NULL, na);
    T_OK(be->ops.attn_fwd(be->ctx, dout2, dp, dq, dk, dv, XB, XT, XH, XHD));
    T_OK(be->ops.attn_bwd(be->ctx, gq, gk, gv, dout_, dq, dk, dv, dp, XB, XT, XH, XHD));
    o->v[O_ATTN] = down(be, dout2, o->n[O_ATTN] = na);
    o->v[O_DQ] = down(be, gq, o->n[O_DQ] = na);
    const int64_t nc = 30011; /* clip_accum over several cache blocks; sqnorm_rows over the parallel cut-off */
    double *gs = rvec(XB * nc, 13), *s0 = rvec(nc, 14);
    void *dgs = up(be, gs, XB * nc), *dsum = up(be, s0, nc);
    T_OK(be->ops.clip_accum(be->ctx, dsum, dgs, dc, XB, nc));
    o->v[O_CLIPACC] = down(be, dsum, o->n[O_CLIPACC] = nc);
    if (dt == DP_F64) { /* against sum[j] + c_0 g_0 + c_1 g_1 + ... */
        int64_t bad = 0;
        for (int64_t j = 0; j < nc; j++) {
            double acc = s0[j];
            for (int64_t b = 0; b < XB; b++) acc += cf[b] * gs[b * nc + j];
            bad += !same_d(acc, o->v[O_CLIPACC][j]);
        }
        T_CHECK(bad == 0, "clip_accum differs from its documented loop in %lld elements", (long long)bad);
    }
    /* element-wise and per-example passes split across threads */
    void *dh = up(be, NULL, nc), *dda = up(be, NULL, nc), *ddb = up(be, NULL, nc), *dsr = up(be, ex, XB);
    T_OK(be->ops.swiglu_fwd(be->ctx, dh, dgs, dsum, nc));
    T_OK(be->ops.swiglu_bwd(be->ctx, dda, ddb, dsum, dgs, (char *)dgs + opt_backend_esize(be) * (size_t)nc, nc));
    T_OK(be->ops.sqnorm_rows(be->ctx, dsr, dgs, XB, nc));
    o->v[O_SWIGLU] = down(be, dh, o->n[O_SWIGLU] = nc);
    o->v[O_SWIGLU_DA] = down(be, dda, o->n[O_SWIGLU_DA] = nc);
    o->v[O_SQROWS] = down(be, dsr, o->n[O_SQROWS] = XB);
    if (dt == DP_F64) { /* sq[b] = ex[b] + sum_j g[b,j]^2 in j order */
        int64_t bad = 0;
        for (int64_t b = 0; b < XB; b++) {
            double acc = 0;
            for (int64_t j = 0; j < nc; j++) acc += gs[b * nc + j] * gs[b * nc + j];
            bad += !same_d(ex[b] + acc, o->v[O_SQROWS][b]);
        }
        T_CHECK(bad == 0, "sqnorm_rows differs from its documented loop in %lld examples", (long long)bad);
    }
    be->ops.free(be->ctx, dh); be->ops.free(be->ctx, dda); be->ops.free(be->ctx, ddb); be->ops.free(be->ctx, dsr);
    be->ops.free(be->ctx, dgs); be->ops.free(be->ctx, dsum); free(gs); free(s0);
    void *bufs[] = {dA, dB, dC, da, dg, dc, dex, dsq, dW, dW2, dsq2, dcc, dsq3, dq, dk, dv, dout_, dout2, dp, gq, gk, gv};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->ops.free(be->ctx, bufs[i]);
    free(A); free(Bm); free(C0); free(Aa); free(Gg); free(cf); free(W0); free(ex); free(q); free(k); free(v); free(dout);
    opt_backend_destroy(be);
}

/* The documented loops of docs/engine.md §2 for ghost, bk and fused (f64). */
static void check_against_loops(const op_outs *o) {
    double *Aa = rvec(XB * XT * XD, 4), *Gg = rvec(XB * XT * XP, 5), *cf = rvec(XB, 6), *W0 = rvec(XP * XD, 7);
    double *ex = rvec(XB, 8), *W2 = rvec(XP * XD, 7);
    for (int i = 0; i < XB; i++) { cf[i] = fabs(cf[i]); ex[i] = fabs(ex[i]); }
    int64_t bad_gh = 0, bad_bk = 0, bad_fu = 0;
    double *ga = malloc(sizeof(double) * XT * XT), *gg = malloc(sizeof(double) * XT * XT);
    double *blk = malloc(sizeof(double) * XP * XD);
    for (int64_t b = 0; b < XB; b++) {
        const double *A = Aa + b * XT * XD, *G = Gg + b * XT * XP;
        for (int64_t t = 0; t < XT; t++)
            for (int64_t s = 0; s < XT; s++) {
                double x = 0, y = 0;
                for (int64_t e = 0; e < XD; e++) x += A[t * XD + e] * A[s * XD + e];
                for (int64_t e = 0; e < XP; e++) y += G[t * XP + e] * G[s * XP + e];
                ga[t * XT + s] = x; gg[t * XT + s] = y;
            }
        double acc = 0;
        for (int64_t i = 0; i < XT * XT; i++) acc += ga[i] * gg[i];
        bad_gh += !same_d(acc, o->v[O_GHOST][b]);
        double sq = 0;
        for (int64_t i = 0; i < XP; i++)
            for (int64_t e = 0; e < XD; e++) {
                double s = 0;
                for (int64_t t = 0; t < XT; t++) s += G[t * XP + i] * A[t * XD + e];
                blk[i * XD + e] = s;
                sq += s * s;
            }
        bad_fu += !same_d(sq, o->v[O_SQNORM][b]);
        sq += ex[b];
        double n = sqrt(sq), c = n > 1.5 ? 1.5 / n : 1.0;
        for (int64_t i = 0; i < XP * XD; i++) W2[i] += c * blk[i];
        bad_fu += !same_d(sq, o->v[O_FUSED_SQ][b]) + !same_d(c, o->v[O_FUSED_C][b]);
    }
    for (int64_t i = 0; i < XP * XD; i++) bad_fu += !same_d(W2[i], o->v[O_FUSED_W][i]);
    for (int64_t i = 0; i < XP; i++)
        for (int64_t e = 0; e < XD; e++) {
            double acc = 0;
            for (int64_t r = 0; r < XB * XT; r++) acc += (cf[r / XT] * Gg[r * XP + i]) * Aa[r * XD + e];
            bad_bk += !same_d(W0[i * XD + e] + acc, o->v[O_BK][i * XD + e]);
        }
    T_CHECK(bad_gh == 0, "ghost_sqnorm differs from its documented loop in %lld examples", (long long)bad_gh);
    T_CHECK(bad_bk == 0, "bk_gemm differs from its documented loop in %lld elements", (long long)bad_bk);
    T_CHECK(bad_fu == 0, "fused ops differ from their documented loops in %lld values", (long long)bad_fu);
    free(Aa); free(Gg); free(cf); free(W0); free(ex); free(W2); free(ga); free(gg); free(blk);
}

/* attn_fwd / attn_bwd (f64) bit for bit against their documented scalar loops
 * (docs/engine.md §2): scores scale (q_t . k_s) over e in order; softmax over s <= t;
 * out_t = sum_{s <= t} P[t,s] v_s, s in order; dP[t,s] = dout_t . v_s;
 * c = scale (P (dP - sum_{s<=t} P dP)); for t: for s <= t: dq_t += c k_s, dk_s += c q_t,
 * dv_s += P[t,s] dout_t. T = 263 crosses the GEMM's row (96) and k (256) blocks. */
static void test_attn_loop(int threads, int64_t Bx, int64_t T, int64_t H, int64_t hd) {
    opt_backend *be = NULL;
    opt_backend_config c = {"host", DP_F64, threads, 0};
    T_OK(opt_backend_create(&be, &c));
    if (!be) return;
    const int64_t na = Bx * T * H * hd, np = Bx * H * T * T;
    double *q = rvec(na, 21), *k = rvec(na, 22), *v = rvec(na, 23), *dout = rvec(na, 24);
    void *dq = up(be, q, na), *dk = up(be, k, na), *dv = up(be, v, na), *ddo = up(be, dout, na);
    void *dout2 = up(be, NULL, na), *dp = up(be, NULL, np), *gq = up(be, NULL, na), *gk = up(be, NULL, na),
         *gv = up(be, NULL, na);
    T_OK(be->ops.attn_fwd(be->ctx, dout2, dp, dq, dk, dv, Bx, T, H, hd));
    T_OK(be->ops.attn_bwd(be->ctx, gq, gk, gv, ddo, dq, dk, dv, dp, Bx, T, H, hd));
    double *o = down(be, dout2, na), *P = down(be, dp, np), *oq = down(be, gq, na), *ok = down(be, gk, na),
           *ov = down(be, gv, na);
    double *wo = calloc((size_t)na, sizeof(double)), *wq = calloc((size_t)na, sizeof(double));
    double *wk = calloc((size_t)na, sizeof(double)), *wv = calloc((size_t)na, sizeof(double));
    double *WP = malloc(sizeof(double) * (size_t)(T * T)), *dS = malloc(sizeof(double) * (size_t)T);
    const double scale = 1.0 / sqrt((double)hd);
    int64_t bad_f = 0, bad_b = 0;
    for (int64_t b = 0; b < Bx; b++)
        for (int64_t h = 0; h < H; h++) {
#define IX(t) ((((b) * T + (t)) * H + (h)) * hd)
            for (int64_t t = 0; t < T; t++) {
                double mx = -INFINITY, z = 0;
                for (int64_t s = 0; s <= t; s++) {
                    double acc = 0;
                    for (int64_t e = 0; e < hd; e++) acc = acc + q[IX(t) + e] * k[IX(s) + e];
                    WP[t * T + s] = scale * acc;
                    if (WP[t * T + s] > mx) mx = WP[t * T + s];
                }
                for (int64_t s = 0; s <= t; s++) { WP[t * T + s] = exp(WP[t * T + s] - mx); z += WP[t * T + s]; }
                for (int64_t s = 0; s <= t; s++) WP[t * T + s] /= z;
                for (int64_t s = t + 1; s < T; s++) WP[t * T + s] = 0;
                for (int64_t s = 0; s <= t; s++)
                    for (int64_t e = 0; e < hd; e++) wo[IX(t) + e] = wo[IX(t) + e] + WP[t * T + s] * v[IX(s) + e];
            }
            for (int64_t i = 0; i < T * T; i++) bad_f += !same_d(WP[i], P[(b * H + h) * T * T + i]);
            for (int64_t t = 0; t < T; t++) {
                double sum = 0;
                for (int64_t s = 0; s <= t; s++) {
                    double acc = 0;
                    for (int64_t e = 0; e < hd; e++) acc = acc + dout[IX(t) + e] * v[IX(s) + e];
                    dS[s] = acc;
                    sum += WP[t * T + s] * acc;
                }
                for (int64_t s = 0; s <= t; s++) {
                    double cc = scale * (WP[t * T + s] * (dS[s] - sum));
                    for (int64_t e = 0; e < hd; e++) {
                        wq[IX(t) + e] = wq[IX(t) + e] + cc * k[IX(s) + e];
                        wk[IX(s) + e] = wk[IX(s) + e] + cc * q[IX(t) + e];
                        wv[IX(s) + e] = wv[IX(s) + e] + WP[t * T + s] * dout[IX(t) + e];
                    }
                }
            }
#undef IX
        }
    for (int64_t i = 0; i < na; i++) {
        bad_f += !same_d(wo[i], o[i]);
        bad_b += !same_d(wq[i], oq[i]) + !same_d(wk[i], ok[i]) + !same_d(wv[i], ov[i]);
    }
    T_CHECK(bad_f == 0 && bad_b == 0, "attention B=%lld T=%lld H=%lld hd=%lld, %d threads: forward %lld, backward %lld values differ from the loops",
            (long long)Bx, (long long)T, (long long)H, (long long)hd, threads, (long long)bad_f, (long long)bad_b);
    void *bufs[] = {dq, dk, dv, ddo, dout2, dp, gq, gk, gv};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) be->ops.free(be->ctx, bufs[i]);
    free(q); free(k); free(v); free(dout); free(o); free(P); free(oq); free(ok); free(ov);
    free(wo); free(wq); free(wk); free(wv); free(WP); free(dS);
    opt_backend_destroy(be);
}

/* noise_add over several chunks of the pairwise Philox fill, from an odd offset, at 1, 2
 * and 4 threads: element-exact against dp_stream_gaussian element by element. */
static void test_noise_threads(void) {
    const int64_t n = 3 * 512 + 77;
    const uint64_t offset = 11;
    dp_noise_key key = {0x5eed};
    for (int th = 1; th <= 4; th *= 2) {
        opt_backend *be = NULL;
        opt_backend_config c = {"host", DP_F64, th, 0};
        T_OK(opt_backend_create(&be, &c));
        if (!be) return;
        double *x = rvec(n, 31);
        void *dx = up(be, x, n);
        T_OK(be->ops.noise_add(be->ctx, dx, key, 5, 9, 0.75, offset, n));
        double *y = down(be, dx, n);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += !same_d(y[i], x[i] + 0.75 * dp_stream_gaussian(key.k, DP_PURPOSE_NOISE, 5, 9, offset + (uint64_t)i));
        T_CHECK(bad == 0, "noise_add, %d threads: %lld of %lld elements differ from the element-wise stream", th,
                (long long)bad, (long long)n);
        be->ops.free(be->ctx, dx);
        free(x); free(y);
        opt_backend_destroy(be);
    }
}

static void test_threads(dp_dtype dt) {
    const int th[3] = {1, 2, 4};
    op_outs o[3];
    memset(o, 0, sizeof o);
    for (int i = 0; i < 3; i++) run_ops(&o[i], dt, th[i]);
    for (int i = 1; i < 3; i++)
        for (int j = 0; j < O_NOUT; j++) {
            if (!o[0].v[j] || !o[i].v[j]) continue;
            T_CHECK(memcmp(o[0].v[j], o[i].v[j], sizeof(double) * (size_t)o[0].n[j]) == 0, "%s %s: %d threads differ from 1",
                    dt == DP_F64 ? "f64" : "f32", k_out_names[j], th[i]);
        }
    if (dt == DP_F64 && o[0].v[O_GHOST]) check_against_loops(&o[0]);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < O_NOUT; j++) free(o[i].v[j]);
}

/* ---- the pool: every item exactly once, any n, many calls, nested calls stay put ---- */
typedef struct { int *count; opt_host_pool *pool; int nested_ok; } pool_arg;
static void pool_count(void *arg, int64_t lo, int64_t hi, int tid) {
    pool_arg *a = arg;
    for (int64_t i = lo; i < hi; i++) __atomic_fetch_add(&a->count[i], 1, __ATOMIC_RELAXED);
}
static void pool_nested(void *arg, int64_t lo, int64_t hi, int tid) {
    pool_arg *a = arg;
    if (lo == 0) { /* a nested call runs whole on this thread */
        int cnt[8] = {0};
        pool_arg in = {cnt, NULL, 0};
        opt_host_pool_run(a->pool, pool_count, &in, 8, 4);
        int ok = 1;
        for (int i = 0; i < 8; i++) ok &= cnt[i] == 1;
        a->nested_ok = ok;
    }
}
static void test_pool(void) {
    opt_host_pool *p = NULL;
    T_OK(opt_host_pool_create(&p, 4));
    if (!p) return;
    int64_t sizes[] = {1, 2, 3, 5, 17, 1000};
    int *cnt = calloc(1000, sizeof(int));
    int bad = 0;
    for (int rep = 0; rep < 300; rep++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            memset(cnt, 0, 1000 * sizeof(int));
            pool_arg a = {cnt, p, 0};
            opt_host_pool_run(p, pool_count, &a, sizes[s], 1 + rep % 4);
            for (int64_t i = 0; i < sizes[s]; i++) bad += cnt[i] != 1;
        }
    T_CHECK(bad == 0, "pool: %d items not run exactly once", bad);
    pool_arg a = {cnt, p, 0};
    opt_host_pool_run(p, pool_nested, &a, 4, 4);
    T_CHECK(a.nested_ok, "pool: a nested call did not run every item once");
    free(cnt);
    opt_host_pool_destroy(p);
}

/* --threads default: the cores of the affinity mask, divided by the ranks on this node */
static void test_default_threads(void) {
    cpu_set_t set;
    T_CHECK(sched_getaffinity(0, sizeof set, &set) == 0, "sched_getaffinity failed");
    int cores = CPU_COUNT(&set);
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    unsetenv("MPI_LOCALNRANKS");
    int want = cores > 256 ? 256 : cores;
    T_CHECK(opt_default_threads() == want, "default threads %d, cores %d", opt_default_threads(), cores);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
    want = cores / 2 < 1 ? 1 : cores / 2 > 256 ? 256 : cores / 2;
    T_CHECK(opt_default_threads() == want, "default threads with 2 local ranks %d, want %d", opt_default_threads(), want);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "100000", 1);
    T_CHECK(opt_default_threads() == 1, "default threads with many local ranks %d, want 1", opt_default_threads());
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
}

int main(void) {
    g_seed = t_seed(5);
    printf("gemm micro-kernel on this CPU: %s\n", opt_hgemm_isa_name(OPT_HGEMM_ISA_AUTO));
    test_api();
    test_strided();
    test_tri();
    test_controls();
    test_threads(DP_F64);
    test_threads(DP_F32);
    test_attn_loop(1, 2, 37, 2, 8);
    test_attn_loop(2, 1, 263, 2, 5);
    test_noise_threads();
    test_pool();
    test_default_threads();
    return t_finish();
}

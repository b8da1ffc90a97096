/* optimized/host/host_gemm.h — the host backend's GEMM: packed, register-blocked,
 * vectorised across output columns (docs/engine.md §2 "The host GEMM").
 *
 * Every output element keeps one accumulator that runs over k = 0..K-1 in order, each
 * step a rounded product then a rounded add (no FMA, no reassociation), then
 * C = alpha acc (+ beta C). So the result is bit-identical to the textbook triple loop
 * in that order, for every ISA (AVX2 or the portable C kernel) and every blocking.
 * The output is cut into fixed macro-tiles (independent of the thread count); a caller
 * runs any subset of tiles in any order on any thread: no reduction crosses a tile.
 *
 * The reference (reference/) never calls this. */
#ifndef DP_OPT_HOST_GEMM_H
#define DP_OPT_HOST_GEMM_H

#include <stddef.h>
#include <stdint.h>

/* Which micro-kernel runs: the best the CPU supports (chosen once at run time; the
 * environment variable DPCERT_HOST_ISA=generic caps it, for benchmarks) or the portable
 * C kernel (tests compare the two bit for bit). A request beyond the CPU's runs on the
 * best it has. */
typedef enum { OPT_HGEMM_ISA_AUTO = 0, OPT_HGEMM_ISA_GENERIC, OPT_HGEMM_ISA_AVX2 } opt_hgemm_isa;

/* C_b[M,N] = alpha op(A_b) op(B_b) + beta C_b for b < batch, as the backend's gemm
 * (optimized/backend.h): op(A_b) [M,K] is A_b [M,K] (ta = 0) or A_b [K,M] read
 * transposed (ta = 1); op(B_b) [K,N] is B_b [K,N] (tb = 0) or B_b [N,K] (tb = 1);
 * X_b = X + b strideX elements; beta = 0 overwrites C.
 * Options:
 *   kscale (element type of the GEMM, may be NULL): op(A)[i,k] is replaced by the
 *     exact product kscale[k / kdiv] * op(A)[i,k] (book-keeping's c_b G rows);
 *   sym = 1: op(A_b) op(B_b) is known symmetric (a Gram matrix X X^T): only tiles on or
 *     below the diagonal are computed and C[j,i] receives C[i,j]; requires M = N and
 *     beta = 0. Bit-identical to the full product because x y = y x exactly;
 *   tri (opt_hgemm_tri): a triangular op(A) whose other entries are absent, not zero:
 *     OPT_HGEMM_TRI_LOWER sums only k <= i, OPT_HGEMM_TRI_UPPER only k >= i (i, k the
 *     row and reduction indices of op(A)); each C[i,j] is still one accumulator over
 *     its k in increasing order, so C[t,:] of a causal P V is bit-identical to the loop
 *     "acc = 0; for s = 0..t: acc = acc + P[t,s] v_s" (attention, host_kern.h);
 *     requires sym = 0 and no kscale;
 *   lda, ldb, ldc: row strides in elements of A_b, B_b, C_b as stored (0: dense, i.e.
 *     K or M for A, N or K for B, N for C), e.g. one head's rows of [T, H, hd]. */
typedef enum { OPT_HGEMM_TRI_NONE = 0, OPT_HGEMM_TRI_LOWER, OPT_HGEMM_TRI_UPPER } opt_hgemm_tri;

typedef struct {
    void *C;
    const void *A, *B;
    int ta, tb;
    int64_t M, N, K;
    double alpha, beta;
    int64_t batch, sA, sB, sC;
    const void *kscale;
    int64_t kdiv;
    int sym;
    opt_hgemm_isa isa;
    int64_t lda, ldb, ldc;
    opt_hgemm_tri tri;
} opt_hgemm_problem;

/* Number of independent output macro-tiles of the problem (batch included). */
int64_t opt_hgemm_tiles(const opt_hgemm_problem *p);
/* Bytes of workspace one thread needs to run tiles (element size esize = 4 or 8). */
size_t opt_hgemm_ws_bytes(size_t esize);
/* Multiply-adds of one tile on average (for the parallel cut-off). */
double opt_hgemm_tile_cost(const opt_hgemm_problem *p);
/* Run tiles [lo, hi) with workspace ws (opt_hgemm_ws_bytes, 64-byte aligned). */
void opt_hgemm_run_f64(const opt_hgemm_problem *p, int64_t lo, int64_t hi, void *ws);
void opt_hgemm_run_f32(const opt_hgemm_problem *p, int64_t lo, int64_t hi, void *ws);
/* y[i] = y[i] + a x[i] for i < n (a rounded product, then a rounded add; vectorised) */
void opt_hgemm_axpy_f64(double *y, double a, const double *x, int64_t n);
void opt_hgemm_axpy_f32(float *y, float a, const float *x, int64_t n);
/* The ISA OPT_HGEMM_ISA_AUTO resolves to on this CPU, and its name ("avx2", "generic"). */
opt_hgemm_isa opt_hgemm_isa_best(void);
const char *opt_hgemm_isa_name(opt_hgemm_isa isa);

#endif

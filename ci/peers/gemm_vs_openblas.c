/* ci/peers/gemm_vs_openblas.c — the host GEMM (optimized/host/host_gemm.h) against
 * OpenBLAS's dgemm/sgemm on the GEMM shapes of one llama DP step, one thread each,
 * measured side by side in one run; also counts the output elements whose bits differ
 * (OpenBLAS uses FMA and its own k order). Built and run by ci/peers/bench-peers.sh
 * (make bench-peers); not part of make test. Usage: gemm_vs_openblas D T B */
#include <cblas.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "optimized/host/host_gemm.h"

/* the process's CPU time: both sides run on this thread, and on a shared machine the
 * wall clock counts the other processes' time slices */
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
static int cmp_d(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return (x > y) - (x < y); }
static double median(double *v, int n) { qsort(v, (size_t)n, sizeof *v, cmp_d); return v[n / 2]; }

typedef struct { const char *what; int ta, tb; int64_t M, N, K, batch; } shape;

int main(int argc, char **argv) {
    int64_t D = argc > 1 ? atoll(argv[1]) : 128, T = argc > 2 ? atoll(argv[2]) : 128, B = argc > 3 ? atoll(argv[3]) : 16;
    shape sh[] = {
        {"forward y = x W^T (rows B*T)", 0, 1, B * T, D, D, 1},
        {"input grad dx = dy W", 0, 0, B * T, D, D, 1},
        {"per-example g_b = G_b^T A_b", 1, 0, D, D, T, B},
        {"book-keeping dW = G^T diag(c) A", 1, 0, D, D, B * T, 1},
        {"ghost Gram A_b A_b^T", 0, 1, T, T, D, B},
    };
    openblas_set_num_threads(1);
    printf("D=%lld T=%lld B=%lld, 1 thread, medians of 7 runs (CPU time); ours: %s micro-kernel; OpenBLAS %s\n", (long long)D,
           (long long)T, (long long)B, opt_hgemm_isa_name(OPT_HGEMM_ISA_AUTO), openblas_get_config());
    printf("%-34s %5s %10s %10s %11s %10s\n", "shape", "dtype", "ours GF/s", "BLAS GF/s", "t ours/BLAS", "bits differ");
    for (int dt = 0; dt < 2; dt++)
        for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
            shape h = sh[s];
            size_t es = dt == 0 ? 8 : 4;
            int64_t na = h.M * h.K, nb = h.K * h.N, nc = h.M * h.N;
            char *A = malloc(es * (size_t)(na * h.batch)), *Bm = malloc(es * (size_t)(nb * h.batch));
            char *C1 = calloc((size_t)(nc * h.batch), es), *C2 = calloc((size_t)(nc * h.batch), es);
            void *ws = aligned_alloc(64, (opt_hgemm_ws_bytes(es) + 63) / 64 * 64);
            srand(1);
            for (int64_t i = 0; i < na * h.batch; i++) {
                double v = 2.0 * rand() / RAND_MAX - 1;
                if (dt == 0) ((double *)A)[i] = v; else ((float *)A)[i] = (float)v;
            }
            for (int64_t i = 0; i < nb * h.batch; i++) {
                double v = 2.0 * rand() / RAND_MAX - 1;
                if (dt == 0) ((double *)Bm)[i] = v; else ((float *)Bm)[i] = (float)v;
            }
            opt_hgemm_problem p = {.C = C1, .A = A, .B = Bm, .ta = h.ta, .tb = h.tb, .M = h.M, .N = h.N, .K = h.K,
                                   .alpha = 1, .beta = 0, .batch = h.batch, .sA = na, .sB = nb, .sC = nc, .kdiv = 1};
            double t1[7], t2[7];
            for (int r = 0; r < 7; r++) {
                double t0 = now();
                if (dt == 0) opt_hgemm_run_f64(&p, 0, opt_hgemm_tiles(&p), ws);
                else opt_hgemm_run_f32(&p, 0, opt_hgemm_tiles(&p), ws);
                t1[r] = now() - t0;
                t0 = now();
                for (int64_t b = 0; b < h.batch; b++) {
                    if (dt == 0)
                        cblas_dgemm(CblasRowMajor, h.ta ? CblasTrans : CblasNoTrans, h.tb ? CblasTrans : CblasNoTrans,
                                    (int)h.M, (int)h.N, (int)h.K, 1.0, (double *)A + b * na, h.ta ? (int)h.M : (int)h.K,
                                    (double *)Bm + b * nb, h.tb ? (int)h.K : (int)h.N, 0.0, (double *)C2 + b * nc, (int)h.N);
                    else
                        cblas_sgemm(CblasRowMajor, h.ta ? CblasTrans : CblasNoTrans, h.tb ? CblasTrans : CblasNoTrans,
                                    (int)h.M, (int)h.N, (int)h.K, 1.0f, (float *)A + b * na, h.ta ? (int)h.M : (int)h.K,
                                    (float *)Bm + b * nb, h.tb ? (int)h.K : (int)h.N, 0.0f, (float *)C2 + b * nc, (int)h.N);
                }
                t2[r] = now() - t0;
            }
            int64_t diff = 0;
            for (int64_t i = 0; i < nc * h.batch; i++) diff += memcmp(C1 + (size_t)i * es, C2 + (size_t)i * es, es) != 0;
            double flop = 2.0 * (double)h.M * (double)h.N * (double)h.K * (double)h.batch;
            double m1 = median(t1, 7), m2 = median(t2, 7);
            printf("%-34s %5s %10.2f %10.2f %11.2f %5.1f %%\n", h.what, dt == 0 ? "f64" : "f32", flop / m1 * 1e-9,
                   flop / m2 * 1e-9, m1 / m2, 100.0 * (double)diff / (double)(nc * h.batch));
            free(A); free(Bm); free(C1); free(C2); free(ws);
        }
    return 0;
}

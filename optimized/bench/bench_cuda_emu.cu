// optimized/bench/bench_cuda_emu.cu — the speed of the CUDA emulation's execution model
// (docs/cuda.md "Speed"), side by side in one run:
//   fibers   the emulation: every CUDA thread a fiber, a block's threads on one OS thread,
//            blocks on the pool (cu_emu_sched.cc);
//   threads  the alternative first described for it: one OS thread per CUDA thread of a
//            block and a std::barrier per block (written here, for the comparison only).
// Two kernels of the backend's kinds: a row reduction (the block sum of cu_reduce.cuh:
// warp shuffles and three __syncthreads per row, 128 threads per block) and an
// elementwise grid-stride loop (no barrier, 256 threads per block), the two designs taking
// turns. One iteration: one launch of the kernel (and its synchronisation) or the same work on
// the threads. Rows (common/bench.h, docs/benchmarks.md): rowsum-fibers (the baseline),
// rowsum-threads (ratio threads / fibers), axpy-fibers (the baseline), axpy-threads; then a
// "# sums agree" line. bytes/step and peak_ledger_B n/a (no engine).
// Usage: build/bench/optimized_bench_cuda_emu [-w W] [-n N] [rows] [n]   (defaults -w 0 -n 5, 64, 262144)
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "optimized/cuda/cu_reduce.cuh"
extern "C" {
#include "common/bench.h"
}

/* ---- the kernels (launched through the emulation) ---- */
__global__ void k_rowsum(float *out, const float *x, int D) {
    __shared__ float sh[33];
    const float *xr = x + (int64_t)blockIdx.x * D;
    float s = 0.0f;
    for (int d = threadIdx.x; d < D; d += blockDim.x) s += xr[d];
    s = cu_block_sum(s, sh);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}
__global__ void k_axpy(float *y, const float *x, float a, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = a * x[i] + y[i];
}

/* ---- the same work with one OS thread per CUDA thread and std::barrier ---- */
/* block sum: per-warp partials through shared memory (the shuffle tree replaced by a
 * barrier-separated tree over 32-lane groups, as many barriers as cu_block_sum's syncs) */
static void threads_rowsum(float *out, const float *x, int rows, int D, int nt) {
    std::vector<float> part((size_t)nt), sh(33);
    std::barrier bar(nt);
    std::atomic<int> row{0};
    auto body = [&](int t) {
        for (int r = 0; r < rows; r++) {
            float s = 0.0f;
            for (int d = t; d < D; d += nt) s += x[(size_t)r * D + d];
            part[t] = s;
            for (int o = 16; o > 0; o >>= 1) { /* the five shuffle steps: a barrier each */
                bar.arrive_and_wait();
                float v = (t & 31) + o < 32 ? part[t + o] : 0.0f;
                bar.arrive_and_wait();
                part[t] += v;
            }
            bar.arrive_and_wait();
            if ((t & 31) == 0) sh[t >> 5] = part[t];
            bar.arrive_and_wait();
            if (t == 0) {
                float a = 0.0f;
                for (int w = 0; w < nt / 32; w++) a += sh[w];
                out[r] = a;
            }
            bar.arrive_and_wait();
        }
        (void)row;
    };
    std::vector<std::thread> th;
    for (int t = 0; t < nt; t++) th.emplace_back(body, t);
    for (auto &h : th) h.join();
}
static void threads_axpy(float *y, const float *x, float a, int64_t n, int nt) {
    std::vector<std::thread> th;
    for (int t = 0; t < nt; t++)
        th.emplace_back([=] {
            for (int64_t i = t; i < n; i += nt) y[i] = a * x[i] + y[i];
        });
    for (auto &h : th) h.join();
}

int main(int argc, char **argv) {
    dp_bench_opts bo;
    int help = 0;
    if (dp_bench_parse(&bo, &help, argc, argv, 0, 5, "[rows] [n]") != DP_OK || bo.threads) {
        fprintf(stderr, "bench_cuda_emu: %s\n", dp_last_error()[0] ? dp_last_error() : "no -t");
        return 2;
    }
    if (help) return 0;
    const int rows = bo.npos > 0 ? atoi(bo.pos[0]) : 64, D = 512;
    const int64_t n = bo.npos > 1 ? atoll(bo.pos[1]) : (int64_t)1 << 18;
    if (rows < 1 || n < 1) { fprintf(stderr, "bench_cuda_emu: rows and n must be positive\n"); return 2; }
    float *hx = (float *)malloc(sizeof(float) * (size_t)rows * D), *hy = (float *)malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < (int64_t)rows * D; i++) hx[i] = (float)(i % 13);
    for (int64_t i = 0; i < n; i++) hy[i] = 1.0f;
    float *dx, *dy, *dout;
    cudaMalloc(&dx, sizeof(float) * (size_t)rows * D);
    cudaMalloc(&dy, sizeof(float) * (size_t)n);
    cudaMalloc(&dout, sizeof(float) * (size_t)rows);
    cudaMemcpy(dx, hx, sizeof(float) * (size_t)rows * D, cudaMemcpyHostToDevice);
    cudaMemcpy(dy, hy, sizeof(float) * (size_t)n, cudaMemcpyHostToDevice);
    std::vector<float> out((size_t)rows), y(hy, hy + n);
    std::vector<double> f1, t1, f2, t2;
    const int64_t m = std::min<int64_t>(n, (int64_t)rows * D);
    char what[200];
    snprintf(what, sizeof what, "one kernel launch or the same work on OS threads: row reduction %d rows x %d, 128 "
             "threads; axpy %lld elements, 256 threads", rows, D, (long long)m);
    dp_bench_header("bench_cuda_emu", what, "cuda-emu (CPU emulation: not a GPU)", "f32", 1, 0, &bo);
    for (int r = 0; r < bo.warmup + bo.iters; r++) {
        double a = dp_bench_now();
        k_rowsum<<<rows, 128>>>(dout, dx, D);
        cudaDeviceSynchronize();
        double b = dp_bench_now();
        threads_rowsum(out.data(), hx, rows, D, 128);
        double c = dp_bench_now();
        k_axpy<<<(unsigned)((n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535), 256>>>(dy, dx, 0.5f, m);
        cudaDeviceSynchronize();
        double d = dp_bench_now();
        /* one block's worth of threads: the thread design runs blocks one after another */
        threads_axpy(y.data(), hx, 0.5f, m, 256);
        double e = dp_bench_now();
        if (r < bo.warmup) continue;
        f1.push_back(b - a);
        t1.push_back(c - b);
        f2.push_back(d - c);
        t2.push_back(e - d);
    }
    float check[1];
    cudaMemcpy(check, dout, sizeof check, cudaMemcpyDeviceToHost);
    double base = dp_bench_row_of("rowsum-fibers", f1.data(), bo.iters, 0, 1, -1, -1);
    dp_bench_row_of("rowsum-threads", t1.data(), bo.iters, base, 0, -1, -1);
    base = dp_bench_row_of("axpy-fibers", f2.data(), bo.iters, 0, 1, -1, -1);
    dp_bench_row_of("axpy-threads", t2.data(), bo.iters, base, 0, -1, -1);
    printf("# sums agree: %s\n", check[0] == out[0] ? "yes" : "NO");
    dp_bench_reproduce(argv[0], &bo);
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(dout);
    free(hx);
    free(hy);
    return check[0] == out[0] ? 0 : 1;
}

// optimized/tests/test_cuda_emu_runtime.cu — the CUDA emulation itself (optimized/cuda/emu/,
// docs/cuda.md "The emulation"), against independent references written here:
//   - bf16 / fp16 conversions: round to nearest even, overflow, subnormals, NaN -> 0x7fff,
//     for every bf16 value and every rounding boundary of fp16, and exact widening;
//   - the execution model: __syncthreads, the warp shuffles (down, up, xor, indexed),
//     atomics across blocks, exited threads at later barriers, 3-D grids and blocks; a
//     divergent barrier and __trap fault the launch (sticky, after the next
//     synchronisation) and cudaDeviceReset recovers; bad launch configurations are
//     cudaErrorInvalidConfiguration and not sticky;
//   - the memory guard: wrong-size copies, use after free, double free and host pointers
//     given as device pointers are errors; a kernel given a freed pointer faults; host
//     code that dereferences a device pointer dies of SIGSEGV (in a child process);
//   - cuBLAS: column-major products with transposes, leading dimensions larger than the
//     rows, strided batches, alpha / beta (beta = 0 does not read C: NaN in C is
//     overwritten), f32 / f64 / bf16, compared bit for bit with the documented order (k
//     ascending, one rounding per operation); an extent past the buffer is refused;
//   - WMMA: mma_sync bit for bit against the documented element order, and the fragment
//     layout property the tensor-core ghost norm relies on;
//   - streams and events (a stream inherits an event's pending work), one-rank NCCL;
//   - DPCERT_CUDA_SYNC=1 (in a child process each way): a production kernel that faults is
//     named by the check after its launch; without it the fault surfaces at the next
//     synchronisation, without the kernel's name (the defect the debug mode answers).
// Every check is meant to fail when the emulation deviates; tests of the production
// kernels on the emulation are the test_cuda_gpu_* programs.
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#include <nccl.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/emu/cu_emu_blas.h"
extern "C" {
#include "common/tensor.h"
#include "common/test.h"
}

/* ---------------- conversions ---------------- */
static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float fl(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* the nearest of the two candidates lo < hi (values la, ha; ha may stand for 2^128 = overflow),
 * ties to the even encoding */
static uint32_t nearest(double x, uint32_t lo, double la, uint32_t hi, double ha) {
    double dl = fabs(x - la), dh = fabs(ha - x);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}
/* bf16 reference: the two bf16 neighbours of |f| by truncation, compared in double (exact) */
static uint16_t ref_bf16(float f) {
    uint32_t u = bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    uint32_t s = u & 0x80000000u, a = u & 0x7fffffffu, lo = a >> 16;
    double x = fabs((double)f), la = (double)fl(lo << 16);
    if ((double)la == x) return (uint16_t)((s >> 16) | lo);
    double ha = lo + 1 == 0x7f80u ? ldexp(1.0, 128) : (double)fl((lo + 1) << 16);
    return (uint16_t)((s >> 16) | nearest(x, lo, la, lo + 1, ha));
}
static double f16_value(uint32_t h) { /* exact value of a finite fp16 encoding (no sign) */
    uint32_t e = h >> 10, m = h & 0x3ffu;
    return e == 0 ? ldexp((double)m, -24) : ldexp((double)(m | 0x400u), (int)e - 25);
}
/* fp16 reference: search the two neighbours among the finite encodings (then inf) */
static uint16_t ref_f16(float f) {
    uint32_t u = bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    uint16_t s = (uint16_t)((u >> 16) & 0x8000u);
    double x = fabs((double)f);
    if (x >= 65520.0) return s | 0x7c00u; /* max + half an ulp and above: infinity */
    uint32_t lo = 0, hi = 0x7bff; /* largest encoding with value <= x */
    while (lo < hi) {
        uint32_t mid = (lo + hi + 1) / 2;
        if (f16_value(mid) <= x) lo = mid;
        else hi = mid - 1;
    }
    if (f16_value(lo) == x) return s | (uint16_t)lo;
    double ha = lo == 0x7bff ? 65536.0 : f16_value(lo + 1);
    return s | (uint16_t)nearest(x, lo, f16_value(lo), lo + 1, ha);
}

static void test_conversions(void) {
    static const uint32_t low[] = {0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, 0x1234, 0xc000};
    int bad = 0, bad_tensor = 0, n = 0;
    for (uint32_t hi = 0; hi < 0x10000u; hi++)
        for (uint32_t l : low) {
            float f = fl(hi << 16 | l);
            uint16_t got = __bfloat16_as_ushort(__float2bfloat16_rn(f));
            bad += got != ref_bf16(f);
            if (!isnan(f)) bad_tensor += got != dp_f32_to_bf16(f);
            n++;
        }
    T_CHECK(bad == 0 && bad_tensor == 0, "__float2bfloat16_rn: %d of %d differ from RNE, %d from dp_f32_to_bf16", bad,
            n, bad_tensor);
    /* fp16: every encoding's value, its neighbours, every midpoint and its neighbours */
    bad = bad_tensor = n = 0;
    for (uint32_t h = 0; h <= 0x7bffu; h++) {
        double v = f16_value(h), nx = h == 0x7bff ? 65536.0 : f16_value(h + 1), mid = 0.5 * (v + nx);
        float probes[] = {(float)v, nextafterf((float)v, 0.0f), nextafterf((float)v, INFINITY), (float)mid,
                          nextafterf((float)mid, 0.0f), nextafterf((float)mid, INFINITY)};
        for (float p : probes)
            for (int sgn = 0; sgn < 2; sgn++) {
                float f = sgn ? -p : p;
                uint16_t got = __half_as_ushort(__float2half_rn(f));
                bad += got != ref_f16(f);
                bad_tensor += got != dp_f32_to_f16(f);
                n++;
            }
    }
    float specials[] = {INFINITY, -INFINITY, NAN, -NAN, 65519.99f, 65520.0f, 1e30f, 0x1p-25f, 0x1.000002p-25f, 0x1p-26f};
    for (float f : specials) {
        uint16_t got = __half_as_ushort(__float2half_rn(f));
        bad += got != ref_f16(f);
        n++;
    }
    T_CHECK(bad == 0 && bad_tensor == 0, "__float2half_rn: %d of %d differ from RNE, %d from dp_f32_to_f16", bad, n,
            bad_tensor);
    T_CHECK(__bfloat16_as_ushort(__float2bfloat16_rn(NAN)) == 0x7fff && __half_as_ushort(__float2half_rn(-NAN)) == 0x7fff,
            "NaN converts to the canonical 0x7fff");
    /* widening is exact: every finite encoding round-trips */
    bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        float b = __bfloat162float(__ushort_as_bfloat16((unsigned short)h));
        if (!isnan(b)) bad += __bfloat16_as_ushort(__float2bfloat16_rn(b)) != h;
        float q = __half2float(__ushort_as_half((unsigned short)h));
        if (!isnan(q)) bad += __half_as_ushort(__float2half_rn(q)) != h || q != (float)dp_f16_to_f32((uint16_t)h);
    }
    T_CHECK(bad == 0, "widening bf16/fp16 -> float is exact: %d encodings do not round-trip", bad);
}

/* ---------------- execution model ---------------- */
/* out[b * nt + t] = sum over the block of in, by a shared-memory tree with __syncthreads */
__global__ void k_tree_sum(int *out, const int *in) {
    __shared__ int sh[1024];
    int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int nt = blockDim.x * blockDim.y * blockDim.z;
    int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    sh[t] = in[b * nt + t];
    __syncthreads();
    for (int s = 1; s < nt; s *= 2) {
        int v = (t % (2 * s) == 0 && t + s < nt) ? sh[t + s] : 0;
        __syncthreads();
        sh[t] += v;
        __syncthreads();
    }
    out[b * nt + t] = sh[0];
}
/* per lane: down, up, xor and indexed shuffles of (lane * 3 + warp) */
__global__ void k_shuffles(int *out) {
    int lane = threadIdx.x & 31, v = lane * 3 + (int)(threadIdx.x >> 5);
    int d = __shfl_down_sync(0xffffffffu, v, 5), u = __shfl_up_sync(0xffffffffu, v, 3);
    int x = __shfl_xor_sync(0xffffffffu, v, 9), i = __shfl_sync(0xffffffffu, v, (lane * 7) & 31);
    int w = __shfl_down_sync(0xffffffffu, v, 2, 8); /* segments of 8 lanes */
    int *o = out + 5 * threadIdx.x;
    o[0] = d; o[1] = u; o[2] = x; o[3] = i; o[4] = w;
}
/* threads of odd index leave early; the rest meet at barriers (exited threads count as arrived) */
__global__ void k_exit_early(int *out) {
    __shared__ int sh[256];
    if (threadIdx.x & 1) return;
    sh[threadIdx.x] = (int)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = sh[(threadIdx.x + 2) % blockDim.x];
}
__global__ void k_atomics(int *mx, int *sum) {
    int v = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    atomicMax(mx, (v * 37) % 1001);
    atomicAdd(sum, 1);
}
/* lane 0 waits at the block barrier, the other lanes at a shuffle: neither can go on */
__global__ void k_divergent(int *out) {
    if (threadIdx.x == 0) __syncthreads();
    else out[threadIdx.x] = __shfl_down_sync(0xffffffffu, (int)threadIdx.x, 1);
}
__global__ void k_trap(int *out) {
    if (threadIdx.x == 7) __trap();
    out[threadIdx.x] = 1;
}
__global__ void k_fill(float *x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

static void test_model(void) {
    /* tree sums in several block shapes, one and three dimensions (TSan build: up to 256
     * threads, as the production kernels; each TSan thread identity costs ~0.8 MB) */
#ifdef __SANITIZE_THREAD__
    dim3 shapes[] = {dim3(1), dim3(32), dim3(96), dim3(256), dim3(8, 4, 2), dim3(5, 3, 7)};
#else
    dim3 shapes[] = {dim3(1), dim3(32), dim3(96), dim3(256), dim3(1024), dim3(8, 4, 2), dim3(5, 3, 7)};
#endif
    for (dim3 bs : shapes) {
        dim3 g(3, 2, 1);
        int nt = (int)(bs.x * bs.y * bs.z), nb = 6, n = nb * nt;
        int *h = (int *)malloc(sizeof(int) * n), *o = (int *)malloc(sizeof(int) * n), *din, *dout;
        for (int i = 0; i < n; i++) h[i] = (i * 13) % 97 - 40;
        T_CHECK(cudaMalloc(&din, sizeof(int) * n) == cudaSuccess && cudaMalloc(&dout, sizeof(int) * n) == cudaSuccess, "malloc");
        cudaMemcpy(din, h, sizeof(int) * n, cudaMemcpyHostToDevice);
        k_tree_sum<<<g, bs>>>(dout, din);
        T_CHECK(cudaMemcpy(o, dout, sizeof(int) * n, cudaMemcpyDeviceToHost) == cudaSuccess, "copy back");
        int bad = 0;
        for (int b = 0; b < nb; b++) {
            int s = 0;
            for (int t = 0; t < nt; t++) s += h[b * nt + t];
            for (int t = 0; t < nt; t++) bad += o[b * nt + t] != s;
        }
        T_CHECK(bad == 0, "block (%u,%u,%u): %d threads saw a wrong __syncthreads tree sum", bs.x, bs.y, bs.z, bad);
        cudaFree(din); cudaFree(dout); free(h); free(o);
    }
    /* shuffles, two warps */
    int *dsh, sh[64 * 5];
    cudaMalloc(&dsh, sizeof sh);
    k_shuffles<<<1, 64>>>(dsh);
    cudaMemcpy(sh, dsh, sizeof sh, cudaMemcpyDeviceToHost);
    int bad = 0;
    for (int t = 0; t < 64; t++) {
        int lane = t & 31, w = t >> 5, v = lane * 3 + w;
        int d = lane + 5 < 32 ? (lane + 5) * 3 + w : v, u = lane >= 3 ? (lane - 3) * 3 + w : v;
        int x = (lane ^ 9) * 3 + w, i = ((lane * 7) & 31) * 3 + w, s8 = lane % 8 + 2 < 8 ? (lane + 2) * 3 + w : v;
        const int *o = sh + 5 * t;
        bad += o[0] != d || o[1] != u || o[2] != x || o[3] != i || o[4] != s8;
    }
    T_CHECK(bad == 0, "shuffles: %d lanes got a wrong value", bad);
    /* exited threads do not hold the barrier */
    int ex[256];
    memset(ex, 0, sizeof ex);
    cudaMemcpy(dsh, ex, sizeof(int) * 64, cudaMemcpyHostToDevice);
    int *dex;
    cudaMalloc(&dex, sizeof ex);
    cudaMemset(dex, 0, sizeof ex);
    k_exit_early<<<1, 256>>>(dex);
    cudaMemcpy(ex, dex, sizeof ex, cudaMemcpyDeviceToHost);
    bad = 0;
    for (int t = 0; t < 256; t += 2) bad += ex[t] != (t + 2) % 256;
    T_CHECK(bad == 0 && cudaGetLastError() == cudaSuccess, "barrier with exited threads: %d wrong", bad);
    /* atomics across 40 blocks */
    int *dm, host[2] = {-5, 0};
    cudaMalloc(&dm, sizeof host);
    cudaMemcpy(dm, host, sizeof host, cudaMemcpyHostToDevice);
    k_atomics<<<40, 128>>>(dm, dm + 1);
    cudaMemcpy(host, dm, sizeof host, cudaMemcpyDeviceToHost);
    int want = 0;
    for (int v = 0; v < 40 * 128; v++) want = (v * 37) % 1001 > want ? (v * 37) % 1001 : want;
    T_CHECK(host[0] == want && host[1] == 40 * 128, "atomicMax %d (want %d), atomicAdd %d", host[0], want, host[1]);
    /* configuration errors: reported by cudaGetLastError, not sticky */
    k_fill<<<1, 2048>>>((float *)dm, 1.0f, 1);
    T_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "2048 threads per block: invalid configuration");
    k_fill<<<0, 32>>>((float *)dm, 1.0f, 1);
    T_CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration, "an empty grid: invalid configuration");
    T_CHECK(cudaGetLastError() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "not sticky");
    /* a divergent barrier and a trap fault the launch; seen at the next synchronisation */
    k_divergent<<<1, 32>>>(dex);
    T_CHECK(cudaGetLastError() == cudaSuccess, "the fault is asynchronous: the launch itself succeeds");
    T_CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure, "divergent barrier: launch failure at the next sync");
    T_CHECK(cudaMemcpy(ex, dex, 4, cudaMemcpyDeviceToHost) == cudaErrorLaunchFailure, "the fault is sticky");
    T_CHECK(cudaDeviceReset() == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess, "cudaDeviceReset recovers");
    cudaMalloc(&dex, sizeof ex);
    k_trap<<<1, 32>>>(dex);
    T_CHECK(cudaStreamSynchronize(nullptr) == cudaErrorLaunchFailure, "__trap: launch failure");
    cudaDeviceReset();
}

/* ---------------- memory guard ---------------- */
static void test_memory(void) {
    float *d = NULL, h[64] = {0};
    T_CHECK(cudaMalloc(&d, 100) == cudaSuccess, "malloc");
    T_CHECK(cudaMemcpy(d, h, 100, cudaMemcpyHostToDevice) == cudaSuccess, "an in-bounds copy");
    T_CHECK(cudaMemcpy(d, h, 200, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "200 bytes into 100: refused");
    T_CHECK(cudaMemcpy(h, d + 10, 80, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "80 bytes from offset 40 of 100");
    T_CHECK(cudaMemcpy(h, d + 10, 60, cudaMemcpyDeviceToHost) == cudaSuccess, "60 bytes from offset 40 of 100");
    T_CHECK(cudaMemcpy(h, h + 8, 16, cudaMemcpyHostToDevice) == cudaErrorInvalidValue, "a host pointer as destination");
    T_CHECK(cudaMemset(h, 0, 4) == cudaErrorInvalidValue, "cudaMemset of host memory");
    T_CHECK(cudaGetLastError() == cudaSuccess, "copy errors are not sticky");
    T_CHECK(cudaFree(d) == cudaSuccess, "free");
    T_CHECK(cudaMemcpy(h, d, 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue, "use after free: refused");
    T_CHECK(cudaFree(d) == cudaErrorInvalidValue, "double free: refused");
    /* a kernel given freed memory faults (sticky, after the next synchronisation) */
    k_fill<<<1, 32>>>(d, 1.0f, 16);
    T_CHECK(cudaDeviceSynchronize() == cudaErrorIllegalAddress, "a kernel on freed memory: illegal address");
    cudaDeviceReset();
    k_fill<<<1, 32>>>(h, 1.0f, 16);
    T_CHECK(cudaDeviceSynchronize() == cudaErrorIllegalAddress, "a kernel on host memory: illegal address");
    cudaDeviceReset();
    T_CHECK(cu_emu::device_range_ok(h, 4) < 0, "host memory is not device memory");
    /* host code dereferencing a device pointer dies (the device view is not accessible) */
    float *live = NULL;
    cudaMalloc(&live, 64);
    fflush(stdout);
    fflush(stderr);
    int pfd[2];
    T_CHECK(pipe(pfd) == 0, "pipe");
    pid_t pid = fork();
    if (pid == 0) { /* its stderr (our message, a sanitizer's report) goes to the parent */
        dup2(pfd[1], 2);
        close(pfd[0]);
        volatile float v = live[3]; /* SIGSEGV */
        (void)v;
        _exit(0);
    }
    close(pfd[1]);
    char msg[8192];
    size_t got = 0;
    ssize_t r;
    while (got < sizeof msg - 1 && (r = read(pfd[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
    msg[got] = '\0';
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    T_CHECK(strstr(msg, "cu_emu: host code dereferenced device address") != NULL, "the death names the cause: %.200s", msg);
    /* SIGSEGV (a sanitizer's handler may report it and exit non-zero instead) */
    T_CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) || (WIFEXITED(status) && WEXITSTATUS(status) != 0),
            "host dereference of a device pointer must kill the process (status %d)", status);
    cudaFree(live);
}

/* ---------------- cuBLAS ---------------- */
/* op(X)(r, c) of a column-major matrix stored with leading dimension ld */
static double at(const float *X, bool t, int r, int c, int ld) { return t ? X[c + (size_t)r * ld] : X[r + (size_t)c * ld]; }

static void test_gemm(void) {
    cublasHandle_t h;
    T_CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    const int m = 13, n = 7, k = 21, batch = 3, pad = 5;
    int bad = 0;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
            int lda = ar + pad, ldb = br + pad, ldc = m + pad;
            long long sA = (long long)lda * ac + 11, sB = (long long)ldb * bc + 3, sC = (long long)ldc * n + 2;
            size_t na = (size_t)sA * batch, nb = (size_t)sB * batch, nc = (size_t)sC * batch;
            float *A = (float *)malloc(na * 4), *B = (float *)malloc(nb * 4), *C = (float *)malloc(nc * 4),
                  *C0 = (float *)malloc(nc * 4);
            for (size_t i = 0; i < na; i++) A[i] = (float)((i * 7919) % 201) / 37.0f - 2.5f;
            for (size_t i = 0; i < nb; i++) B[i] = (float)((i * 104729) % 173) / 29.0f - 3.0f;
            for (size_t i = 0; i < nc; i++) C0[i] = (i % 5 == 0) ? NAN : (float)(i % 9) - 4.0f;
            float *dA, *dB, *dC;
            cudaMalloc(&dA, na * 4); cudaMalloc(&dB, nb * 4); cudaMalloc(&dC, nc * 4);
            cudaMemcpy(dA, A, na * 4, cudaMemcpyHostToDevice);
            cudaMemcpy(dB, B, nb * 4, cudaMemcpyHostToDevice);
            for (int bz = 0; bz < 2; bz++) { /* beta = 0 (C not read) and beta = 0.5 */
                float alpha = 1.25f, beta = bz ? 0.5f : 0.0f;
                if (bz) for (size_t i = 0; i < nc; i++) C0[i] = isnan(C0[i]) ? 1.5f : C0[i];
                cudaMemcpy(dC, C0, nc * 4, cudaMemcpyHostToDevice);
                cublasStatus_t st = cublasSgemmStridedBatched(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                                              m, n, k, &alpha, dA, lda, sA, dB, ldb, sB, &beta, dC, ldc,
                                                              sC, batch);
                T_CHECK(st == CUBLAS_STATUS_SUCCESS, "sgemm ta=%d tb=%d: %d", ta, tb, (int)st);
                cudaMemcpy(C, dC, nc * 4, cudaMemcpyDeviceToHost);
                for (int b = 0; b < batch; b++)
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++) {
                            float acc = 0.0f; /* the documented order, one rounding each */
                            for (int l = 0; l < k; l++)
                                acc = acc + (float)at(A + b * sA, ta, i, l, lda) * (float)at(B + b * sB, tb, l, j, ldb);
                            size_t ci = (size_t)(b * sC) + i + (size_t)j * ldc;
                            float want = alpha * acc;
                            if (beta != 0.0f) want = want + beta * C0[ci];
                            bad += memcmp(&C[ci], &want, 4) != 0;
                        }
                /* padding and the gaps between batches are untouched */
                for (int b = 0; b < batch; b++)
                    for (int j = 0; j < n; j++)
                        for (int i = m; i < ldc; i++) {
                            size_t ci = (size_t)(b * sC) + i + (size_t)j * ldc;
                            bad += memcmp(&C[ci], &C0[ci], 4) != 0;
                        }
            }
            /* a leading dimension that runs past the buffer is refused */
            float one = 1.0f, zero = 0.0f;
            T_CHECK(cublasSgemmStridedBatched(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                              &one, dA, lda, sA * 2, dB, ldb, sB, &zero, dC, ldc, sC, batch) ==
                        CUBLAS_STATUS_INVALID_VALUE,
                    "a batch stride past the end of A is refused");
            T_CHECK(cublasSgemmStridedBatched(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k,
                                              &one, dA, ar - 1, sA, dB, ldb, sB, &zero, dC, ldc, sC, batch) ==
                        CUBLAS_STATUS_INVALID_VALUE,
                    "a leading dimension below the rows is refused");
            cudaFree(dA); cudaFree(dB); cudaFree(dC);
            free(A); free(B); free(C); free(C0);
        }
    T_CHECK(bad == 0, "sgemm: %d elements differ from the documented order (or padding touched)", bad);
    /* bf16 inputs, f32 output through cublasGemmEx: exact products, f32 sums in k order */
    const int M = 9, N = 11, K = 33;
    uint16_t Ab[9 * 33], Bb[33 * 11];
    float Cf[9 * 11];
    for (int i = 0; i < M * K; i++) Ab[i] = __bfloat16_as_ushort(__float2bfloat16_rn((float)((i * 31) % 17) / 7.0f - 1.0f));
    for (int i = 0; i < K * N; i++) Bb[i] = __bfloat16_as_ushort(__float2bfloat16_rn((float)((i * 13) % 19) / 5.0f - 2.0f));
    uint16_t *dAb, *dBb;
    float *dCf;
    cudaMalloc(&dAb, sizeof Ab); cudaMalloc(&dBb, sizeof Bb); cudaMalloc(&dCf, sizeof Cf);
    cudaMemcpy(dAb, Ab, sizeof Ab, cudaMemcpyHostToDevice);
    cudaMemcpy(dBb, Bb, sizeof Bb, cudaMemcpyHostToDevice);
    float one = 1.0f, zero = 0.0f;
    T_CHECK(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &one, dAb, CUDA_R_16BF, M, dBb, CUDA_R_16BF, K, &zero, dCf,
                         CUDA_R_32F, M, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS, "gemmex bf16");
    cudaMemcpy(Cf, dCf, sizeof Cf, cudaMemcpyDeviceToHost);
    bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.0f;
            for (int l = 0; l < K; l++)
                acc = acc + __bfloat162float(__ushort_as_bfloat16(Ab[i + l * M])) *
                                __bfloat162float(__ushort_as_bfloat16(Bb[l + j * K]));
            bad += Cf[i + j * M] != acc;
        }
    T_CHECK(bad == 0, "gemmex bf16: %d elements differ from the documented order", bad);
    cudaFree(dAb); cudaFree(dBb); cudaFree(dCf);
    cublasDestroy(h);
}

/* ---------------- WMMA ---------------- */
/* D = A B + C for one 16x16x16 tile (A row-major, B col-major, C/D row-major), one warp */
__global__ void k_mma(float *D, const __nv_bfloat16 *A, const __nv_bfloat16 *B, const float *C, float *same) {
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc, fc2;
    wmma::load_matrix_sync(fa, A, 16);
    wmma::load_matrix_sync(fb, B, 16);
    wmma::load_matrix_sync(fc, C, 16, wmma::mem_row_major);
    wmma::load_matrix_sync(fc2, C, 16, wmma::mem_row_major);
    for (int e = 0; e < fc.num_elements; e++) same[threadIdx.x * 8 + e] = fc.x[e] == fc2.x[e] ? 1.0f : 0.0f;
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(D, fc, 16, wmma::mem_row_major);
}

static void test_wmma(void) {
    __nv_bfloat16 A[256], B[256];
    float C[256], D[256], same[256];
    for (int i = 0; i < 256; i++) {
        A[i] = __float2bfloat16_rn((float)((i * 37) % 23) / 9.0f - 1.0f);
        B[i] = __float2bfloat16_rn((float)((i * 11) % 29) / 13.0f - 1.0f);
        C[i] = (float)(i % 7) / 3.0f;
    }
    __nv_bfloat16 *dA, *dB;
    float *dC, *dD, *ds;
    cudaMalloc(&dA, sizeof A); cudaMalloc(&dB, sizeof B); cudaMalloc(&dC, sizeof C); cudaMalloc(&dD, sizeof D);
    cudaMalloc(&ds, sizeof same);
    cudaMemcpy(dA, A, sizeof A, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B, sizeof B, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C, sizeof C, cudaMemcpyHostToDevice);
    k_mma<<<1, 32>>>(dD, dA, dB, dC, ds);
    cudaMemcpy(D, dD, sizeof D, cudaMemcpyDeviceToHost);
    cudaMemcpy(same, ds, sizeof same, cudaMemcpyDeviceToHost);
    int bad = 0, diff = 0;
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float acc = C[i * 16 + j];
            for (int k = 0; k < 16; k++) acc = acc + (float)A[i * 16 + k] * (float)B[k + j * 16];
            bad += D[i * 16 + j] != acc;
        }
    for (int i = 0; i < 256; i++) diff += same[i] != 1.0f;
    T_CHECK(bad == 0, "mma_sync: %d elements differ from the documented order", bad);
    T_CHECK(diff == 0, "fragments of one type map elements identically: %d differ", diff);
    cudaFree(dA); cudaFree(dB); cudaFree(dC); cudaFree(dD); cudaFree(ds);
}

/* ---------------- streams, events, one-rank NCCL ---------------- */
static void test_streams_nccl(void) {
    cudaStream_t s1, s2;
    cudaEvent_t e0, e1;
    T_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking) == cudaSuccess &&
                cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking) == cudaSuccess, "streams");
    T_CHECK(cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess, "events");
    float *d, h[8] = {1, 2, 3, 4, 5, 6, 7, 8}, r[8];
    cudaMalloc(&d, sizeof h);
    cudaEventRecord(e0, s1);
    cudaMemcpyAsync(d, h, sizeof h, cudaMemcpyHostToDevice, s1);
    k_fill<<<1, 8, 0, s1>>>(d + 4, 9.0f, 4);
    cudaEventRecord(e1, s1);
    cudaStreamWaitEvent(s2, e1, 0);
    cudaMemcpyAsync(r, d, sizeof r, cudaMemcpyDeviceToHost, s2);
    T_CHECK(cudaStreamSynchronize(s2) == cudaSuccess && cudaEventQuery(e1) == cudaSuccess && cudaStreamQuery(s1) == cudaSuccess,
            "sync and queries");
    float ms = -1;
    T_CHECK(cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess && ms >= 0, "elapsed time %g", ms);
    T_CHECK(r[0] == 1 && r[3] == 4 && r[4] == 9 && r[7] == 9, "stream order");
    ncclUniqueId id;
    ncclComm_t c;
    T_CHECK(ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&c, 1, id, 0) == ncclSuccess, "one-rank NCCL");
    float *o;
    cudaMalloc(&o, sizeof h);
    T_CHECK(ncclAllReduce(d, o, 8, ncclFloat32, ncclSum, c, s1) == ncclSuccess && cudaStreamSynchronize(s1) == cudaSuccess,
            "allreduce");
    cudaMemcpy(r, o, sizeof r, cudaMemcpyDeviceToHost);
    T_CHECK(r[0] == 1 && r[7] == 9, "one-rank allreduce is a copy");
    T_CHECK(ncclAllReduce(h, o, 8, ncclFloat32, ncclSum, c, s1) == ncclInvalidArgument, "a host buffer is refused");
    ncclCommDestroy(c);
    cudaFree(d); cudaFree(o);
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    cudaStreamDestroy(s1); cudaStreamDestroy(s2);
}

/* ---------------- DPCERT_CUDA_SYNC ---------------- */
/* the child: k_sqnorm_partial on freed memory (a fault of the kernel) */
static int sync_child(void) {
    int debug = getenv("DPCERT_CUDA_SYNC") && strcmp(getenv("DPCERT_CUDA_SYNC"), "1") == 0;
    cu_ctx *ctx = NULL;
    float *x = NULL;
    double *sq = NULL;
    T_OK(cu_ctx_create(&ctx, 0));
    T_OK(cu_malloc((void **)&x, 4000));
    T_OK(cu_malloc((void **)&sq, 8));
    cu_free(x);
    dp_status st = cu_dp_rows_sqnorm(ctx, sq, x, 1000, 1);
    if (debug) {
        T_CHECK(st == DP_ERR_DEVICE && strstr(dp_last_error(), "CUDA kernel k_sqnorm_partial failed") &&
                    strstr(dp_last_error(), "DPCERT_CUDA_SYNC=1"), "debug mode names the kernel: %s", dp_last_error());
    } else {
        T_CHECK(st == DP_OK, "without the debug mode the launch returns before the fault is seen");
        st = cu_sync(ctx);
        T_CHECK(st == DP_ERR_DEVICE && strstr(dp_last_error(), "cudaStreamSynchronize") &&
                    !strstr(dp_last_error(), "k_sqnorm_partial"),
                "the fault surfaces at the next synchronisation: %s", dp_last_error());
    }
    printf("DPCERT_CUDA_SYNC=%d: %s\n", debug, dp_last_error());
    cu_free(sq);
    cu_ctx_destroy(ctx);
    cudaDeviceReset();
    return t_finish();
}
static void test_sync_debug(const char *self) {
    for (int debug = 0; debug < 2; debug++) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0) {
            if (debug) setenv("DPCERT_CUDA_SYNC", "1", 1);
            else unsetenv("DPCERT_CUDA_SYNC");
            execl(self, self, "--sync-child", (char *)NULL);
            _exit(127);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "DPCERT_CUDA_SYNC=%d child (status %d)", debug, status);
    }
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--sync-child") == 0) return sync_child();
    test_sync_debug("/proc/self/exe");
    test_conversions();
    test_model();
    test_memory();
    test_gemm();
    test_wmma();
    test_streams_nccl();
    return t_finish();
}

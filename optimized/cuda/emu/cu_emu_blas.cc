// optimized/cuda/emu/cu_emu_blas.cc — the emulated cuBLAS / cuBLASLt GEMMs (cu_emu_blas.h):
// one column-major core, C = alpha op(A) op(B) + beta C, strided-batched, inputs f32 /
// f64 / bf16 / fp16, accumulation in f32 (f64 for Dgemm). Each C element is one dot
// product in k order from 0: the packed op(B) rows let the inner loop run over several
// output columns at once without changing any element's order of operations. Rows are
// split into blocks that run on the kernel pool (as a launch of a one-thread "kernel").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "optimized/cuda/emu/cu_emu_blas.h"
#include "optimized/cuda/emu/cu_emu_half.h"
#include "optimized/cuda/emu/cu_emu_internal.h"

struct cublasContext {
    uint32_t magic;
    cudaStream_t stream;
    cublasMath_t math;
    void *ws;
    size_t ws_bytes;
};
struct cublasLtContext {
    uint32_t magic;
};
struct cu_emu_lt_desc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    cublasOperation_t ta, tb;
};
struct cu_emu_lt_layout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
};
struct cu_emu_lt_pref {
    size_t max_ws;
    uint32_t align[4]; /* A, B, C, D */
};

namespace {
using namespace cu_emu;

const uint32_t BLAS_MAGIC = 0x424c4153u;

size_t type_size(cudaDataType_t t) {
    switch (t) {
    case CUDA_R_32F: return 4;
    case CUDA_R_64F: return 8;
    case CUDA_R_16F: case CUDA_R_16BF: return 2;
    }
    return 0;
}
inline double load_el(const void *p, cudaDataType_t t, size_t i) {
    switch (t) {
    case CUDA_R_32F: return ((const float *)p)[i];
    case CUDA_R_64F: return ((const double *)p)[i];
    case CUDA_R_16BF: return cu_emu::f32_from((uint32_t)((const uint16_t *)p)[i] << 16);
    case CUDA_R_16F: return cu_emu::f16_to_f32(((const uint16_t *)p)[i]);
    }
    return 0;
}

/* One GEMM problem, validated, with alias (runtime-view) pointers. */
struct gemm_prob {
    int m, n, k, batch;
    bool ta, tb;
    const void *A, *B;
    void *C;
    cudaDataType_t at, bt, ct;
    int lda, ldb, ldc;
    long long sA, sB, sC;
    double alpha, beta;
    bool f64; /* accumulate in double (Dgemm) */
};

template <class ACC> struct gemm_job {
    const gemm_prob *p;
    std::vector<ACC> bp; /* packed op(B): [batch][k][n] */
    int rb, row_blocks;
};

/* block (b, rows r0 .. r0 + rb) of the product */
template <class ACC> void gemm_block(void *arg) {
    gemm_job<ACC> *j = (gemm_job<ACC> *)arg;
    const gemm_prob &p = *j->p;
    long blk = (long)cu_emu::cur_block->bid.x;
    int b = (int)(blk / j->row_blocks), r0 = (int)(blk % j->row_blocks) * j->rb;
    int r1 = r0 + j->rb < p.m ? r0 + j->rb : p.m;
    const ACC *bp = j->bp.data() + (size_t)b * p.k * p.n;
    std::vector<ACC> arow((size_t)p.k), acc((size_t)p.n);
    const size_t ao = (size_t)b * (size_t)p.sA, co = (size_t)b * (size_t)p.sC;
    for (int i = r0; i < r1; i++) {
        for (int l = 0; l < p.k; l++) /* op(A)(i, l) */
            arow[l] = (ACC)load_el(p.A, p.at, ao + (p.ta ? (size_t)l + (size_t)i * p.lda : (size_t)i + (size_t)l * p.lda));
        for (int c = 0; c < p.n; c++) acc[c] = 0;
        for (int l = 0; l < p.k; l++) {
            const ACC a = arow[l], *brow = bp + (size_t)l * p.n;
            for (int c = 0; c < p.n; c++) acc[c] = acc[c] + a * brow[c];
        }
        const ACC al = (ACC)p.alpha, be = (ACC)p.beta;
        for (int c = 0; c < p.n; c++) {
            size_t ci = co + (size_t)i + (size_t)c * p.ldc;
            ACC r = al * acc[c];
            if (p.beta != 0) r = r + be * (ACC)load_el(p.C, p.ct, ci);
            if (p.ct == CUDA_R_64F) ((double *)p.C)[ci] = (double)r;
            else ((float *)p.C)[ci] = (float)r;
        }
    }
}

template <class ACC> void gemm_run(const gemm_prob &p, cudaStream_t s) {
    gemm_job<ACC> j;
    j.p = &p;
    j.bp.resize((size_t)p.batch * p.k * p.n);
    for (int b = 0; b < p.batch; b++) { /* op(B)(l, c) -> bp[b][l][c] */
        ACC *dst = j.bp.data() + (size_t)b * p.k * p.n;
        const size_t bo = (size_t)b * (size_t)p.sB;
        for (int c = 0; c < p.n; c++)
            for (int l = 0; l < p.k; l++)
                dst[(size_t)l * p.n + c] =
                    (ACC)load_el(p.B, p.bt, bo + (p.tb ? (size_t)c + (size_t)l * p.ldb : (size_t)l + (size_t)c * p.ldb));
    }
    /* about 2^16 multiply-adds per block */
    long per_row = (long)p.n * p.k + 1;
    j.rb = (int)(65536 / per_row);
    if (j.rb < 1) j.rb = 1;
    if (j.rb > p.m) j.rb = p.m;
    j.row_blocks = (p.m + j.rb - 1) / j.rb;
    long nblk = (long)j.row_blocks * p.batch;
    launch_desc d{(const void *)&gemm_block<ACC>, launch_cfg{dim3((unsigned)nblk), dim3(1), 0, s}, &gemm_block<ACC>, &j,
                  nullptr, nullptr, 0, false};
    launch(d);
}

/* extent in elements of a stored R x Cc column-major matrix with leading dimension ld */
size_t extent(int rows, int cols, int ld) { return rows == 0 || cols == 0 ? 0 : (size_t)(cols - 1) * ld + rows; }

cublasStatus_t gemm(cublasHandle_t h, const char *fn, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                    double alpha, const void *A, cudaDataType_t at, int lda, long long sA, const void *B,
                    cudaDataType_t bt, int ldb, long long sB, double beta, void *C, cudaDataType_t ct, int ldc,
                    long long sC, int batch, bool f64) {
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (broken()) return CUBLAS_STATUS_EXECUTION_FAILED;
    bool bad_op = (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T);
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    if (bad_op || m < 0 || n < 0 || k < 0 || batch < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) ||
        ldc < (m > 1 ? m : 1) || !type_size(at) || !type_size(bt) || (ct != CUDA_R_32F && ct != CUDA_R_64F)) {
        complain(cudaErrorInvalidValue, "%s: invalid arguments (op %d/%d, m=%d n=%d k=%d lda=%d ldb=%d ldc=%d batch=%d)",
                 fn, (int)ta, (int)tb, m, n, k, lda, ldb, ldc, batch);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (m == 0 || n == 0 || batch == 0) return CUBLAS_STATUS_SUCCESS;
    gemm_prob p{m, n, k, batch, ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, nullptr, nullptr, nullptr, at, bt, ct, lda, ldb,
                ldc, sA, sB, sC, alpha, beta, f64};
    /* every matrix of the batch must lie inside the buffer it starts in */
    size_t ea = extent(ar, ac, lda) + (size_t)(batch - 1) * (size_t)sA;
    size_t eb = extent(br, bc, ldb) + (size_t)(batch - 1) * (size_t)sB;
    size_t ec = extent(m, n, ldc) + (size_t)(batch - 1) * (size_t)sC;
    char what[120];
    snprintf(what, sizeof what, "%s: matrix A (%d x %d, ld %d, %d batches, stride %lld)", fn, ar, ac, lda, batch, sA);
    p.A = k ? dev_alias(A, ea * type_size(at), what) : A;
    snprintf(what, sizeof what, "%s: matrix B (%d x %d, ld %d, %d batches, stride %lld)", fn, br, bc, ldb, batch, sB);
    p.B = k ? dev_alias(B, eb * type_size(bt), what) : B;
    snprintf(what, sizeof what, "%s: matrix C (%d x %d, ld %d, %d batches, stride %lld)", fn, m, n, ldc, batch, sC);
    p.C = dev_alias(C, ec * type_size(ct), what);
    if ((k && (!p.A || !p.B)) || !p.C) return CUBLAS_STATUS_INVALID_VALUE;
    stream_obj *so = stream_of(h->stream);
    if (!so || stream_drain(so, fn) != cudaSuccess) return CUBLAS_STATUS_EXECUTION_FAILED;
    if (f64) gemm_run<double>(p, h->stream);
    else gemm_run<float>(p, h->stream);
    return broken() ? CUBLAS_STATUS_EXECUTION_FAILED : CUBLAS_STATUS_SUCCESS;
}

double scalar(const void *p, bool f64) { return f64 ? *(const double *)p : (double)*(const float *)p; }

} // namespace

/* ---------------- cuBLAS ---------------- */
cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = new cublasContext{BLAS_MAGIC, nullptr, CUBLAS_DEFAULT_MATH, nullptr, 0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!stream_of(s)) return CUBLAS_STATUS_INVALID_VALUE;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = m; /* no TF32 in the emulation: every mode computes in full f32 */
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes) {
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (bytes && !dev_alias(ws, bytes, "cublasSetWorkspace")) return CUBLAS_STATUS_INVALID_VALUE;
    h->ws = ws;
    h->ws_bytes = bytes;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    return gemm(h, "cublasSgemm", ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, 0, B, CUDA_R_32F, ldb, 0, *beta, C,
                CUDA_R_32F, ldc, 0, 1, false);
}
cublasStatus_t cublasDgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const double *alpha, const double *A, int lda, const double *B, int ldb,
                           const double *beta, double *C, int ldc) {
    return gemm(h, "cublasDgemm", ta, tb, m, n, k, *alpha, A, CUDA_R_64F, lda, 0, B, CUDA_R_64F, ldb, 0, *beta, C,
                CUDA_R_64F, ldc, 0, 1, true);
}
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sA,
                                         const float *B, int ldb, long long sB, const float *beta, float *C, int ldc,
                                         long long sC, int batch) {
    return gemm(h, "cublasSgemmStridedBatched", ta, tb, m, n, k, *alpha, A, CUDA_R_32F, lda, sA, B, CUDA_R_32F, ldb,
                sB, *beta, C, CUDA_R_32F, ldc, sC, batch, false);
}
cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const double *alpha, const double *A, int lda, long long sA,
                                         const double *B, int ldb, long long sB, const double *beta, double *C,
                                         int ldc, long long sC, int batch) {
    return gemm(h, "cublasDgemmStridedBatched", ta, tb, m, n, k, *alpha, A, CUDA_R_64F, lda, sA, B, CUDA_R_64F, ldb,
                sB, *beta, C, CUDA_R_64F, ldc, sC, batch, true);
}
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *A, cudaDataType_t Atype, int lda,
                                          long long sA, const void *B, cudaDataType_t Btype, int ldb, long long sB,
                                          const void *beta, void *C, cudaDataType_t Ctype, int ldc, long long sC,
                                          int batch, cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    (void)algo;
    bool f64 = compute == CUBLAS_COMPUTE_64F;
    if (!f64 && compute != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    return gemm(h, "cublasGemmStridedBatchedEx", ta, tb, m, n, k, scalar(alpha, f64), A, Atype, lda, sA, B, Btype, ldb,
                sB, scalar(beta, f64), C, Ctype, ldc, sC, batch, f64);
}
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType_t Atype, int lda, const void *B,
                            cudaDataType_t Btype, int ldb, const void *beta, void *C, cudaDataType_t Ctype, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo) {
    return cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc,
                                      0, 1, compute, algo);
}

/* ---------------- cuBLASLt ---------------- */
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
    *h = new cublasLtContext{BLAS_MAGIC};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0;
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute, cudaDataType_t scale) {
    *d = new cu_emu_lt_desc{compute, scale, CUBLAS_OP_N, CUBLAS_OP_N};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void *v,
                                              size_t bytes) {
    if (bytes != sizeof(cublasOperation_t)) return CUBLAS_STATUS_INVALID_VALUE;
    if (a == CUBLASLT_MATMUL_DESC_TRANSA) memcpy(&d->ta, v, bytes);
    else if (a == CUBLASLT_MATMUL_DESC_TRANSB) memcpy(&d->tb, v, bytes);
    else return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type, uint64_t rows, uint64_t cols,
                                          int64_t ld) {
    *l = new cu_emu_lt_layout{type, rows, cols, ld, 1, 0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, cublasLtMatrixLayoutAttribute_t a,
                                                const void *v, size_t bytes) {
    if (a == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && bytes == sizeof(int32_t)) memcpy(&l->batch, v, bytes);
    else if (a == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && bytes == sizeof(int64_t)) memcpy(&l->stride, v, bytes);
    else return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
    *p = new cu_emu_lt_pref{0, {1, 1, 1, 1}};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *v, size_t bytes) {
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof(size_t)) memcpy(&p->max_ws, v, bytes);
    else if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES &&
             bytes == sizeof(uint32_t))
        memcpy(&p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], v, bytes);
    else return CUBLAS_STATUS_INVALID_VALUE;
    return CUBLAS_STATUS_SUCCESS;
}
/* the emulated algorithm: word 0 = a tag, words 1-4 = the alignments promised */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t A,
                                              cublasLtMatrixLayout_t B, cublasLtMatrixLayout_t C,
                                              cublasLtMatrixLayout_t D, cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *results, int *found) {
    *found = 0;
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!op || !A || !B || !C || !D || !pref || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    if (!env().lt_heuristic) return CUBLAS_STATUS_NOT_SUPPORTED; /* "no algorithm": callers fall back */
    memset(&results[0], 0, sizeof results[0]);
    results[0].algo.data[0] = 0x656d75u;
    for (int i = 0; i < 4; i++) results[0].algo.data[1 + i] = pref->align[i];
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}
static bool aligned_to(const void *p, uint64_t a) { return a <= 1 || (uintptr_t)p % a == 0; }
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t Ad, const void *B, cublasLtMatrixLayout_t Bd, const void *beta,
                              const void *C, cublasLtMatrixLayout_t Cd, void *D, cublasLtMatrixLayout_t Dd,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t wsbytes, cudaStream_t s) {
    (void)ws;
    (void)wsbytes;
    if (!h || h->magic != BLAS_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    if (!op || !Ad || !Bd || !Cd || !Dd || !algo || algo->data[0] != 0x656d75u) return CUBLAS_STATUS_INVALID_VALUE;
    if (C != D || Cd->rows != Dd->rows || Cd->cols != Dd->cols || Cd->ld != Dd->ld)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* the emulation computes in place (C == D), as the backend calls it */
    if (!aligned_to(A, algo->data[1]) || !aligned_to(B, algo->data[2]) || !aligned_to(C, algo->data[3]) ||
        !aligned_to(D, algo->data[4])) {
        complain(cudaErrorInvalidValue, "cublasLtMatmul: a pointer is less aligned than the preference promised the "
                 "heuristic (A %p, B %p, C %p)", A, B, C);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    bool f64 = op->compute == CUBLAS_COMPUTE_64F;
    if (!f64 && op->compute != CUBLAS_COMPUTE_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    /* op(A) is m x k, op(B) k x n, C m x n */
    int m = (int)(op->ta == CUBLAS_OP_N ? Ad->rows : Ad->cols), k = (int)(op->ta == CUBLAS_OP_N ? Ad->cols : Ad->rows);
    int kb = (int)(op->tb == CUBLAS_OP_N ? Bd->rows : Bd->cols), n = (int)(op->tb == CUBLAS_OP_N ? Bd->cols : Bd->rows);
    if (kb != k || (int)Cd->rows != m || (int)Cd->cols != n || Ad->batch != Bd->batch || Ad->batch != Cd->batch) {
        complain(cudaErrorInvalidValue, "cublasLtMatmul: layouts disagree (op(A) %d x %d, op(B) %d x %d, C %d x %d, "
                 "batches %d/%d/%d)", m, k, kb, n, (int)Cd->rows, (int)Cd->cols, Ad->batch, Bd->batch, Cd->batch);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    cublasHandle_t tmp;
    cublasCreate(&tmp);
    tmp->stream = s;
    cublasStatus_t st = gemm(tmp, "cublasLtMatmul", op->ta, op->tb, m, n, k, scalar(alpha, f64), A, Ad->type, (int)Ad->ld,
                             Ad->stride, B, Bd->type, (int)Bd->ld, Bd->stride, scalar(beta, f64), D, Cd->type,
                             (int)Cd->ld, Cd->stride, Ad->batch, f64);
    cublasDestroy(tmp);
    return st;
}

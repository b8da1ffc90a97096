// optimized/cuda/emu/cu_emu_nccl.h — NCCL of the emulation (nccl.h): communicators and
// collectives over MPI on the host (cu_emu_nccl.cc). Device pointers are host memory, so
// every collective is the MPI non-blocking operation of the same meaning on the device
// buffers; it is started when called and stays pending on its stream until something on
// that stream (or an event recorded after it) waits: cudaStreamQuery / cudaEventQuery
// test the MPI requests, so a caller's timed poll sees a stalled peer as "not ready".
//
// ncclGetUniqueId makes a random id; ncclCommInitRank(comm, n, id, rank) is collective over
// MPI_COMM_WORLD (MPI_Comm_split by the id: rank order = NCCL rank), or local when n = 1;
// like NCCL it fails (ncclInvalidUsage, "Duplicate GPU detected") when two ranks of one
// node use the same device. ncclCommSplit(comm, color, key, &new, config) is collective over
// comm (MPI_Comm_split of its MPI communicator): same color = one communicator, ranked by
// key, ties by the rank in comm; NCCL_SPLIT_NOCOLOR gives NULL; a negative color other
// than that, or a config that is not NULL, is refused (ncclInvalidArgument; the backend
// passes NULL: inherit the parent's configuration). ncclGroupStart / ncclGroupEnd nest and
// are counted (an End without a Start is ncclInvalidUsage, as in NCCL). Collectives start
// when called. ncclSend / ncclRecv are "blocking for the GPU" (nccl.h): each starts only
// when the work its stream had before it is complete (the GPU's stream order), except the
// work of its own ncclGroupStart/End section (fused: they progress together), and a send
// outside a group completes only when the peer's receive has started (MPI_Issend). So two
// ranks that each issue a receive and then a send to each other outside a group wait for
// each other until the stream wait times out (CU_EMU_WAIT_TIMEOUT), as they would hang on
// a GPU; fused in a group they complete. Sums follow MPI's reduction order (as NCCL's, not the host
// backend's rank order). Types: f32, f64; operation: sum. CU_EMU_FAULT=ncclGetUniqueId
// makes ncclGetUniqueId fail (tests of the callers' error paths).
#ifndef CU_EMU_NCCL_H
#define CU_EMU_NCCL_H

#include <stddef.h>

#include "optimized/cuda/emu/cu_emu_runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 27
#define NCCL_PATCH 0
#define NCCL_VERSION_CODE 22700

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7
} ncclResult_t;
typedef enum { ncclFloat32 = 7, ncclFloat = 7, ncclFloat64 = 8, ncclDouble = 8 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef struct ncclComm *ncclComm_t;
#define NCCL_SPLIT_NOCOLOR -1
/* nccl.h's configuration; the emulation accepts only NULL (inherit the parent's) */
typedef struct {
    size_t size;
    unsigned int magic, version;
    int blocking;
} ncclConfig_t;

const char *ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetVersion(int *v);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRank(ncclComm_t *c, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config);
ncclResult_t ncclCommDestroy(ncclComm_t c);
ncclResult_t ncclCommAbort(ncclComm_t c);
ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *r);
ncclResult_t ncclCommCount(ncclComm_t c, int *n);
ncclResult_t ncclCommUserRank(ncclComm_t c, int *r);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t n, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t s);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t n, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t s);
ncclResult_t ncclSend(const void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s);
ncclResult_t ncclRecv(void *buf, size_t n, ncclDataType_t t, int peer, ncclComm_t c, cudaStream_t s);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

#endif

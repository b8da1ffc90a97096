// optimized/cuda/emu/cu_emu_internal.h — what the emulation's implementation files share
// (not included by the .cu sources): error state, the device-memory arena, streams and
// their pending (NCCL) work, the sanitizer annotations, environment settings.
#ifndef CU_EMU_INTERNAL_H
#define CU_EMU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <deque>
#include <memory>
#include <vector>

#include "optimized/cuda/emu/cu_emu_runtime.h"

#if defined(__SANITIZE_ADDRESS__)
#define CU_EMU_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define CU_EMU_TSAN 1
#endif

namespace cu_emu {

/* ---- errors (cu_emu_runtime.cc) ---- */
/* The launch-configuration error of the last call (returned and cleared by cudaGetLastError). */
void set_last(cudaError_t e);
/* A fault of the device (a kernel's illegal address, a trap, a divergent barrier): prints
 * "cu_emu: <message>" to stderr and records e, which becomes sticky (every later call
 * returns it, until cudaDeviceReset) at the next synchronising call (surface()), as a GPU
 * reports a kernel's fault asynchronously; nothing runs on the device meanwhile. Returns e. */
cudaError_t fault(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* the sticky error visible to the program (cudaSuccess if none) */
cudaError_t sticky();
/* a synchronising call: a recorded fault becomes visible (sticky); returns sticky() */
cudaError_t surface();
/* a fault was recorded (visible or not): kernels and GEMMs do not run */
bool broken();
/* A loud diagnostic for a call that fails without corrupting the context (wrong-size copy,
 * bad pointer): prints "cu_emu: <message>" and returns e (not sticky). */
cudaError_t complain(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- settings (environment, read once) ---- */
struct settings {
    size_t memory;       /* CU_EMU_MEMORY: arena bytes */
    int guard;           /* CU_EMU_GUARD: device memory PROT_NONE between launches */
    int threads;         /* CU_EMU_THREADS: OS threads running blocks */
    int devices;         /* CU_EMU_DEVICES */
    double wait_timeout; /* CU_EMU_WAIT_TIMEOUT: seconds a stream operation waits for pending NCCL work */
    int lt_heuristic;    /* CU_EMU_LT_HEURISTIC=none -> 0 */
    char fault[64];      /* CU_EMU_FAULT: name of an API call made to fail */
};
const settings &env();

/* ---- device memory (cu_emu_mem.cc) ---- */
/* The runtime's view of device range [p, p + bytes) (an always-accessible alias of the
 * same pages), or NULL after a loud complaint naming `what` (not a device pointer, freed,
 * past the end of its allocation). */
void *dev_alias(const void *p, size_t bytes, const char *what);
/* 0 if p points into (or one past) a live allocation; else a description of what it is. */
const char *dev_ptr_problem(const void *p);
/* Host access to the device view: on (kernels run) / off (host code runs). */
void dev_access(bool on);
/* Checks the redzone after the allocation containing p; 0 or a message. */
const char *dev_redzone_problem(const void *p, char *buf, size_t len);
void mem_reset();

/* ---- streams (cu_emu_runtime.cc) ---- */
/* Work started on a stream that completes later (an NCCL operation: MPI requests). */
struct pending_op {
    virtual ~pending_op() {}
    /* true once complete (may make progress) */
    virtual bool test() = 0;
    bool done = false;
    bool abandoned = false; /* its communicator was aborted: never completes, never waited for */
    const char *what = "";
};
typedef std::shared_ptr<pending_op> pend;
/* The stream object for a handle (nullptr: the default stream); NULL if invalid. */
struct stream_obj;
stream_obj *stream_of(cudaStream_t s);
/* Adds op to the stream's pending work. */
void stream_add(stream_obj *s, const pend &op);
/* The stream's pending work (what a GPU would run before anything enqueued now). */
std::deque<pend> stream_pending(stream_obj *s);
/* Waits (polling, CU_EMU_WAIT_TIMEOUT) until the stream's pending work is complete. */
cudaError_t stream_drain(stream_obj *s, const char *why);

/* ---- kernels (cu_emu_sched.cc) ---- */
/* The kernel's name for messages ("k_noise<float, 0>"), from the symbol table. */
void kernel_name(const void *kernel, char *out, size_t len);

/* ---- time ---- */
double now_s();
void nap(long *ns);

} // namespace cu_emu

#endif

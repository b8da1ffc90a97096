// optimized/cuda/emu/cu_emu_runtime.cc — the emulated CUDA runtime apart from memory and
// kernels: errors (last and sticky), settings, devices, streams, events (docs/cuda.md
// "The emulation"). Streams run their work when it is enqueued; what stays pending is
// NCCL work (cu_emu_nccl.cc), which stream and event waits complete by polling.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>

#include "optimized/cuda/emu/cu_emu_internal.h"

extern "C" {
const int cu_emu_runtime_marker = 1;
}

namespace cu_emu {

/* ---------------- settings ---------------- */
static size_t parse_bytes(const char *s, size_t dflt) {
    if (!s || !*s) return dflt;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || !(v > 0)) return dflt;
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1024.0 * 1024.0; break;
    case 'g': case 'G': v *= 1024.0 * 1024.0 * 1024.0; break;
    default: break;
    }
    return (size_t)v;
}
static int env_int(const char *name, int dflt) {
    const char *e = getenv(name);
    return e && *e ? atoi(e) : dflt;
}
/* ranks started on this node by the launcher (the emulation gives each its own device) */
static int local_ranks() {
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!ls || !*ls) ls = getenv("MPI_LOCALNRANKS");
    int n = ls && *ls ? atoi(ls) : 1;
    return n < 1 ? 1 : n;
}

const settings &env() {
    static settings s;
    static std::once_flag once;
    std::call_once(once, [] {
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        size_t half = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz / 2 : ((size_t)8 << 30);
        size_t dflt = std::min(half, (size_t)16 << 30);
        s.memory = parse_bytes(getenv("CU_EMU_MEMORY"), dflt);
        s.guard = env_int("CU_EMU_GUARD", 1);
        int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
        int t = cores / local_ranks();
        s.threads = env_int("CU_EMU_THREADS", t < 1 ? 1 : t);
        if (s.threads < 1) s.threads = 1;
        if (s.threads > 64) s.threads = 64;
        s.devices = env_int("CU_EMU_DEVICES", local_ranks());
        if (s.devices < 0) s.devices = 0;
        const char *w = getenv("CU_EMU_WAIT_TIMEOUT");
        s.wait_timeout = w && *w ? atof(w) : 600.0;
        const char *h = getenv("CU_EMU_LT_HEURISTIC");
        s.lt_heuristic = !(h && strcmp(h, "none") == 0);
        const char *f = getenv("CU_EMU_FAULT");
        snprintf(s.fault, sizeof s.fault, "%s", f ? f : "");
    });
    return s;
}

double now_s() {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
/* sleep *ns (10 us, doubling to 1 ms) */
void nap(long *ns) {
    *ns = *ns ? (*ns * 2 > 1000000 ? 1000000 : *ns * 2) : 10000;
    struct timespec ts = {0, *ns};
    nanosleep(&ts, NULL);
}

/* ---------------- errors ---------------- */
static std::atomic<int> last_err{cudaSuccess};
static std::atomic<int> pending_err{cudaSuccess}; /* recorded, not yet seen by a synchronising call */
static std::atomic<int> sticky_err{cudaSuccess};

void set_last(cudaError_t e) { last_err.store(e); }
cudaError_t sticky() { return (cudaError_t)sticky_err.load(); }
bool broken() { return pending_err.load() != cudaSuccess || sticky_err.load() != cudaSuccess; }
cudaError_t surface() {
    int p = pending_err.load(), expect = cudaSuccess;
    if (p != cudaSuccess) sticky_err.compare_exchange_strong(expect, p);
    return sticky();
}

static void vsay(const char *fmt, va_list ap) {
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    fprintf(stderr, "cu_emu: %s\n", msg);
    fflush(stderr);
}
cudaError_t fault(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    int expect = cudaSuccess;
    pending_err.compare_exchange_strong(expect, e);
    return e;
}
cudaError_t complain(cudaError_t e, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsay(fmt, ap);
    va_end(ap);
    return e;
}

/* ---------------- streams and events ---------------- */
static const uint32_t STREAM_MAGIC = 0x5354524du, EVENT_MAGIC = 0x45564e54u, DEAD = 0xdeadu;
struct stream_obj {
    uint32_t magic;
    unsigned int flags;
    std::deque<pend> q;
};
static stream_obj default_stream = {STREAM_MAGIC, 0, {}};
static std::mutex streams_m;
static std::set<stream_obj *> streams; /* live non-default streams (cudaDeviceSynchronize) */

stream_obj *stream_of(cudaStream_t s) {
    if (!s) return &default_stream;
    stream_obj *o = (stream_obj *)(void *)s;
    std::lock_guard<std::mutex> g(streams_m);
    return streams.count(o) && o->magic == STREAM_MAGIC ? o : NULL;
}
void stream_add(stream_obj *s, const pend &op) { s->q.push_back(op); }
std::deque<pend> stream_pending(stream_obj *s) { return s->q; }

/* test every pending op; drop the complete and abandoned ones; true when none is left */
static bool stream_test(std::deque<pend> &q) {
    for (auto it = q.begin(); it != q.end();) {
        pend &p = *it;
        if (!p->done && !p->abandoned) p->done = p->test();
        if (p->done || p->abandoned) it = q.erase(it);
        else ++it;
    }
    return q.empty();
}

static cudaError_t wait_ops(std::deque<pend> &q, const char *why) {
    double t0 = now_s();
    long ns = 0;
    while (!stream_test(q)) {
        double waited = now_s() - t0;
        if (waited > env().wait_timeout) {
            fault(cudaErrorLaunchTimeout,
                         "%s waited %.0f s for pending NCCL work (%s) (CU_EMU_WAIT_TIMEOUT): another rank died or "
                         "stalled",
                         why, waited, q.front()->what);
            return surface();
        }
        nap(&ns);
    }
    return cudaSuccess;
}
cudaError_t stream_drain(stream_obj *s, const char *why) { return wait_ops(s->q, why); }

} // namespace cu_emu

struct CUevent_st {
    uint32_t magic;
    unsigned int flags;
    bool recorded;
    double t;
    std::deque<cu_emu::pend> deps; /* the stream's pending work when recorded */
};

using namespace cu_emu;

/* ---------------- the API ---------------- */
struct err_name {
    cudaError_t e;
    const char *name, *text;
};
static const err_name err_names[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration", "invalid configuration argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorIllegalAddress, "cudaErrorIllegalAddress", "an illegal memory access was encountered"},
    {cudaErrorLaunchTimeout, "cudaErrorLaunchTimeout", "the launch timed out and was terminated"},
    {cudaErrorAssert, "cudaErrorAssert", "device-side assert triggered"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorCooperativeLaunchTooLarge, "cudaErrorCooperativeLaunchTooLarge",
     "too many blocks in cooperative launch"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};
static const err_name *find_err(cudaError_t e) {
    for (const err_name &n : err_names)
        if (n.e == e) return &n;
    return NULL;
}
const char *cudaGetErrorName(cudaError_t e) {
    const err_name *n = find_err(e);
    return n ? n->name : "cudaErrorUnrecognized";
}
const char *cudaGetErrorString(cudaError_t e) {
    const err_name *n = find_err(e);
    return n ? n->text : "unrecognized error code";
}
cudaError_t cudaGetLastError(void) {
    cudaError_t s = sticky();
    cudaError_t l = (cudaError_t)last_err.exchange(cudaSuccess);
    return s != cudaSuccess ? s : l;
}
cudaError_t cudaPeekAtLastError(void) {
    cudaError_t s = sticky();
    return s != cudaSuccess ? s : (cudaError_t)last_err.load();
}

/* ---- devices ---- */
static thread_local int cur_device = 0;
cudaError_t cudaGetDeviceCount(int *n) {
    *n = env().devices;
    return *n > 0 ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int device) {
    if (device < 0 || device >= env().devices) return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuda-emu (CPU emulation of sm_90, %d threads; not a GPU)", env().threads);
    p->totalGlobalMem = env().memory;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->regsPerBlock = 65536;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = p->maxThreadsDim[1] = 1024;
    p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 0x7fffffff;
    p->maxGridSize[1] = p->maxGridSize[2] = 65535;
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = env().threads;
    p->l2CacheSize = 50 << 20;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device) {
    if (device < 0 || device >= env().devices) return cudaErrorInvalidDevice;
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = env().threads; return cudaSuccess;
    case cudaDevAttrCooperativeLaunch: *value = 1; return cudaSuccess;
    }
    return cudaErrorInvalidValue;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= env().devices) return cudaErrorInvalidDevice;
    cur_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) {
    *device = cur_device;
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) {
    *v = CUDART_VERSION;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) {
    if (surface()) return sticky();
    cudaError_t e = stream_drain(&default_stream, "cudaDeviceSynchronize");
    std::vector<stream_obj *> all;
    {
        std::lock_guard<std::mutex> g(streams_m);
        all.assign(streams.begin(), streams.end());
    }
    for (stream_obj *s : all)
        if (e == cudaSuccess) e = stream_drain(s, "cudaDeviceSynchronize");
    return e;
}
cudaError_t cudaDeviceReset(void) {
    sticky_err.store(cudaSuccess);
    pending_err.store(cudaSuccess);
    last_err.store(cudaSuccess);
    mem_reset();
    return cudaSuccess;
}

/* ---- streams ---- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    if (sticky()) return sticky();
    stream_obj *o = new stream_obj{STREAM_MAGIC, flags, {}};
    {
        std::lock_guard<std::mutex> g(streams_m);
        streams.insert(o);
    }
    *s = (cudaStream_t)(void *)o;
    return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    stream_obj *o = s ? stream_of(s) : NULL;
    if (!o) return complain(cudaErrorInvalidResourceHandle, "cudaStreamDestroy: %p is not a live stream", (void *)s);
    {
        std::lock_guard<std::mutex> g(streams_m);
        streams.erase(o);
    }
    o->magic = DEAD;
    delete o; /* pending work of aborted communicators is dropped with it */
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    stream_obj *o = stream_of(s);
    if (!o) return complain(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize: %p is not a live stream", (void *)s);
    if (surface()) return sticky();
    return stream_drain(o, "cudaStreamSynchronize");
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
    stream_obj *o = stream_of(s);
    if (!o) return complain(cudaErrorInvalidResourceHandle, "cudaStreamQuery: %p is not a live stream", (void *)s);
    if (surface()) return sticky();
    return stream_test(o->q) ? cudaSuccess : cudaErrorNotReady;
}
/* later work on s waits for e: s inherits e's pending work (nothing blocks now) */
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    (void)flags;
    stream_obj *o = stream_of(s);
    if (!o || !e || e->magic != EVENT_MAGIC)
        return complain(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent: bad stream %p or event %p", (void *)s,
                        (void *)e);
    if (sticky()) return sticky();
    for (const pend &p : e->deps)
        if (std::find(o->q.begin(), o->q.end(), p) == o->q.end()) o->q.push_back(p);
    return cudaSuccess;
}

/* ---- events ---- */
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    if (sticky()) return sticky();
    *e = new CUevent_st{EVENT_MAGIC, flags, false, 0.0, {}};
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e || e->magic != EVENT_MAGIC)
        return complain(cudaErrorInvalidResourceHandle, "cudaEventDestroy: %p is not a live event", (void *)e);
    e->magic = DEAD;
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    stream_obj *o = stream_of(s);
    if (!o || !e || e->magic != EVENT_MAGIC)
        return complain(cudaErrorInvalidResourceHandle, "cudaEventRecord: bad stream %p or event %p", (void *)s,
                        (void *)e);
    if (sticky()) return sticky();
    stream_test(o->q);
    e->deps = o->q;
    e->recorded = true;
    e->t = now_s();
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e || e->magic != EVENT_MAGIC)
        return complain(cudaErrorInvalidResourceHandle, "cudaEventQuery: %p is not a live event", (void *)e);
    if (surface()) return sticky();
    return stream_test(e->deps) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e || e->magic != EVENT_MAGIC)
        return complain(cudaErrorInvalidResourceHandle, "cudaEventSynchronize: %p is not a live event", (void *)e);
    if (surface()) return sticky();
    return wait_ops(e->deps, "cudaEventSynchronize");
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    if (!a || !b || a->magic != EVENT_MAGIC || b->magic != EVENT_MAGIC)
        return complain(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime: bad event");
    if ((a->flags | b->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
    if (!a->recorded || !b->recorded) return cudaErrorInvalidResourceHandle;
    if (sticky()) return sticky();
    *ms = (float)((b->t - a->t) * 1e3); /* host time of the emulation: not a GPU timing */
    return cudaSuccess;
}

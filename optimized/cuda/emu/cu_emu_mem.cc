// optimized/cuda/emu/cu_emu_mem.cc — emulated device memory (docs/cuda.md "The emulation",
// "Memory guard"):
//   - one arena of CU_EMU_MEMORY bytes, a memfd mapped twice: the device view (the
//     addresses cudaMalloc returns, what kernels use) and an alias view of the same pages
//     that the runtime itself copies through;
//   - the device view is PROT_NONE except while a kernel runs (CU_EMU_GUARD=1, default):
//     host code that dereferences a device pointer gets SIGSEGV, reported as such;
//   - allocations are 256-byte aligned and followed by a redzone (>= 256 bytes) filled
//     with a canary: a kernel that writes past the end of a buffer it was given is
//     reported after the launch, naming the kernel; under ASan the redzones and freed
//     memory are poisoned, so every out-of-bounds or stale access is reported at once;
//   - freed memory goes to a quarantine (reused after 256 MiB or 4096 frees), so a use
//     after free is recognised as such;
//   - copies and sets check that the device range lies inside one live allocation
//     (host pointer as device pointer, wrong size, use after free: message + error).
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <mutex>

#include "optimized/cuda/emu/cu_emu_internal.h"

#ifdef CU_EMU_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) __asan_poison_memory_region((p), (n))
#define UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace cu_emu {

enum : size_t { ALIGN = 256, REDZONE = 256, QUAR_BYTES = (size_t)256 << 20, QUAR_COUNT = 4096 };
static const unsigned char CANARY = 0xcd;

struct block_info {
    size_t user;  /* bytes asked for */
    size_t span;  /* bytes reserved: user rounded up + redzone */
    bool live;
};

static struct arena {
    std::mutex m;
    bool ready = false, failed = false;
    char *dev = NULL, *alias = NULL;
    size_t size = 0, high = 0; /* high: page-rounded end of everything ever allocated */
    std::map<size_t, block_info> blocks; /* offset -> allocation (live or quarantined) */
    std::map<size_t, size_t> free_;      /* offset -> bytes, coalesced */
    std::deque<size_t> quarantine;
    size_t quar_bytes = 0, live_bytes = 0;
    bool access = false;
    struct sigaction old_segv;
} A;

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static void segv_handler(int sig, siginfo_t *si, void *uc) {
    char *p = (char *)si->si_addr;
    if (A.dev && p >= A.dev && p < A.dev + A.size) {
        char msg[200];
        int n = snprintf(msg, sizeof msg,
                         "cu_emu: host code dereferenced device address %p (device memory is not host memory; "
                         "copy it with cudaMemcpy): SIGSEGV\n",
                         (void *)p);
        if (n > 0) (void)!write(2, msg, (size_t)n);
    }
    /* the previous handler (ASan's report, or the default: core) */
    if (A.old_segv.sa_flags & SA_SIGINFO) {
        if (A.old_segv.sa_sigaction) {
            A.old_segv.sa_sigaction(sig, si, uc);
            return;
        }
    } else if (A.old_segv.sa_handler != SIG_DFL && A.old_segv.sa_handler != SIG_IGN) {
        A.old_segv.sa_handler(sig);
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* with A.m held */
static bool arena_init() {
    if (A.ready) return true;
    if (A.failed) return false;
    A.failed = true;
    A.size = round_up(env().memory, (size_t)2 << 20);
    int fd = memfd_create("cu_emu_device_memory", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)A.size) != 0) {
        fprintf(stderr, "cu_emu: cannot create the device-memory arena (%s)\n", strerror(errno));
        if (fd >= 0) close(fd);
        return false;
    }
    int prot = env().guard ? PROT_NONE : PROT_READ | PROT_WRITE;
    void *d = mmap(NULL, A.size, prot, MAP_SHARED | MAP_NORESERVE, fd, 0);
    void *a = mmap(NULL, A.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd);
    if (d == MAP_FAILED || a == MAP_FAILED) {
        fprintf(stderr, "cu_emu: cannot map the device-memory arena of %zu bytes (%s)\n", A.size, strerror(errno));
        return false;
    }
    A.dev = (char *)d;
    A.alias = (char *)a;
    A.free_[0] = A.size;
    A.access = !env().guard;
    if (env().guard) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = segv_handler;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &A.old_segv);
    }
    A.ready = true;
    A.failed = false;
    return true;
}

/* the allocation whose reserved span contains offset o, or end() */
static std::map<size_t, block_info>::iterator find_block(size_t o) {
    auto it = A.blocks.upper_bound(o);
    if (it == A.blocks.begin()) return A.blocks.end();
    --it;
    return o < it->first + it->second.span ? it : A.blocks.end();
}

static void free_range(size_t off, size_t n) {
    auto next = A.free_.lower_bound(off);
    if (next != A.free_.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            off = prev->first;
            n += prev->second;
            A.free_.erase(prev);
        }
    }
    if (next != A.free_.end() && off + n == next->first) {
        n += next->second;
        A.free_.erase(next);
    }
    A.free_[off] = n;
}

static void release_quarantine(size_t keep_bytes, size_t keep_count) {
    while (!A.quarantine.empty() && (A.quar_bytes > keep_bytes || A.quarantine.size() > keep_count)) {
        size_t off = A.quarantine.front();
        A.quarantine.pop_front();
        auto it = A.blocks.find(off);
        size_t span = it->second.span;
        A.quar_bytes -= span;
        A.blocks.erase(it);
        free_range(off, span);
    }
}

static const char *redzone_problem_at(std::map<size_t, block_info>::iterator it, char *buf, size_t len) {
    const unsigned char *rz = (const unsigned char *)A.alias + it->first + it->second.user;
    size_t n = it->second.span - it->second.user;
    for (size_t i = 0; i < n; i++)
        if (rz[i] != CANARY) {
            snprintf(buf, len,
                     "the device allocation of %zu bytes at %p was written %zu bytes past its end (its redzone was "
                     "overwritten: an out-of-bounds write)",
                     it->second.user, (void *)(A.dev + it->first), i);
            return buf;
        }
    return NULL;
}

void *dev_alias(const void *p, size_t bytes, const char *what) {
    std::lock_guard<std::mutex> g(A.m);
    const char *c = (const char *)p;
    if (!A.ready || c < A.dev || c >= A.dev + A.size) {
        complain(cudaErrorInvalidValue, "%s: %p is not a device pointer (host memory given where device memory is "
                 "expected)", what, p);
        return NULL;
    }
    size_t o = (size_t)(c - A.dev);
    auto it = find_block(o);
    if (it == A.blocks.end()) {
        complain(cudaErrorInvalidValue, "%s: device address %p is not inside any allocation", what, p);
        return NULL;
    }
    if (!it->second.live) {
        complain(cudaErrorInvalidValue, "%s: device address %p lies in an allocation that was freed (use after free)",
                 what, p);
        return NULL;
    }
    size_t end = it->first + it->second.user;
    if (o > end || bytes > end - o) {
        complain(cudaErrorInvalidValue,
                 "%s: %zu bytes at device address %p run past the end of its allocation of %zu bytes at %p "
                 "(wrong size?)",
                 what, bytes, p, it->second.user, (void *)(A.dev + it->first));
        return NULL;
    }
    return A.alias + o;
}

const char *dev_ptr_problem(const void *p) {
    std::lock_guard<std::mutex> g(A.m);
    const char *c = (const char *)p;
    if (!A.ready || c < A.dev || c >= A.dev + A.size) return "host memory (not a device pointer)";
    size_t o = (size_t)(c - A.dev);
    auto it = find_block(o);
    if (it == A.blocks.end()) return "device memory outside every allocation";
    if (!it->second.live) return "device memory that was freed (use after free)";
    if (o > it->first + it->second.user) return "device memory past the end of its allocation";
    return NULL;
}

const char *dev_redzone_problem(const void *p, char *buf, size_t len) {
    std::lock_guard<std::mutex> g(A.m);
    const char *c = (const char *)p;
    if (!A.ready || c < A.dev || c >= A.dev + A.size) return NULL;
    auto it = find_block((size_t)(c - A.dev));
    if (it == A.blocks.end() || !it->second.live) return NULL;
    return redzone_problem_at(it, buf, len);
}

void dev_access(bool on) {
    if (!env().guard) return;
    std::lock_guard<std::mutex> g(A.m);
    if (!A.ready || A.access == on || A.high == 0) {
        A.access = on;
        return;
    }
    if (mprotect(A.dev, A.high, on ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        fprintf(stderr, "cu_emu: mprotect of the device view failed (%s)\n", strerror(errno));
    A.access = on;
}

long long device_range_ok(const void *p, size_t bytes) {
    std::lock_guard<std::mutex> g(A.m);
    const char *c = (const char *)p;
    if (!A.ready || c < A.dev || c >= A.dev + A.size) return -1;
    size_t o = (size_t)(c - A.dev);
    auto it = find_block(o);
    if (it == A.blocks.end() || !it->second.live || o + bytes > it->first + it->second.user) return -1;
    return (long long)it->second.user;
}

void mem_reset() {
    std::lock_guard<std::mutex> g(A.m);
    if (!A.ready) return;
    A.free_.clear();
    A.free_[0] = A.size;
    A.quarantine.clear();
    for (auto &b : A.blocks) UNPOISON(A.dev + b.first, b.second.span);
    A.blocks.clear();
    A.quar_bytes = A.live_bytes = 0;
}

} // namespace cu_emu

using namespace cu_emu;

cudaError_t cudaMalloc(void **p, size_t bytes) {
    *p = NULL;
    if (surface()) return sticky();
    if (bytes == 0) return cudaSuccess;
    std::lock_guard<std::mutex> g(A.m);
    if (!arena_init()) return cudaErrorMemoryAllocation;
    size_t span = round_up(bytes, ALIGN) + REDZONE;
    for (int attempt = 0; attempt < 2; attempt++) {
        for (auto it = A.free_.begin(); it != A.free_.end(); ++it) {
            if (it->second < span) continue;
            size_t off = it->first, rest = it->second - span;
            A.free_.erase(it);
            if (rest) A.free_[off + span] = rest;
            A.blocks[off] = block_info{bytes, span, true};
            A.live_bytes += span;
            memset(A.alias + off + bytes, CANARY, span - bytes);
            UNPOISON(A.dev + off, bytes);
            POISON(A.dev + off + bytes, span - bytes);
            size_t end = round_up(off + span, (size_t)sysconf(_SC_PAGESIZE));
            if (end > A.high) {
                if (env().guard && A.access) mprotect(A.dev + A.high, end - A.high, PROT_READ | PROT_WRITE);
                A.high = end;
            }
            *p = A.dev + off;
            return cudaSuccess;
        }
        release_quarantine(0, 0); /* out of space: reuse what is quarantined, then try again */
    }
    return cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p) {
    surface(); /* cudaFree synchronises */
    if (!p) return sticky();
    std::lock_guard<std::mutex> g(A.m);
    char *c = (char *)p;
    if (!A.ready || c < A.dev || c >= A.dev + A.size)
        return complain(cudaErrorInvalidValue, "cudaFree: %p is not a device pointer", p);
    auto it = A.blocks.find((size_t)(c - A.dev));
    if (it == A.blocks.end()) return complain(cudaErrorInvalidValue, "cudaFree: %p is not the start of an allocation", p);
    if (!it->second.live) return complain(cudaErrorInvalidValue, "cudaFree: %p was already freed (double free)", p);
    char buf[256];
    const char *rz = redzone_problem_at(it, buf, sizeof buf);
    if (rz) fault(cudaErrorIllegalAddress, "cudaFree: %s", rz);
    cudaError_t st = surface();
    it->second.live = false;
    A.live_bytes -= it->second.span;
    POISON(A.dev + it->first, it->second.span);
    memset(A.alias + it->first, CANARY, it->second.user); /* stale reads see garbage, not old values */
    A.quarantine.push_back(it->first);
    A.quar_bytes += it->second.span;
    release_quarantine(QUAR_BYTES, QUAR_COUNT);
    return st;
}

cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    std::lock_guard<std::mutex> g(A.m);
    size_t total = round_up(env().memory, (size_t)2 << 20);
    *total_b = total;
    *free_b = total - A.live_bytes;
    return cudaSuccess;
}

/* ---- copies and sets: on the stream's order (after its pending work), executed now ---- */
static cudaError_t copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s, const char *fn,
                        bool sync) {
    stream_obj *o = stream_of(s);
    if (!o) return complain(cudaErrorInvalidResourceHandle, "%s: %p is not a live stream", fn, (void *)s);
    if (sync) surface();
    if (sticky()) return sticky();
    if (bytes == 0) return cudaSuccess;
    cudaError_t e = stream_drain(o, fn);
    if (e != cudaSuccess) return e;
    bool dsrc = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    bool ddst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault) {
        dsrc = dev_ptr_problem(src) == NULL;
        ddst = dev_ptr_problem(dst) == NULL;
    } else if (kind != cudaMemcpyHostToHost && !dsrc && !ddst) {
        return complain(cudaErrorInvalidMemcpyDirection, "%s: invalid copy kind %d", fn, (int)kind);
    }
    char what[96];
    snprintf(what, sizeof what, "%s (source)", fn);
    const void *s2 = dsrc ? dev_alias(src, bytes, what) : src;
    snprintf(what, sizeof what, "%s (destination)", fn);
    void *d2 = ddst ? dev_alias(dst, bytes, what) : dst;
    if (!s2 || !d2) return cudaErrorInvalidValue;
    memmove(d2, s2, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    return copy(dst, src, bytes, kind, s, "cudaMemcpyAsync", false);
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, nullptr, "cudaMemcpy", true);
}
cudaError_t cudaMemsetAsync(void *dst, int value, size_t bytes, cudaStream_t s) {
    stream_obj *o = stream_of(s);
    if (!o) return complain(cudaErrorInvalidResourceHandle, "cudaMemsetAsync: %p is not a live stream", (void *)s);
    if (sticky()) return sticky();
    if (bytes == 0) return cudaSuccess;
    cudaError_t e = stream_drain(o, "cudaMemsetAsync");
    if (e != cudaSuccess) return e;
    void *d = dev_alias(dst, bytes, "cudaMemsetAsync");
    if (!d) return cudaErrorInvalidValue;
    memset(d, value, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *dst, int value, size_t bytes) { return cudaMemsetAsync(dst, value, bytes, nullptr); }

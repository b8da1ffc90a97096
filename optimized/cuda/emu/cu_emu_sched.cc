// optimized/cuda/emu/cu_emu_sched.cc — kernel execution of the emulation (docs/cuda.md
// "The emulation", "Speed"):
//
//   - every CUDA thread is a fiber (its own stack, a register-switch context) and the
//     threads of a block run on one OS thread, in thread-index order, each until it
//     finishes or reaches a barrier (__syncthreads: the block's; a shuffle or mma_sync:
//     its warp's); a barrier opens when every thread of the block (warp) that has not
//     exited has reached it, and the scheduler sweeps again. A kernel without barriers
//     therefore runs its threads one after the other on one reused stack (the fast path:
//     no OS thread per CUDA thread, no locking). No runnable thread while some have not
//     finished is a divergent barrier: the launch faults (a hang on a GPU);
//   - blocks run in parallel on CU_EMU_THREADS OS threads (the launching thread and a
//     pool), each block on one of them from start to end; `__shared__` is thread_local;
//   - ThreadSanitizer: each fiber is a TSan fiber; switches into a fiber synchronise (it
//     sees what the scheduler did), switches out do not, and barriers release/acquire a
//     per-block sync cell, so a race between two CUDA threads (a removed __syncthreads,
//     two blocks writing one element) is reported; AddressSanitizer: stack switches are
//     announced (__sanitizer_start/finish_switch_fiber).
//   - the launch checks its configuration (cudaErrorInvalidConfiguration) and its pointer
//     arguments (a host or freed pointer faults: cudaErrorIllegalAddress, sticky, the
//     kernel named), opens the device view for the kernel, and checks the redzones of the
//     buffers it was given afterwards.
#include <cxxabi.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "optimized/cuda/emu/cu_emu_internal.h"

#ifdef CU_EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef CU_EMU_TSAN
extern "C" {
void *__tsan_get_current_fiber(void);
void *__tsan_create_fiber(unsigned flags);
void __tsan_destroy_fiber(void *fiber);
void __tsan_switch_to_fiber(void *fiber, unsigned flags);
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
void __tsan_ignore_thread_begin(void);
void __tsan_ignore_thread_end(void);
}
#define TSAN_NO_SYNC 1u
#endif

/* ---------------- context switch ---------------- */
#if defined(__x86_64__)
extern "C" void cu_emu_ctx_switch(void **save_sp, void *new_sp);
extern "C" void cu_emu_ctx_entry(void);
/* Saves the callee-saved registers and the SSE/x87 control words on the current stack,
 * stores the stack pointer in *save_sp, loads new_sp and restores the same from it. A new
 * context starts in cu_emu_ctx_entry with rbx = argument, r12 = function. */
asm(R"(
    .text
    .globl cu_emu_ctx_switch
    .hidden cu_emu_ctx_switch
    .type cu_emu_ctx_switch,@function
cu_emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cu_emu_ctx_switch,.-cu_emu_ctx_switch
    .globl cu_emu_ctx_entry
    .hidden cu_emu_ctx_entry
    .type cu_emu_ctx_entry,@function
cu_emu_ctx_entry:
    movq %rbx, %rdi
    callq *%r12
    ud2
    .size cu_emu_ctx_entry,.-cu_emu_ctx_entry
)");
/* A stack prepared so that switching to it enters fn(arg) (stack 16-byte aligned at the call). */
static void *ctx_init(char *top, void (*fn)(void *), void *arg) {
    uint64_t *sp = (uint64_t *)(((uintptr_t)top & ~(uintptr_t)15) - 80);
    uint32_t csr[2];
    asm volatile("stmxcsr %0; fnstcw %1" : "=m"(csr[0]), "=m"(*(uint16_t *)&csr[1]));
    memcpy(&sp[0], csr, 8);        /* mxcsr, x87 control word */
    sp[1] = 0;                     /* r15 */
    sp[2] = 0;                     /* r14 */
    sp[3] = 0;                     /* r13 */
    sp[4] = (uint64_t)(uintptr_t)fn;  /* r12 */
    sp[5] = (uint64_t)(uintptr_t)arg; /* rbx */
    sp[6] = 0;                     /* rbp */
    sp[7] = (uint64_t)(uintptr_t)&cu_emu_ctx_entry;
    sp[8] = sp[9] = 0;
    return sp;
}
#define CTX_SWITCH(save, to) cu_emu_ctx_switch((save), (to))
#else
#include <ucontext.h>
struct uctx_pair {
    ucontext_t uc;
};
static void *ctx_init(char *top, void (*fn)(void *), void *arg);
#error "cu_emu: the fiber switch is written for x86-64 (add the registers of this architecture)"
#endif

namespace cu_emu {

thread_local thread_ctx *cur_thread CU_EMU_TLS = nullptr;
thread_local block_ctx *cur_block CU_EMU_TLS = nullptr;

#if defined(CU_EMU_ASAN)
static const size_t STACK = (size_t)512 << 10;
#elif defined(CU_EMU_TSAN)
static const size_t STACK = (size_t)256 << 10;
/* TSan: blocks go to TSAN_WORKERS OS threads by b mod TSAN_WORKERS, so neighbouring blocks
 * never share an OS thread (their races are reported); see struct worker */
static const int TSAN_WORKERS = 2;
#else
static const size_t STACK = (size_t)64 << 10;
#endif

enum { F_NEW, F_RUN, F_BAR, F_WARP, F_DONE, F_TRAP };

struct worker;
struct fiber {
    void *sp;
    char *stack; /* usable [stack, stack + STACK) */
    thread_ctx tc;
    int state; /* written by the fiber, read by the scheduler: relaxed atomics */
    worker *w;
    void *tsan; /* TSan: the thread's identity (kept with its stack, per thread index) */
    void *asan_fake;
};
/* per block: the warps' exchange slots (double-buffered by generation) */
struct warp_state {
    int alive, at_bar;
    unsigned gen;
    alignas(16) unsigned char slot[2][32][32];
};
/* TSan sync addresses of a block (never read or written): allocated per block, so that
 * freeing them drops their clocks and nothing synchronises one block with another */
struct sync_cells {
    char bar[2];
    char warp[32][2];
};
struct block_run {
    int n, alive, at_bar;
    unsigned gen;
    warp_state *warps; /* fresh per block: under TSan, no history from other blocks */
    sync_cells *sync;
};
struct worker {
    void *sched_sp = nullptr;
    std::vector<fiber> fibers;
    std::vector<char *> stacks; /* free stacks */
    block_ctx blk;
    block_run br;
    fiber *cur = nullptr;
    const launch_desc *desc = nullptr;
    const void *asan_bottom = nullptr; /* the scheduler's (OS thread's) stack */
    size_t asan_size = 0;
    void *asan_fake = nullptr;
    void *tsan_sched = nullptr;
    /* TSan: CUDA thread t of every block this worker runs is TSan fiber t (created once);
     * the blocks of one worker are ordered by a sync cell per parity of `serial` (the
     * __shared__ arrays and stacks they reuse carry no false races); CUDA threads of one
     * block, and blocks of different workers, are never ordered except by the kernel's own
     * barriers. */
    int index = 0;
    unsigned serial = 0;
    char boundary[2];
};
static thread_local worker *W = nullptr;

/* a fault of the running launch (first one wins) */
static std::atomic<int> launch_fault{0};
static char launch_fault_msg[600];

static void record_fault(int code, const char *fmt, ...) {
    int expect = 0;
    if (!launch_fault.compare_exchange_strong(expect, -1)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(launch_fault_msg, sizeof launch_fault_msg, fmt, ap);
    va_end(ap);
    launch_fault.store(code);
}

static inline void set_state(fiber *f, int s) { __atomic_store_n(&f->state, s, __ATOMIC_RELAXED); }
static inline int get_state(fiber *f) { return __atomic_load_n(&f->state, __ATOMIC_RELAXED); }

static inline void tsan_release(void *a) {
#ifdef CU_EMU_TSAN
    __tsan_release(a);
#else
    (void)a;
#endif
}
static inline void tsan_acquire(void *a) {
#ifdef CU_EMU_TSAN
    __tsan_acquire(a);
#else
    (void)a;
#endif
}

#ifdef CU_EMU_TSAN
static worker *tsan_workers[TSAN_WORKERS];
#endif
static worker *get_worker() {
    if (!W) {
        W = new worker;
#ifdef CU_EMU_TSAN
        W->tsan_sched = __tsan_get_current_fiber();
#endif
    }
    return W;
}

static char *get_stack(worker *w) {
    if (!w->stacks.empty()) {
        char *s = w->stacks.back();
        w->stacks.pop_back();
        return s;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    char *m = (char *)mmap(NULL, STACK + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        fprintf(stderr, "cu_emu: cannot map a thread stack of %zu bytes\n", STACK);
        abort();
    }
    mprotect(m, page, PROT_NONE); /* guard page: a stack overflow is a SIGSEGV, not corruption */
    return m + page;
}

/* ---- switches ---- */
static void switch_to_sched(worker *w, fiber *f, bool final) {
#ifdef CU_EMU_ASAN
    __sanitizer_start_switch_fiber(final ? nullptr : &f->asan_fake, w->asan_bottom, w->asan_size);
#endif
    void **save = &f->sp, *to = w->sched_sp; /* read before TSan switches threads */
#ifdef CU_EMU_TSAN
    __tsan_switch_to_fiber(w->tsan_sched, TSAN_NO_SYNC);
#endif
    CTX_SWITCH(save, to);
#ifdef CU_EMU_ASAN
    __sanitizer_finish_switch_fiber(f->asan_fake, &w->asan_bottom, &w->asan_size);
#endif
    (void)final;
}
static void resume(worker *w, fiber *f, bool first) {
    w->cur = f;
    cur_thread = &f->tc;
#ifdef CU_EMU_ASAN
    __sanitizer_start_switch_fiber(&w->asan_fake, f->stack, STACK);
#endif
    void **save = &w->sched_sp, *to = f->sp; /* read before TSan switches threads */
#ifdef CU_EMU_TSAN
    /* the first switch: the thread sees what came before the launch (the scheduler's own
     * bookkeeping is invisible to TSan, so later switches need no synchronisation) */
    __tsan_switch_to_fiber(f->tsan, first ? 0 : TSAN_NO_SYNC);
#endif
    CTX_SWITCH(save, to);
#ifdef CU_EMU_ASAN
    __sanitizer_finish_switch_fiber(w->asan_fake, nullptr, nullptr);
#endif
    (void)first;
    w->cur = nullptr;
}

static void fiber_main(void *arg) {
    fiber *f = (fiber *)arg;
    worker *w = f->w;
#ifdef CU_EMU_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &w->asan_bottom, &w->asan_size);
#endif
    tsan_acquire(&w->boundary[(w->serial + 1) & 1]); /* after the previous block of this worker */
    w->desc->run(w->desc->arg);
    tsan_release(&w->boundary[w->serial & 1]); /* before the next block, and the launcher's next step */
    set_state(f, F_DONE);
    switch_to_sched(w, f, true);
    abort(); /* never resumed */
}

static void start_fiber(worker *w, fiber *f) {
#ifdef CU_EMU_TSAN
    if (!f->stack) { /* identity t and its stack, for good */
        f->stack = get_stack(w);
        f->tsan = __tsan_create_fiber(0);
    }
#else
    f->stack = get_stack(w);
#endif
    f->asan_fake = nullptr;
    f->sp = ctx_init(f->stack + STACK, fiber_main, f);
    set_state(f, F_RUN);
    resume(w, f, true);
}

static void drop_fiber(worker *w, fiber *f, bool clean) {
#ifdef CU_EMU_ASAN
    if (!clean) __asan_unpoison_memory_region(f->stack, STACK); /* frames never unwound */
#endif
    (void)clean;
#ifndef CU_EMU_TSAN /* TSan: the stack stays with its identity */
    if (f->stack) w->stacks.push_back(f->stack);
    f->stack = nullptr;
#endif
    (void)w;
}

} // namespace cu_emu

using namespace cu_emu;

void cu_emu::syncthreads() {
    worker *w = W;
    fiber *f = w ? w->cur : nullptr;
    if (!f) {
        fprintf(stderr, "cu_emu: __syncthreads() called outside a kernel\n");
        abort();
    }
    unsigned g = w->br.gen;
    tsan_release(&w->br.sync->bar[g & 1]);
    set_state(f, F_BAR);
    switch_to_sched(w, f, false);
    tsan_acquire(&w->br.sync->bar[g & 1]);
}

const unsigned char *cu_emu::warp_exchange(const void *mine, size_t bytes) {
    worker *w = W;
    fiber *f = w ? w->cur : nullptr;
    if (!f) {
        fprintf(stderr, "cu_emu: a warp shuffle / mma_sync called outside a kernel\n");
        abort();
    }
    warp_state &ws = w->br.warps[f->tc.warp];
    unsigned g = ws.gen;
    if (bytes) memcpy(ws.slot[g & 1][f->tc.lane], mine, bytes);
    tsan_release(&w->br.sync->warp[f->tc.warp][g & 1]);
    set_state(f, F_WARP);
    switch_to_sched(w, f, false);
    tsan_acquire(&w->br.sync->warp[f->tc.warp][g & 1]);
    return &ws.slot[g & 1][0][0];
}

void cu_emu::syncwarp() { (void)warp_exchange(nullptr, 0); }

void cu_emu::trap(const char *why) {
    worker *w = W;
    fiber *f = w ? w->cur : nullptr;
    if (!f) {
        fprintf(stderr, "cu_emu: %s outside a kernel\n", why);
        abort();
    }
    char name[200];
    kernel_name(w->desc->kernel, name, sizeof name);
    record_fault(cudaErrorLaunchFailure, "kernel %s: block (%u,%u,%u) thread (%u,%u,%u) executed %s", name,
                 w->blk.bid.x, w->blk.bid.y, w->blk.bid.z, f->tc.tid.x, f->tc.tid.y, f->tc.tid.z, why);
    set_state(f, F_TRAP);
    switch_to_sched(w, f, false);
    abort(); /* an abandoned fiber is never resumed */
}

namespace cu_emu {

static void open_block_barrier(worker *w) {
    block_run &b = w->br;
    if (b.alive == 0 || b.at_bar != b.alive) return;
    for (int t = 0; t < b.n; t++)
        if (get_state(&w->fibers[t]) == F_BAR) set_state(&w->fibers[t], F_RUN);
    b.at_bar = 0;
    b.gen++;
}
static void open_warp_barrier(worker *w, unsigned k) {
    warp_state &ws = w->br.warps[k];
    if (ws.alive == 0 || ws.at_bar != ws.alive) return;
    int lo = (int)k * 32, hi = lo + 32 < w->br.n ? lo + 32 : w->br.n;
    for (int t = lo; t < hi; t++)
        if (get_state(&w->fibers[t]) == F_WARP) set_state(&w->fibers[t], F_RUN);
    ws.at_bar = 0;
    ws.gen++;
}

/* Runs block b of launch d on this OS thread; false after a fault. */
static bool run_block_(worker *w, const launch_desc &d, long b) {
    const dim3 g = d.cfg.grid, bd = d.cfg.block;
    w->desc = &d;
    w->blk.bid = uint3{(unsigned)(b % g.x), (unsigned)(b / g.x % g.y), (unsigned)(b / ((long)g.x * g.y))};
    w->blk.bdim = bd;
    w->blk.gdim = g;
    cur_block = &w->blk;
    block_run &br = w->br;
    const int n = (int)(bd.x * bd.y * bd.z), nw = (n + 31) / 32;
    br.n = br.alive = n;
    br.at_bar = 0;
    br.gen = 0;
    br.sync = new sync_cells;
    br.warps = new warp_state[nw];
    for (int k = 0; k < nw; k++) {
        br.warps[k].alive = n - 32 * k < 32 ? n - 32 * k : 32;
        br.warps[k].at_bar = 0;
        br.warps[k].gen = 0;
    }
    if ((int)w->fibers.size() < n) w->fibers.resize((size_t)n);
    w->serial++;
    for (int t = 0; t < n; t++) {
        fiber &f = w->fibers[t];
        f.sp = nullptr;
#ifndef CU_EMU_TSAN
        f.stack = nullptr;
        f.tsan = nullptr;
#endif
        f.tc.tid = uint3{(unsigned)t % bd.x, (unsigned)t / bd.x % bd.y, (unsigned)t / (bd.x * bd.y)};
        f.tc.lane = (unsigned)t % 32;
        f.tc.warp = (unsigned)t / 32;
        f.state = F_NEW;
        f.w = w;
        f.asan_fake = nullptr;
    }
    bool ok = true;
    while (ok && br.alive > 0) {
        bool progressed = false;
        for (int t = 0; t < n && ok; t++) {
            fiber *f = &w->fibers[t];
            int st = get_state(f);
            if (st == F_NEW) start_fiber(w, f);
            else if (st == F_RUN) resume(w, f, false);
            else continue;
            progressed = true;
            switch (get_state(f)) {
            case F_DONE:
                drop_fiber(w, f, true);
                br.alive--;
                br.warps[f->tc.warp].alive--;
                open_block_barrier(w);
                open_warp_barrier(w, f->tc.warp);
                break;
            case F_BAR:
                br.at_bar++;
                open_block_barrier(w);
                break;
            case F_WARP:
                br.warps[f->tc.warp].at_bar++;
                open_warp_barrier(w, f->tc.warp);
                break;
            default: /* F_TRAP */
                ok = false;
            }
            if (launch_fault.load(std::memory_order_relaxed)) ok = false;
        }
        if (ok && br.alive > 0 && !progressed) {
            int at_warp = 0;
            for (int k = 0; k < nw; k++) at_warp += br.warps[k].at_bar;
            char name[200];
            kernel_name(d.kernel, name, sizeof name);
            record_fault(cudaErrorLaunchFailure,
                         "kernel %s: block (%u,%u,%u) cannot continue: %d of its %d threads wait at __syncthreads, %d "
                         "at a warp barrier, %d exited (divergent barrier: a hang on a GPU)",
                         name, w->blk.bid.x, w->blk.bid.y, w->blk.bid.z, br.at_bar, n, at_warp, n - br.alive);
            ok = false;
        }
    }
    if (!ok) /* abandon the threads that did not finish */
        for (int t = 0; t < n; t++) {
            fiber *f = &w->fibers[t];
            int st = get_state(f);
            if (st != F_NEW && st != F_DONE) {
#ifdef CU_EMU_TSAN
                /* what the abandoned thread did happens before what follows the launch */
                __tsan_switch_to_fiber(f->tsan, TSAN_NO_SYNC);
                __tsan_release(&w->boundary[w->serial & 1]);
                __tsan_switch_to_fiber(w->tsan_sched, TSAN_NO_SYNC);
#endif
                drop_fiber(w, f, false);
            }
            set_state(f, F_DONE);
        }
    delete br.sync;
    delete[] br.warps;
    br.sync = nullptr;
    br.warps = nullptr;
    cur_block = nullptr;
    cur_thread = nullptr;
    return ok;
}

/* The scheduler's own bookkeeping (fiber records, barrier counts, block indices) is
 * invisible to TSan: only the CUDA threads' accesses are checked against each other. */
static bool run_block(worker *w, const launch_desc &d, long b) {
#ifdef CU_EMU_TSAN
    __tsan_ignore_thread_begin();
#endif
    bool ok = run_block_(w, d, b);
#ifdef CU_EMU_TSAN
    __tsan_ignore_thread_end();
#endif
    return ok;
}

/* ---------------- the pool ---------------- */
struct pool_t {
    std::mutex m;
    std::condition_variable cv, cv_done;
    int helpers = 0;
    uint64_t gen = 0;
    const launch_desc *job = nullptr;
    long nblocks = 0;
    std::atomic<long> next{0};
    int busy = 0;
};
static pool_t *P = nullptr;

/* CU_EMU_COOP_STAGGER_MS=N: block b of a cooperative launch starts b N ms late (blocks of a
 * GPU start in no particular order; a test that must see a missing grid barrier fail uses
 * it to make the late writer certain) */
static void coop_stagger(const launch_desc *d, long b) {
    static const long ms = [] {
        const char *e = getenv("CU_EMU_COOP_STAGGER_MS");
        return e && *e ? atol(e) : 0L;
    }();
    if (d->coop && ms > 0 && b > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms * b));
}

static void run_blocks(const launch_desc *d, long nb, std::atomic<long> &next) {
    worker *w = get_worker();
#ifdef CU_EMU_TSAN
    (void)next;
    for (long b = w->index; b < nb && !launch_fault.load(std::memory_order_relaxed); b += TSAN_WORKERS) {
        coop_stagger(d, b);
        run_block(w, *d, b);
    }
#else
    long b;
    while (!launch_fault.load(std::memory_order_relaxed) && (b = next.fetch_add(1)) < nb) {
        coop_stagger(d, b);
        run_block(w, *d, b);
    }
#endif
}

static void helper_main(int index) {
    get_worker()->index = index;
#ifdef CU_EMU_TSAN
    tsan_workers[index] = W;
#endif
    uint64_t seen = 0;
    for (;;) {
        const launch_desc *d;
        long nb;
        {
            std::unique_lock<std::mutex> l(P->m);
            P->cv.wait(l, [&] { return P->gen != seen; });
            seen = P->gen;
            d = P->job;
            nb = P->nblocks;
        }
        run_blocks(d, nb, P->next);
        std::lock_guard<std::mutex> l(P->m);
        if (--P->busy == 0) P->cv_done.notify_one();
    }
}

static int pool_helpers() {
#ifdef CU_EMU_TSAN
    int want = TSAN_WORKERS - 1;
#else
    int want = env().threads - 1;
#endif
    if (want <= 0) return 0;
    if (!P) {
        P = new pool_t;
        for (int i = 0; i < want; i++) std::thread(helper_main, i + 1).detach();
        P->helpers = want;
    }
    return P->helpers;
}

static std::mutex launch_m;
/* the error of the calling thread's last launch (configuration, cooperative size), for
 * cudaLaunchCooperativeKernel's return value */
static thread_local int last_launch_err = 0;

/* blocks a cooperative launch may have: one per OS thread that runs blocks (the launching
 * thread and the pool's helpers), each block on its own, so that a block waiting for
 * another (a grid-wide barrier) never holds up the thread the other needs */
static int coop_capacity() {
#ifdef CU_EMU_TSAN
    return TSAN_WORKERS; /* block b on worker b mod TSAN_WORKERS */
#else
    return env().threads;
#endif
}

static bool bad_cfg(const launch_cfg &c) {
    const dim3 g = c.grid, b = c.block;
    if (g.x == 0 || g.y == 0 || g.z == 0 || b.x == 0 || b.y == 0 || b.z == 0) return true;
    if (g.x > 0x7fffffffu || g.y > 65535u || g.z > 65535u) return true;
    if (b.x > 1024u || b.y > 1024u || b.z > 64u || (uint64_t)b.x * b.y * b.z > 1024u) return true;
    return c.smem > (size_t)(48 << 10);
}

} // namespace cu_emu

void cu_emu::kernel_name(const void *k, char *out, size_t len) {
    Dl_info info;
    if (dladdr(k, &info) && info.dli_sname) {
        int st = 0;
        char *dm = abi::__cxa_demangle(info.dli_sname, NULL, NULL, &st);
        const char *n = st == 0 && dm ? dm : info.dli_sname;
        /* "void k_noise<float, 0>(float*, ...)" -> "k_noise<float, 0>" */
        const char *p = n;
        if (strncmp(p, "void ", 5) == 0) p += 5;
        size_t l = strlen(p);
        const char *paren = strchr(p, '(');
        if (paren) l = (size_t)(paren - p);
        snprintf(out, len, "%.*s", (int)l, p);
        free(dm);
        return;
    }
    snprintf(out, len, "kernel@%p", k);
}

int cu_emu::last_launch_error() { return last_launch_err; }
int cu_emu_coop_blocks_per_sm(void) { return cu_emu::coop_capacity() / env().threads; }
void cu_emu_nanosleep(unsigned int ns) {
    (void)ns;
    std::this_thread::yield();
}

void cu_emu::launch(const launch_desc &d) {
    std::lock_guard<std::mutex> g(launch_m);
    last_launch_err = 0;
    if (broken()) return; /* the device has faulted: nothing runs */
    char name[200];
    if (d.coop && (long)d.cfg.grid.x * d.cfg.grid.y * d.cfg.grid.z > coop_capacity()) {
        kernel_name(d.kernel, name, sizeof name);
        complain(cudaErrorCooperativeLaunchTooLarge, "kernel %s: cooperative launch of %ld blocks, at most %d can be "
                 "resident", name, (long)d.cfg.grid.x * d.cfg.grid.y * d.cfg.grid.z, coop_capacity());
        set_last(cudaErrorCooperativeLaunchTooLarge);
        last_launch_err = cudaErrorCooperativeLaunchTooLarge;
        return;
    }
    if (bad_cfg(d.cfg)) {
        kernel_name(d.kernel, name, sizeof name);
        complain(cudaErrorInvalidConfiguration, "kernel %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u) "
                 "shared %zu bytes", name, d.cfg.grid.x, d.cfg.grid.y, d.cfg.grid.z, d.cfg.block.x, d.cfg.block.y,
                 d.cfg.block.z, d.cfg.smem);
        set_last(cudaErrorInvalidConfiguration);
        last_launch_err = cudaErrorInvalidConfiguration;
        return;
    }
    stream_obj *s = stream_of(d.cfg.stream);
    if (!s) {
        set_last(cudaErrorInvalidResourceHandle);
        return;
    }
    if (stream_drain(s, "kernel launch") != cudaSuccess) return;
    for (int i = 0; i < d.nptrs; i++) {
        const char *why = d.ptrs[i] ? dev_ptr_problem(d.ptrs[i]) : NULL;
        if (why) {
            kernel_name(d.kernel, name, sizeof name);
            fault(cudaErrorIllegalAddress, "kernel %s: argument %d (%p) is %s: the launch faults", name, d.ptr_index[i],
                  d.ptrs[i], why);
            return;
        }
    }
    const long nb = (long)d.cfg.grid.x * d.cfg.grid.y * d.cfg.grid.z;
    const long nt = (long)d.cfg.block.x * d.cfg.block.y * d.cfg.block.z;
#ifdef CU_EMU_TSAN
    int helpers = nb > 1 ? pool_helpers() : 0; /* every block has its worker (b mod TSAN_WORKERS) */
    (void)nt;
#else
    /* a cooperative launch always spreads its blocks over the pool (each on its own thread) */
    int helpers = nb > 1 && (d.coop || nb * nt >= 4096) ? pool_helpers() : 0;
#endif
    launch_fault.store(0);
    dev_access(true);
    std::atomic<long> local_next{0};
    if (helpers) {
        std::lock_guard<std::mutex> l(P->m);
        P->job = &d;
        P->nblocks = nb;
        P->next.store(0);
        P->busy = helpers;
        P->gen++;
        P->cv.notify_all();
    }
    run_blocks(&d, nb, helpers ? P->next : local_next);
    if (helpers) {
        std::unique_lock<std::mutex> l(P->m);
        P->cv_done.wait(l, [] { return P->busy == 0; });
    }
    dev_access(false);
#ifdef CU_EMU_TSAN
    /* everything the kernel's threads did happens before what follows the launch */
    tsan_workers[0] = get_worker();
    for (worker *tw : tsan_workers)
        if (tw) {
            tsan_acquire(&tw->boundary[0]);
            tsan_acquire(&tw->boundary[1]);
        }
#endif
    int code = launch_fault.load();
    if (code > 0) {
        fault((cudaError_t)code, "%s", launch_fault_msg);
        return;
    }
    for (int i = 0; i < d.nptrs; i++) {
        char buf[300];
        const char *rz = d.ptrs[i] ? dev_redzone_problem(d.ptrs[i], buf, sizeof buf) : NULL;
        if (rz) {
            kernel_name(d.kernel, name, sizeof name);
            fault(cudaErrorIllegalAddress, "kernel %s (argument %d): %s", name, d.ptr_index[i], rz);
            return;
        }
    }
}

// optimized/cuda/emu/cu_emu_kernel.h — the CUDA execution model on the CPU (docs/cuda.md
// "The emulation"): the keywords, the built-in variables, __syncthreads, warp shuffles,
// atomics, the device intrinsics the .cu files use, and the launch that the build-time
// rewriter (cu_emu_rewrite.sh) substitutes for `kernel<<<grid, block, smem, stream>>>(args)`:
//
//   kernel<<<cfg>>>(args)   becomes   kernel | cu_emu::cfg(cfg)(args)
//
// Every CUDA thread of a block runs as its own execution context (a fiber with its own
// stack, cu_emu_sched.cc); the threads of one block run on one OS thread, so `__shared__`
// is `static thread_local` (one copy per running block), and __syncthreads / shuffles
// are per-block / per-warp barriers. Blocks run in parallel on a pool of OS threads.
// Exited threads count as arrived at every later barrier (as on sm_70+ hardware).
//
// Floating point: compiled with -ffp-contract=off, so `a * b + c` rounds twice, and the
// __fmul_rn-style intrinsics are single correctly rounded operations (docs/cuda.md,
// "FMA contraction").
#ifndef CU_EMU_KERNEL_H
#define CU_EMU_KERNEL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

/* ---------------- keywords ---------------- */
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __restrict__ __restrict
/* one copy per OS thread = per running block (a block's threads share its OS thread) */
#define __shared__ static thread_local
#define CU_EMU_TLS /* default TLS model: the plugin is dlopen()ed (its __shared__ arrays do not fit the static TLS surplus) */

struct uint3 {
    unsigned int x, y, z;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

typedef struct CUstream_st *cudaStream_t;

namespace cu_emu {

/* the CUDA thread and block being executed (set by the scheduler, cu_emu_sched.cc) */
struct thread_ctx {
    uint3 tid;
    unsigned int lane, warp;
};
struct block_ctx {
    uint3 bid;
    dim3 bdim, gdim;
};
extern thread_local thread_ctx *cur_thread CU_EMU_TLS;
extern thread_local block_ctx *cur_block CU_EMU_TLS;

/* barriers of the running block (fatal outside a kernel) */
void syncthreads();
/* every lane of the calling thread's warp deposits `bytes` (<= 32) bytes; returns the
 * 32 slots of 32 bytes each once the whole warp has deposited */
const unsigned char *warp_exchange(const void *mine, size_t bytes);
void syncwarp();
/* a device-side trap: the launch faults (cudaErrorLaunchFailure, sticky), the thread ends */
[[noreturn]] void trap(const char *why);

/* ---------------- the launch ---------------- */
struct launch_cfg {
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
/* What the launcher passes to the scheduler: run(arg) executes the kernel body for the
 * current (block, thread); ptrs[i] are the kernel's pointer arguments (checked to lie in
 * live device allocations: a host or freed pointer makes the launch fault). */
struct launch_desc {
    const void *kernel;
    launch_cfg cfg;
    void (*run)(void *arg);
    void *arg;
    const void *const *ptrs;
    const int *ptr_index;
    int nptrs;
    bool coop; /* cudaLaunchCooperativeKernel: every block resident at once */
};
void launch(const launch_desc &d);

template <class T> inline void note_ptr(const void **out, int *idx, int *n, int i, const T &v) {
    if constexpr (std::is_pointer<T>::value) {
        out[*n] = (const void *)v;
        idx[(*n)++] = i;
    }
}

template <class... P> struct kernel_pack {
    void (*k)(P...);
    std::tuple<P...> a;
    static void run(void *self) {
        kernel_pack *s = static_cast<kernel_pack *>(self);
        std::apply(s->k, s->a);
    }
};

template <class... A> struct call {
    launch_cfg cfg;
    std::tuple<A...> args;
};
struct cfg_builder {
    launch_cfg c;
    template <class... A> call<std::decay_t<A>...> operator()(A &&...a) const {
        return call<std::decay_t<A>...>{c, std::tuple<std::decay_t<A>...>(std::forward<A>(a)...)};
    }
};
inline cfg_builder cfg(dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = nullptr) {
    return cfg_builder{launch_cfg{grid, block, smem, stream}};
}

template <class... P, class... A, size_t... I>
inline void launch_with(void (*k)(P...), call<A...> &c, std::index_sequence<I...>) {
    kernel_pack<P...> pk{k, std::tuple<P...>(std::get<I>(c.args)...)}; /* implicit conversions, as a call */
    const void *ptrs[sizeof...(P) + 1];
    int idx[sizeof...(P) + 1], n = 0;
    (note_ptr(ptrs, idx, &n, (int)I, std::get<I>(pk.a)), ...);
    launch_desc d{(const void *)k, c.cfg, &kernel_pack<P...>::run, &pk, ptrs, idx, n, false};
    launch(d);
}
/* cudaLaunchCooperativeKernel: args[i] points to the i-th argument, of the kernel's type */
template <class... P, size_t... I>
inline void launch_coop(void (*k)(P...), launch_cfg cfg, void **args, std::index_sequence<I...>) {
    kernel_pack<P...> pk{k, std::tuple<P...>(*static_cast<std::remove_reference_t<P> *>(args[I])...)};
    const void *ptrs[sizeof...(P) + 1];
    int idx[sizeof...(P) + 1], n = 0;
    (note_ptr(ptrs, idx, &n, (int)I, std::get<I>(pk.a)), ...);
    launch_desc d{(const void *)k, cfg, &kernel_pack<P...>::run, &pk, ptrs, idx, n, true};
    launch(d);
}
/* the launch's error (configuration, too many blocks), as cudaGetLastError would return it */
int last_launch_error();
/* kernel | cfg(grid, block, smem, stream)(args...) */
template <class... P, class... A> inline void operator|(void (*k)(P...), call<A...> &&c) {
    static_assert(sizeof...(P) == sizeof...(A), "kernel launched with the wrong number of arguments");
    launch_with(k, c, std::index_sequence_for<P...>{});
}

template <class T> inline T shfl_from(T v, unsigned int src_lane, bool in_range) {
    static_assert(sizeof(T) <= 32 && std::is_trivially_copyable<T>::value, "shuffle of a type larger than 32 bytes");
    const unsigned char *s = warp_exchange(&v, sizeof v);
    if (!in_range) return v;
    T r;
    memcpy(&r, s + 32 * src_lane, sizeof r);
    return r;
}

} // namespace cu_emu

/* ---------------- built-in variables ---------------- */
#define threadIdx (cu_emu::cur_thread->tid)
#define blockIdx (cu_emu::cur_block->bid)
#define blockDim (cu_emu::cur_block->bdim)
#define gridDim (cu_emu::cur_block->gdim)
inline constexpr int warpSize = 32;

inline void __syncthreads() { cu_emu::syncthreads(); }
inline void __syncwarp(unsigned int mask = 0xffffffffu) {
    (void)mask;
    cu_emu::syncwarp();
}
#if defined(__SANITIZE_THREAD__)
/* TSan models no standalone fence: the emulation's atomics are sequentially consistent
 * read-modify-writes, and TSan orders threads by them (a fence adds nothing it could see) */
inline void __threadfence() { __asm__ __volatile__("" ::: "memory"); }
inline void __threadfence_block() { __asm__ __volatile__("" ::: "memory"); }
#else
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
/* sleep of a spinning thread (sm_70+): the OS thread yields (blocks of a cooperative launch
 * run on their own OS threads) */
void cu_emu_nanosleep(unsigned int ns);
inline void __nanosleep(unsigned int ns) { cu_emu_nanosleep(ns); }
[[noreturn]] inline void __trap() { cu_emu::trap("__trap()"); }

/* ---------------- warp shuffles (mask: the whole warp takes part) ---------------- */
template <class T> inline T __shfl_sync(unsigned int mask, T v, int src, int width = 32) {
    (void)mask;
    unsigned int lane = cu_emu::cur_thread->lane, base = lane - lane % (unsigned)width;
    return cu_emu::shfl_from(v, base + (unsigned)src % (unsigned)width, true);
}
template <class T> inline T __shfl_down_sync(unsigned int mask, T v, unsigned int delta, int width = 32) {
    (void)mask;
    unsigned int lane = cu_emu::cur_thread->lane;
    return cu_emu::shfl_from(v, lane + delta, lane % (unsigned)width + delta < (unsigned)width);
}
template <class T> inline T __shfl_up_sync(unsigned int mask, T v, unsigned int delta, int width = 32) {
    (void)mask;
    unsigned int lane = cu_emu::cur_thread->lane;
    return cu_emu::shfl_from(v, lane - delta, lane % (unsigned)width >= delta);
}
template <class T> inline T __shfl_xor_sync(unsigned int mask, T v, int lmask, int width = 32) {
    (void)mask;
    unsigned int lane = cu_emu::cur_thread->lane, src = lane ^ (unsigned)lmask;
    return cu_emu::shfl_from(v, src, src / (unsigned)width == lane / (unsigned)width);
}

/* ---------------- atomics (sequentially consistent) ---------------- */
template <class T> inline T cu_emu_atomic_update(T *a, T v, int op) {
    T old;
    __atomic_load(a, &old, __ATOMIC_SEQ_CST);
    for (;;) {
        T nv = op == 0 ? (old > v ? old : v) : op == 1 ? (old < v ? old : v) : (T)(old + v);
        if (__atomic_compare_exchange(a, &old, &nv, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) return old;
    }
}
inline int atomicMax(int *a, int v) { return cu_emu_atomic_update(a, v, 0); }
inline unsigned int atomicMax(unsigned int *a, unsigned int v) { return cu_emu_atomic_update(a, v, 0); }
inline int atomicMin(int *a, int v) { return cu_emu_atomic_update(a, v, 1); }
inline unsigned int atomicMin(unsigned int *a, unsigned int v) { return cu_emu_atomic_update(a, v, 1); }
inline int atomicAdd(int *a, int v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline unsigned int atomicAdd(unsigned int *a, unsigned int v) { return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST); }
inline unsigned long long atomicAdd(unsigned long long *a, unsigned long long v) {
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);
}
inline int atomicExch(int *a, int v) { return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST); }
inline int atomicCAS(int *a, int cmp, int v) {
    __atomic_compare_exchange_n(a, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
/* floating-point atomics (not used by the backend: its sums have fixed orders) */
inline float atomicAdd(float *a, float v) { return cu_emu_atomic_update(a, v, 2); }
inline double atomicAdd(double *a, double v) { return cu_emu_atomic_update(a, v, 2); }

/* ---------------- intrinsics ---------------- */
template <class T> inline T __ldg(const T *p) { return *p; }
inline float __uint_as_float(unsigned int u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
inline unsigned int __float_as_uint(float f) {
    unsigned int u;
    memcpy(&u, &f, sizeof u);
    return u;
}
inline float __int_as_float(int u) { return __uint_as_float((unsigned int)u); }
inline int __float_as_int(float f) { return (int)__float_as_uint(f); }
inline double __longlong_as_double(long long u) {
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}
inline long long __double_as_longlong(double d) {
    long long u;
    memcpy(&u, &d, sizeof u);
    return u;
}
/* one IEEE operation each, round to nearest even (never contracted: -ffp-contract=off) */
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
inline float __saturatef(float x) { return x != x ? 0.0f : x < 0.0f ? 0.0f : x > 1.0f ? 1.0f : x; }
inline int __popc(unsigned int x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned int)x); }

#endif

// optimized/cuda/emu/cu_emu_half.h — bf16 and fp16 of the emulation (cuda_bf16.h,
// cuda_fp16.h): storage types and the conversions, bit for bit as the device's
// cvt.rn instructions define them (round to nearest, ties to even; overflow to
// infinity; fp16 subnormals rounded the same way; every NaN becomes the canonical
// 0x7fff). Widening (bf16/fp16 -> float) is exact. Tested exhaustively over the 2^16
// upper halves with the rounding-critical lower halves (test_cuda_emu_runtime).
#ifndef CU_EMU_HALF_H
#define CU_EMU_HALF_H

#include <stdint.h>
#include <string.h>

/* Aggregates without constructors (the toolkit's have them): a `__shared__` array of them is
 * then a plain thread_local without an initialisation guard (a guard byte written by one
 * CUDA thread and read by the others would be a race of the emulation, not of the kernel). */
struct __nv_bfloat16 {
    uint16_t __x;
    operator float() const;
};
struct __half {
    uint16_t __x;
    operator float() const;
};
typedef __nv_bfloat16 nv_bfloat16;
typedef __half half;

namespace cu_emu {
inline uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
inline float f32_from(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
/* round to nearest even on the upper 16 bits; NaN -> 0x7fff */
inline uint16_t bf16_rn(float f) {
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    uint32_t r = u + 0x7fffu + ((u >> 16) & 1u); /* carries into the exponent (and to inf) as rounding does */
    return (uint16_t)(r >> 16);
}
/* float -> fp16 (1-5-10), round to nearest even, overflow to inf, NaN -> 0x7fff */
inline uint16_t f16_rn(float f) {
    uint32_t u = f32_bits(f), a = u & 0x7fffffffu;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (a > 0x7f800000u) return 0x7fffu;
    if (a >= 0x477ff000u) return sign | 0x7c00u; /* >= 65520 (max + half ulp) or inf: inf */
    if (a >= 0x38800000u) {                      /* normal fp16: 10 mantissa bits kept of 23 */
        uint32_t m = a - 0x38000000u;            /* rebias the exponent 127 -> 15 */
        uint32_t r = m + 0xfffu + ((m >> 13) & 1u);
        return sign | (uint16_t)(r >> 13);
    }
    if (a < 0x33000000u) return sign; /* below half the smallest subnormal (2^-25): zero */
    /* subnormal: value = a_mant * 2^(e-150); result units of 2^-24 */
    uint32_t e = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e; /* 2^(e-150) / 2^-24 = 2^(e-126): shift right by 126 - e (>= 1) */
    uint32_t q = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return sign | (uint16_t)q;
}
inline float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) return f32_from(sign | 0x7f800000u | (m << 13));
    if (e != 0) return f32_from(sign | ((e + 112u) << 23) | (m << 13));
    float v = (float)m * (1.0f / 16777216.0f); /* exact: m * 2^-24 */
    return sign ? -v : v;
}
} // namespace cu_emu

inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) {
    __nv_bfloat16 h;
    h.__x = u;
    return h;
}
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __ushort_as_bfloat16(cu_emu::bf16_rn(f)); }
inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
inline float __bfloat162float(__nv_bfloat16 h) { return cu_emu::f32_from((uint32_t)h.__x << 16); }
inline __nv_bfloat16::operator float() const { return __bfloat162float(*this); }

inline __half __ushort_as_half(unsigned short u) {
    __half h;
    h.__x = u;
    return h;
}
inline unsigned short __half_as_ushort(__half h) { return h.__x; }
inline __half __float2half_rn(float f) { return __ushort_as_half(cu_emu::f16_rn(f)); }
inline __half __float2half(float f) { return __float2half_rn(f); }
inline float __half2float(__half h) { return cu_emu::f16_to_f32(h.__x); }
inline __half::operator float() const { return __half2float(*this); }

namespace cu_emu {
/* float -> T for the fragment and conversion helpers (T = float, bf16, fp16) */
template <class T> inline T from_float(float v) { return (T)v; }
template <> inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
template <> inline __half from_float<__half>(float v) { return __float2half_rn(v); }
} // namespace cu_emu

#endif

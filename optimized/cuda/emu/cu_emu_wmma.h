// optimized/cuda/emu/cu_emu_wmma.h — nvcuda::wmma of the emulation (mma.h), 16x16x16
// tiles, element by element.
//
// Fragment layout (the emulation's; the hardware's is unspecified too): every fragment of
// a 16x16 tile holds 8 elements per lane; element e of lane L is the tile entry at
// row-major position p = 8 L + e, i.e. (p / 16, p % 16) of the 16x16 matrix the fragment
// stands for (A: (i, k), B: (k, j), accumulator: (i, j)). Fragments of the same type map
// their elements identically (what cu_dp.cu's tensor-core ghost norm relies on).
//
// mma_sync(d, a, b, c) is warp-collective (every lane calls it: two warp barriers) and
// computes, for each (i, j),
//     d(i, j) = c(i, j) + a(i,0) b(0,j) + a(i,1) b(1,j) + ... + a(i,15) b(15,j)
// left to right in float, each product exact (bf16 x bf16 and fp16 x fp16 fit in a
// float) and each addition rounded to nearest: one admissible order for the bound
// gamma_16(2u) of docs/cuda.md (the hardware's order and rounding are unspecified).
#ifndef CU_EMU_WMMA_H
#define CU_EMU_WMMA_H

#include "optimized/cuda/emu/cu_emu_half.h"
#include "optimized/cuda/emu/cu_emu_kernel.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 16, "the emulation implements 16x16x16 WMMA tiles only");
    enum { num_elements = 8 };
    T x[8];
};

namespace detail {
inline unsigned int lane() { return cu_emu::cur_thread->lane; }
template <class T> inline float as_f(T v) { return (float)v; }
/* tile entry (r, c) of a fragment stored with row-major (rowmaj) or column-major layout */
template <class T> inline T at(const T *p, unsigned ldm, int r, int c, bool rowmaj) {
    return rowmaj ? p[(size_t)r * ldm + c] : p[r + (size_t)c * ldm];
}
} // namespace detail

template <class Use, class T, class Layout, class U>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const U *ptr, unsigned ldm) {
    static_assert(!std::is_same<Use, accumulator>::value, "accumulator loads take a layout_t");
    /* A (i, k) and B (k, j): position p = 8 L + e -> (p / 16, p % 16) */
    constexpr bool rowmaj = std::is_same<Layout, row_major>::value;
    unsigned int L = detail::lane();
    for (int e = 0; e < 8; e++) {
        int p = 8 * (int)L + e;
        f.x[e] = detail::at(ptr, ldm, p / 16, p % 16, rowmaj);
    }
}
template <class T>
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, T> &f, const T *p, unsigned ldm, layout_t l) {
    unsigned int L = detail::lane();
    for (int e = 0; e < 8; e++) {
        int q = 8 * (int)L + e;
        f.x[e] = detail::at(p, ldm, q / 16, q % 16, l == mem_row_major);
    }
}
template <class T>
inline void store_matrix_sync(T *p, const fragment<accumulator, 16, 16, 16, T> &f, unsigned ldm, layout_t l) {
    unsigned int L = detail::lane();
    for (int e = 0; e < 8; e++) {
        int q = 8 * (int)L + e, r = q / 16, c = q % 16;
        if (l == mem_row_major) p[(size_t)r * ldm + c] = f.x[e];
        else p[r + (size_t)c * ldm] = f.x[e];
    }
}
template <class Use, class T, class Layout>
inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, typename std::common_type<T>::type v) {
    for (int e = 0; e < 8; e++) f.x[e] = v;
}

template <class TA, class LA, class TB, class LB, class TC>
inline void mma_sync(fragment<accumulator, 16, 16, 16, TC> &d, const fragment<matrix_a, 16, 16, 16, TA, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, TB, LB> &b, const fragment<accumulator, 16, 16, 16, TC> &c) {
    struct ptrs {
        const TA *a;
        const TB *b;
    } mine = {a.x, b.x};
    const unsigned char *s = cu_emu::warp_exchange(&mine, sizeof mine); /* every lane's A and B */
    ptrs all[32];
    for (int l = 0; l < 32; l++) memcpy(&all[l], s + 32 * l, sizeof all[l]);
    unsigned int L = detail::lane();
    TC out[8];
    for (int e = 0; e < 8; e++) {
        int q = 8 * (int)L + e, i = q / 16, j = q % 16;
        float acc = (float)c.x[e];
        for (int k = 0; k < 16; k++) {
            int pa = 16 * i + k, pb = 16 * k + j; /* A (i, k), B (k, j): lane pos / 8, element pos % 8 */
            acc = acc + detail::as_f(all[pa / 8].a[pa % 8]) * detail::as_f(all[pb / 8].b[pb % 8]);
        }
        out[e] = cu_emu::from_float<TC>(acc);
    }
    cu_emu::syncwarp(); /* every lane has read the others' A and B before any lane changes them */
    for (int e = 0; e < 8; e++) d.x[e] = out[e];
}

} // namespace wmma
} // namespace nvcuda

#endif

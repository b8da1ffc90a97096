/* optimized/host/host_gemm_inst.h — one instance of the GEMM driver (host_gemm_kern.h),
 * included by host_gemm.c after defining
 *     R       the element type          HG_SFX  its suffix (f64, f32)
 *     NR      the register block's columns (the rows are HG_MR)
 *     HG_ISA  the instruction set (generic, avx2)
 * It names the driver's primitives after them (ukr_<isa>_<sfx>, trans4_<isa>_<sfx>,
 * trans2_<isa>_<sfx>, wb_<isa>_<sfx>, opt_hgemm_axpy_<sfx>), defines
 * hg_run_<sfx>_<isa>, and undefines everything again. */
#define HG_CAT_(a, b, c) a##b##c
#define HG_CAT(a, b, c) HG_CAT_(a, b, c)
#define HG_CAT4_(a, b, c, d) a##b##c##d
#define HG_CAT4(a, b, c, d) HG_CAT4_(a, b, c, d)
#define MR HG_MR
#define GK(name) HG_CAT4(name, _, HG_SFX, HG_CAT(_, HG_ISA, ))
#define HG_UKR_CALL HG_CAT4(ukr_, HG_ISA, _, HG_SFX)
#define HG_TRANS4 HG_CAT4(trans4_, HG_ISA, _, HG_SFX)
#define HG_TRANS2 HG_CAT4(trans2_, HG_ISA, _, HG_SFX)
#define HG_WB HG_CAT4(wb_, HG_ISA, _, HG_SFX)
#define HG_AXPY_ROW HG_CAT(opt_hgemm_axpy_, HG_SFX, )
#include "optimized/host/host_gemm_kern.h"
#undef GK
#undef HG_UKR_CALL
#undef HG_TRANS4
#undef HG_TRANS2
#undef HG_WB
#undef HG_AXPY_ROW
#undef MR
#undef NR
#undef R
#undef HG_SFX
#undef HG_ISA
#undef HG_CAT_
#undef HG_CAT
#undef HG_CAT4_
#undef HG_CAT4

/* optimized/cuda/cu_stub.c — the CUDA backend's C API in a build without CUDA (no
 * nvcc/cuBLAS/NCCL, or the SANITIZE=1 build): every function returns
 * DP_ERR_NOT_SUPPORTED naming itself, so callers and tests fail or skip cleanly.
 * The stubs are generated from the X-macros CU_API of cu_api.h and CU_DEV_API of
 * dev/cu_dev.h, which declare the API once: a function added there gets its stub here without an edit.
 *   dp_status functions        return DP_ERR_NOT_SUPPORTED ("built without CUDA")
 *   ... with an output handle  set *out = NULL first (X_STATUS_OUT)
 *   void functions             do nothing
 *   other values               return the value given in CU_API (NULL, 0) */
#ifndef DP_HAVE_CUDA
#include <stddef.h>

#include "optimized/cuda/cu_api.h"
#include "optimized/cuda/dev/cu_dev.h"

/* Present in both builds (see cu_backend.cu). */
const int cu_backend_linked = 0;

#define CU_STUB_NOT_SUPPORTED_() \
    dp_error(DP_ERR_NOT_SUPPORTED, "%s: built without CUDA (no nvcc/cuBLAS/NCCL, or SANITIZE=1)", __func__)

#define CU_STUB_STATUS_(name, params) \
    dp_status name params { return CU_STUB_NOT_SUPPORTED_(); }
#define CU_STUB_STATUS_OUT_(name, params, out) \
    dp_status name params {                     \
        *(out) = NULL;                          \
        return CU_STUB_NOT_SUPPORTED_();        \
    }
#define CU_STUB_VOID_(name, params) \
    void name params {}
#define CU_STUB_VALUE_(type, name, params, value) \
    type name params { return (value); }

CU_API(CU_STUB_STATUS_, CU_STUB_STATUS_OUT_, CU_STUB_VOID_, CU_STUB_VALUE_)
CU_DEV_API(CU_STUB_STATUS_, CU_STUB_STATUS_OUT_, CU_STUB_VOID_, CU_STUB_VALUE_)

#else
typedef int cu_stub_unused_;
#endif

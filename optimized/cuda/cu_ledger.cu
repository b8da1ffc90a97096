// optimized/cuda/cu_ledger.cu — the CUDA backend's own device memory in the engine's memory
// ledger (docs/engine.md "Memory ledger", docs/cuda.md "Memory ledger on CUDA"): the engine's
// buffers are tagged by opt_mem_alloc like on the host; what the backend allocates itself,
// the context's scratch slots (grown on demand) and its fixed cuBLAS(Lt) workspace, is noted
// as backend_scratch, as the host backend notes its GEMM workspaces and per-call scratch.
extern "C" {
#include "optimized/ledger.h"
}
#include "optimized/cuda/cu_adapter.cuh"

/* A scratch slot grew or was freed; the first change after the ledger exists also notes the
 * workspace (made with the context, before the engine's ledger). */
static void cb_scratch_note(void *arg, int64_t delta) {
    opt_backend *be = (opt_backend *)arg;
    cb_ctx *c = CB(be->ctx);
    if (!be->ledger) return;
    if (!c->ws_noted) {
        size_t ws = 0;
        (void)cu_ctx_workspace_(c->cu, &ws);
        opt_mem_note(be, OPT_MEM_SCRATCH, (int64_t)ws);
        c->ws_noted = 1;
    }
    opt_mem_note(be, OPT_MEM_SCRATCH, delta);
}

void cb_ledger_attach(cb_ctx *c, opt_backend *be) { cu_ctx_set_scratch_note_(c->cu, cb_scratch_note, be); }

/* optimized/ledger.h — the memory ledger: every allocation the engine makes is tagged,
 * and the ledger keeps the current and peak bytes per tag on this rank
 * (docs/engine.md "Memory ledger"). The engine allocates through opt_mem_alloc /
 * opt_mem_free (never the backend's alloc/free directly). */
#ifndef OPT_LEDGER_H
#define OPT_LEDGER_H

#include <stdint.h>
#include <stdio.h>

#include "optimized/backend.h"

/* X(ID, name, model_state): model_state = 1 for the terms of the ZeRO formulas. */
/* gathered_params: zero3's per-layer all-gathered parameters (alive from the layer's
 * gather to its release). The last four are memory the engine does not allocate through
 * the backend, recorded so that the ledger accounts for the process (docs/memory.md
 * "Ledger coverage"): backend_scratch (the host backend's own buffers: GEMM workspaces,
 * kernels' per-call scratch, collectives' gathered contributions), host_buffers (the
 * step's host copies: sums, private gradient, per-example outputs), dataset (the run's
 * data set) and host_model (the f64 model the run starts from, and the copy the update
 * check keeps). */
#define OPT_MEM_TAGS(X)                                                                                   \
    X(PARAMS, params, 1) X(MASTER, master_weights, 1) X(GRADS, grads, 1) X(OPTSTATE, optimizer_state, 1) \
    X(ACTIVATIONS, activations, 0) X(PER_EXAMPLE, per_example, 0) X(WORKSPACE, workspace, 0)              \
    X(COMM, comm_buffers, 0) X(GATHERED, gathered_params, 0) X(SCRATCH, backend_scratch, 0)               \
    X(HOST, host_buffers, 0) X(DATASET, dataset, 0) X(HOST_MODEL, host_model, 0)
typedef enum {
#define OPT_MEM_ID_(ID, name, ms) OPT_MEM_##ID,
    OPT_MEM_TAGS(OPT_MEM_ID_)
#undef OPT_MEM_ID_
    OPT_MEM_TAG_COUNT
} opt_mem_tag;
extern const char *const opt_mem_tag_names[OPT_MEM_TAG_COUNT];
extern const int opt_mem_tag_is_model_state[OPT_MEM_TAG_COUNT];

typedef struct opt_ledger opt_ledger;

typedef struct {
    uint64_t cur[OPT_MEM_TAG_COUNT], peak[OPT_MEM_TAG_COUNT];
    uint64_t cur_total, peak_total;               /* all tags */
    uint64_t cur_model_states, peak_model_states; /* params + master + grads + optimizer state */
    uint64_t allocs, frees;
} opt_mem_report;

dp_status opt_ledger_create(opt_ledger **out);
void opt_ledger_destroy(opt_ledger *l);

/* be->ops.alloc (zeroed) recorded under tag; be->ledger NULL: not recorded. */
dp_status opt_mem_alloc(opt_backend *be, void **out, size_t nbytes, opt_mem_tag tag);
/* be->ops.free, removing the record (p NULL: nothing). */
void opt_mem_free(opt_backend *be, void *p);
/* Host memory (malloc, not zeroed) recorded under tag; freed by opt_mem_host_free. */
dp_status opt_mem_host_alloc(opt_backend *be, void **out, size_t nbytes, opt_mem_tag tag);
void opt_mem_host_free(opt_backend *be, void *p);
/* Records delta bytes (positive: allocated, negative: released) under tag for memory
 * allocated elsewhere (a backend's scratch, the data set, the host model); be NULL or
 * without a ledger: nothing. Call from the thread that drives the backend. */
void opt_mem_note(opt_backend *be, opt_mem_tag tag, int64_t delta);
/* Current and peak bytes of be's ledger (all zero without one). */
void opt_mem_get(opt_mem_report *out, const opt_backend *be);
/* Peaks restart from the current values. */
void opt_mem_reset_peaks(opt_backend *be);
/* The report as text: one line per tag (current, peak bytes), then totals; prefix
 * starts every line (e.g. "rank 1: "). */
void opt_mem_print(FILE *f, const opt_mem_report *r, const char *prefix);

#endif

/* optimized/ledger.c — the memory ledger (docs/engine.md "Memory ledger"). */
#include "optimized/ledger.h"
#include "common/alloc.h"

#include <stdlib.h>
#include <string.h>

const char *const opt_mem_tag_names[OPT_MEM_TAG_COUNT] = {
#define OPT_MEM_NAME_(ID, name, ms) #name,
    OPT_MEM_TAGS(OPT_MEM_NAME_)
#undef OPT_MEM_NAME_
};
const int opt_mem_tag_is_model_state[OPT_MEM_TAG_COUNT] = {
#define OPT_MEM_MS_(ID, name, ms) ms,
    OPT_MEM_TAGS(OPT_MEM_MS_)
#undef OPT_MEM_MS_
};

typedef struct {
    void *p;
    size_t n;
    int tag;
} opt_mem_rec;

struct opt_ledger {
    opt_mem_rec *rec;
    size_t nrec, cap;
    opt_mem_report r;
};

dp_status opt_ledger_create(opt_ledger **out) {
    *out = dp_calloc(1, sizeof **out);
    return *out ? DP_OK : dp_error(DP_ERR_NOMEM, "memory ledger: out of memory");
}

void opt_ledger_destroy(opt_ledger *l) {
    if (!l) return;
    dp_free(l->rec);
    dp_free(l);
}

static void ledger_update_peaks(opt_mem_report *r) {
    for (int t = 0; t < OPT_MEM_TAG_COUNT; t++)
        if (r->cur[t] > r->peak[t]) r->peak[t] = r->cur[t];
    if (r->cur_total > r->peak_total) r->peak_total = r->cur_total;
    if (r->cur_model_states > r->peak_model_states) r->peak_model_states = r->cur_model_states;
}

static void ledger_add(opt_mem_report *r, int tag, size_t n, int sign) {
    uint64_t u = (uint64_t)n;
    if (sign > 0) {
        r->cur[tag] += u; r->cur_total += u;
        if (opt_mem_tag_is_model_state[tag]) r->cur_model_states += u;
        r->allocs++;
        ledger_update_peaks(r);
    } else {
        r->cur[tag] -= u; r->cur_total -= u;
        if (opt_mem_tag_is_model_state[tag]) r->cur_model_states -= u;
        r->frees++;
    }
}

/* Allocates nbytes with the backend (host = 0) or dp_malloc (host = 1) and records it. */
static dp_status mem_alloc(opt_backend *be, void **out, size_t nbytes, opt_mem_tag tag, int host) {
    *out = NULL;
    if (tag < 0 || tag >= OPT_MEM_TAG_COUNT) return dp_error(DP_ERR_INTERNAL, "memory ledger: bad tag %d", (int)tag);
    if (!host && !be->ops.alloc) return opt_backend_require(be, (const opt_op[]){OPT_OP_ALLOC}, 1);
    opt_ledger *l = be->ledger;
    if (l) DP_TRY(DP_GROW(l->rec, l->cap, l->nrec + 1, 64, "memory ledger"));
    if (host) {
        *out = dp_malloc(nbytes ? nbytes : 1);
        if (!*out) return dp_error(DP_ERR_NOMEM, "engine: out of memory allocating %zu bytes of host memory", nbytes);
    } else
        DP_TRY(be->ops.alloc(be->ctx, out, nbytes));
    if (l) {
        l->rec[l->nrec++] = (opt_mem_rec){*out, nbytes, (int)tag};
        ledger_add(&l->r, (int)tag, nbytes, +1);
    }
    return DP_OK;
}

/* Removes p's record (if any). */
static void mem_forget(opt_backend *be, const void *p) {
    opt_ledger *l = be->ledger;
    if (l)
        for (size_t i = l->nrec; i-- > 0;)
            if (l->rec[i].p == p) {
                ledger_add(&l->r, l->rec[i].tag, l->rec[i].n, -1);
                l->rec[i] = l->rec[--l->nrec];
                break;
            }
}

dp_status opt_mem_alloc(opt_backend *be, void **out, size_t nbytes, opt_mem_tag tag) {
    return mem_alloc(be, out, nbytes, tag, 0);
}

void opt_mem_free(opt_backend *be, void *p) {
    if (!p) return;
    mem_forget(be, p);
    if (be->ops.free) be->ops.free(be->ctx, p);
}

dp_status opt_mem_host_alloc(opt_backend *be, void **out, size_t nbytes, opt_mem_tag tag) {
    return mem_alloc(be, out, nbytes, tag, 1);
}

void opt_mem_host_free(opt_backend *be, void *p) {
    if (!p) return;
    mem_forget(be, p);
    dp_free(p);
}

void opt_mem_note(opt_backend *be, opt_mem_tag tag, int64_t delta) {
    if (!be || !be->ledger || tag < 0 || tag >= OPT_MEM_TAG_COUNT || delta == 0) return;
    ledger_add(&be->ledger->r, (int)tag, (size_t)(delta > 0 ? delta : -delta), delta > 0 ? +1 : -1);
}

void opt_mem_get(opt_mem_report *out, const opt_backend *be) {
    if (be && be->ledger) *out = be->ledger->r;
    else memset(out, 0, sizeof *out);
}

void opt_mem_reset_peaks(opt_backend *be) {
    if (!be || !be->ledger) return;
    opt_mem_report *r = &be->ledger->r;
    memcpy(r->peak, r->cur, sizeof r->peak);
    r->peak_total = r->cur_total;
    r->peak_model_states = r->cur_model_states;
}

void opt_mem_print(FILE *f, const opt_mem_report *r, const char *prefix) {
    fprintf(f, "%smemory ledger (bytes)        current          peak\n", prefix);
    for (int t = 0; t < OPT_MEM_TAG_COUNT; t++)
        fprintf(f, "%s  %-20s %14llu %14llu\n", prefix, opt_mem_tag_names[t], (unsigned long long)r->cur[t],
                (unsigned long long)r->peak[t]);
    fprintf(f, "%s  %-20s %14llu %14llu\n", prefix, "model_states", (unsigned long long)r->cur_model_states,
            (unsigned long long)r->peak_model_states);
    fprintf(f, "%s  %-20s %14llu %14llu\n", prefix, "total", (unsigned long long)r->cur_total,
            (unsigned long long)r->peak_total);
}

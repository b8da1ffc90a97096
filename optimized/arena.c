/* optimized/arena.c — device buffer lists freed together (optimized/arena.h). */
#include "optimized/arena.h"
#include "common/alloc.h"

#include <stdlib.h>
#include <string.h>

#include "optimized/ledger.h"

static dp_status grow(opt_arena *ar) {
    if (ar->n < ar->cap) return DP_OK;
    int cap = ar->cap ? 2 * ar->cap : 64;
    void **np = dp_realloc(ar->p, sizeof(void *) * (size_t)cap);
    if (!np) return dp_error(DP_ERR_NOMEM, "engine: out of memory");
    ar->p = np;
    ar->cap = cap;
    return DP_OK;
}

dp_status opt_arena_alloc(opt_arena *ar, void **out, size_t nbytes) {
    return opt_arena_alloc_tag(ar, out, nbytes, OPT_MEM_ACTIVATIONS);
}

dp_status opt_arena_alloc_tag(opt_arena *ar, void **out, size_t nbytes, int tag) {
    *out = NULL;
    DP_TRY(grow(ar));
    DP_TRY(opt_mem_alloc(ar->be, out, nbytes, (opt_mem_tag)tag));
    ar->p[ar->n++] = *out;
    return DP_OK;
}

void opt_arena_free(opt_arena *ar) {
    for (int i = ar->n; i-- > 0;) opt_mem_free(ar->be, ar->p[i]);
    dp_free(ar->p);
    ar->p = NULL; ar->n = ar->cap = 0;
}

void opt_arena_drop(opt_arena *ar, void *p) {
    for (int i = ar->n; i-- > 0;)
        if (ar->p[i] == p) {
            opt_mem_free(ar->be, p);
            memmove(ar->p + i, ar->p + i + 1, sizeof(void *) * (size_t)(ar->n - i - 1));
            ar->n--;
            return;
        }
}

dp_status opt_arena_move(opt_arena *dst, opt_arena *src) {
    dst->be = src->be;
    for (int i = 0; i < src->n; i++) {
        DP_TRY(grow(dst));
        dst->p[dst->n++] = src->p[i];
    }
    src->n = 0;
    return DP_OK;
}

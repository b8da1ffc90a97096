/* optimized/arena.h — device buffer lists freed together (the tape's, a block's, a
 * workspace's). Every allocation goes through the memory ledger (optimized/ledger.h)
 * under a tag. Below the models (optimized/engine.c), the attention implementations and
 * the clipping pipeline (optimized/clip/), which all allocate through it. */
#ifndef OPT_ARENA_H
#define OPT_ARENA_H

#include <stddef.h>

#include "optimized/backend.h"

typedef struct {
    void **p; int n, cap;
    opt_backend *be;
} opt_arena;

/* Allocations of an arena are recorded in the memory ledger as activations, or under
 * tag (an opt_mem_tag, optimized/ledger.h). */
dp_status opt_arena_alloc(opt_arena *ar, void **out, size_t nbytes);
dp_status opt_arena_alloc_tag(opt_arena *ar, void **out, size_t nbytes, int tag);
void opt_arena_free(opt_arena *ar);
/* Free p, one allocation of ar, now (nothing when p is not ar's). */
void opt_arena_drop(opt_arena *ar, void *p);
/* dst takes over src's buffers (src is left empty). */
dp_status opt_arena_move(opt_arena *dst, opt_arena *src);

#endif

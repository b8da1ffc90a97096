/* optimized/parallel.h — the process-group layout of a run (docs/engine.md "Process
 * groups"): the world's R ranks as a 2-D grid of N data-parallel (DP) x M
 * context-parallel (CP) ranks, N M = R. World rank w is DP rank w / M and CP rank w % M;
 * the DP group of w = the ranks with its CP rank, its CP group = the ranks with its DP
 * rank. */
#ifndef OPT_PARALLEL_H
#define OPT_PARALLEL_H

#include "optimized/backend.h"

typedef struct {
    int dp, cp;               /* N, M */
    int dp_rank, cp_rank;     /* this rank's coordinates */
    opt_group *dp_group;      /* NULL = the world (when N = R) */
    opt_group *cp_group;      /* &self when M = 1 */
    opt_group self;           /* the one-rank group {0, 1} */
    opt_backend *be;          /* that made the groups */
} opt_parallel;

/* dp = 0: N = R / cp. Usage error (exit 2) when N M != R or either is < 1. */
dp_status opt_parallel_make(opt_parallel *par, opt_backend *be, int dp, int cp);
void opt_parallel_free(opt_parallel *par);

#endif

/* optimized/parallel.c — the DP x CP process-group layout (docs/engine.md "Process groups"). */
#include "optimized/parallel.h"

#include <string.h>

dp_status opt_parallel_make(opt_parallel *par, opt_backend *be, int dp, int cp) {
    memset(par, 0, sizeof *par);
    const int R = be->comm.size, w = be->comm.rank;
    if (cp < 1) return dp_error(DP_ERR_USAGE, "--cp %d: must be >= 1", cp);
    if (dp == 0) dp = R / cp;
    if (dp < 1 || (int64_t)dp * cp != R)
        return dp_error(DP_ERR_USAGE, "--dp %d --cp %d: the layout needs %lld ranks, but the run has %d (N M must equal "
                        "the world size)", dp, cp, (long long)dp * cp, R);
    par->be = be;
    par->dp = dp; par->cp = cp;
    par->dp_rank = w / cp; par->cp_rank = w % cp;
    par->self = (opt_group){0, 1, 0, NULL};
    par->cp_group = &par->self;
    if (cp == 1) return DP_OK; /* the DP group is the world: no split (every backend) */
    if (!be->ops.group_split)
        return dp_error(DP_ERR_NOT_SUPPORTED, "backend '%s' does not support operation 'group_split' (--cp %d needs "
                        "process groups)", be->name, cp);
    opt_group *dg = NULL, *cg = NULL;
    DP_TRY(be->ops.group_split(be->ctx, &dg, par->cp_rank, par->dp_rank));
    dp_status st = be->ops.group_split(be->ctx, &cg, par->dp_rank, par->cp_rank);
    if (st != DP_OK) { be->ops.group_free(be->ctx, dg); return st; }
    par->dp_group = dg;
    par->cp_group = cg;
    return DP_OK;
}

void opt_parallel_free(opt_parallel *par) {
    if (par->be && par->be->ops.group_free) {
        if (par->dp_group) par->be->ops.group_free(par->be->ctx, par->dp_group);
        if (par->cp_group && par->cp_group != &par->self) par->be->ops.group_free(par->be->ctx, par->cp_group);
    }
    memset(par, 0, sizeof *par);
}

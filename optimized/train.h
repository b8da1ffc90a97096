/* optimized/train.h — pieces shared by the `dpcert train dpsgd|dpzo` commands
 * (both in optimized/train_cmd.c). */
#ifndef OPT_TRAIN_H
#define OPT_TRAIN_H

#include <stdio.h>

#include "common/cli.h"
#include "optimized/dpsgd.h"

/* The engine's own options (--impl --backend --strategy --noise-mode --mixed-rule --dtype
 * --threads --inject-bug --export). */
typedef struct {
    const char *impl, *backend, *strategy, *noise_mode, *dtype, *bug, *mixed_rule, *export_dir;
    int64_t threads;
    int seen_export, seen_bug, seen_strategy, seen_noise_mode, seen_mixed_rule;
    const char *sharding;       /* --sharding replicated|zero1|zero2|zero3 */
    int64_t dp, cp;             /* --dp N --cp M (0: N = world size / M) */
    double collective_timeout;  /* --collective-timeout SECONDS */
    int memory_report;          /* --memory-report */
    int seen_sharding, seen_dp, seen_cp;
    int seen_threads;  /* without --threads: the cores available to this rank (opt_default_threads) */
    const char *cp_attention, *cp_pattern; /* --cp-attention allgather|ring, --cp-pattern input|output */
    int seen_cp_attention, seen_cp_pattern;
    const char *precision;      /* --precision f64|f32|bf16|fp16 (docs/precision.md); --dtype is its alias */
    int seen_precision, seen_dtype;
    const char *cp_overlap;                /* --cp-overlap on|off */
    int seen_cp_overlap;
    const char *checkpoint;                /* --checkpoint none|block */
    int seen_checkpoint;
    const char *loss_scale;     /* --loss-scale none|static:S|dynamic[:S0[:K]] */
    int seen_loss_scale;
} opt_train_cli;
#define OPT_TRAIN_NOPTS 20

void opt_train_cli_init(opt_train_cli *t);
/* Appends the engine options (at most OPT_TRAIN_NOPTS) to opts[*n, cap). */
dp_status opt_train_add_opts(dp_opt *opts, size_t *n, size_t cap, opt_train_cli *t);
/* Validates the engine options; algo_dpzo rejects the DP-SGD-only ones. */
dp_status opt_train_parse(opt_backend_config *bc, opt_dp_options *o, const opt_train_cli *t, int algo_dpzo);
/* The default of --threads: the cores available to this process / the ranks on this node. */
int opt_default_threads(void);

/* MPI: initialised when the process was started by mpirun (OMPI_COMM_WORLD_SIZE,
 * PMIX_RANK or PMI_RANK set); *use_mpi = 1 then. */
dp_status opt_mpi_start(int *use_mpi);
/* Finalize MPI if opt_mpi_start initialised it; failed != 0 on a rank that fails alone
 * aborts the others (MPI_Abort) instead of leaving them in a collective. */
void opt_mpi_stop(int failed);
/* Every rank takes rank 0's noise key (a fresh random key differs per process), through
 * the backend's allgatherv_bytes. */
dp_status opt_share_key(opt_backend *be, dp_noise_key *key);
/* --memory-report: every rank's memory ledger and byte counters, printed by rank 0 in
 * rank order (collective). */
dp_status opt_memory_report(opt_backend *be, FILE *f);
/* Fails with NOT_SUPPORTED when --backend cuda is asked of a binary that neither links
 * the CUDA objects nor finds the plugin (optimized/cuda_plugin.h; loads it). */
dp_status opt_check_backend_built(const opt_backend_config *bc);
dp_status opt_make_dir(const char *dir);
/* opt_check_backend_built, opt_mpi_start, opt_backend_create (bc->use_mpi set) and
 * opt_share_key (of *key), in that order: the start of every `train` command. */
dp_status opt_train_start(opt_backend **be, opt_backend_config *bc, dp_noise_key *key, int *use_mpi);
/* The export metadata every train command records about its run (docs/engine.md): ranks,
 * threads and the arithmetic declaration the run is judged under (docs/plugin-abi.md). */
typedef struct {
    char ranks[32], threads[32];
    char arith[4600], arith_u[40], arith_u_in[40];
} opt_train_meta;
void opt_train_meta_fill(opt_train_meta *tm, const opt_backend *be);
/* The configuration digest of `train ALGO` (opts[0..n) as parsed, the model) agreed by
 * every rank before any work (optimized/opt_agree.h, docs/ranks.md); a disagreement is
 * DP_ERR_INVALID on every rank, which then exit 2 together. */
dp_status opt_train_agree(opt_backend *be, const char *algo, const dp_opt *opts, size_t n,
                          const dp_model_config *mc);

#endif

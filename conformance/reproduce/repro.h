/* conformance/reproduce/repro.h — `dpcert reproduce` targets (docs/reproduce.md).
 *
 * A target fills a JSON object: "columns" (the keys of a row, in print order), "rows"
 * (objects with those keys, a "kind", a "verdict" and, when it differs or did not run, a
 * "reason"), "plots" (specifications that dp_html_plot renders, common/html.h),
 * "caveats", and optionally "extra_tables" (further tables, each {"title", "columns", "rows"},
 * e.g. a sensitivity analysis); repro_finish adds the per-kind "summary" and the
 * target's "verdict". The command prints the side-by-side table, the JSON or the report
 * from that object. */
#ifndef REPRO_H
#define REPRO_H

#include <jansson.h>
#include <stdio.h>

#include "common/html.h"
#include "common/status.h"
#include "optimized/opt_cost.h"

/* What a row proves (docs/reproduce.md "Kinds"): id, name, counts as reproduced, meaning. */
#define REPRO_KINDS(X)                                                                                           \
    X(REPRO_KIND_INDEPENDENT, "independent", 1, "computed by dpcert from first principles, compared with the paper's number") \
    X(REPRO_KIND_MEASURED, "measured", 1, "from running dpcert's engine at a size this machine holds, checked against the model") \
    X(REPRO_KIND_ARITHMETIC, "arithmetic", 0, "the paper's own formula or numbers re-evaluated")                      \
    X(REPRO_KIND_BOUND_ONLY, "bound-only", 0, "only an inequality is checked")                                         \
    X(REPRO_KIND_DERIVED, "derived", 0, "follows from other numbers of the paper")                                    \
    X(REPRO_KIND_NOT_IN_PAPER, "not-in-paper", 0, "dpcert's own figure or expectation; the paper prints no such number")
typedef enum {
#define REPRO_KIND_ENUM_(id, name, counts, what) id,
    REPRO_KINDS(REPRO_KIND_ENUM_)
#undef REPRO_KIND_ENUM_
    REPRO_N_KINDS
} repro_kind;
const char *repro_kind_name(repro_kind k);
const char *repro_kind_what(repro_kind k);
int repro_kind_counts(repro_kind k); /* 1: its matches count as reproduced */
int repro_kind_parse(repro_kind *out, const char *name); /* 0 unknown */

/* A row's outcome, from its verdict: "match..." / "CONSISTENT" match; "differs..." /
 * "UNDER-REPORTED" differ; "not run..." could not run (an input of the check is missing,
 * e.g. no mpirun); anything else ("n/a (...)", "INCONCLUSIVE") neither. */
typedef enum { REPRO_OUT_MATCH, REPRO_OUT_DIFFERS, REPRO_OUT_NOT_RUN, REPRO_OUT_OTHER } repro_outcome;
repro_outcome repro_outcome_of(const char *verdict);

typedef struct {
    json_t *root; /* the target's object */
    FILE *txt;    /* the text output (NULL with --json) */
    const char *dpcert; /* the dpcert binary the measured rows run (`reproduce --dpcert`) */
} repro_ctx;

/* Column keys of the rows, in order (NULL-terminated); "kind" is inserted before "verdict". */
void repro_columns(repro_ctx *r, const char *const *keys);
/* A new row appended to "rows" with its kind and verdict ("match", "differs", "n/a
 * (computed)", "not run (...)"...); a differing or not-run row needs a reason. A
 * not-in-paper row must not carry a key starting with "paper" (repro_finish checks). */
json_t *repro_row(repro_ctx *r, repro_kind kind, const char *verdict, const char *reason);
void repro_caveat(repro_ctx *r, const char *text);
/* A further table {"title", "columns", "rows"} appended to "extra_tables"; returns its rows array. */
json_t *repro_table(repro_ctx *r, const char *title, const char *const *columns);

/* The target's verdict from its rows (docs/reproduce.md "Verdict"): */
typedef enum { REPRO_REPRODUCED, REPRO_DIFFERS, REPRO_INCOMPLETE, REPRO_UNCORROBORATED } repro_verdict;
/* Sets "summary" (per kind: rows, match, differs, not_run, other; reproduced = matches of
 * the kinds that count, of reproducible rows of those kinds; differ; not_run) and
 * "verdict"; *out the verdict. DP_ERR_INTERNAL when a row lacks a kind or a verdict, a
 * differing row a reason, or a not-in-paper row carries a paper value. */
dp_status repro_finish(repro_verdict *out, json_t *root);
const char *repro_verdict_name(repro_verdict v);

/* The side-by-side table, the further tables, the caveats and the summary as text. */
void repro_print(FILE *f, const json_t *root);

/* A JSON number: an integer when x is one (below 2^53), else a real (so that byte
 * counts and sequence lengths print in full). */
json_t *repro_num(double x);
/* |x - printed| within half a unit of the printed value's last digit. */
int repro_rounds_to(double x, double printed, double unit);
/* a / b, both printed to the unit ua, ub (each exact within half of it): can the quotient
 * round to `printed` at the unit up? (interval arithmetic over the inputs' rounding) */
int repro_ratio_consistent(double a, double ua, double b, double ub, double printed, double up);

/* ---- measured rows: `dpcert train dpsgd ... --memory-report` (conformance/reproduce/repro_measure.c) ---- */
#define REPRO_MAX_RANKS 4
typedef struct {
    int nranks, nsteps;
    long long batch[16];                      /* the global batch of each step (step lines) */
    double peak[REPRO_MAX_RANKS][16];    /* ledger peak per tag (repro_tag order) */
    double sent[REPRO_MAX_RANKS][16];    /* bytes sent per collective kind (repro_coll order) */
    char missing[160];                        /* non-empty: the run could not be made (the reason) */
} repro_run;
/* Ledger tags and collective kinds as --memory-report prints them. */
#define REPRO_TAGS(X) X(params) X(master_weights) X(grads) X(optimizer_state) X(activations) X(per_example) \
    X(workspace) X(comm_buffers) X(gathered_params)
#define REPRO_COLLS(X) X(allreduce_sum) X(reduce_scatter_sum) X(allgather) X(alltoall) X(send)
typedef enum {
#define REPRO_TAG_ENUM_(n) REPRO_TAG_##n,
    REPRO_TAGS(REPRO_TAG_ENUM_)
#undef REPRO_TAG_ENUM_
    REPRO_N_TAGS
} repro_tag;
typedef enum {
#define REPRO_COLL_ENUM_(n) REPRO_COLL_##n,
    REPRO_COLLS(REPRO_COLL_ENUM_)
#undef REPRO_COLL_ENUM_
    REPRO_N_COLLS
} repro_coll;
/* Runs `[mpirun -n ranks] DPCERT train dpsgd ARGS --memory-report` (ARGS a space-separated
 * list of options, no quoting) in a temporary directory and parses every rank's ledger
 * peaks, bytes sent and the step lines. DP_OK with out->missing set when the run could not
 * be made (no mpirun for ranks > 1): the rows become "not run"; an error status when the
 * run failed (its log's tail in the message). */
dp_status repro_train(repro_run *out, const repro_ctx *r, int ranks, const char *args);
/* The largest batch over the run's steps. */
long long repro_max_batch(const repro_run *run);

/* ---- the papers' setups shared by several targets (conformance/reproduce/repro_memory.c) ---- */
#define REPRO_GB 1e9
#define REPRO_CAPACITY_80GB (80 * REPRO_GB) /* an 80 GB device: 80e9 bytes usable (docs/reproduce.md) */
extern const opt_cost_llama *const LS_MODELS[3]; /* Llama 3.2 1B, 3.2 3B, 3.1 8B */
/* LongShield's ZeRO-DP+ on n_ranks GPUs (0 = infinitely many): FSDP (ZeRO stage 3), mixed
 * ghost norm with fastDP's memory rule, book-keeping, flat clipping, bf16 + f32 AdamW,
 * logits upcast to f32. */
opt_cost_setup ls_zero_dp_plus(int64_t n_ranks);
/* Its runs on 4 GPUs with context parallelism over the 4: "non-DP", "non-DP AC", "V1"
 * (grad-sample), "V2" (per-example gradients sharded over CP), "V3" (V2 + block
 * checkpointing). */
opt_cost_setup ls_variant(const char *variant);
/* GPT-2 small, medium, large, XL (size 0..3; 12/24/36/48 layers of width 768/1024/1280/1600,
 * vocabulary 50257, tied head): its linear layers in order (4 per block, then lm_head),
 * at most 4 * 48 + 1; returns the count (conformance/reproduce/repro_flashdp.c). */
int repro_gpt2_linears(opt_cost_linear *out, int size);
/* The DP-ZO paper's memory comparison as a plot (conformance/reproduce/repro_memory.c). */
dp_status repro_dpzo_memory_plot(repro_ctx *r);

/* ---- the targets: each returns DP_OK having filled r, or an error status with dp_error set ---- */
dp_status repro_dpzo_tables(repro_ctx *r);        /* repro_dpzo.c */
dp_status repro_longshield_table2(repro_ctx *r);  /* repro_memory.c */
dp_status repro_longshield_memory(repro_ctx *r);  /* repro_memory.c */
dp_status repro_dp_zero_memory(repro_ctx *r);     /* repro_zero.c */
dp_status repro_dp_zero_time(repro_ctx *r);       /* repro_zero.c */
dp_status repro_flashdp_memory(repro_ctx *r);     /* repro_flashdp.c */
dp_status repro_dp_zero_losscale(repro_ctx *r);   /* repro_losscale.c */
dp_status repro_longshield_comm(repro_ctx *r);    /* repro_longshield.c */
dp_status repro_longshield_claims(repro_ctx *r);  /* repro_longshield.c */

/* The page of a reproduce target (its JSON object) written atomically to path (repro_html.c). */
dp_status repro_html(const char *path, const json_t *root);

#endif

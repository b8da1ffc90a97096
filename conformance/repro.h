/* conformance/repro.h — `dpcert reproduce` targets (docs/reproduce.md).
 *
 * A target fills a JSON object: "columns" (the keys of a row, in print order), "rows"
 * (objects with those keys, a "kind", a "verdict" and, when it differs or did not run, a
 * "reason"), "plots" (specifications that dp_html_plot renders, common/html.h),
 * "caveats", and optionally "extra_tables" (further tables, each {"title", "columns", "rows"},
 * e.g. a sensitivity analysis); conf_repro_finish adds the per-kind "summary" and the
 * target's "verdict". The command prints the side-by-side table, the JSON or the report
 * from that object. */
#ifndef CONF_REPRO_H
#define CONF_REPRO_H

#include <jansson.h>
#include <stdio.h>

#include "common/html.h"
#include "common/status.h"
#include "optimized/opt_cost.h"

/* What a row proves (docs/reproduce.md "Kinds"): id, name, counts as reproduced, meaning. */
#define CONF_REPRO_KINDS(X)                                                                                           \
    X(CONF_KIND_INDEPENDENT, "independent", 1, "computed by dpcert from first principles, compared with the paper's number") \
    X(CONF_KIND_MEASURED, "measured", 1, "from running dpcert's engine at a size this machine holds, checked against the model") \
    X(CONF_KIND_ARITHMETIC, "arithmetic", 0, "the paper's own formula or numbers re-evaluated")                      \
    X(CONF_KIND_BOUND_ONLY, "bound-only", 0, "only an inequality is checked")                                         \
    X(CONF_KIND_DERIVED, "derived", 0, "follows from other numbers of the paper")                                    \
    X(CONF_KIND_NOT_IN_PAPER, "not-in-paper", 0, "dpcert's own figure or expectation; the paper prints no such number")
typedef enum {
#define CONF_KIND_ENUM_(id, name, counts, what) id,
    CONF_REPRO_KINDS(CONF_KIND_ENUM_)
#undef CONF_KIND_ENUM_
    CONF_N_KINDS
} conf_repro_kind;
const char *conf_repro_kind_name(conf_repro_kind k);
const char *conf_repro_kind_what(conf_repro_kind k);
int conf_repro_kind_counts(conf_repro_kind k); /* 1: its matches count as reproduced */
int conf_repro_kind_parse(conf_repro_kind *out, const char *name); /* 0 unknown */

/* A row's outcome, from its verdict: "match..." / "CONSISTENT" match; "differs..." /
 * "UNDER-REPORTED" differ; "not run..." could not run (an input of the check is missing,
 * e.g. no mpirun); anything else ("n/a (...)", "INCONCLUSIVE") neither. */
typedef enum { CONF_OUT_MATCH, CONF_OUT_DIFFERS, CONF_OUT_NOT_RUN, CONF_OUT_OTHER } conf_repro_outcome;
conf_repro_outcome conf_repro_outcome_of(const char *verdict);

typedef struct {
    json_t *root; /* the target's object */
    FILE *txt;    /* the text output (NULL with --json) */
    const char *dpcert; /* the dpcert binary the measured rows run (`reproduce --dpcert`) */
} conf_repro;

/* Column keys of the rows, in order (NULL-terminated); "kind" is inserted before "verdict". */
void conf_repro_columns(conf_repro *r, const char *const *keys);
/* A new row appended to "rows" with its kind and verdict ("match", "differs", "n/a
 * (computed)", "not run (...)"...); a differing or not-run row needs a reason. A
 * not-in-paper row must not carry a key starting with "paper" (conf_repro_finish checks). */
json_t *conf_repro_row(conf_repro *r, conf_repro_kind kind, const char *verdict, const char *reason);
void conf_repro_caveat(conf_repro *r, const char *text);
/* A further table {"title", "columns", "rows"} appended to "extra_tables"; returns its rows array. */
json_t *conf_repro_table(conf_repro *r, const char *title, const char *const *columns);

/* The target's verdict from its rows (docs/reproduce.md "Verdict"): */
typedef enum { CONF_REPRO_REPRODUCED, CONF_REPRO_DIFFERS, CONF_REPRO_INCOMPLETE, CONF_REPRO_UNCORROBORATED } conf_repro_verdict;
/* Sets "summary" (per kind: rows, match, differs, not_run, other; reproduced = matches of
 * the kinds that count, of reproducible rows of those kinds; differ; not_run) and
 * "verdict"; *out the verdict. DP_ERR_INTERNAL when a row lacks a kind or a verdict, a
 * differing row a reason, or a not-in-paper row carries a paper value. */
dp_status conf_repro_finish(conf_repro_verdict *out, json_t *root);
const char *conf_repro_verdict_name(conf_repro_verdict v);

/* The side-by-side table, the further tables, the caveats and the summary as text. */
void conf_repro_print(FILE *f, const json_t *root);

/* A JSON number: an integer when x is one (below 2^53), else a real (so that byte
 * counts and sequence lengths print in full). */
json_t *conf_repro_num(double x);
/* |x - printed| within half a unit of the printed value's last digit. */
int conf_repro_rounds_to(double x, double printed, double unit);
/* a / b, both printed to the unit ua, ub (each exact within half of it): can the quotient
 * round to `printed` at the unit up? (interval arithmetic over the inputs' rounding) */
int conf_repro_ratio_consistent(double a, double ua, double b, double ub, double printed, double up);

/* ---- measured rows: `dpcert train dpsgd ... --memory-report` (conformance/repro_measure.c) ---- */
#define CONF_REPRO_MAX_RANKS 4
typedef struct {
    int nranks, nsteps;
    long long batch[16];                      /* the global batch of each step (step lines) */
    double peak[CONF_REPRO_MAX_RANKS][16];    /* ledger peak per tag (conf_repro_tag order) */
    double sent[CONF_REPRO_MAX_RANKS][16];    /* bytes sent per collective kind (conf_repro_coll order) */
    char missing[160];                        /* non-empty: the run could not be made (the reason) */
} conf_repro_run;
/* Ledger tags and collective kinds as --memory-report prints them. */
#define CONF_REPRO_TAGS(X) X(params) X(master_weights) X(grads) X(optimizer_state) X(activations) X(per_example) \
    X(workspace) X(comm_buffers) X(gathered_params)
#define CONF_REPRO_COLLS(X) X(allreduce_sum) X(reduce_scatter_sum) X(allgather) X(alltoall) X(send)
typedef enum {
#define CONF_TAG_ENUM_(n) CONF_TAG_##n,
    CONF_REPRO_TAGS(CONF_TAG_ENUM_)
#undef CONF_TAG_ENUM_
    CONF_N_TAGS
} conf_repro_tag;
typedef enum {
#define CONF_COLL_ENUM_(n) CONF_COLL_##n,
    CONF_REPRO_COLLS(CONF_COLL_ENUM_)
#undef CONF_COLL_ENUM_
    CONF_N_COLLS
} conf_repro_coll;
/* Runs `[mpirun -n ranks] DPCERT train dpsgd ARGS --memory-report` (ARGS a space-separated
 * list of options, no quoting) in a temporary directory and parses every rank's ledger
 * peaks, bytes sent and the step lines. DP_OK with out->missing set when the run could not
 * be made (no mpirun for ranks > 1): the rows become "not run"; an error status when the
 * run failed (its log's tail in the message). */
dp_status conf_repro_train(conf_repro_run *out, const conf_repro *r, int ranks, const char *args);
/* The largest batch over the run's steps. */
long long conf_repro_max_batch(const conf_repro_run *run);

/* ---- the papers' setups shared by several targets (conformance/repro_memory.c) ---- */
#define CONF_GB 1e9
#define CONF_CAPACITY_80GB (80 * CONF_GB) /* an 80 GB device: 80e9 bytes usable (docs/reproduce.md) */
extern const opt_cost_llama *const CONF_LS_MODELS[3]; /* Llama 3.2 1B, 3.2 3B, 3.1 8B */
/* LongShield's ZeRO-DP+ on n_ranks GPUs (0 = infinitely many): FSDP (ZeRO stage 3), mixed
 * ghost norm with fastDP's memory rule, book-keeping, flat clipping, bf16 + f32 AdamW,
 * logits upcast to f32. */
opt_cost_setup conf_ls_zero_dp_plus(int64_t n_ranks);
/* Its runs on 4 GPUs with context parallelism over the 4: "non-DP", "non-DP AC", "V1"
 * (grad-sample), "V2" (per-example gradients sharded over CP), "V3" (V2 + block
 * checkpointing). */
opt_cost_setup conf_ls_variant(const char *variant);
/* GPT-2 small, medium, large, XL (size 0..3; 12/24/36/48 layers of width 768/1024/1280/1600,
 * vocabulary 50257, tied head): its linear layers in order (4 per block, then lm_head),
 * at most 4 * 48 + 1; returns the count (conformance/repro_flashdp.c). */
int conf_gpt2_linears(opt_cost_linear *out, int size);
/* The DP-ZO paper's memory comparison as a plot (conformance/repro_memory.c). */
dp_status conf_repro_dpzo_memory_plot(conf_repro *r);

/* ---- the targets: each returns DP_OK having filled r, or an error status with dp_error set ---- */
dp_status conf_repro_dpzo_tables(conf_repro *r);        /* cmd_reproduce.c (accountant/acct_cmd.c rows) */
dp_status conf_repro_longshield_table2(conf_repro *r);  /* repro_memory.c */
dp_status conf_repro_longshield_memory(conf_repro *r);  /* repro_memory.c */
dp_status conf_repro_dp_zero_memory(conf_repro *r);     /* repro_zero.c */
dp_status conf_repro_dp_zero_time(conf_repro *r);       /* repro_zero.c */
dp_status conf_repro_flashdp_memory(conf_repro *r);     /* repro_flashdp.c */
dp_status conf_repro_dp_zero_losscale(conf_repro *r);   /* repro_losscale.c */
dp_status conf_repro_longshield_comm(conf_repro *r);    /* repro_longshield.c */
dp_status conf_repro_longshield_claims(conf_repro *r);  /* repro_longshield.c */

#endif

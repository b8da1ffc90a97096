/* conformance/conform/conform.h — the conform runner (prefix conf_): cases and suites
 * (conformance/cases/NAME.json), running one case (two processes, then the comparison core),
 * the reports of a run (JSON, JUnit XML, Markdown, report.html from the page blocks of
 * common/html.h, docs/reports.md) and `dpcert conform` (docs/conformance.md). */
#ifndef CONF_CONFORM_H
#define CONF_CONFORM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/html.h"
#include "common/status.h"
#include "conformance/compare/compare.h"

/* ---- cases and suites (cases.c) ---- */
#define CONF_MAX_RANKS 8
typedef struct {
    char name[96];
    char file[512];
    char algorithm[16];     /* dpsgd | dpzo */
    char suites[128];       /* comma-separated: default,ci,full */
    char kind[16];          /* "compare" (element-wise) or "stat-noise" or "stat-poisson" */
    char strategy[32];
    char noise_mode[16];    /* single | shares */
    char dtype[8];          /* f64 | f32 */
    int64_t ranks[CONF_MAX_RANKS]; size_t nranks; /* rank counts this case runs with */
    int any_ranks;          /* 1: `conform --ranks LIST` replaces `ranks` (the check means the same at
                               every R); 0: LIST is intersected with `ranks`. Key "any_ranks";
                               default 1 for compare cases, 0 for statistical cases and negative controls */
    int64_t micro_batches;
    int64_t steps;
    char **args; size_t nargs;      /* model/DP flags passed to both sides */
    char **ref_args; size_t nref;   /* extra flags for the reference only */
    char **cand_args; size_t ncand; /* extra flags for the candidate only */
    double sigma, clip;     /* for the statistical checks (also passed in args) */
    int64_t n_data; double q;
    double alpha;           /* statistical false-reject bound (default 1e-6) */
    int clip_mix;           /* 1 (default): a compare case FAILs unless its reference exercises the clip
                               (conf_clip_mix_check). Key "clip_mix": false only where no step can hold
                               two examples (a dataset of one; almost always empty batches) */
    int expect_fail;        /* negative control: the case must FAIL (a test-only injected bug) */
    char expect_tensor[96]; /* ... naming a tensor whose name starts with this */
    json_t *json;           /* the case as JSON (file or matrix expansion), set by conf_cases_load_suite */
} conf_case;
void conf_case_free(conf_case *c);
/* Load one JSON case (schema in docs/conformance.md); unknown keys are errors. */
dp_status conf_case_load(conf_case *c, const char *path);
/* The same from the file's bytes buf[0..len) (the fuzz target's entry); `path` for messages. */
dp_status conf_case_parse(conf_case *c, const char *buf, size_t len, const char *path);
/* All cases of `dir` that belong to `suite` ("all" for every case): the files dir/NAME.json
 * and the expansion of the matrices dir/matrix/NAME.json, sorted by NAME.json. A name defined
 * twice is DP_ERR_FORMAT, unless a file repeats an expanded case with the same canonical
 * content (kept once: the check that hand-written files equal the expansion). */
dp_status conf_cases_load_suite(conf_case **out, size_t *n, const char *dir, const char *suite);
/* The cases of the matrix file `path` (docs/conformance.md "Case matrices") as a JSON array of
 * case objects in expansion order, not yet checked against the case schema. */
dp_status conf_matrix_expand(json_t **out, const char *path);
/* The canonical text of a case object (json_dumps `flags`; dp_free): its top-level keys sorted,
 * nested objects in their written order (the order of args is the order of the command line).
 * NULL when out of memory. */
char *conf_case_canonical(const json_t *c, size_t flags);

/* ---- runner and reports (runner.c, report.c) ---- */
typedef struct {
    char name[160];         /* case name + "@r<R>" */
    char backend[16];       /* the candidate's backend (cuda-emu: the CPU emulation, not a GPU) */
    conf_status status;
    double worst_frac;
    double seconds;
    char detail[512];       /* first failing tensor / reason */
    conf_cmp_result cmp;    /* per-tensor results (may be empty) */
    conf_stat_result stat;  /* for statistical cases */
    int is_stat;
} conf_case_result;

typedef struct {
    const char *dpcert;     /* binary to run */
    const char *backend;    /* host | cuda | cuda-emu */
    const char *cases_dir;
    const char *work_dir;   /* where exports go (removed afterwards unless keep) */
    int keep;
    int verbose;
} conf_run_opts;
/* Runs one case with `ranks` ranks into *res. */
/* 1 when a process that exited `rc` could not run the case rather than failed it: rc == 3
 * and its log has a line matching ^dpcert [a-z-]+( [a-z]+)?: not supported:  (common/cli.c
 * for DP_ERR_NOT_SUPPORTED) or the text "not built into this binary". */
int conf_log_not_supported(int rc, const char *log);
/* Margin of conf_clip_mix_check: a clipped example's factor is below 1 - m (so the omitted clip
 * changes its terms by more than 1 %, far above the f32 detection limit delta* of
 * docs/tolerances.md), automatic factors spread by more than m. */
#define CONF_CLIP_MIX_MARGIN 0.01
/* 1: the reference export in `dir` exercises the clip (abadi: a step with an example clipped
 * by more than m and an unclipped one; automatic: a step whose factors spread by more than m
 * and differ from 1 by more than m; DP-ZO: a step with |l+ - l-| > C (1 + m) and one <= C);
 * 0: not (msg says why); -1: nothing to check (no clip factors exported). */
int conf_clip_mix_check(char *msg, size_t len, const char *dir);
dp_status conf_run_case(conf_case_result *res, const conf_case *c, int64_t ranks, const conf_run_opts *o);
/* Remove a file or directory tree (links removed, never followed); errors ignored. */
void conf_rm_rf(const char *path);

dp_status conf_report_json(const char *path, const char *suite, const conf_case_result *r, size_t n);
dp_status conf_report_junit(const char *path, const char *suite, const conf_case_result *r, size_t n);
dp_status conf_report_md(const char *path, const char *suite, const conf_case_result *r, size_t n);
/* XML-escape s into buf (& < > " ' and control characters other than \t\n\r dropped). */
void conf_xml_escape(char *buf, size_t len, const char *s);

/* The tolerance-budget plot specification of a run (bars up to 60 cases, a histogram of the
 * fractions beyond: docs/reports.md); NULL when out of memory. */
json_t *conf_budget_plot(const conf_case_result *r, size_t n);

/* report.html of a conformance run, beside report.json (same results). */
dp_status conf_report_html(const char *path, const char *suite, const conf_case_result *r, size_t n);

#endif

/* conformance/reproduce/repro_measure.c — the measured rows of `dpcert reproduce`: runs
 * `[mpirun -n N] dpcert train dpsgd ... --memory-report` at a size this machine holds and
 * parses every rank's memory-ledger peaks, bytes sent per collective kind and the step
 * lines (docs/reproduce.md "Measured rows"; the report's format: docs/engine.md "Memory
 * ledger" and "Byte counters"). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/proc.h"
#include "common/alloc.h"
#include "conformance/reproduce/repro.h"

#define TAG_NAME_(n) #n,
static const char *const TAG_NAMES[] = {REPRO_TAGS(TAG_NAME_)};
static const char *const COLL_NAMES[] = {REPRO_COLLS(TAG_NAME_)};
#undef TAG_NAME_

/* Open MPI as the test scripts run it (optimized/tests/mpi_lib.bash): root allowed,
 * oversubscribed, yielding; a sanitizer build without leak checks of the ranks. */
static const char *const MPI_ENV[] = {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                      "OMPI_MCA_rmaps_base_oversubscribe=1", "OMPI_MCA_mpi_yield_when_idle=1",
                                      "ASAN_OPTIONS=detect_odr_violation=0:detect_leaks=0", NULL};

static int have_mpirun(void) {
    static int known = -1;
    if (known < 0) {
        dp_proc_result res;
        char *argv[] = {"mpirun", "--version", NULL};
        dp_proc_opts o = {.timeout_s = 30};
        known = dp_proc_run(&res, argv, &o) == DP_OK && res.exit_code == 0;
        dp_clear_error();
    }
    return known;
}

static void parse(repro_run *out, FILE *f) {
    char line[512];
    while (fgets(line, sizeof line, f)) {
        int r;
        char name[64];
        unsigned long long a, b, c;
        long long st, bs;
        if (sscanf(line, "step %lld batch %lld", &st, &bs) == 2) {
            if (out->nsteps < 16) out->batch[out->nsteps++] = bs;
            continue;
        }
        if (sscanf(line, "rank %d: %63s %llu %llu %llu", &r, name, &a, &b, &c) == 5) {
            for (int k = 0; r >= 0 && r < out->nranks && k < REPRO_N_COLLS; k++)
                if (strcmp(name, COLL_NAMES[k]) == 0) out->sent[r][k] = (double)b;
        } else if (sscanf(line, "rank %d: %63s %llu %llu", &r, name, &a, &b) == 4) {
            for (int t = 0; r >= 0 && r < out->nranks && t < REPRO_N_TAGS; t++)
                if (strcmp(name, TAG_NAMES[t]) == 0) out->peak[r][t] = (double)b;
        }
    }
}

static char *tail_of(const char *path) {
    static char buf[600];
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, n > 500 ? n - 500 : 0, SEEK_SET);
    buf[fread(buf, 1, sizeof buf - 1, f)] = 0;
    fclose(f);
    return buf;
}

dp_status repro_train(repro_run *out, const repro_ctx *r, int ranks, const char *args) {
    memset(out, 0, sizeof *out);
    out->nranks = ranks;
    if (ranks < 1 || ranks > REPRO_MAX_RANKS) return dp_error(DP_ERR_INTERNAL, "reproduce: %d ranks", ranks);
    if (ranks > 1 && !have_mpirun()) {
        snprintf(out->missing, sizeof out->missing, "mpirun was not found: the %d-rank run could not be made", ranks);
        return DP_OK;
    }
    const char *tmp = getenv("TMPDIR");
    char dir[512], log[600], err[600];
    snprintf(dir, sizeof dir, "%s/dpcert-reproduce-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) return dp_error(DP_ERR_IO, "reproduce: cannot create a temporary directory under %s",
                                       tmp && *tmp ? tmp : "/tmp");
    snprintf(log, sizeof log, "%s/stdout.txt", dir);
    snprintf(err, sizeof err, "%s/stderr.txt", dir);
    /* argv: DPCERT train dpsgd ARGS... --memory-report (ARGS split at spaces) */
    char *words = dp_strdup(args ? args : ""), *argv[80];
    int n = 0;
    if (!words) { rmdir(dir); return DP_ERR_NOMEM; }
    argv[n++] = (char *)r->dpcert;
    argv[n++] = "train";
    argv[n++] = "dpsgd";
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w && n < 76; w = strtok_r(NULL, " ", &save)) argv[n++] = w;
    argv[n++] = "--memory-report";
    argv[n] = NULL;
    /* stdout (the step lines) and stderr (the report) in separate files: mpirun may split a
     * line where both share one */
    char cmd[800];
    if (ranks > 1) snprintf(cmd, sizeof cmd, "exec 2>\"%s\"; mpirun -x ASAN_OPTIONS -n %d", err, ranks);
    else snprintf(cmd, sizeof cmd, "exec 2>\"%s\";", err);
    dp_proc_result res;
    dp_proc_opts o = {.timeout_s = 300, .log_path = log, .env_set = MPI_ENV};
    dp_status st = dp_proc_run_shell(&res, cmd, argv, &o);
    dp_free(words);
    if (st == DP_OK && res.exit_code != 0)
        st = dp_error(DP_ERR_INTERNAL, "reproduce: the measured run `%s train dpsgd %s --memory-report` on %d rank(s) "
                                       "exited %d: %s", r->dpcert, args, ranks, res.exit_code, tail_of(err));
    for (int k = 0; st == DP_OK && k < 2; k++) {
        FILE *f = fopen(k ? err : log, "r");
        if (!f) { st = dp_error(DP_ERR_IO, "reproduce: cannot read %s", k ? err : log); break; }
        parse(out, f);
        fclose(f);
    }
    if (st == DP_OK && (out->nsteps == 0 || out->peak[ranks - 1][REPRO_TAG_params] <= 0))
        st = dp_error(DP_ERR_INTERNAL, "reproduce: the measured run `train dpsgd %s` printed no step or no ledger of "
                                       "rank %d", args, ranks - 1);
    unlink(log);
    unlink(err);
    rmdir(dir);
    return st;
}

long long repro_max_batch(const repro_run *run) {
    long long m = 0;
    for (int s = 0; s < run->nsteps; s++)
        if (run->batch[s] > m) m = run->batch[s];
    return m;
}

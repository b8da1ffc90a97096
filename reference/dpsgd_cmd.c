/* reference/dpsgd_cmd.c — `dpcert reference dpsgd` (docs/dpsgd.md); the option table,
 * export set and log line it uses are the neutral common/spec_dpsgd.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/safetensors.h"
#include "reference/dpsgd.h"
#include "reference/mem_estimate.h"

#define CMD "reference dpsgd"

dp_status ref_dpsgd_cli_finish(ref_model_config *mc, ref_dpsgd_config *c, const ref_dpsgd_cli *cli) {
    return dp_dpsgd_cli_finish(mc, c, cli, ref_dpsgd_config_check);
}

dp_status ref_dpsgd_cli_dataset(ref_dataset *d, const ref_model_config *mc, ref_dpsgd_config *c,
                                const ref_dpsgd_cli *cli) {
    return dp_dpsgd_cli_dataset(d, mc, c, cli, ref_dpsgd_config_check);
}

static void print_help(const dp_opt *opts, size_t n) {
    printf("usage: dpcert reference dpsgd --model mlp|llama [model options] [DP-SGD options] [--export DIR]\n"
           "The exact CPU reference of DP-SGD (docs/dpsgd.md). Prints one line per step:\n"
           "  step S batch B loss L mean_clip F [dropped D]\n"
           "and with --export writes DIR/step-000001.safetensors, ... (the tensors of docs/dpsgd.md).\n\n");
    dp_opts_print_help(opts, n);
}

static dp_status run(int argc, char **argv, int *help) {
    ref_dpsgd_cli cli;
    ref_dpsgd_cli_init(&cli);
    const char *export_dir = NULL;
    int seen_export = 0;
    dp_opt opts[REF_DPSGD_NOPTS + 4];
    size_t n = 0;
    DP_TRY(ref_dpsgd_cli_add_opts(opts, &n, REF_DPSGD_NOPTS + 4, &cli));
    opts[n++] = (dp_opt){"--precision", DP_OPT_STRING, &cli.precision, NULL, "double | mpfr (DP stage in 256-bit MPFR)"};
    opts[n++] = (dp_opt){"--export", DP_OPT_STRING, &export_dir, &seen_export, "write DIR/step-NNNNNN.safetensors"};
    DP_TRY(dp_opts_parse(opts, n, argc, argv, NULL, 0, NULL, help));
    if (*help) { print_help(opts, n); return DP_OK; }
    ref_model_config mc;
    ref_dpsgd_config c;
    DP_TRY(ref_dpsgd_cli_finish(&mc, &c, &cli));
    if (cli.reveal_key && !cli.seen_key) dp_cli_reveal_noise_key("reference dpsgd", c.key.k);
    /* memory pre-check (docs/memory.md): before the dataset and the model; with --data
     * again once N is known */
    DP_TRY(ref_model_cli_mem_check(&cli.m, ref_mem_dpsgd(&mc, &c, cli.m.seen_data ? 0 : (double)c.n, seen_export),
                                   "the run"));
    if (seen_export) DP_TRY(dp_mkdir_p("--export", export_dir));
    ref_dataset d;
    DP_TRY(ref_dpsgd_cli_dataset(&d, &mc, &c, &cli));
    if (cli.m.seen_data) {
        dp_status mst = ref_model_cli_mem_check(&cli.m, ref_mem_dpsgd(&mc, &c, (double)d.n, seen_export), "the run");
        if (mst != DP_OK) { ref_dataset_free(&d); return mst; }
    }
    ref_model m, before;
    memset(&before, 0, sizeof before);
    dp_status st = ref_model_init(&m, &mc, c.seed);
    if (st != DP_OK) { ref_dataset_free(&d); return st; }
    ref_dpsgd_state state;
    st = ref_dpsgd_init(&state, &c, &m);
    ref_dpsgd_step_out out;
    memset(&out, 0, sizeof out);
    for (int64_t s = 1; st == DP_OK && s <= c.steps; s++) {
        if (seen_export) {
            ref_model_free(&before);
            st = ref_model_copy(&before, &m);
            if (st != DP_OK) break;
        }
        st = ref_dpsgd_step(&out, &m, &state, &d, s);
        if (st != DP_OK) break;
        ref_dpsgd_print_step(&out);
        if (seen_export) st = ref_dpsgd_export_write(export_dir, &mc, &c, &state.groups, &before, &m, &d, &out, NULL);
    }
    ref_dpsgd_step_free(&out);
    ref_dpsgd_free(&state);
    ref_model_free(&before);
    ref_model_free(&m);
    ref_dataset_free(&d);
    return st;
}

int dp_cmd_reference_dpsgd(int argc, char **argv) {
    int help = 0;
    dp_status st = run(argc, argv, &help);
    if (st != DP_OK) return dp_cli_fail(CMD, st);
    fflush(stdout);
    return 0;
}

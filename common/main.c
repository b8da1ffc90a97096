/* common/main.c — the dpcert command: dispatch to subcommands from the modules' command
 * tables (common/cmd.h: each module exports dp_commands_<module>, one line per command;
 * this file names no command of another module). A command returns an exit code: 0
 * success, 1 a check failed, 2 bad usage or bad input, 3 internal error. */
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/cmd.h"
#include "common/fsutil.h"
#include "common/version.h"

/* The modules' tables (common/cmd.h), weak so that a module can be developed and linked on
 * its own: a module that is not linked has no commands. `version` is main's own. */
#define DP_WEAK_TABLE_(m) extern const dp_command dp_commands_##m[] __attribute__((weak));
DP_COMMAND_MODULES(DP_WEAK_TABLE_)
#undef DP_WEAK_TABLE_

static int cmd_version(int argc, char **argv);
static const dp_command dp_commands_main[] = {
    {"version", cmd_version, "version, git revision and the backends built"},
    {NULL, NULL, NULL},
};
#define DP_TABLE_ROW_(m) dp_commands_##m,
static const dp_command *const dp_tables[] = {dp_commands_main, DP_COMMAND_MODULES(DP_TABLE_ROW_)};
#undef DP_TABLE_ROW_
#define DP_NTABLES (sizeof dp_tables / sizeof dp_tables[0])

static void usage(FILE *f) {
    fprintf(f, "usage: dpcert COMMAND [OPTIONS]   (dpcert COMMAND --help for its options)\n\ncommands:\n");
    for (size_t t = 0; t < DP_NTABLES; t++)
        for (const dp_command *c = dp_tables[t]; c && c->name; c++) fprintf(f, "  %-18s %s\n", c->name, c->summary);
    fprintf(f, "\nexit codes: 0 success, 1 a check failed, 2 bad usage or input, 3 internal error\n");
}

static int cmd_version(int argc, char **argv) {
    if (argc > 0 && strcmp(argv[0], "--help") != 0) {
        return dp_cli_fail("version", dp_error(DP_ERR_USAGE, "unexpected argument '%s'", argv[0]));
    }
    printf("dpcert %s (git %s)\n", DPCERT_VERSION, DPCERT_GIT_REV);
#ifdef DP_HAVE_CUDA
    printf("backends: host cuda (plugin libdpcert_cuda.so loaded on first use, sm_90 + compute_90 PTX) cuda-emu\n");
#else
    printf("backends: host cuda-emu\n");
#endif
    /* make builds the emulation plugin everywhere (g++ only): docs/cuda.md "The emulation" */
    printf("cuda-emu: the CUDA backend's sources on the CPU emulation (plugin libdpcert_cuda_emu.so), not a GPU\n");
    return 0;
}

/* Every result on stdout (a command's, the usage, the version): a failed write or final flush
 * (full device, closed pipe) is a lost result, exit 3 with a message, whatever rc was. */
static int finish(const char *what, int rc) {
    if (dp_stdout_finish(what) != DP_OK) {
        fprintf(stderr, "dpcert %s\n", dp_last_error()); /* "COMMAND: cannot write ..." */
        return 3;
    }
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *c = argv[1];
    if (strcmp(c, "--help") == 0 || strcmp(c, "-h") == 0 || strcmp(c, "help") == 0) { usage(stdout); return finish(c, 0); }
    if (strcmp(c, "--version") == 0) return finish(c, cmd_version(0, NULL));
    for (size_t t = 0; t < DP_NTABLES; t++)
        for (const dp_command *k = dp_tables[t]; k && k->name; k++)
            if (strcmp(c, k->name) == 0) return finish(c, k->fn(argc - 2, argv + 2));
    dp_error(DP_ERR_USAGE, "unknown command '%s'", c); /* escaped: the word may hold any byte */
    fprintf(stderr, "dpcert: %s\n\n", dp_last_error());
    usage(stderr);
    return 2;
}

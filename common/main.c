/* common/main.c — the dpcert command: dispatch to subcommands.
 *
 * Each subcommand is a function int dp_cmd_NAME(int argc, char **argv) living in
 * its module (argv holds the words after the subcommand) that returns an exit code:
 * 0 success, 1 a check failed, 2 bad usage or bad input, 3 internal error. They are
 * declared weak here so that a module can be developed and linked on its own; a
 * command whose module is not linked is reported as not built (exit 3). */
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/fsutil.h"
#include "common/version.h"

typedef int (*dp_cmd_fn)(int argc, char **argv);

#define DP_WEAK_CMD(fn) extern int fn(int argc, char **argv) __attribute__((weak))
DP_WEAK_CMD(dp_cmd_rng);
DP_WEAK_CMD(dp_cmd_inspect);
DP_WEAK_CMD(dp_cmd_reference_dpsgd);
DP_WEAK_CMD(dp_cmd_reference_dpzo);
DP_WEAK_CMD(dp_cmd_train);
DP_WEAK_CMD(dp_cmd_ops);
DP_WEAK_CMD(dp_cmd_conform);
DP_WEAK_CMD(dp_cmd_compare);
DP_WEAK_CMD(dp_cmd_account);
DP_WEAK_CMD(dp_cmd_audit_accounting);
DP_WEAK_CMD(dp_cmd_reproduce);
DP_WEAK_CMD(dp_cmd_losscale);
DP_WEAK_CMD(dp_cmd_plan);
DP_WEAK_CMD(dp_cmd_mia);
DP_WEAK_CMD(dp_cmd_audit);
DP_WEAK_CMD(dp_cmd_vectors);
DP_WEAK_CMD(dp_cmd_certify);
DP_WEAK_CMD(dp_cmd_keygen);
DP_WEAK_CMD(dp_cmd_verify_report);

static int cmd_version(int argc, char **argv);
static int cmd_reference(int argc, char **argv);

static const struct {
    const char *name;
    dp_cmd_fn fn;
    const char *summary;
} dp_commands[] = {
    {"version", cmd_version, "version, git revision and the backends built"},
    {"rng", dp_cmd_rng, "Philox4x32-10 words and samples from dpcert's RNG streams"},
    {"inspect", dp_cmd_inspect, "list the tensors (dtype, shape, SHA-256) and metadata of a safetensors file"},
    {"reference", cmd_reference, "the exact CPU reference: 'reference dpsgd ...' or 'reference dpzo ...'"},
    {"train", dp_cmd_train, "the optimized engine (host or cuda backend, MPI ranks)"},
    {"ops", dp_cmd_ops, "the operation harness: every backend operation against its bound (host, cuda, plugin:PATH)"},
    {"conform", dp_cmd_conform, "run a conformance suite: optimized vs reference, tensor by tensor"},
    {"compare", dp_cmd_compare, "compare two exports (A.safetensors B.safetensors) under derived tolerances"},
    {"account", dp_cmd_account, "privacy accounting: RDP, PLD, pure DP, GDP; calibration of sigma"},
    {"audit-accounting", dp_cmd_audit_accounting, "check claimed (epsilon, delta) values against certified bounds"},
    {"reproduce", dp_cmd_reproduce, "reproduce tables of the papers (e.g. 'reproduce dpzo-tables')"},
    {"losscale", dp_cmd_losscale, "loss-scaling pipelines side by side; --check REF CAND: the losscale check"},
    {"plan", dp_cmd_plan, "project memory, communication and step time of a DP x CP x ZeRO layout; --search ranks layouts"},
    {"mia", dp_cmd_mia, "membership-inference sanity checks"},
    {"audit", dp_cmd_audit, "empirical privacy audits of a DP implementation"},
    {"vectors", dp_cmd_vectors, "write the certification test vectors (--suite ci|certify --out DIR)"},
    {"certify", dp_cmd_certify, "certify a third-party DP-SGD candidate command on the test vectors"},
    {"keygen", dp_cmd_keygen, "make an Ed25519 key pair for signing certification reports"},
    {"verify-report", dp_cmd_verify_report, "check a certification bundle: signature, hashes, recomputed verdicts"},
};
#define DP_NCOMMANDS (sizeof dp_commands / sizeof dp_commands[0])

static void usage(FILE *f) {
    fprintf(f, "usage: dpcert COMMAND [OPTIONS]   (dpcert COMMAND --help for its options)\n\ncommands:\n");
    for (size_t i = 0; i < DP_NCOMMANDS; i++)
        if (dp_commands[i].fn) fprintf(f, "  %-18s %s\n", dp_commands[i].name, dp_commands[i].summary);
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

static int cmd_reference(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fprintf(argc < 1 ? stderr : stdout, "usage: dpcert reference dpsgd|dpzo [OPTIONS]\n");
        return argc < 1 ? 2 : 0;
    }
    dp_cmd_fn fn = strcmp(argv[0], "dpsgd") == 0 ? dp_cmd_reference_dpsgd
                 : strcmp(argv[0], "dpzo") == 0 ? dp_cmd_reference_dpzo : NULL;
    if (strcmp(argv[0], "dpsgd") != 0 && strcmp(argv[0], "dpzo") != 0) {
        return dp_cli_fail("reference", dp_error(DP_ERR_USAGE, "unknown algorithm '%s' (expected dpsgd or dpzo)", argv[0]));
    }
    if (!fn) {
        fprintf(stderr, "dpcert reference %s: not built into this binary\n", argv[0]);
        return 3;
    }
    return fn(argc - 1, argv + 1);
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
    for (size_t i = 0; i < DP_NCOMMANDS; i++) {
        if (strcmp(c, dp_commands[i].name) != 0) continue;
        if (!dp_commands[i].fn) {
            fprintf(stderr, "dpcert %s: not built into this binary\n", c);
            return 3;
        }
        return finish(c, dp_commands[i].fn(argc - 2, argv + 2));
    }
    dp_error(DP_ERR_USAGE, "unknown command '%s'", c); /* escaped: the word may hold any byte */
    fprintf(stderr, "dpcert: %s\n\n", dp_last_error());
    usage(stderr);
    return 2;
}

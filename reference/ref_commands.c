/* reference/ref_commands.c — the reference's command, `dpcert reference dpsgd|dpzo` (the table
 * `main` dispatches from, common/cmd.h). */
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/cmd.h"

int dp_cmd_reference_dpsgd(int argc, char **argv);
int dp_cmd_reference_dpzo(int argc, char **argv);

int dp_cmd_reference(int argc, char **argv);
int dp_cmd_reference(int argc, char **argv) {
    if (argc < 1 || strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0) {
        fprintf(argc < 1 ? stderr : stdout, "usage: dpcert reference dpsgd|dpzo [OPTIONS]\n");
        return argc < 1 ? 2 : 0;
    }
    if (strcmp(argv[0], "dpsgd") == 0) return dp_cmd_reference_dpsgd(argc - 1, argv + 1);
    if (strcmp(argv[0], "dpzo") == 0) return dp_cmd_reference_dpzo(argc - 1, argv + 1);
    return dp_cli_fail("reference", dp_error(DP_ERR_USAGE, "unknown algorithm '%s' (expected dpsgd or dpzo)", argv[0]));
}

#define REF_COMMANDS(X) X("reference", dp_cmd_reference, "the exact CPU reference: 'reference dpsgd ...' or 'reference dpzo ...'")
DP_COMMAND_TABLE(reference, REF_COMMANDS);

/* common/commands.c — the subcommands defined in common/, referenced strongly.
 *
 * common/main.c declares every subcommand as a weak symbol. A weak undefined
 * reference does not make the linker extract a member from a static library,
 * so without a strong reference dp_cmd_rng / dp_cmd_inspect would silently be
 * left out of build/dpcert ("not built into this binary"). cli.h (which main.c
 * includes) holds a strong reference to dp_common_commands, which pulls in this
 * object and, through it, cmd_rng.o and cmd_inspect.o. */
#include "cli.h"

int dp_cmd_rng(int argc, char **argv);
int dp_cmd_inspect(int argc, char **argv);

int (*const dp_common_commands[2])(int argc, char **argv) = {dp_cmd_rng, dp_cmd_inspect};

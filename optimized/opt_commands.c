/* optimized/opt_commands.c — the engine's commands (the table `main` dispatches from, common/cmd.h). */
#include "common/cmd.h"

#define OPT_COMMANDS(X)                                                                                        \
    X("train", dp_cmd_train, "the optimized engine (host or cuda backend, MPI ranks)")                         \
    X("ops", dp_cmd_ops, "the operation harness: every backend operation against its bound (host, cuda, plugin:PATH)")
DP_COMMAND_TABLE(optimized, OPT_COMMANDS);

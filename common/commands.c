/* common/commands.c — common/'s commands (the table `main` dispatches from, common/cmd.h). */
#include "common/cmd.h"

#define COMMON_COMMANDS(X)                                                                                     \
    X("rng", dp_cmd_rng, "Philox4x32-10 words and samples from dpcert's RNG streams")                          \
    X("inspect", dp_cmd_inspect, "list the tensors (dtype, shape, SHA-256) and metadata of a safetensors file")
DP_COMMAND_TABLE(common, COMMON_COMMANDS);

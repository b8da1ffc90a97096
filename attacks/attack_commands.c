/* attacks/attack_commands.c — the attacks' commands (the table `main` dispatches from, common/cmd.h). */
#include "common/cmd.h"

#define ATTACK_COMMANDS(X)                                                                                     \
    X("mia", dp_cmd_mia, "membership-inference sanity checks")                                                 \
    X("audit", dp_cmd_audit, "empirical privacy audits of a DP implementation")
DP_COMMAND_TABLE(attacks, ATTACK_COMMANDS);

/* accountant/acct_commands.c — the accountant's commands (the table `main` dispatches from, common/cmd.h). */
#include "common/cmd.h"

#define ACCT_COMMANDS(X)                                                                                       \
    X("account", dp_cmd_account, "privacy accounting: RDP, PLD, pure DP, GDP; calibration of sigma")           \
    X("audit-accounting", dp_cmd_audit_accounting, "check claimed (epsilon, delta) values against certified bounds")
DP_COMMAND_TABLE(accountant, ACCT_COMMANDS);

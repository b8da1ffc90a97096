/* common/cmd.h — the command tables of `dpcert` (docs/architecture.md "Adding a command").
 *
 * Every module exports one table, dp_commands_<module> (its file <module>/..._commands.c
 * holds one line per command), and `main` (common/main.c) dispatches from the tables in the
 * order of the fixed top level; common/ names no command of another module. A command is
 * int fn(int argc, char **argv) (argv: the words after its name) returning an exit code:
 * 0 success, 1 a check failed, 2 bad usage or bad input, 3 internal error. */
#ifndef DP_CMD_H
#define DP_CMD_H

#include <stddef.h>

typedef int (*dp_cmd_fn)(int argc, char **argv);
typedef struct {
    const char *name;    /* the word after `dpcert` */
    dp_cmd_fn fn;
    const char *summary; /* one line for `dpcert --help` */
} dp_command;

/* A module's table from an X-list X(name, fn, summary): declares each fn and defines
 * const dp_command dp_commands_<module>[] ending with a NULL name. */
#define DP_CMD_DECL_(name, fn, summary) int fn(int argc, char **argv);
#define DP_CMD_ROW_(name, fn, summary) {name, fn, summary},
#define DP_COMMAND_TABLE(module, LIST)                                                                       \
    LIST(DP_CMD_DECL_)                                                                                       \
    const dp_command dp_commands_##module[] = {LIST(DP_CMD_ROW_){NULL, NULL, NULL}}

/* The modules' tables, in the order `dpcert --help` lists them (the fixed top level). */
#define DP_COMMAND_MODULES(X) X(common) X(reference) X(optimized) X(conformance) X(accountant) X(attacks)

#endif

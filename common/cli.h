/* common/cli.h — command-line option parsing shared by every subcommand.
 *
 * Each subcommand declares a table of dp_opt and calls dp_opts_parse. Values are
 * validated as they are parsed: numbers must parse completely, be finite (no NaN
 * or infinity) and fit their type; unknown options, missing values and repeated
 * options are DP_ERR_USAGE with a message naming the option. Range checks
 * (sigma >= 0, q in (0,1], ...) use the dp_check_* helpers so messages are uniform. */
#ifndef DP_CLI_H
#define DP_CLI_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef enum {
    DP_OPT_FLAG,    /* int*: set to 1                           */
    DP_OPT_STRING,  /* const char**                             */
    DP_OPT_DOUBLE,  /* double*: finite                          */
    DP_OPT_INT,     /* int64_t*: decimal                        */
    DP_OPT_U64      /* uint64_t*: decimal or 0x hex (keys, seeds) */
} dp_opt_type;

typedef struct {
    const char *name;   /* "--sigma" */
    dp_opt_type type;
    void *dest;
    int *seen;          /* optional: set to 1 when given */
    const char *help;   /* one line for --help */
} dp_opt;

/* Parses argv[0..argc) (argv[0] is NOT skipped). Accepts "--name value" and
 * "--name=value". Non-option words go to pos[] (at most max_pos, else usage
 * error) and their number to *npos. "--help"/"-h" sets *help (when help != NULL). */
dp_status dp_opts_parse(const dp_opt *opts, size_t nopts, int argc, char **argv, char **pos, int max_pos,
                        int *npos, int *help);
/* Prints "  --name  help" lines. */
void dp_opts_print_help(const dp_opt *opts, size_t nopts);

dp_status dp_parse_double(double *out, const char *what, const char *s);
/* Every number token of the JSON text buf[0..len) (outside strings) must satisfy dp_parse_double's
 * rules: jansson reads 1e-400 as 0 without a word, so JSON inputs are checked by this first.
 * DP_ERR_FORMAT "WHAT: number '1e-400' underflows ..." otherwise; malformed JSON is left to jansson. */
dp_status dp_json_numbers_check(const char *buf, size_t len, const char *what);
dp_status dp_parse_i64(int64_t *out, const char *what, const char *s);
dp_status dp_parse_u64(uint64_t *out, const char *what, const char *s);
/* Comma-separated lists; *n receives the count (at most max). */
dp_status dp_parse_double_list(double *out, size_t max, size_t *n, const char *what, const char *s);
dp_status dp_parse_i64_list(int64_t *out, size_t max, size_t *n, const char *what, const char *s);
/* A positive finite power of two written as a number ("1024") or "2^K" (K an integer):
 * a loss scale (docs/precision.md "Loss scaling"); anything else is DP_ERR_INVALID. */
dp_status dp_parse_pow2(double *out, const char *what, const char *s);
/* Index of s in the NULL-terminated list names, or usage error listing the choices. */
dp_status dp_parse_choice(int *out, const char *what, const char *s, const char *const *names);

/* Range checks producing "--sigma must be >= 0 (got -1)" style DP_ERR_INVALID. */
dp_status dp_check_min(const char *what, double v, double lo, int inclusive);
dp_status dp_check_range(const char *what, double v, double lo, int lo_incl, double hi, int hi_incl);

/* --reveal-noise-key: print a randomly drawn noise key on stderr, once the key is final
 * (after MPI ranks have agreed on it), as "dpcert CMD: noise key K (revealed ...)". */
void dp_cli_reveal_noise_key(const char *cmd, uint64_t key);

/* Report a failed status on stderr as "dpcert CMD: message" and return its exit code.
 * DP_ERR_NOT_SUPPORTED is printed as "dpcert CMD: not supported: message" (exit 3). */
int dp_cli_fail(const char *cmd, dp_status st);

#endif

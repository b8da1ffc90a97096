/* common/proc.h — run a child command safely: its own process group, a time limit,
 * stdout/stderr to a log file, resource limits, and SIGINT/SIGTERM/SIGHUP forwarded to
 * every running child's group (then reported so the caller can clean up and exit
 * 128 + signal). Used by `conform` (reference and engine runs), `certify` and `audit`
 * (third-party candidates: never trusted, always time-limited). */
#ifndef DP_PROC_H
#define DP_PROC_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

typedef struct {
    int exit_code;   /* the child's exit status; 128 + signal if killed by one; 124 on timeout;
                        127 if it could not be executed */
    int timed_out;   /* 1: killed because it ran past timeout_s */
    int signal;      /* the terminating signal (0 if it exited) */
    int interrupted; /* 1: we received SIGINT/SIGTERM/SIGHUP and killed it (see dp_proc_interrupted) */
    double wall_s;   /* wall-clock seconds it ran */
} dp_proc_result;

typedef struct {
    double timeout_s;            /* > 0: SIGTERM to the group at the limit, SIGKILL 2 s later */
    const char *log_path;        /* stdout and stderr go here (truncated); NULL: /dev/null */
    const char *const *env_set;  /* NULL-terminated "NAME=VALUE" entries set in the child, or NULL */
    const char *const *env_unset;/* NULL-terminated names removed from the child's environment, or NULL */
    uint64_t max_file_bytes;     /* > 0: RLIMIT_FSIZE of the child (caps every file it writes, log included) */
    uint64_t max_memory_bytes;   /* > 0: RLIMIT_AS of the child */
    const char *cwd;             /* NULL: inherit */
} dp_proc_opts;

/* Install handlers for SIGINT, SIGTERM and SIGHUP that forward the signal to every child
 * group started by dp_proc_run* and record it. Idempotent. */
dp_status dp_proc_install_signal_forwarding(void);
/* The signal received since installation (0 if none): the caller should stop starting
 * work, clean up and exit 128 + signal. */
int dp_proc_interrupted(void);

/* Run argv (argv[0] looked up in PATH) with stdin from /dev/null. DP_OK whenever the
 * child was started and waited for, whatever its exit status (see res); an error status
 * only if it could not be started (fork failure, log file not creatable). */
dp_status dp_proc_run(dp_proc_result *res, char *const argv[], const dp_proc_opts *o);

/* Run the shell command line `cmdline` with extra positional arguments appended, as
 * /bin/sh -c 'cmdline "$@"' sh args...  (args NULL-terminated, may be NULL). The words of
 * `cmdline` are the user's (a candidate command); args are passed without re-splitting. */
dp_status dp_proc_run_shell(dp_proc_result *res, const char *cmdline, char *const args[], const dp_proc_opts *o);

/* A child that keeps running (a persistent candidate, common/candidate.c): `cmdline` under
 * /bin/sh -c in its own process group with the limits and log of `o` (time limits are the
 * caller's), stdin the read end of a pipe whose write end is in_fd, and file descriptor 3 the
 * write end of a pipe whose read end is rep_fd. SIGPIPE is ignored in dpcert from then on (a
 * dead child's pipe gives EPIPE, not a signal). */
typedef struct {
    int pid, in_fd, rep_fd;
    double t0;
} dp_proc_child;
dp_status dp_proc_spawn_shell(dp_proc_child *c, const char *cmdline, const dp_proc_opts *o);
/* 1 when the child has exited (res filled, its group killed), 0 while it runs. */
int dp_proc_child_poll(dp_proc_child *c, dp_proc_result *res);
/* Closes its stdin, waits up to grace_s for it to exit, then SIGTERM / SIGKILL to the group. */
void dp_proc_child_stop(dp_proc_child *c, dp_proc_result *res, double grace_s);
/* Monotonic seconds. */
double dp_proc_now(void);

#endif

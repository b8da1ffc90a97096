/* common/proc.c — see proc.h. The parent polls waitpid (5 ms) so that time limits and
 * forwarded signals are handled without a SIGCHLD handler; children run in their own
 * process group so that a timeout or a forwarded signal reaches everything they started
 * (mpirun and its ranks included). */
#include "proc.h"
#include "common/alloc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DP_PROC_MAX_LIVE 64
#define DP_PROC_KILL_GRACE_S 2.0

static volatile sig_atomic_t g_signal;
static volatile sig_atomic_t g_live_n;
static volatile pid_t g_live[DP_PROC_MAX_LIVE];
static int g_installed;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void on_signal(int sig) {
    g_signal = sig;
    for (int i = 0; i < g_live_n && i < DP_PROC_MAX_LIVE; i++)
        if (g_live[i] > 0) kill(-g_live[i], sig);
}

dp_status dp_proc_install_signal_forwarding(void) {
    if (g_installed) return DP_OK;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0)
            return dp_error(DP_ERR_INTERNAL, "sigaction: %s", strerror(errno));
    g_installed = 1;
    return DP_OK;
}

int dp_proc_interrupted(void) { return (int)g_signal; }

static void live_add(pid_t pid) {
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < g_live_n; i++)
        if (g_live[i] == 0) { g_live[i] = pid; sigprocmask(SIG_SETMASK, &old, NULL); return; }
    if (g_live_n < DP_PROC_MAX_LIVE) g_live[g_live_n++] = pid;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

static void live_remove(pid_t pid) {
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    for (int i = 0; i < g_live_n; i++)
        if (g_live[i] == pid) g_live[i] = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
}

/* In the child, after fork: only async-signal-safe work until exec, plus setenv (the
 * child is single-threaded from here on). */
static void child_exec(char *const argv[], const dp_proc_opts *o, int logfd, int infd, int repfd) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGHUP, &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL); /* the parent may ignore it (persistent candidates' pipes) */
    setpgid(0, 0);
    if (infd >= 0) {
        dup2(infd, 0);
    } else {
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) { dup2(nul, 0); close(nul); }
    }
    if (logfd >= 0) { dup2(logfd, 1); dup2(logfd, 2); }
    if (repfd >= 0) { /* the reply descriptor of a persistent candidate is fd 3 */
        if (repfd == 3) fcntl(3, F_SETFD, 0);
        else dup2(repfd, 3);
    }
    if (o && o->env_unset)
        for (const char *const *e = o->env_unset; *e; e++) unsetenv(*e);
    if (o && o->env_set)
        for (const char *const *e = o->env_set; *e; e++) {
            const char *eq = strchr(*e, '=');
            if (!eq) continue;
            char name[256];
            size_t n = (size_t)(eq - *e);
            if (n == 0 || n >= sizeof name) continue;
            memcpy(name, *e, n);
            name[n] = '\0';
            setenv(name, eq + 1, 1);
        }
    if (o && o->max_file_bytes) {
        struct rlimit rl = {(rlim_t)o->max_file_bytes, (rlim_t)o->max_file_bytes};
        setrlimit(RLIMIT_FSIZE, &rl);
    }
    if (o && o->max_memory_bytes) {
        struct rlimit rl = {(rlim_t)o->max_memory_bytes, (rlim_t)o->max_memory_bytes};
        setrlimit(RLIMIT_AS, &rl);
    }
    if (o && o->cwd && chdir(o->cwd) != 0) {
        fprintf(stderr, "cannot change directory to %s: %s\n", o->cwd, strerror(errno));
        _exit(127);
    }
    execvp(argv[0], argv);
    fprintf(stderr, "cannot execute %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Wait for pid, enforcing the time limit and forwarding recorded signals. */
static void wait_child(dp_proc_result *res, pid_t pid, const dp_proc_opts *o, double t0) {
    int status = 0, term_sent = 0;
    double kill_at = 0;
    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) break;
        if (r < 0 && errno != EINTR) { status = 0; res->exit_code = -1; break; }
        double t = now_s();
        if (!term_sent && g_signal) {
            res->interrupted = 1;
            kill(-pid, g_signal);
            term_sent = 1;
            kill_at = t + DP_PROC_KILL_GRACE_S;
        }
        if (!term_sent && o && o->timeout_s > 0 && t - t0 > o->timeout_s) {
            res->timed_out = 1;
            kill(-pid, SIGTERM);
            term_sent = 1;
            kill_at = t + DP_PROC_KILL_GRACE_S;
        }
        if (term_sent && t > kill_at) {
            kill(-pid, SIGKILL);
            kill_at = t + 3600;
        }
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    if (g_signal) res->interrupted = 1; /* the handler may have forwarded it before we looked */
    /* Whatever the child left behind in its group (e.g. a grandchild) goes too. */
    kill(-pid, SIGKILL);
    live_remove(pid);
    res->wall_s = now_s() - t0;
    if (res->exit_code == -1) return;
    if (WIFEXITED(status)) res->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) { res->signal = WTERMSIG(status); res->exit_code = 128 + res->signal; }
    if (res->timed_out) res->exit_code = 124;
}

dp_status dp_proc_run(dp_proc_result *res, char *const argv[], const dp_proc_opts *o) {
    memset(res, 0, sizeof *res);
    if (!argv || !argv[0]) return dp_error(DP_ERR_INVALID, "dp_proc_run: empty command");
    int logfd = -1;
    const char *log = o && o->log_path ? o->log_path : "/dev/null";
    /* the child's log is a stream (docs/development.md "Writing files"): a link is not followed, a
     * FIFO without a reader is refused (O_NONBLOCK: ENXIO) instead of blocking, a directory refused */
    logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_APPEND | O_NONBLOCK, 0644);
    if (logfd < 0)
        return dp_error(DP_ERR_IO, "cannot create log file '%s': %s", log,
                        errno == ENXIO ? "a FIFO that no process is reading" : strerror(errno));
    int fl = fcntl(logfd, F_GETFL);
    if (fl < 0 || fcntl(logfd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(logfd);
        return dp_error(DP_ERR_INTERNAL, "log file '%s': fcntl: %s", log, strerror(e));
    }
    fflush(stdout);
    fflush(stderr);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        close(logfd);
        return dp_error(DP_ERR_INTERNAL, "fork: %s", strerror(errno));
    }
    if (pid == 0) child_exec(argv, o, logfd, -1, -1);
    close(logfd);
    setpgid(pid, pid); /* also in the parent: no window where a signal misses the group */
    live_add(pid);
    if (g_signal) kill(-pid, g_signal);
    wait_child(res, pid, o, t0);
    return DP_OK;
}

dp_status dp_proc_run_shell(dp_proc_result *res, const char *cmdline, char *const args[], const dp_proc_opts *o) {
    size_t n = 0;
    while (args && args[n]) n++;
    char **argv = dp_calloc(n + 5, sizeof *argv);
    if (!argv) return DP_ERR_NOMEM;
    size_t len = strlen(cmdline) + sizeof " \"$@\"";
    char *script = dp_malloc(len);
    if (!script) { dp_free(argv); return DP_ERR_NOMEM; }
    snprintf(script, len, "%s \"$@\"", cmdline);
    argv[0] = (char *)"/bin/sh";
    argv[1] = (char *)"-c";
    argv[2] = script;
    argv[3] = (char *)"sh";
    for (size_t i = 0; i < n; i++) argv[4 + i] = args[i];
    argv[4 + n] = NULL;
    dp_status st = dp_proc_run(res, argv, o);
    dp_free(script);
    dp_free(argv);
    return st;
}

/* ---- a child that stays: persistent candidates (common/candidate.c) ---- */
dp_status dp_proc_spawn_shell(dp_proc_child *c, const char *cmdline, const dp_proc_opts *o) {
    memset(c, 0, sizeof *c);
    c->pid = -1;
    c->in_fd = c->rep_fd = -1;
    const char *log = o && o->log_path ? o->log_path : "/dev/null";
    int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_APPEND, 0644);
    if (logfd < 0) return dp_error(DP_ERR_IO, "cannot create log file '%s': %s", log, strerror(errno));
    int pin[2], prep[2];
    if (pipe2(pin, O_CLOEXEC) != 0) { close(logfd); return dp_error(DP_ERR_INTERNAL, "pipe: %s", strerror(errno)); }
    if (pipe2(prep, O_CLOEXEC) != 0) {
        close(logfd); close(pin[0]); close(pin[1]);
        return dp_error(DP_ERR_INTERNAL, "pipe: %s", strerror(errno));
    }
    char *argv[] = {(char *)"/bin/sh", (char *)"-c", (char *)cmdline, NULL};
    fflush(stdout);
    fflush(stderr);
    signal(SIGPIPE, SIG_IGN); /* a candidate that died must not kill dpcert when it writes the next request */
    c->t0 = now_s();
    pid_t pid = fork();
    if (pid < 0) {
        close(logfd); close(pin[0]); close(pin[1]); close(prep[0]); close(prep[1]);
        return dp_error(DP_ERR_INTERNAL, "fork: %s", strerror(errno));
    }
    if (pid == 0) child_exec(argv, o, logfd, pin[0], prep[1]);
    close(logfd);
    close(pin[0]);
    close(prep[1]);
    setpgid(pid, pid);
    live_add(pid);
    if (g_signal) kill(-pid, g_signal);
    c->pid = pid;
    c->in_fd = pin[1];
    c->rep_fd = prep[0];
    return DP_OK;
}

static void fill_status(dp_proc_result *res, int status) {
    if (WIFEXITED(status)) res->exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status)) { res->signal = WTERMSIG(status); res->exit_code = 128 + res->signal; }
}

int dp_proc_child_poll(dp_proc_child *c, dp_proc_result *res) {
    if (c->pid <= 0) return 1;
    int status = 0;
    pid_t r = waitpid(c->pid, &status, WNOHANG);
    if (r != c->pid) return 0;
    memset(res, 0, sizeof *res);
    fill_status(res, status);
    res->wall_s = now_s() - c->t0;
    kill(-c->pid, SIGKILL); /* whatever it left in its group */
    live_remove(c->pid);
    c->pid = -1;
    return 1;
}

void dp_proc_child_stop(dp_proc_child *c, dp_proc_result *res, double grace_s) {
    memset(res, 0, sizeof *res);
    if (c->in_fd >= 0) { close(c->in_fd); c->in_fd = -1; } /* end of requests: a candidate exits */
    if (c->pid > 0) {
        double t0 = now_s(), kill_at = t0 + grace_s;
        int term = 0, status = 0;
        for (;;) {
            pid_t r = waitpid(c->pid, &status, WNOHANG);
            if (r == c->pid) { fill_status(res, status); break; }
            if (r < 0 && errno != EINTR) break;
            double t = now_s();
            if (!term && t > kill_at) { kill(-c->pid, SIGTERM); term = 1; kill_at = t + DP_PROC_KILL_GRACE_S; }
            else if (term && t > kill_at) { kill(-c->pid, SIGKILL); kill_at = t + 3600; }
            struct timespec ts = {0, 5 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        kill(-c->pid, SIGKILL);
        live_remove(c->pid);
        res->wall_s = now_s() - c->t0;
        c->pid = -1;
    }
    if (c->rep_fd >= 0) { close(c->rep_fd); c->rep_fd = -1; }
}

double dp_proc_now(void) { return now_s(); }

/* common/tests/test_fsproc.c — atomic writes (common/fsutil.h) and the child runner
 * (common/proc.h): links are replaced, never written through; a lost stdout is an error;
 * time limits, file-size limits, argument passing, environment, signal forwarding. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/proc.h"
#include "common/test.h"

static int read_all(char *buf, size_t len, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
    return (int)n;
}

static int count_tmp_files(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -c '\\.tmp\\.' > cnt.txt", dir);
    if (system(cmd) < 0) return -1;
    char b[32];
    if (read_all(b, sizeof b, "cnt.txt") < 0) return -1;
    return atoi(b);
}

static void test_atomic(void) {
    T_CHECK(dp_mkdir_p("test", "out") == DP_OK, "mkdir");
    FILE *v = fopen("victim", "w");
    fputs("precious", v);
    fclose(v);
    T_CHECK(symlink("../victim", "out/f.bin") == 0, "symlink: %s", strerror(errno));
    T_CHECK(dp_write_file_atomic("--export", "out/f.bin", "new", 3) == DP_OK, "write: %s", dp_last_error());
    char b[64];
    read_all(b, sizeof b, "victim");
    T_CHECK(strcmp(b, "precious") == 0, "victim overwritten through a link: '%s'", b);
    struct stat sb;
    T_CHECK(lstat("out/f.bin", &sb) == 0 && S_ISREG(sb.st_mode), "destination is not a regular file");
    read_all(b, sizeof b, "out/f.bin");
    T_CHECK(strcmp(b, "new") == 0, "destination content '%s'", b);
    T_CHECK(count_tmp_files("out") == 0, "temporary file left behind");

    /* abort leaves nothing; the destination keeps its old content */
    dp_afile af;
    T_CHECK(dp_afile_open(&af, "--report", "out/f.bin") == DP_OK, "open");
    fputs("half", af.f);
    dp_afile_abort(&af);
    read_all(b, sizeof b, "out/f.bin");
    T_CHECK(strcmp(b, "new") == 0, "abort changed the destination: '%s'", b);
    T_CHECK(count_tmp_files("out") == 0, "abort left a temporary file");

    /* a directory is refused with a message naming the option */
    T_CHECK(dp_write_file_atomic("--json", "out", "x", 1) == DP_ERR_IO, "directory accepted");
    T_CHECK(strstr(dp_last_error(), "--json") != NULL, "message does not name the option: %s", dp_last_error());
    T_CHECK(dp_write_file_atomic("--json", "nonexistent-dir/x", "x", 1) == DP_ERR_IO, "missing dir accepted");
}

static void test_stdout_full(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/full", "w", stdout)) _exit(9);
        for (int i = 0; i < 10; i++) printf("result line %d\n", i);
        _exit(dp_stdout_finish("account") == DP_ERR_SYSIO && strstr(dp_last_error(), "account") ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "a write to /dev/full was not reported");
}

static void test_proc(void) {
    dp_proc_result r;
    dp_proc_opts o = {.timeout_s = 10, .log_path = "log.txt"};
    char *a1[] = {"sh", "-c", "echo hello; exit 7", NULL};
    T_CHECK(dp_proc_run(&r, a1, &o) == DP_OK, "run");
    T_CHECK(r.exit_code == 7 && !r.timed_out && !r.signal, "exit code %d", r.exit_code);
    char b[256];
    read_all(b, sizeof b, "log.txt");
    T_CHECK(strcmp(b, "hello\n") == 0, "log '%s'", b);

    /* arguments with spaces and quotes pass unchanged through the shell form */
    char *args[] = {"a b", "c'd", NULL};
    T_CHECK(dp_proc_run_shell(&r, "printf '[%s]'", args, &o) == DP_OK, "shell");
    read_all(b, sizeof b, "log.txt");
    T_CHECK(r.exit_code == 0 && strcmp(b, "[a b][c'd]") == 0, "shell args: rc %d '%s'", r.exit_code, b);

    /* environment */
    const char *set[] = {"DP_T_A=1", NULL}, *unset[] = {"DP_T_B", NULL};
    setenv("DP_T_B", "x", 1);
    dp_proc_opts oe = {.timeout_s = 10, .log_path = "log.txt", .env_set = set, .env_unset = unset};
    T_CHECK(dp_proc_run_shell(&r, "echo \"$DP_T_A${DP_T_B:-none}\"", NULL, &oe) == DP_OK, "env");
    read_all(b, sizeof b, "log.txt");
    T_CHECK(strcmp(b, "1none\n") == 0, "env '%s'", b);

    /* timeout kills the whole group, grandchildren included, promptly */
    dp_proc_opts ot = {.timeout_s = 0.3, .log_path = "log.txt"};
    T_CHECK(dp_proc_run_shell(&r, "sleep 31.5 & sleep 31.5; echo never", NULL, &ot) == DP_OK, "timeout run");
    T_CHECK(r.timed_out && r.exit_code == 124, "timeout not reported: rc %d", r.exit_code);
    T_CHECK(r.wall_s < 3.5, "timeout took %.2f s", r.wall_s);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int left = system("pgrep -x -f 'sleep 31.5' >/dev/null");
    T_CHECK(left != 0, "a grandchild survived the timeout");

    /* file-size limit: a child that writes too much is stopped */
    dp_proc_opts of = {.timeout_s = 10, .log_path = "log.txt", .max_file_bytes = 4096};
    T_CHECK(dp_proc_run_shell(&r, "head -c 1000000 /dev/zero > big.bin", NULL, &of) == DP_OK, "fsize");
    struct stat sb;
    T_CHECK(r.exit_code != 0 && stat("big.bin", &sb) == 0 && sb.st_size <= 4096, "file limit not enforced: rc %d",
            r.exit_code);

    /* a command that does not exist */
    char *a2[] = {"/nonexistent/dpcert-nothing", NULL};
    T_CHECK(dp_proc_run(&r, a2, &o) == DP_OK && r.exit_code == 127, "missing command rc %d", r.exit_code);
}

/* SIGTERM to a process waiting on a child reaches the child's group; the waiter learns it. */
static void test_forwarding(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (dp_proc_install_signal_forwarding() != DP_OK) _exit(9);
        dp_proc_result r;
        dp_proc_opts o = {.timeout_s = 60, .log_path = "fwd.txt"};
        dp_proc_run_shell(&r, "sleep 40", NULL, &o);
        if (!(r.interrupted && dp_proc_interrupted() == SIGTERM && r.signal == SIGTERM))
            fprintf(stderr, "forwarding: interrupted %d signal %d received %d rc %d\n", r.interrupted, r.signal,
                    dp_proc_interrupted(), r.exit_code);
        _exit(r.interrupted && dp_proc_interrupted() == SIGTERM && r.signal == SIGTERM ? 0 : 1);
    }
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGTERM);
    int status;
    time_t t0 = time(NULL);
    waitpid(pid, &status, 0);
    T_CHECK(time(NULL) - t0 < 5, "forwarding took too long");
    T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "signal not forwarded (status %d)", status);
}

int main(void) {
    test_atomic();
    test_stdout_full();
    test_proc();
    test_forwarding();
    return t_finish();
}

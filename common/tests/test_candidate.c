/* common/tests/test_candidate.c — the candidate runner (common/candidate.h) against hostile
 * candidates: a good one, a crash, a hang, a non-zero exit, no output, a symlink output,
 * garbage, a truncated file, a header claiming 10 GiB, a 10 GiB write (file-size limit),
 * wrong shapes, a wrong dtype class, a missing required tensor. Each gets its outcome and a
 * message; none crashes or hangs the runner. Persistent mode (dp_cand_session): a good server
 * (one process for three requests), an ERROR reply (the process serves on), a wrong sequence
 * number (PROTOCOL, restart), a crash during a request (EXIT naming it, its stderr quoted, a
 * fresh process next), no READY; a failed one-call run quotes the end of its log. Runs in a
 * fresh temporary folder. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/candidate.h"
#include "common/safetensors.h"
#include "common/test.h"

static void write_set(const char *path, int64_t rows, dp_dtype dt) {
    dp_tensor_set s;
    dp_tset_init(&s);
    int64_t shp[2] = {rows, 3};
    double v[12] = {0};
    dp_tensor t;
    dp_tensor_alloc(&t, dt, 2, shp);
    for (int64_t i = 0; i < rows * 3 && i < 12; i++) dp_tensor_put(&t, i, v[i] + (double)i);
    dp_tset_add(&s, "out.a", &t);
    dp_tensor_free(&t);
    T_OK(dp_st_write(path, &s));
    dp_tset_free(&s);
}

static dp_cand_outcome run(const char *cmd, char *msg, size_t len, double timeout, uint64_t fsize) {
    static const dp_cand_expect exp[] = {
        {"out.a", 1, DP_CAND_FLOAT, 2, {2, 3}},
        {"out.opt", 0, DP_CAND_FLOAT, 1, {3}},
    };
    dp_cand_opts o;
    dp_cand_opts_default(&o);
    o.timeout_s = timeout;
    if (fsize) o.max_file_bytes = fsize;
    o.log_path = "cand.log";
    dp_cand_result r;
    dp_tensor_set out;
    dp_status st = dp_candidate_run(&r, &out, cmd, "in.safetensors", "work/out.safetensors", exp, 2, &o);
    T_CHECK(st == DP_OK, "runner error for '%s': %s", cmd, dp_last_error());
    if (r.outcome != DP_CAND_OK) T_CHECK(r.msg[0] != '\0', "no message for '%s'", cmd);
    if (r.outcome == DP_CAND_EXIT || r.outcome == DP_CAND_NO_OUTPUT || r.outcome == DP_CAND_BAD_OUTPUT)
        T_CHECK(out.n == 0, "an unreadable output left tensors");
    dp_tset_free(&out);
    snprintf(msg, len, "%s", r.msg);
    printf("  %-60.60s -> %s: %s\n", cmd, dp_cand_outcome_name(r.outcome), r.msg);
    return r.outcome;
}

/* One persistent request of session s; returns its outcome (message in msg). */
static dp_cand_outcome sreq(dp_cand_session *s, char *msg, size_t len) {
    static const dp_cand_expect exp[] = {{"out.a", 1, DP_CAND_FLOAT, 2, {2, 3}}};
    dp_cand_result r;
    dp_tensor_set out;
    T_OK(dp_cand_session_run(s, &r, &out, "in.safetensors", "work/out.safetensors", exp, 1));
    dp_tset_free(&out);
    snprintf(msg, len, "%s", r.msg);
    printf("  persistent request %lld -> %s: %s\n", s->seq, dp_cand_outcome_name(r.outcome), r.msg);
    return r.outcome;
}

static void persistent(void) {
    char msg[512];
    dp_cand_opts o;
    dp_cand_opts_default(&o);
    o.timeout_s = 20;
    /* a server: READY, then copies good.safetensors to OUT for each request; ERROR for the 2nd */
    FILE *f = fopen("server.sh", "w");
    fprintf(f, "echo READY >&3\nn=0\nwhile IFS=\"$(printf '\\t')\" read -r s i o; do n=$((n+1))\n"
               "  if [ $n = 2 ]; then echo \"$s ERROR ValueError: second\" >&3; continue; fi\n"
               "  if [ $n = 4 ]; then echo \"9$s OK\" >&3; continue; fi\n"
               "  cp good.safetensors \"$o\"; echo \"$s OK\" >&3\ndone\n");
    fclose(f);
    dp_cand_session s;
    dp_cand_session_init(&s, "sh server.sh", &o, "srv.p%d.log", 0);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_OK, "request 1: %s", msg);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_EXIT && strstr(msg, "replied ERROR ValueError: second"), "ERROR: %s", msg);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_OK && s.nstarted == 1, "after ERROR the same process serves: %s", msg);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_PROTOCOL && strstr(msg, "wrong reply '94 OK'"), "wrong seq: %s", msg);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_OK && s.nstarted == 2, "a fresh process after the wrong reply: %s", msg);
    dp_cand_session_close(&s);
    /* a crash during a request (the 2nd of a process): named, stderr quoted, then a fresh one */
    f = fopen("crash.sh", "w");
    fprintf(f, "echo READY >&3\nn=0\nwhile IFS=\"$(printf '\\t')\" read -r s i o; do n=$((n+1))\n"
               "  if [ $n = 2 ]; then echo 'dying now' >&2; kill -SEGV $$; fi\n"
               "  cp good.safetensors \"$o\"; echo \"$s OK\" >&3\ndone\n");
    fclose(f);
    dp_cand_session_init(&s, "sh crash.sh", &o, "srv2.p%d.log", 0);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_OK, "crash server, request 1: %s", msg);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_EXIT && strstr(msg, "during request 2") && strstr(msg, "dying now"),
            "crash: %s", msg);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_OK && s.nstarted == 2, "after the crash: %s", msg);
    dp_cand_session_close(&s);
    /* no READY: a command that does not serve persistent mode */
    dp_cand_session_init(&s, "true", &o, "srv3.p%d.log", 0);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_PROTOCOL && strstr(msg, "without READY"), "no READY: %s", msg);
    dp_cand_session_close(&s);
    dp_cand_session_init(&s, "sh -c 'echo broken >&2; exit 3'", &o, "srv4.p%d.log", 0);
    T_CHECK(sreq(&s, msg, sizeof msg) == DP_CAND_EXIT && strstr(msg, "before it was ready") && strstr(msg, "broken"),
            "exit before READY: %s", msg);
    dp_cand_session_close(&s);
}

int main(void) {
    char msg[512];
    T_CHECK(system("mkdir -p work") == 0, "mkdir");
    write_set("in.safetensors", 2, DP_F64);
    write_set("good.safetensors", 2, DP_F32);
    write_set("rows3.safetensors", 3, DP_F64);
    write_set("int.safetensors", 2, DP_I32);
    /* a valid header that names another tensor only */
    {
        dp_tensor_set s;
        dp_tset_init(&s);
        double x = 1;
        int64_t one = 1;
        T_OK(dp_tset_add_f64(&s, "other", &x, 1, &one));
        T_OK(dp_st_write("other.safetensors", &s));
        dp_tset_free(&s);
    }
    /* a header length of 10 GiB followed by a few bytes */
    {
        FILE *f = fopen("huge.bin", "wb");
        uint64_t n = (uint64_t)10 << 30;
        fwrite(&n, 8, 1, f);
        fputs("{\"a\":", f);
        fclose(f);
    }
    T_CHECK(run("sh -c 'cp good.safetensors \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_OK, "good: %s", msg);
    T_CHECK(run("sh -c 'cp good.safetensors \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_OK, "args: %s", msg);
    T_CHECK(run("sh -c 'kill -SEGV $$'", msg, sizeof msg, 20, 0) == DP_CAND_EXIT && strstr(msg, "signal 11"),
            "crash: %s", msg);
    T_CHECK(run("exit 3;", msg, sizeof msg, 20, 0) == DP_CAND_EXIT && strstr(msg, "status 3"), "exit 3: %s", msg);
    T_CHECK(run("no-such-command-dpcert", msg, sizeof msg, 20, 0) == DP_CAND_EXIT, "not found: %s", msg);
    time_t t0 = time(NULL);
    T_CHECK(run("sleep 60;", msg, sizeof msg, 1, 0) == DP_CAND_TIMEOUT, "hang: %s", msg);
    T_CHECK(time(NULL) - t0 < 20, "the hang was not cut at the time limit");
    T_CHECK(run("true", msg, sizeof msg, 20, 0) == DP_CAND_NO_OUTPUT, "no output: %s", msg);
    T_CHECK(run("sh -c 'ln -s \"$PWD/good.safetensors\" \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_NO_OUTPUT,
            "symlink output: %s", msg);
    T_CHECK(run("sh -c 'head -c 3000 /dev/urandom > \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_BAD_OUTPUT,
            "garbage: %s", msg);
    T_CHECK(run("sh -c 'head -c 90 good.safetensors > \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_BAD_OUTPUT,
            "truncated: %s", msg);
    T_CHECK(run("sh -c 'cp huge.bin \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_BAD_OUTPUT, "10 GiB header: %s", msg);
    /* a candidate that tries to write 10 GiB is stopped by the file-size limit (1 MiB here) */
    t0 = time(NULL);
    T_CHECK(run("sh -c 'head -c 10737418240 /dev/zero > \"$2\"' x", msg, sizeof msg, 60, (uint64_t)1 << 20) ==
                DP_CAND_EXIT,
            "10 GiB write: %s", msg);
    T_CHECK(time(NULL) - t0 < 30, "the 10 GiB write was not stopped early");
    T_CHECK(run("sh -c 'cp rows3.safetensors \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_BAD_SHAPE && strstr(msg, "out.a"),
            "wrong shape: %s", msg);
    T_CHECK(run("sh -c 'cp int.safetensors \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_BAD_SHAPE, "int dtype: %s", msg);
    T_CHECK(run("sh -c 'cp other.safetensors \"$2\"' x", msg, sizeof msg, 20, 0) == DP_CAND_MISSING && strstr(msg, "out.a"),
            "missing: %s", msg);
    T_CHECK(run("sh -c 'echo \"ValueError: no way\" >&2; exit 1' x", msg, sizeof msg, 20, 0) == DP_CAND_EXIT &&
                strstr(msg, "its output ends: ValueError: no way"),
            "a failed run does not quote its log: %s", msg);
    persistent();
    T_CHECK(dp_cand_outcome_incomplete(DP_CAND_MISSING) && dp_cand_outcome_incomplete(DP_CAND_TIMEOUT) &&
                !dp_cand_outcome_incomplete(DP_CAND_EXIT) && !dp_cand_outcome_incomplete(DP_CAND_BAD_OUTPUT),
            "outcome classes");
    return t_finish();
}

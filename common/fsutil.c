/* common/fsutil.c — mkdir -p, atomic file writes, checked stdout. */
#include "fsutil.h"
#include "common/alloc.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The process umask, read without changing it for long (umask has no getter). */
static mode_t dp_umask_(void) {
    mode_t m = umask(022);
    umask(m);
    return m;
}

dp_status dp_path_fmt(char *out, size_t cap, const char *what, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < cap) return DP_OK;
    return dp_error(DP_ERR_IO, "%s %s: a path of %d bytes, longer than the %zu this command allows", what, out, n,
                    cap - 1); /* out holds the head of the path; dp_error marks nothing cut: say the length */
}

dp_status dp_mkdir_p(const char *what, const char *dir) {
    size_t n = strlen(dir);
    if (n == 0) return dp_error(DP_ERR_INVALID, "%s: empty directory name", what);
    if (n > DP_MAX_DIR_LEN)
        return dp_error(DP_ERR_IO, "%s %s: a directory name of %zu bytes, longer than the %d allowed (PATH_MAX 4096 "
                        "less room for the files written in it)", what, dir, n, DP_MAX_DIR_LEN);
    char *buf = dp_strdup(dir); /* no fixed buffer: a long name gets the system's answer (ENAMETOOLONG) */
    if (!buf) return dp_error_context(DP_ERR_NOMEM, "%s %s", what, dir);
    dp_status st = DP_OK;
    for (size_t i = 1; i <= n && st == DP_OK; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            st = dp_error(dp_errno_status(errno), "%s %s: cannot create directory '%s': %s", what, dir, buf, strerror(errno));
        buf[i] = c;
    }
    dp_free(buf);
    DP_TRY(st);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dp_error(DP_ERR_IO, "%s %s: exists and is not a directory", what, dir);
    return DP_OK;
}

/* ---- fault injection (DPCERT_FAIL_IO=KIND[:N]) ---- */
/* the kinds, declared once: enumerator and the name DPCERT_FAIL_IO takes */
#define DP_IO_FAULTS(X)                                                                                                 \
    X(FAULT_SHORT_WRITE, "short-write") X(FAULT_ENOSPC, "enospc") X(FAULT_EIO_FSYNC, "eio-fsync")                     \
    X(FAULT_EIO_CLOSE, "eio-close") X(FAULT_RENAME, "rename") X(FAULT_READ_EIO, "read-eio")
#define DP_IO_FAULT_ENUM(e, name) e,
#define DP_IO_FAULT_NAME(e, name) name,
enum { FAULT_NONE, DP_IO_FAULTS(DP_IO_FAULT_ENUM) };
static const char *const FAULT_NAMES[] = {"", DP_IO_FAULTS(DP_IO_FAULT_NAME) NULL};
static int fault_kind;                   /* from the environment, read once */
static unsigned long fault_n = 1;
static atomic_ulong fault_writes, fault_reads; /* files opened so far, each side */

static void io_report(void) {
    fprintf(stderr, "dpcert: %lu files written, %lu files read\n", (unsigned long)atomic_load(&fault_writes),
            (unsigned long)atomic_load(&fault_reads));
}

__attribute__((constructor)) static void fault_env(void) {
    const char *c = getenv("DPCERT_IO_COUNT");
    if (c && strcmp(c, "1") == 0) atexit(io_report);
    const char *s = getenv("DPCERT_FAIL_IO");
    if (!s || !*s) return;
    size_t k = strcspn(s, ":");
    for (int i = 1; FAULT_NAMES[i]; i++)
        if (strlen(FAULT_NAMES[i]) == k && strncmp(s, FAULT_NAMES[i], k) == 0) fault_kind = i;
    char *end = NULL;
    if (s[k] == ':') fault_n = strtoul(s + k + 1, &end, 10);
    if (!fault_kind || fault_n == 0 || (s[k] == ':' && (end == s + k + 1 || *end))) {
        fprintf(stderr, "dpcert: DPCERT_FAIL_IO='%s' ignored (expected short-write, enospc, eio-fsync, eio-close, "
                        "rename or read-eio, then optionally :N with N >= 1)\n", s);
        fault_kind = FAULT_NONE;
    }
}

/* The fault of the file `path` being opened on one side (0: none); says which file it hits. */
static int fault_take(int reading, const char *path) {
    unsigned long k = atomic_fetch_add(reading ? &fault_reads : &fault_writes, 1) + 1; /* counted always */
    if (!fault_kind || (fault_kind == FAULT_READ_EIO) != reading || k != fault_n) return 0;
    fprintf(stderr, "dpcert: DPCERT_FAIL_IO=%s:%lu applies to %s\n", FAULT_NAMES[fault_kind], fault_n, path);
    return fault_kind;
}

/* ---- the stream under a dp_afile or a reader: stdio over our own write(2)/read(2) loop ---- */
typedef struct { int fd; int fault; int step; } io_cookie;

static ssize_t cookie_write(void *c, const char *buf, size_t n) {
    io_cookie *k = c;
    size_t done = 0;
    while (done < n) {
        ssize_t w;
        if (k->fault == FAULT_ENOSPC || (k->fault == FAULT_SHORT_WRITE && k->step > 0)) { errno = ENOSPC; w = -1; }
        else if (k->fault == FAULT_SHORT_WRITE) { w = write(k->fd, buf + done, (n - done) / 2); k->step = 1; }
        else w = write(k->fd, buf + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1; /* errno says why */
        if (w == 0 && k->fault != FAULT_SHORT_WRITE) { errno = EIO; return -1; }
        done += (size_t)w;
    }
    return (ssize_t)n;
}

static ssize_t cookie_read(void *c, char *buf, size_t n) {
    io_cookie *k = c;
    if (k->fault == FAULT_READ_EIO && k->step > 0) { errno = EIO; return -1; }
    size_t want = k->fault == FAULT_READ_EIO ? (n + 1) / 2 : n;
    ssize_t r;
    do r = read(k->fd, buf, want); while (r < 0 && errno == EINTR);
    if (k->fault == FAULT_READ_EIO) {
        if (r == 0) { errno = EIO; return -1; } /* an empty file fails its first read */
        k->step = 1;
    }
    return r;
}

static int cookie_close(void *c) {
    io_cookie *k = c;
    int rc = close(k->fd);
    if (rc == 0 && k->fault == FAULT_EIO_CLOSE) { errno = EIO; rc = -1; }
    dp_free(k);
    return rc;
}

/* A stdio stream over fd (mode "wb" or "rb"); the stream owns fd (closed with it, also on failure). */
static FILE *cookie_stream(int fd, const char *mode, int fault) {
    io_cookie *k = dp_malloc(sizeof *k);
    if (!k) { close(fd); errno = ENOMEM; return NULL; }
    *k = (io_cookie){fd, fault, 0};
    cookie_io_functions_t fns = {.read = cookie_read, .write = cookie_write, .seek = NULL, .close = cookie_close};
    FILE *f = fopencookie(k, mode, fns);
    if (!f) { int e = errno; close(fd); dp_free(k); errno = e; }
    return f;
}

/* dp_fopen_read, and the status of what was opened in *sb (when not NULL) */
FILE *dp_fopen_read_stat(const char *path, struct stat *sb) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    if (sb && fstat(fd, sb) != 0) memset(sb, 0, sizeof *sb);
    return cookie_stream(fd, "rb", fault_take(1, path));
}

FILE *dp_fopen_read(const char *path) { return dp_fopen_read_stat(path, NULL); }

dp_status dp_read_error(const char *what, const char *path, int err) {
    int e = err ? err : EIO;
    /* what the user named (a directory: EISDIR) is bad input, exit 2; a failing system is exit 3 */
    return dp_error(e == EISDIR ? dp_errno_status(e) : DP_ERR_SYSIO, "%s%s%s: read error: %s", what ? what : "",
                    what && *what ? " " : "", path, strerror(e));
}

/* ---- writing ---- */
static void afile_release(dp_afile *af) {
    dp_free(af->tmp);
    dp_free(af->path);
    dp_free(af->what);
    dp_free(af->dir);
    memset(af, 0, sizeof *af);
    af->fd = -1;
}

/* The failed system call's status and message, naming the file. */
static dp_status afile_fail(const dp_afile *af, const char *op, int err) {
    if (err == ENOMEM) return dp_error(DP_ERR_NOMEM, "%s %s: out of memory (%s)", af->what, af->path, op);
    return dp_error(DP_ERR_SYSIO, "%s %s: %s failed: %s", af->what, af->path, op, strerror(err));
}

/* What an existing destination is, followed through a link: 0 write atomically (none, a
 * regular file, a link to one or to a directory, a dangling link), 1 stream in place (a
 * character device or a FIFO), or an error naming the path (a directory, a block device, a
 * socket: never replaced). *sb: the followed status when streaming. */
static dp_status target_kind(int *stream, struct stat *sb, const char *what, const char *path) {
    struct stat lsb;
    *stream = 0;
    if (lstat(path, &lsb) != 0) return DP_OK; /* none (or unreachable: the open says why) */
    *sb = lsb;
    int link = S_ISLNK(lsb.st_mode);
    if (link && stat(path, sb) != 0) return DP_OK; /* a dangling link: replaced */
    if (S_ISREG(sb->st_mode)) return DP_OK;
    if (S_ISDIR(sb->st_mode)) {
        if (link) return DP_OK; /* the link is replaced, the directory untouched */
        return dp_error(DP_ERR_IO, "%s %s: is a directory", what, path);
    }
    if (S_ISCHR(sb->st_mode) || S_ISFIFO(sb->st_mode)) { *stream = 1; return DP_OK; }
    return dp_error(DP_ERR_IO, "%s %s: %sa %s: dpcert writes regular files, character devices and FIFOs only, and "
                    "never replaces another kind of file", what, path, link ? "a link to " : "",
                    S_ISBLK(sb->st_mode) ? "block device" : S_ISSOCK(sb->st_mode) ? "socket" : "special file");
}

static dp_status afile_open_stream(dp_afile *af, const struct stat *sb) {
    int fifo = S_ISFIFO(sb->st_mode);
    /* O_NONBLOCK: a FIFO with no reader fails (ENXIO) instead of blocking forever */
    int fd = open(af->path, O_WRONLY | O_NOCTTY | O_CLOEXEC | (fifo ? O_NONBLOCK : 0));
    if (fd < 0) {
        int e = errno;
        if (e == ENXIO && fifo) return dp_error(DP_ERR_IO, "%s %s: a FIFO that no process is reading", af->what, af->path);
        return dp_error(dp_errno_status(e), "%s %s: cannot open: %s", af->what, af->path, strerror(e));
    }
    struct stat now;
    if (fstat(fd, &now) != 0 || now.st_dev != sb->st_dev || now.st_ino != sb->st_ino) {
        close(fd);
        return dp_error(DP_ERR_IO, "%s %s: changed while it was opened", af->what, af->path);
    }
    if (fifo) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    af->fd = fd;
    af->f = cookie_stream(fd, "wb", af->fault);
    if (!af->f) return afile_fail(af, "fopencookie", errno);
    return DP_OK;
}

dp_status dp_afile_open(dp_afile *af, const char *what, const char *path) {
    memset(af, 0, sizeof *af);
    af->fd = -1;
    if (!path || !*path) return dp_error(DP_ERR_INVALID, "%s: empty file name", what);
    int stream = 0;
    struct stat sb;
    DP_TRY(target_kind(&stream, &sb, what, path));
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base && !stream) return dp_error(DP_ERR_INVALID, "%s %s: names a directory, not a file", what, path);
    af->path = dp_strdup(path);
    af->what = dp_strdup(what);
    if (!af->path || !af->what) { afile_release(af); return DP_ERR_NOMEM; }
    af->fault = fault_take(0, path);
    if (stream) {
        dp_status st = afile_open_stream(af, &sb);
        if (st != DP_OK) afile_release(af);
        return st;
    }
    size_t n = dlen + 1 + strlen(base) + sizeof ".tmp.XXXXXX";
    af->tmp = dp_malloc(n);
    af->dir = dlen ? dp_strndup(path, dlen > 1 ? dlen - 1 : 1) : dp_strdup(".");
    if (!af->tmp || !af->dir) { afile_release(af); return DP_ERR_NOMEM; }
    snprintf(af->tmp, n, "%.*s.%s.tmp.XXXXXX", (int)dlen, path, base);
    int fd = mkostemp(af->tmp, O_CLOEXEC); /* O_CREAT | O_EXCL: never opens an existing file or link */
    if (fd < 0) {
        int e = errno;
        dp_status st = dp_error(dp_errno_status(e), "%s %s: cannot create a temporary file: %s", what, path, strerror(e));
        dp_free(af->tmp); /* not created: nothing to remove */
        af->tmp = NULL;
        afile_release(af);
        return st;
    }
    fchmod(fd, 0644 & ~dp_umask_());
    af->fd = fd;
    af->f = cookie_stream(fd, "wb", af->fault);
    if (!af->f) {
        dp_status st = afile_fail(af, "fopencookie", errno);
        unlink(af->tmp);
        afile_release(af);
        return st;
    }
    return DP_OK;
}

void dp_afile_abort(dp_afile *af) {
    if (af->f) fclose(af->f);
    if (af->tmp) unlink(af->tmp);
    afile_release(af);
}

dp_status dp_afile_commit(dp_afile *af) {
    if (!af->f) return dp_error(DP_ERR_INTERNAL, "dp_afile_commit on a closed file");
    const char *op = NULL;
    int err = 0;
    errno = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) { op = "write"; err = errno ? errno : EIO; }
    if (!err && af->tmp) {
        if (af->fault == FAULT_EIO_FSYNC) { op = "fsync"; err = EIO; }
        else if (fsync(af->fd) != 0) { op = "fsync"; err = errno; }
    }
    errno = 0;
    if (fclose(af->f) != 0 && !err) { op = "close"; err = errno ? errno : EIO; }
    af->f = NULL;
    if (!err && af->tmp) {
        if (af->fault == FAULT_RENAME) { op = "rename"; err = EIO; }
        else if (rename(af->tmp, af->path) != 0) { op = "rename"; err = errno; }
    }
    if (err) {
        dp_status st = afile_fail(af, op, err);
        if (af->tmp) unlink(af->tmp);
        afile_release(af);
        return st;
    }
    if (af->tmp) { /* make the rename durable */
        int dfd = open(af->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) { fsync(dfd); close(dfd); }
    }
    afile_release(af);
    return DP_OK;
}

dp_status dp_write_file_atomic(const char *what, const char *path, const void *data, size_t n) {
    dp_afile af;
    DP_TRY(dp_afile_open(&af, what, path));
    errno = 0;
    if (n && fwrite(data, 1, n, af.f) != n) {
        dp_status st = afile_fail(&af, "write", errno ? errno : EIO);
        dp_afile_abort(&af);
        return st;
    }
    return dp_afile_commit(&af);
}

dp_status dp_stdout_finish(const char *what) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        return dp_error(DP_ERR_SYSIO, "%s: cannot write the result to standard output: %s", what,
                        strerror(errno ? errno : EIO));
    return DP_OK;
}

dp_status dp_read_file_max(char **buf, size_t *len, const char *what, const char *path, size_t max) {
    *buf = NULL;
    *len = 0;
    struct stat sb;
    FILE *f = dp_fopen_read_stat(path, &sb);
    if (!f && errno == ENOMEM) return dp_error(DP_ERR_NOMEM, "%s %s: out of memory opening it", what, path);
    if (!f) return dp_error(dp_errno_status(errno), "%s %s: cannot open: %s", what, path, strerror(errno));
    if (S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > (uint64_t)max) {
        fclose(f);
        return dp_error(DP_ERR_FORMAT, "%s %s: %lld bytes, longer than the limit of %zu bytes", what, path,
                        (long long)sb.st_size, max);
    }
    size_t cap = 4096, n = 0;
    char *p = dp_malloc(cap + 1);
    dp_status st = p ? DP_OK : dp_error_context(DP_ERR_NOMEM, "%s %s", what, path);
    errno = 0;
    while (st == DP_OK) {
        if (n == cap) {
            size_t nc = cap > max / 2 ? max + 1 : cap * 2; /* at most max + 1 bytes are ever read */
            if (n > max) { st = dp_error(DP_ERR_FORMAT, "%s %s: longer than the limit of %zu bytes", what, path, max); break; }
            char *q = dp_realloc(p, nc + 1);
            if (!q) { st = dp_error_context(DP_ERR_NOMEM, "%s %s", what, path); break; }
            p = q;
            cap = nc;
        }
        size_t r = fread(p + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (st == DP_OK && n > max) st = dp_error(DP_ERR_FORMAT, "%s %s: longer than the limit of %zu bytes", what, path, max);
    if (st == DP_OK && ferror(f)) st = dp_read_error(what, path, errno);
    fclose(f);
    if (st != DP_OK) { dp_free(p); return st; }
    p[n] = 0;
    *buf = p;
    *len = n;
    return DP_OK;
}

static int tree_path_is(const char *p, int want_dir) {
    struct stat sb;
    return stat(p, &sb) == 0 && (want_dir ? S_ISDIR(sb.st_mode) : S_ISREG(sb.st_mode));
}

void dp_find_tree_path(char *out, size_t len, const char *rel, const char *exe, int want_dir) {
    const char *root = getenv("DPCERT_ROOT");
    if (root && *root) {
        snprintf(out, len, "%s/%s", root, rel);
        if (tree_path_is(out, want_dir)) return;
    }
    char d[2048] = "";
    if (exe) snprintf(d, sizeof d, "%.2000s", exe);
    else {
        ssize_t n = readlink("/proc/self/exe", d, sizeof d - 1);
        d[n > 0 ? n : 0] = 0;
    }
    char *sl = strrchr(d, '/');
    if (sl) {
        *sl = 0;
        snprintf(out, len, "%s/../%s", d, rel);
        if (tree_path_is(out, want_dir)) return;
        snprintf(out, len, "%s/../../%s", d, rel);
        if (tree_path_is(out, want_dir)) return;
    }
    snprintf(out, len, "%s", rel);
}

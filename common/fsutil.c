/* common/fsutil.c — mkdir -p, atomic file writes, checked stdout. */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
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

dp_status dp_mkdir_p(const char *what, const char *dir) {
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0) return dp_error(DP_ERR_INVALID, "%s: empty directory name", what);
    if (n >= sizeof buf) return dp_error(DP_ERR_INVALID, "%s: directory name too long", what);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return dp_error(DP_ERR_IO, "%s %s: cannot create directory '%s': %s", what, dir, buf, strerror(errno));
        buf[i] = c;
    }
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return dp_error(DP_ERR_IO, "%s %s: exists and is not a directory", what, dir);
    return DP_OK;
}

static char *dp_strdup_(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = dp_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void afile_release(dp_afile *af) {
    free(af->tmp);
    free(af->path);
    free(af->what);
    memset(af, 0, sizeof *af);
}

dp_status dp_afile_open(dp_afile *af, const char *what, const char *path) {
    memset(af, 0, sizeof *af);
    if (!path || !*path) return dp_error(DP_ERR_INVALID, "%s: empty file name", what);
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return dp_error(DP_ERR_IO, "%s %s: is a directory", what, path);
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) + 1 : 0;
    const char *base = slash ? slash + 1 : path;
    if (!*base) return dp_error(DP_ERR_INVALID, "%s %s: names a directory, not a file", what, path);
    size_t n = dlen + 1 + strlen(base) + sizeof ".tmp.XXXXXX";
    af->tmp = dp_malloc(n);
    af->path = dp_strdup_(path);
    af->what = dp_strdup_(what);
    if (!af->tmp || !af->path || !af->what) { afile_release(af); return DP_ERR_NOMEM; }
    snprintf(af->tmp, n, "%.*s.%s.tmp.XXXXXX", (int)dlen, path, base);
    int fd = mkostemp(af->tmp, O_CLOEXEC); /* O_CREAT | O_EXCL: never opens an existing file or link */
    if (fd < 0) {
        dp_status st = dp_error(DP_ERR_IO, "%s %s: cannot create a temporary file: %s", what, path, strerror(errno));
        afile_release(af);
        return st;
    }
    fchmod(fd, 0644 & ~dp_umask_());
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        close(fd);
        unlink(af->tmp);
        afile_release(af);
        return dp_error(DP_ERR_IO, "%s %s: fdopen: %s", what, path, strerror(errno));
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
    int err = 0;
    if (fflush(af->f) != 0 || ferror(af->f)) err = errno ? errno : EIO;
    if (!err && fsync(fileno(af->f)) != 0) err = errno;
    if (fclose(af->f) != 0 && !err) err = errno ? errno : EIO;
    af->f = NULL;
    if (!err && rename(af->tmp, af->path) != 0) err = errno;
    if (err) {
        dp_status st = dp_error(DP_ERR_IO, "%s %s: write failed: %s", af->what, af->path, strerror(err));
        unlink(af->tmp);
        afile_release(af);
        return st;
    }
    /* Make the rename durable. */
    char *dir = dp_strdup_(af->path);
    if (dir) {
        char *slash = strrchr(dir, '/');
        const char *d = ".";
        if (slash) { slash[slash == dir ? 1 : 0] = '\0'; d = dir; }
        int dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) { fsync(dfd); close(dfd); }
        free(dir);
    }
    afile_release(af);
    return DP_OK;
}

dp_status dp_write_file_atomic(const char *what, const char *path, const void *data, size_t n) {
    dp_afile af;
    DP_TRY(dp_afile_open(&af, what, path));
    if (n && fwrite(data, 1, n, af.f) != n) {
        dp_status st = dp_error(DP_ERR_IO, "%s %s: write failed: %s", what, path, strerror(errno));
        dp_afile_abort(&af);
        return st;
    }
    return dp_afile_commit(&af);
}

dp_status dp_stdout_finish(const char *what) {
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout))
        return dp_error(DP_ERR_IO, "%s: cannot write the result to standard output: %s", what,
                        strerror(errno ? errno : EIO));
    return DP_OK;
}

dp_status dp_read_file_max(char **buf, size_t *len, const char *what, const char *path, size_t max) {
    *buf = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return dp_error(DP_ERR_IO, "%s %s: cannot open: %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode) && (uint64_t)sb.st_size > (uint64_t)max) {
        fclose(f);
        return dp_error(DP_ERR_FORMAT, "%s %s: %lld bytes, longer than the limit of %zu bytes", what, path,
                        (long long)sb.st_size, max);
    }
    size_t cap = 4096, n = 0;
    char *p = malloc(cap + 1);
    dp_status st = p ? DP_OK : dp_error(DP_ERR_NOMEM, "%s %s: out of memory", what, path);
    while (st == DP_OK) {
        if (n == cap) {
            size_t nc = cap > max / 2 ? max + 1 : cap * 2; /* at most max + 1 bytes are ever read */
            if (n > max) { st = dp_error(DP_ERR_FORMAT, "%s %s: longer than the limit of %zu bytes", what, path, max); break; }
            char *q = realloc(p, nc + 1);
            if (!q) { st = dp_error(DP_ERR_NOMEM, "%s %s: out of memory", what, path); break; }
            p = q;
            cap = nc;
        }
        size_t r = fread(p + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    if (st == DP_OK && n > max) st = dp_error(DP_ERR_FORMAT, "%s %s: longer than the limit of %zu bytes", what, path, max);
    if (st == DP_OK && ferror(f)) st = dp_error(DP_ERR_IO, "%s %s: read error", what, path);
    fclose(f);
    if (st != DP_OK) { free(p); return st; }
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

/* common/fsutil.h — small filesystem helpers shared by the commands. */
#ifndef DP_FSUTIL_H
#define DP_FSUTIL_H

#include <stdio.h>

#include "status.h"

/* A path formatted into a fixed buffer out[cap], or a refusal (DP_ERR_IO, exit 2) naming
 * `what`, the value and the limit when it does not fit: no buffer cuts a path silently. */
dp_status dp_path_fmt(char *out, size_t cap, const char *what, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/* The longest output directory dp_mkdir_p accepts: PATH_MAX (4096) less room for the names
 * the commands write under it. */
#define DP_MAX_DIR_LEN 3840

/* Create directory `dir` and any missing parents (mode 0777 & ~umask), like mkdir -p.
 * An existing directory is fine; an existing non-directory is DP_ERR_IO. `what` names
 * the option or purpose in messages (e.g. "--export"). */
dp_status dp_mkdir_p(const char *what, const char *dir);

/* Writing a file. Every file dpcert writes goes through this (docs/development.md "Atomic
 * writes"), by the kind of what the path names now:
 * - nothing, a regular file, or a symbolic link to either or to a directory: atomically. The
 *   data goes to a new temporary file in the destination's directory (".NAME.tmp.XXXXXX",
 *   created with O_EXCL, so never through a link), is flushed, fsync'ed and renamed over the
 *   destination. rename() replaces a link by the new file; it never writes through it. A
 *   crash, a full disk or an I/O error leaves the old file (or none), never half a file.
 * - a character device or a FIFO (named directly or through a link: /dev/null, /dev/stdout,
 *   a pipe the user made): written in place as a stream, never replaced; a FIFO with no
 *   reader is refused (exit 2), a write error (e.g. /dev/full) is a lost result (exit 3).
 * - a directory, a block device, a socket: refused (DP_ERR_IO, exit 2), never replaced.
 * A failed write, fsync, close or rename is DP_ERR_SYSIO (exit 3) naming the file. */
typedef struct {
    FILE *f;       /* write here (stdio) */
    char *tmp;     /* the temporary path (NULL when streaming in place) */
    char *path;    /* the destination */
    char *what;    /* for messages */
    char *dir;     /* the destination's directory, fsync'ed after the rename (NULL when streaming) */
    int fd;        /* the descriptor under f */
    int fault;     /* injected fault of this file (DPCERT_FAIL_IO), 0 none */
} dp_afile;

/* Open the temporary file for `path` (or the stream). `what` names the option or purpose in
 * messages. */
dp_status dp_afile_open(dp_afile *af, const char *what, const char *path);
/* Flush, fsync, close and rename into place (also fsyncs the directory). Any write error
 * seen on the stream (e.g. ENOSPC) makes it fail with DP_ERR_SYSIO and remove the temporary
 * file. The dp_afile is released in every case. */
dp_status dp_afile_commit(dp_afile *af);
/* Close and remove the temporary file (on an error path). Safe on a zeroed dp_afile. */
void dp_afile_abort(dp_afile *af);
/* Whole file at once. */
dp_status dp_write_file_atomic(const char *what, const char *path, const void *data, size_t n);

/* Reading. Open `path` for reading (fopen "rb"); every reader of input files uses it, so
 * that DPCERT_FAIL_IO=read-eio can fail it. NULL with errno set when it cannot be opened. A
 * read error shows as ferror(); report it with dp_read_error. */
FILE *dp_fopen_read(const char *path);
/* The same, with the status of what was opened in *sb (fstat of the descriptor: no race with
 * the name; zeroed when fstat fails). */
struct stat;
FILE *dp_fopen_read_stat(const char *path, struct stat *sb);
/* "WHAT PATH: read error: REASON" (err: the errno of the failed read, 0 = EIO) as DP_ERR_SYSIO
 * (exit 3: the input exists and is readable, the system failed); EISDIR (a directory named as a
 * file) is DP_ERR_IO (exit 2). */
dp_status dp_read_error(const char *what, const char *path, int err);

/* I/O fault injection (docs/development.md "Fault injection"): DPCERT_FAIL_IO=KIND[:N] fails
 * the N-th (default the first) file of its side, counted from 1 over the process: the
 * written files (dp_afile_open) for short-write (half of the first write(2), then ENOSPC),
 * enospc (the first write(2)), eio-fsync, eio-close and rename (EIO); the files opened by
 * dp_fopen_read for read-eio (EIO after the first half of the first read; an empty file
 * fails its first read). DPCERT_IO_COUNT=1
 * prints "dpcert: W files written, R files read" on stderr at exit (the range of N). */
/* Bounded reading. Read the whole of `path` (also a pipe or a device: never trusted to end)
 * into a malloc'd buffer with a NUL byte after it (not counted in *len). More than `max` bytes
 * is DP_ERR_FORMAT "WHAT PATH: longer than the limit of MAX bytes", found after reading at most
 * max + 1 bytes; a regular file's size is checked before reading. `what` names the option. */
dp_status dp_read_file_max(char **buf, size_t *len, const char *what, const char *path, size_t max);
/* Limits of the text inputs (docs/development.md, I/O rules). */
#define DP_MAX_TEXT_INPUT ((size_t)64 << 20) /* case files, schedules, claims files: 64 MiB */

/* Flush stdout and report a lost result (full device, closed pipe) as DP_ERR_SYSIO naming
 * `what`; commands call it before returning success. */
dp_status dp_stdout_finish(const char *what);

/* A file or directory of the source tree (rel, e.g. "conformance/cases"), found in order at
 * $DPCERT_ROOT/rel, EXEDIR/../rel, EXEDIR/../../rel (EXEDIR: the directory of exe, or of
 * /proc/self/exe when exe is NULL), else rel itself (relative to the working directory).
 * want_dir: 1 a directory, 0 a regular file. out [len] receives the path. */
void dp_find_tree_path(char *out, size_t len, const char *rel, const char *exe, int want_dir);

#endif

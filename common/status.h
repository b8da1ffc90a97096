/* common/status.h — status codes and error messages.
 *
 * Library code never exits or aborts: every fallible function returns a
 * dp_status and, on failure, records a human-readable message with
 * dp_error(). Only main() turns a status into an exit code
 * (dp_status_exit_code): 0 success, 1 a check failed, 2 bad usage or bad
 * input, 3 internal error. */
#ifndef DP_STATUS_H
#define DP_STATUS_H

#include <stddef.h>

#include "alloc.h" /* dp_malloc, dp_calloc, dp_realloc, dp_strdup, dp_free */

typedef enum {
    DP_OK = 0,
    DP_ERR_USAGE,         /* bad command-line usage (unknown option, missing value)   -> exit 2 */
    DP_ERR_INVALID,       /* bad input value (NaN, negative sigma, q outside (0,1])   -> exit 2 */
    DP_ERR_FORMAT,        /* malformed input file (safetensors, JSON, CSV)            -> exit 2 */
    DP_ERR_IO,            /* cannot open/read/write a file                            -> exit 2 */
    DP_ERR_CHECK_FAILED,  /* a conformance/statistical check did not pass            -> exit 1 */
    DP_ERR_NOT_SUPPORTED, /* operation not supported by this backend/build            -> exit 3 */
    DP_ERR_NOMEM,         /* allocation failed                                        -> exit 3 */
    DP_ERR_NUMERIC,       /* non-finite or out-of-range result in a computation      -> exit 3 */
    DP_ERR_INTERNAL,      /* a bug or a failing external library call                 -> exit 3 */
    DP_ERR_DEVICE,        /* a CUDA/NCCL/MPI failure                                  -> exit 3 */
    DP_ERR_SYSIO          /* the system failed a read or write that should work: disk
                           * full, EIO, a failed fsync or rename (a lost result)      -> exit 3 */
} dp_status;

/* Record a message for the calling thread and return `st` unchanged, so that
 * `return dp_error(DP_ERR_INVALID, "sigma must be >= 0, got %g", s);` works. The message is
 * made safe for a terminal (control bytes and bytes that are not UTF-8 are written as \xHH)
 * and is never cut silently: a message longer than DP_ERR_MAX bytes keeps its head and its
 * tail (the file's name and the reason) around a marker "[... N bytes ...]". */
#define DP_ERR_MAX 8192
dp_status dp_error(dp_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Prefix the current message with context ("reading FILE: ..."). Returns st. */
dp_status dp_error_context(dp_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
const char *dp_last_error(void);   /* "" when none */
void dp_clear_error(void);
const char *dp_status_name(dp_status st);
int dp_status_exit_code(dp_status st);

/* Propagate a failing status. */
#define DP_TRY(expr) do { dp_status dp_try_st_ = (expr); if (dp_try_st_ != DP_OK) return dp_try_st_; } while (0)

/* The status of a failed system call on a file, from its errno: what the user's path or
 * permissions cause (ENOENT, EACCES, EPERM, ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP, EROFS,
 * EEXIST, ENXIO, ETXTBSY) is DP_ERR_IO (exit 2); anything else (ENOSPC, EDQUOT, EIO, EFBIG,
 * EPIPE, ENOMEM, ...) is DP_ERR_SYSIO (exit 3, a lost result). */
dp_status dp_errno_status(int err);

/* Growable arrays: make the array `arr` (a pointer variable, *cap elements allocated) hold
 * at least `need` elements, doubling from `first`; on failure the array is untouched and
 * the message names `what`. Example: DP_TRY(DP_GROW(r->items, r->cap, r->n + 1, 32, "results")); */
#define DP_GROW(arr, cap, need, first, what) dp_grow_((void *)&(arr), &(cap), (need), sizeof *(arr), (first), (what))
dp_status dp_grow_(void *arrp, size_t *cap, size_t need, size_t esize, size_t first, const char *what);

#endif

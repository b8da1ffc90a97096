/* common/memlimit.h — the memory pre-check of a run (docs/memory.md): an upper estimate
 * of a run's memory, computed from its configuration before anything large is
 * allocated, is compared with the limit: `--max-memory BYTES[K|M|G|T]` when given, else
 * MemAvailable of /proc/meminfo. */
#ifndef DP_MEMLIMIT_H
#define DP_MEMLIMIT_H

#include <stdint.h>

#include "status.h"

/* "BYTES[K|M|G|T]" (binary multiples, 1K = 1024), a positive integer without sign or
 * spaces; DP_ERR_INVALID naming `what` otherwise (or beyond 2^63 bytes). */
dp_status dp_mem_parse(uint64_t *out, const char *what, const char *s);
/* MemAvailable of /proc/meminfo in bytes; DP_ERR_IO when it cannot be read. */
dp_status dp_mem_available(uint64_t *out);
/* DP_OK when `need` bytes (an estimate, double so that it cannot wrap) fit the limit:
 * max_memory (the text of --max-memory, NULL when absent) or MemAvailable. Otherwise
 * DP_ERR_INVALID: "WHAT needs an estimated N GiB (docs/memory.md), more than the limit
 * L GiB (SOURCE)". When MemAvailable cannot be read and no --max-memory is given, a
 * warning is printed on stderr and the check is skipped (DP_OK). */
dp_status dp_mem_check(double need, const char *what, const char *max_memory);

#endif

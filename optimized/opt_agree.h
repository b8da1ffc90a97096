/* optimized/opt_agree.h — configuration agreement of MPI ranks (docs/ranks.md).
 *
 * Before any work, every rank of a multi-rank command writes the canonical serialisation
 * of its configuration (opt_canon_*: one "NAME VALUE" line per option, in the option
 * table's order, numbers formatted canonically, the SHA-256 of a --data file instead of
 * its path, the resolved model configuration), and opt_config_agree exchanges the
 * SHA-256 of that text through the backend's allgatherv_bytes. When the digests differ,
 * every rank gets the same DP_ERR_INVALID naming the first differing line, e.g.
 * "rank 1 has --steps 3, rank 0 has --steps 2". */
#ifndef OPT_AGREE_H
#define OPT_AGREE_H

#include <stddef.h>

#include "common/cli.h"
#include "common/status.h"
#include "optimized/backend.h"
#include "common/spec_model.h"

/* A growing NUL-terminated text. */
typedef struct {
    char *text;
    size_t len, cap;
} opt_canon;

void opt_canon_init(opt_canon *c);
void opt_canon_free(opt_canon *c);
/* Appends the line "key value" (value printf-formatted, bytes outside ' '..'~' and '\'
 * escaped as \xNN so that a line is one line). */
dp_status opt_canon_line(opt_canon *c, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* One line per option of opts[0..n) in table order, except those named in skip
 * (NULL-terminated; options that are legitimately per-rank). Values: DOUBLE %.17g,
 * INT %lld, U64 %llu, FLAG 0|1, STRING the text or "(absent)". The options named in
 * hashed (NULL-terminated; files) are written as "sha256:HEX" of the file's contents
 * ("unreadable" when it cannot be read), the options in presence (NULL-terminated) as
 * "given" or "absent". */
dp_status opt_canon_options(opt_canon *c, const dp_opt *opts, size_t n, const char *const *skip,
                            const char *const *hashed, const char *const *presence);
/* The line "model ..." of a resolved model configuration (every field). */
dp_status opt_canon_model(opt_canon *c, const dp_model_config *mc);

/* Collective over the backend's ranks: DP_OK when every rank's SHA-256 of c->text is
 * rank 0's; else DP_ERR_INVALID on every rank, naming the first line (in canonical
 * order) on which some rank differs from rank 0, the lowest such rank and both values. */
dp_status opt_config_agree(opt_backend *be, const opt_canon *c);

#endif

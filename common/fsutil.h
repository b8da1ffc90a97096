/* common/fsutil.h — small filesystem helpers shared by the commands. */
#ifndef DP_FSUTIL_H
#define DP_FSUTIL_H

#include "status.h"

/* Create directory `dir` and any missing parents (mode 0777 & ~umask), like mkdir -p.
 * An existing directory is fine; an existing non-directory is DP_ERR_IO. `what` names
 * the option or purpose in messages (e.g. "--export"). */
dp_status dp_mkdir_p(const char *what, const char *dir);

#endif

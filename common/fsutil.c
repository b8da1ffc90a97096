/* common/fsutil.c — mkdir -p. */
#include "fsutil.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

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

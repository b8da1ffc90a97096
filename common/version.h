/* common/version.h — dpcert's version and git revision (the Makefile passes both as -D;
 * these defaults serve builds that do not). Recorded in exports and reports. */
#ifndef DP_VERSION_H
#define DP_VERSION_H

#ifndef DPCERT_VERSION
#define DPCERT_VERSION "0.0.0"
#endif
#ifndef DPCERT_GIT_REV
#define DPCERT_GIT_REV "unknown"
#endif

#endif

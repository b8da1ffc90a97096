/* optimized/tests/plugin_skeleton_wrap.h — the skeleton plugin (optimized/plugins/skeleton/skeleton.c)
 * included unchanged, its three entry points renamed sk_abi_version, sk_query and sk_create, for
 * the defective plugins built from it (plugin_variants.c, plugin_caps_variants.c), which define
 * the entry points around them. Build with -I optimized/plugins/skeleton. */
#define dpcert_backend_abi_version sk_abi_version
#define dpcert_backend_query sk_query
#define dpcert_backend_create sk_create
#include "skeleton.c"
#undef dpcert_backend_abi_version
#undef dpcert_backend_query
#undef dpcert_backend_create

/* optimized/plugin_loader.h — backends from plugins: `--backend plugin:PATH` (or
 * plugin:NAME, the file BINDIR/plugins/libdpcert_NAME.so next to the dpcert binary) for
 * train, conform and the operation harness (docs/plugin-abi.md).
 *
 * A plugin is a shared object built against optimized/plugin/dpcert_backend.h only. The
 * loader dlopens it, checks its ABI version and layout, its three entry points and its
 * declaration (dpcert_backend_query), creates it, and refuses a table that differs from
 * the declaration. Refusals are DP_ERR_INVALID (exit 2) with a message naming what is
 * wrong; a dtype or rank count the plugin does not declare is DP_ERR_NOT_SUPPORTED.
 *
 * Every operation of a plugin backend goes through a forwarding function generated from
 * OPT_BACKEND_OPS (BUILD/gen/opt_plugin_fwd.inc, optimized/plugin/gen_abi.sh fwd) that
 * records which plugin operation is running: a signal (SIGSEGV, SIGBUS, SIGFPE, SIGILL,
 * SIGABRT) raised inside it ends the process with exit 3 and the message
 * "dpcert: plugin 'NAME' crashed in operation 'OP' (signal ...)". With the declaration's
 * inherit_host, an operation the plugin leaves NULL runs dpcert's host backend (same
 * dtype, threads and communicator); the harness judges only the plugin's own entries. */
#ifndef OPT_PLUGIN_LOADER_H
#define OPT_PLUGIN_LOADER_H

#include <stddef.h>

#include "optimized/backend.h"
#include "optimized/backend_decl.h"

/* spec = PATH (contains '/') or NAME ([a-z0-9_-]); the path of the shared object into path
 * (absolute when the file exists). DP_ERR_INVALID when NAME is malformed or not built. */
dp_status opt_plugin_resolve(char *path, size_t cap, const char *spec);

/* Load and check the plugin without creating it: ABI version and layout, entry points,
 * declaration. *decl (optional) receives a copy of the declaration. Loading is cached
 * per path for the life of the process (a plugin's code stays mapped). */
dp_status opt_plugin_probe(const char *spec, opt_backend_decl *decl);

/* Create the backend of plugin `spec` into *be (called by opt_backend_create for names
 * "plugin:SPEC"); sets be->decl. */
dp_status opt_plugin_backend_create(opt_backend *be, const opt_backend_config *cfg, const char *spec);

#endif

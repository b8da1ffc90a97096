/* optimized/backend_decl.h — what a backend declares about itself (docs/plugin-abi.md
 * "The declaration", docs/tolerances.md "Declared arithmetic"): dtypes, the operations
 * that are its own code, memory, collectives, determinism class and arithmetic per dtype.
 *
 * The fields are the public ABI's dpcert_caps (optimized/plugin/dpcert_backend.h), so a
 * plugin's declaration and a built-in backend's are the same structure. Built-in backends
 * (host, cuda and its emulation) get theirs from opt_backend_decl_builtin; a plugin's comes
 * from its dpcert_backend_query (optimized/plugin_loader.c). opt_backend_create sets
 * be->decl for every backend. */
#ifndef OPT_BACKEND_DECL_H
#define OPT_BACKEND_DECL_H

#include <limits.h>
#include <stddef.h>

#include "optimized/backend.h"
#include "optimized/plugin/dpcert_backend.h"

typedef struct opt_backend_decl {
    dpcert_caps caps;               /* the declaration (caps.ops: the backend's own operations) */
    char origin[PATH_MAX + 16];     /* "built in" or "plugin PATH" */
} opt_backend_decl;

/* The declaration of a built-in backend by name ("host", "cuda", "cuda-*"); other names get
 * the undeclared default (order unknown, FMA allowed, run-to-run determinism). The op
 * mask is filled from the table: caps.ops[op] = (be->ops entry != NULL). */
dp_status opt_backend_decl_builtin(opt_backend_decl **out, const opt_backend *be);
void opt_backend_decl_free(opt_backend_decl *d);

/* Effective arithmetic of dtype dt under the declaration (defaults applied: u_acc at least
 * the dtype's unit roundoff, libm_ulps 4 when not positive). */
dpcert_arith opt_decl_arith(const opt_backend_decl *d, dp_dtype dt);
/* u_eff = max(u_acc, u_in, u(dt)) (docs/tolerances.md "Declared arithmetic"). */
double opt_decl_u_eff(const opt_backend_decl *d, dp_dtype dt);
/* One line naming the declaration, e.g. "host (built in): order documented, no FMA, f64
 * arithmetic u=2^-53, libm 4 ulps, deterministic bitwise (any thread count)". */
void opt_decl_text(char *buf, size_t cap, const opt_backend_decl *d, dp_dtype dt);
const char *opt_decl_det_name(int det);
/* The export metadata of the declaration a run was made under: "arithmetic" = the
 * opt_decl_text line, "arith_u" = u_eff and "arith_u_in" = u_in as C99 hex floats
 * (docs/tolerances.md "Declared arithmetic": compare takes u_c = max(u(dtype), arith_u)
 * and counts the operand roundings of u_in in K). u_hex and u_in_hex: 40 bytes each. */
void opt_decl_meta(char *text, size_t text_cap, char *u_hex, char *u_in_hex, const opt_backend *be);        /* "none", "run-to-run", "bitwise" */
int opt_decl_is_own(const opt_backend_decl *d, opt_op op);

#endif

/* optimized/tests/plugin_caps_variants.c — plugins whose declaration (dpcert_caps) breaks one
 * rule of optimized/plugin_loader.c's pl_check_caps each, for optimized/tests/plugin_caps.sh:
 * the skeleton plugin (optimized/plugins/skeleton/skeleton.c, included unchanged) with its
 * query edited by -DCAPS=N (the cases in plugin_caps.sh's table, same numbers); 0 is the
 * skeleton unchanged (the positive control).
 * Build: cc -shared -fPIC -DCAPS=N -I optimized/plugins/skeleton plugin_caps_variants.c */
#ifndef CAPS
#error "compile with -DCAPS=N"
#endif
#include "plugin_skeleton_wrap.h"

uint32_t dpcert_backend_abi_version(void) { return sk_abi_version(); }

dpcert_status dpcert_backend_query(dpcert_caps *caps) {
    dpcert_status st = sk_query(caps);
    switch (CAPS) {
    case 1: strcpy(caps->name, "Bad Name"); break;                                  /* outside [a-z0-9_-] */
    case 2: memset(caps->name, 0, sizeof caps->name); break;                        /* empty */
    case 3: memset(caps->description, 'x', sizeof caps->description); break;        /* no NUL */
    case 4: caps->dtypes = 0; break;
    case 5: caps->dtypes |= 1u << 7; break;                                         /* an unknown dtype bit */
    case 6: caps->memory = 7; break;
    case 7: caps->inherit_host = 2; break;
    case 8: caps->memory = DPCERT_MEMORY_DEVICE; break;                              /* inherit_host still 1 */
    case 9: caps->collectives = 99; break;
    case 10: caps->determinism = 99; break;
    case 11: caps->ops[DPCERT_OP_AXPBY] = 2; break;
    case 12: caps->arith[DPCERT_F64].u_in = 0.6; break;
    case 13: caps->arith[DPCERT_F32].order = 9; break;
    case 14: caps->arith[DPCERT_F64].fma = 2; break;
    case 15: caps->inherit_host = 0; caps->memory = DPCERT_MEMORY_DEVICE; break;     /* no alloc of its own */
    default: break;
    }
    return st;
}

dpcert_status dpcert_backend_create(dpcert_backend_ops *ops, void **ctx, const dpcert_backend_config *cfg,
                                    const dpcert_host *host) {
    return sk_create(ops, ctx, cfg, host);
}

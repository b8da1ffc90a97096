/* optimized/plugin_loader.c — loading, checking and wrapping backend plugins
 * (optimized/plugin_loader.h, docs/plugin-abi.md). */
#include "optimized/plugin_loader.h"
#include "common/alloc.h"

#include <dlfcn.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the public ABI is the engine's table under other names: checked here ---- */
_Static_assert(sizeof(dpcert_status) == sizeof(dp_status), "status enums differ in size");
_Static_assert((int)DPCERT_ERR_NOT_SUPPORTED == (int)DP_ERR_NOT_SUPPORTED && (int)DPCERT_ERR_DEVICE == (int)DP_ERR_DEVICE,
               "status codes differ");
_Static_assert((int)DPCERT_F64 == (int)DP_F64 && (int)DPCERT_F32 == (int)DP_F32 && (int)DPCERT_BF16 == (int)DP_BF16 &&
               (int)DPCERT_F16 == (int)DP_F16, "dtype codes differ");
_Static_assert(sizeof(dpcert_clip_fn) == sizeof(opt_clip_fn) && (int)DPCERT_CLIP_AUTOMATIC == (int)OPT_CLIP_AUTOMATIC,
               "clip function codes differ");
_Static_assert(sizeof(dpcert_group) == sizeof(opt_group) && offsetof(dpcert_group, impl) == offsetof(opt_group, impl) &&
               offsetof(dpcert_group, color) == offsetof(opt_group, color), "group layouts differ");
_Static_assert(sizeof(dpcert_noise_key) == sizeof(dp_noise_key), "noise key layouts differ");
_Static_assert((int)DPCERT_COLL_COUNT == (int)OPT_COLL_COUNT && sizeof(dpcert_comm_stats) == sizeof(opt_comm_stats),
               "byte counter layouts differ");
_Static_assert((int)DPCERT_OP_COUNT == (int)OPT_OP_COUNT && sizeof(dpcert_backend_ops) == sizeof(opt_backend_ops),
               "operation tables differ");
#define OPT_PL_SAME_FIELD_(ID, name, ret, args)                                                                       \
    _Static_assert(offsetof(dpcert_backend_ops, name) == offsetof(opt_backend_ops, name) &&                           \
                       (int)DPCERT_OP_##ID == (int)OPT_OP_##ID,                                                       \
                   "operation " #name " is at another place in the public table");
OPT_BACKEND_OPS(OPT_PL_SAME_FIELD_)
#undef OPT_PL_SAME_FIELD_

/* ---- loaded plugins (cached per path; the code stays mapped for the process) ---- */
typedef uint32_t (*pl_version_fn)(void);
typedef dpcert_status (*pl_query_fn)(dpcert_caps *);
typedef dpcert_status (*pl_create_fn)(dpcert_backend_ops *, void **, const dpcert_backend_config *, const dpcert_host *);
typedef struct {
    char path[PATH_MAX];
    void *handle;
    pl_create_fn create;
    dpcert_caps caps;
} pl_lib;
#define PL_MAX 8
static pl_lib pl_libs[PL_MAX];
static int pl_nlibs;

dp_status opt_plugin_resolve(char *path, size_t cap, const char *spec) {
    if (!spec || !*spec) return dp_error(DP_ERR_USAGE, "--backend plugin: needs a path or a name (plugin:PATH)");
    char buf[PATH_MAX];
    if (strchr(spec, '/')) {
        if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf)
            return dp_error(DP_ERR_INVALID, "plugin path too long: %.60s...", spec);
    } else {
        for (const char *c = spec; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' || *c == '-'))
                return dp_error(DP_ERR_INVALID, "plugin name '%s': a name is [a-z0-9_-] (give a path with '/' for a "
                                "file)", spec);
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return dp_error(DP_ERR_INTERNAL, "cannot resolve /proc/self/exe to find plugin '%s'", spec);
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        if (snprintf(buf, sizeof buf, "%s/plugins/libdpcert_%s.so", exe, spec) >= (int)sizeof buf)
            return dp_error(DP_ERR_INVALID, "plugin path too long for '%s'", spec);
    }
    if (access(buf, R_OK) != 0)
        return dp_error(DP_ERR_INVALID, "plugin '%s': no readable file %s%s", spec, buf,
                        strchr(spec, '/') ? "" : " (plugins built by make live in BUILD/plugins/; give a path otherwise)");
    char *real = realpath(buf, NULL);
    int w = snprintf(path, cap, "%s", real ? real : buf);
    dp_free(real);
    if (w < 0 || (size_t)w >= cap) return dp_error(DP_ERR_INVALID, "plugin path too long: %s", buf);
    return DP_OK;
}

/* The declaration's own consistency (before any create). */
static dp_status pl_check_caps(const char *path, const dpcert_caps *c) {
    if (c->abi_version != DPCERT_BACKEND_ABI_VERSION || c->abi_layout != DPCERT_BACKEND_ABI_LAYOUT)
        return dp_error(DP_ERR_INVALID, "plugin %s: its declaration was built with ABI version %u layout %u; this dpcert "
                        "implements version %u layout %u (rebuild it against optimized/plugin/dpcert_backend.h)", path,
                        c->abi_version, c->abi_layout, DPCERT_BACKEND_ABI_VERSION, DPCERT_BACKEND_ABI_LAYOUT);
    size_t nl = strnlen(c->name, sizeof c->name);
    int name_ok = nl > 0 && nl < sizeof c->name;
    for (size_t i = 0; name_ok && i < nl; i++) {
        char ch = c->name[i];
        name_ok = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    }
    if (!name_ok) return dp_error(DP_ERR_INVALID, "plugin %s: caps.name must be 1 to 31 characters of [a-z0-9_-]", path);
    if (strnlen(c->description, sizeof c->description) == sizeof c->description)
        return dp_error(DP_ERR_INVALID, "plugin %s: caps.description is not NUL-terminated", path);
    const uint32_t all = DPCERT_DTYPE_BIT(DPCERT_F64) | DPCERT_DTYPE_BIT(DPCERT_F32) | DPCERT_DTYPE_BIT(DPCERT_BF16) |
                         DPCERT_DTYPE_BIT(DPCERT_F16);
    if (!c->dtypes || (c->dtypes & ~all))
        return dp_error(DP_ERR_INVALID, "plugin %s: caps.dtypes 0x%x is not a non-empty set of DPCERT_DTYPE_BIT(F64, F32, "
                        "BF16, F16)", path, c->dtypes);
    if (c->memory != DPCERT_MEMORY_HOST && c->memory != DPCERT_MEMORY_DEVICE)
        return dp_error(DP_ERR_INVALID, "plugin %s: caps.memory %d is neither DPCERT_MEMORY_HOST nor _DEVICE", path, c->memory);
    if (c->inherit_host != 0 && c->inherit_host != 1)
        return dp_error(DP_ERR_INVALID, "plugin %s: caps.inherit_host must be 0 or 1", path);
    if (c->inherit_host && c->memory != DPCERT_MEMORY_HOST)
        return dp_error(DP_ERR_INVALID, "plugin %s: caps.inherit_host needs DPCERT_MEMORY_HOST (the host backend's "
                        "operations read and write the buffers directly)", path);
    if (c->collectives < DPCERT_COLLECTIVES_NONE || c->collectives > DPCERT_COLLECTIVES_GROUPS)
        return dp_error(DP_ERR_INVALID, "plugin %s: caps.collectives %d is not a DPCERT_COLLECTIVES_* value", path,
                        c->collectives);
    if (c->determinism < DPCERT_DET_NONE || c->determinism > DPCERT_DET_BITWISE)
        return dp_error(DP_ERR_INVALID, "plugin %s: caps.determinism %d is not a DPCERT_DET_* value", path, c->determinism);
    for (int op = 0; op < OPT_OP_COUNT; op++)
        if (c->ops[op] > 1)
            return dp_error(DP_ERR_INVALID, "plugin %s: caps.ops[%s] = %d (0 or 1)", path, opt_op_name((opt_op)op), c->ops[op]);
    for (int t = 0; t < DPCERT_DTYPE_COUNT; t++) {
        if (!(c->dtypes & DPCERT_DTYPE_BIT(t))) continue;
        const dpcert_arith *a = &c->arith[t];
        if (!(a->u_in >= 0 && a->u_in < 0.5) || !(a->u_acc >= 0 && a->u_acc < 0.5) || !(a->libm_ulps < 1e6) ||
            isnan(a->libm_ulps) || (a->order != DPCERT_ORDER_DOCUMENTED && a->order != DPCERT_ORDER_UNKNOWN) ||
            (a->fma != 0 && a->fma != 1))
            return dp_error(DP_ERR_INVALID, "plugin %s: caps.arith[%s] out of range (u_in, u_acc in [0, 0.5), libm_ulps "
                            "finite, order DPCERT_ORDER_*, fma 0 or 1)", path, dp_dtype_name((dp_dtype)t));
    }
    if (!c->inherit_host) {
        static const opt_op mem[] = {OPT_OP_ALLOC, OPT_OP_FREE, OPT_OP_TO_DEVICE, OPT_OP_TO_HOST};
        for (size_t i = 0; c->memory == DPCERT_MEMORY_DEVICE && i < sizeof mem / sizeof mem[0]; i++)
            if (!c->ops[mem[i]])
                return dp_error(DP_ERR_INVALID, "plugin %s: device memory without '%s' (a plugin with "
                                "DPCERT_MEMORY_DEVICE fills alloc, free, to_device and to_host)", path, opt_op_name(mem[i]));
    }
    return DP_OK;
}

static dp_status pl_load(pl_lib **out, const char *spec) {
    *out = NULL;
    char path[PATH_MAX];
    DP_TRY(opt_plugin_resolve(path, sizeof path, spec));
    for (int i = 0; i < pl_nlibs; i++)
        if (strcmp(pl_libs[i].path, path) == 0) { *out = &pl_libs[i]; return DP_OK; }
    if (pl_nlibs == PL_MAX) return dp_error(DP_ERR_INVALID, "more than %d plugins in one process", PL_MAX);
    dlerror();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        return dp_error(DP_ERR_INVALID, "plugin %s: cannot load: %s", path, e ? e : "unknown dlopen error");
    }
    static const char *const syms[] = {"dpcert_backend_abi_version", "dpcert_backend_query", "dpcert_backend_create"};
    void *fn[3];
    char missing[200] = "";
    for (int i = 0; i < 3; i++) {
        fn[i] = dlsym(h, syms[i]);
        if (!fn[i]) snprintf(missing + strlen(missing), sizeof missing - strlen(missing), "%s%s", missing[0] ? ", " : "", syms[i]);
    }
    if (missing[0]) {
        dlclose(h);
        return dp_error(DP_ERR_INVALID, "plugin %s: missing entry point(s) %s (a plugin exports the three functions of "
                        "dpcert_backend.h, docs/plugin-abi.md)", path, missing);
    }
    pl_version_fn ver;
    pl_query_fn query;
    pl_create_fn create;
    memcpy(&ver, &fn[0], sizeof ver);
    memcpy(&query, &fn[1], sizeof query);
    memcpy(&create, &fn[2], sizeof create);
    uint32_t v = ver();
    if (v != DPCERT_BACKEND_ABI_VERSION) {
        dlclose(h);
        return dp_error(DP_ERR_INVALID, "plugin %s was built for plugin ABI version %u; this dpcert implements version %u "
                        "(rebuild it against optimized/plugin/dpcert_backend.h, docs/plugin-abi.md \"Versioning\")", path, v,
                        DPCERT_BACKEND_ABI_VERSION);
    }
    pl_lib *L = &pl_libs[pl_nlibs];
    memset(L, 0, sizeof *L);
    dp_clear_error();
    dpcert_status qs = query(&L->caps);
    dp_status st = DP_OK;
    if (qs != DPCERT_OK)
        st = dp_error(DP_ERR_INVALID, "plugin %s: dpcert_backend_query failed (status %d)%s%s", path, (int)qs,
                      dp_last_error()[0] ? ": " : "", dp_last_error());
    if (st == DP_OK) st = pl_check_caps(path, &L->caps);
    if (st != DP_OK) { dlclose(h); return st; }
    snprintf(L->path, sizeof L->path, "%s", path);
    L->handle = h;
    L->create = create;
    pl_nlibs++;
    *out = L;
    return DP_OK;
}

dp_status opt_plugin_probe(const char *spec, opt_backend_decl *decl) {
    pl_lib *L;
    DP_TRY(pl_load(&L, spec));
    if (decl) {
        memset(decl, 0, sizeof *decl);
        decl->caps = L->caps;
        snprintf(decl->origin, sizeof decl->origin, "plugin %s", L->path);
    }
    return DP_OK;
}

/* ---- the plugin backend: routes, forwarding functions, crash guard ---- */
typedef struct {
    const opt_backend_ops *ops; /* the table that implements the operation (NULL: none) */
    void *ctx;
    int plugin;                 /* 1: the plugin's own code */
} opt_pl_route;
typedef struct {
    opt_pl_route route[OPT_OP_COUNT];
    opt_backend_ops plugin_ops; /* the plugin's table, as the engine's type (layouts checked above) */
    void *plugin_ctx;
    opt_backend host;           /* inherited host backend (inherit_host), else unused */
    int have_host;
    char name[40];              /* the declaration's name (crash messages) */
    char label[48];             /* be->name: "plugin:NAME" */
} opt_pl_ctx;

/* The plugin operation running now (the crash guard names it): -1 = none. */
static volatile sig_atomic_t opt_pl_cur_op = -1;
static const char *volatile opt_pl_cur_plugin = "";

static const opt_pl_route *opt_pl_enter(void *ctx, opt_op op) {
    const opt_pl_route *r = &((opt_pl_ctx *)ctx)->route[op];
    if (r->plugin) {
        opt_pl_cur_plugin = ((opt_pl_ctx *)ctx)->name;
        opt_pl_cur_op = op;
        dp_clear_error();
    }
    return r;
}
static dp_status opt_pl_leave(const opt_pl_route *r, opt_op op, dp_status st) {
    if (!r->plugin) return st;
    opt_pl_cur_op = -1;
    if ((int)st < (int)DP_OK || (int)st > (int)DP_ERR_DEVICE)
        return dp_error(DP_ERR_INTERNAL, "plugin '%s' operation '%s' returned %d, not a dpcert_status",
                        (const char *)opt_pl_cur_plugin, opt_op_name(op), (int)st);
    if (st == DP_OK) return st;
    if (!dp_last_error()[0])
        return dp_error(st, "plugin '%s' operation '%s' failed: %s", (const char *)opt_pl_cur_plugin, opt_op_name(op),
                        dp_status_name(st));
    return dp_error_context(st, "plugin '%s' operation '%s'", (const char *)opt_pl_cur_plugin, opt_op_name(op));
}
static void opt_pl_leave_void(const opt_pl_route *r) {
    if (r->plugin) opt_pl_cur_op = -1;
}

#include "opt_plugin_fwd.inc"

static void pl_write(const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t w = write(2, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}
static const int pl_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define PL_NSIG (sizeof pl_signals / sizeof pl_signals[0])
static struct sigaction pl_old[PL_NSIG];
static void pl_on_signal(int sig) {
    int op = (int)opt_pl_cur_op;
    size_t k = 0;
    while (k < PL_NSIG && pl_signals[k] != sig) k++;
    if (op < 0 || k == PL_NSIG) { /* not in a plugin operation: the previous handler, or the default */
        if (k < PL_NSIG) sigaction(sig, &pl_old[k], NULL);
        else signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    const char *sn = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE"
                   : sig == SIGILL ? "SIGILL" : "SIGABRT";
    pl_write("dpcert: plugin '");
    pl_write((const char *)opt_pl_cur_plugin);
    pl_write("' crashed in operation '");
    pl_write(op == OPT_OP_COUNT ? "dpcert_backend_create" : opt_op_name((opt_op)op));
    pl_write("' (");
    pl_write(sn);
    pl_write("): the run ends with exit 3\n");
    _exit(3);
}
static void pl_install_guard(void) {
    static int done;
    if (done) return;
    done = 1;
    static char *altstack;
    if (!altstack && (altstack = dp_malloc(1 << 16))) {
        stack_t ss = {.ss_sp = altstack, .ss_size = 1 << 16, .ss_flags = 0};
        sigaltstack(&ss, NULL);
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = pl_on_signal;
    sa.sa_flags = SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < PL_NSIG; i++) sigaction(pl_signals[i], &sa, &pl_old[i]);
}

static dpcert_status pl_host_error(dpcert_status st, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "(no message)", ap);
    va_end(ap);
    dp_error((dp_status)st, "%s", msg);
    return st;
}

static void pl_destroy(void *ctx) {
    opt_pl_ctx *c = ctx;
    if (!c) return;
    if (c->plugin_ctx && c->plugin_ops.destroy) c->plugin_ops.destroy(c->plugin_ctx);
    if (c->have_host && c->host.ops.destroy) c->host.ops.destroy(c->host.ctx);
    dp_free(c);
}

/* The filled entries must be exactly the declared ones. */
static dp_status pl_check_table(const char *path, const dpcert_caps *caps, const opt_backend_ops *t) {
    opt_backend probe;
    memset(&probe, 0, sizeof probe);
    probe.ops = *t;
    char lied[512] = "", extra[512] = "";
    for (int op = 0; op < OPT_OP_COUNT; op++) {
        int has = opt_backend_supports(&probe, (opt_op)op);
        char *dst = caps->ops[op] && !has ? lied : !caps->ops[op] && has ? extra : NULL;
        if (dst && strlen(dst) < 400)
            snprintf(dst + strlen(dst), 512 - strlen(dst), "%s%s", dst[0] ? ", " : "", opt_op_name((opt_op)op));
    }
    if (lied[0])
        return dp_error(DP_ERR_INVALID, "plugin %s ('%s'): declares operations its table leaves NULL: %s (a table it "
                        "claims but does not fill)", path, caps->name, lied);
    if (extra[0])
        return dp_error(DP_ERR_INVALID, "plugin %s ('%s'): fills operations its declaration does not list: %s", path,
                        caps->name, extra);
    if (!t->destroy) return dp_error(DP_ERR_INVALID, "plugin %s ('%s'): ops->destroy is NULL", path, caps->name);
    return DP_OK;
}

dp_status opt_plugin_backend_create(opt_backend *be, const opt_backend_config *cfg, const char *spec) {
    pl_lib *L;
    DP_TRY(pl_load(&L, spec));
    const dpcert_caps *caps = &L->caps;
    if (!(caps->dtypes & DPCERT_DTYPE_BIT(cfg->dtype)))
        return dp_error(DP_ERR_NOT_SUPPORTED, "plugin '%s' (%s) does not declare dtype %s", caps->name, L->path,
                        dp_dtype_name(cfg->dtype));
    opt_pl_ctx *c = dp_calloc(1, sizeof *c);
    opt_backend_decl *decl = dp_calloc(1, sizeof *decl);
    if (!c || !decl) { dp_free(c); dp_free(decl); return DP_ERR_NOMEM; }
    snprintf(c->name, sizeof c->name, "%s", caps->name);
    snprintf(c->label, sizeof c->label, "plugin:%s", caps->name);
    decl->caps = *caps;
    snprintf(decl->origin, sizeof decl->origin, "plugin %s", L->path);
    dp_status st = DP_OK;
    int rank = 0, size = 1;
    if (caps->inherit_host) { /* the host backend first: it owns the communicator the plugin is told about */
        st = opt_backend_host_create(&c->host, cfg);
        if (st == DP_OK) { c->have_host = 1; rank = c->host.comm.rank; size = c->host.comm.size; }
    } else if (cfg->use_mpi) {
        opt_backend tmp;
        memset(&tmp, 0, sizeof tmp);
        st = opt_backend_host_create(&tmp, cfg); /* rank and size of MPI_COMM_WORLD */
        if (st == DP_OK) { rank = tmp.comm.rank; size = tmp.comm.size; tmp.ops.destroy(tmp.ctx); }
    }
    if (st == DP_OK && size > 1 && !caps->inherit_host && caps->collectives == DPCERT_COLLECTIVES_NONE)
        st = dp_error(DP_ERR_NOT_SUPPORTED, "plugin '%s' declares no collectives (DPCERT_COLLECTIVES_NONE) and does not "
                      "inherit the host's: it runs on one rank only (%d ranks here)", caps->name, size);
    dpcert_backend_ops pops;
    memset(&pops, 0, sizeof pops);
    if (st == DP_OK) {
        pl_install_guard();
        dpcert_backend_config pc = {(dpcert_dtype)cfg->dtype, cfg->threads, rank, size, cfg->use_mpi};
        dpcert_host host = {DPCERT_BACKEND_ABI_VERSION, pl_host_error};
        dp_clear_error();
        opt_pl_cur_plugin = c->name;
        opt_pl_cur_op = OPT_OP_COUNT; /* the guard names "dpcert_backend_create" */
        dpcert_status cs = L->create(&pops, &c->plugin_ctx, &pc, &host);
        opt_pl_cur_op = -1;
        if (cs != DPCERT_OK) {
            dp_status s2 = (int)cs > (int)DP_OK && (int)cs <= (int)DP_ERR_DEVICE ? (dp_status)cs : DP_ERR_INTERNAL;
            st = dp_last_error()[0] ? dp_error_context(s2, "plugin '%s' (%s): create", caps->name, L->path)
                                    : dp_error(s2, "plugin '%s' (%s): create failed (status %d)", caps->name, L->path,
                                               (int)cs);
            c->plugin_ctx = NULL;
        }
    }
    if (st == DP_OK) {
        memcpy(&c->plugin_ops, &pops, sizeof pops);
        st = pl_check_table(L->path, caps, &c->plugin_ops);
    }
    if (st != DP_OK) {
        if (c->plugin_ctx && pops.destroy) pops.destroy(c->plugin_ctx);
        c->plugin_ctx = NULL;
        pl_destroy(c);
        dp_free(decl);
        return st;
    }
    opt_backend probe;
    memset(&probe, 0, sizeof probe);
    probe.ops = c->plugin_ops;
    for (int op = 0; op < OPT_OP_COUNT; op++) {
        if (opt_backend_supports(&probe, (opt_op)op)) c->route[op] = (opt_pl_route){&c->plugin_ops, c->plugin_ctx, 1};
        else if (c->have_host && opt_backend_supports(&c->host, (opt_op)op))
            c->route[op] = (opt_pl_route){&c->host.ops, c->host.ctx, 0};
    }
    memset(be, 0, sizeof *be);
    be->name = c->label;
    be->dtype = cfg->dtype;
    be->threads = cfg->threads;
    be->comm.rank = rank;
    be->comm.size = size;
    be->ctx = c;
    opt_pl_fwd_fill(&be->ops);
    for (int op = 0; op < OPT_OP_COUNT; op++)
        if (!c->route[op].ops) opt_pl_fwd_clear(&be->ops, (opt_op)op);
    be->ops.destroy = pl_destroy;
    be->decl = decl;
    return DP_OK;
}

/* conformance/reproduce/repro_html.c — the report page of a `reproduce` target
 * (repro_html), built from the blocks of common/html.h (docs/reports.md). */
#include <jansson.h>
#include <string.h>

#include "common/html.h"
#include "common/svg.h"
#include "conformance/reproduce/repro.h"

#define esc dp_svg_escape

/* The per-kind summary of repro_finish as a table (docs/reproduce.md "Kinds"). */
static void repro_summary_table(FILE *f, const json_t *root) {
    static const char *const keys[] = {"kind", "rows", "match", "differs", "not_run", "other", "counts"};
    json_t *cols = json_array(), *rows = json_array();
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) json_array_append_new(cols, json_string(keys[i]));
    const json_t *s = json_object_get(root, "summary");
    for (int k = 0; k < REPRO_N_KINDS; k++) {
        const json_t *c = json_object_get(s, repro_kind_name((repro_kind)k));
        if (!c) continue;
        json_t *o = json_deep_copy(c);
        json_object_set_new(o, "kind", json_string(repro_kind_name((repro_kind)k)));
        json_object_set_new(o, "counts", json_string(repro_kind_counts((repro_kind)k)
                                                         ? "as reproduced" : "not as reproduced"));
        json_array_append_new(rows, o);
    }
    dp_html_table(f, cols, rows);
    json_decref(cols);
    json_decref(rows);
}

dp_status repro_html(const char *path, const json_t *root) {
    dp_afile af;
    DP_TRY(dp_html_open(&af, path));
    FILE *f = af.f;
    const json_t *s = json_object_get(root, "summary");
    const char *v = json_string_value(json_object_get(root, "verdict"));
    char title[256], verdict[192];
    snprintf(title, sizeof title, "dpcert reproduce %s", json_string_value(json_object_get(root, "target")));
    snprintf(verdict, sizeof verdict, "%s: %lld of %lld independent and measured row(s) match; %lld row(s) differ, "
             "%lld not run", v ? v : "?", (long long)json_integer_value(json_object_get(s, "reproduced")),
             (long long)json_integer_value(json_object_get(s, "reproducible")),
             (long long)json_integer_value(json_object_get(s, "differ")),
             (long long)json_integer_value(json_object_get(s, "not_run")));
    dp_html_begin(f, title, verdict, v && strcmp(v, "REPRODUCED") == 0);
    fputs("<p>", f);
    esc(f, json_string_value(json_object_get(root, "paper")));
    fputs(" &mdash; ", f);
    esc(f, json_string_value(json_object_get(root, "tables")));
    fputs("<br>", f);
    esc(f, json_string_value(json_object_get(root, "modelled_vs_measured")));
    fputs("</p>\n", f);
    dp_html_heading(f, "Rows by kind");
    repro_summary_table(f, root);
    dp_html_plots(f, "Plots", json_object_get(root, "plots")); /* a plot never decides: notes */
    const json_t *cols = json_object_get(root, "columns");
    json_t *dflt = NULL;
    if (!cols) { /* dpzo-tables: its rows' keys */
        static const char *const k[] = {"table", "mechanism", "sigma", "q", "steps", "delta", "paper_epsilon",
                                        "ours_rdp", "ours_pld_lower", "ours_pld_upper", "kind", "verdict"};
        dflt = json_array();
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) json_array_append_new(dflt, json_string(k[i]));
        cols = dflt;
    }
    dp_html_heading(f, "Side by side");
    dp_html_table(f, cols, json_object_get(root, "rows"));
    json_decref(dflt);
    size_t i;
    const json_t *t;
    json_array_foreach(json_object_get(root, "extra_tables"), i, t) {
        dp_html_heading(f, json_string_value(json_object_get(t, "title")));
        dp_html_table(f, json_object_get(t, "columns"), json_object_get(t, "rows"));
    }
    const json_t *cv = json_object_get(root, "caveats");
    if (json_array_size(cv)) {
        dp_html_heading(f, "Caveats");
        dp_html_list(f, cv);
    }
    dp_html_end(f);
    return dp_html_commit(&af, DP_OK);
}

/* conformance/repro.h — `dpcert reproduce` targets (docs/reproduce.md).
 *
 * A target fills a JSON object: "columns" (the keys of a row, in print order), "rows"
 * (objects with those keys, a "verdict" and, when it differs, a "reason"), "plots"
 * (specifications that dp_html_plot renders, common/html.h), "caveats"; the command prints the
 * side-by-side table, the JSON or the report from that object. */
#ifndef CONF_REPRO_H
#define CONF_REPRO_H

#include <jansson.h>
#include <stdio.h>

#include "common/html.h"
#include "common/status.h"

typedef struct {
    json_t *root;  /* the target's object */
    int not_reproduced; /* rows whose verdict starts with "differs" */
} conf_repro;

/* Column keys of the rows, in order (NULL-terminated). */
void conf_repro_columns(conf_repro *r, const char *const *keys);
/* A new row appended to "rows"; verdict "match", "differs", "n/a (computed)", ...; a
 * verdict starting with "differs" counts as not reproduced and needs a reason. */
json_t *conf_repro_row(conf_repro *r, const char *verdict, const char *reason);
void conf_repro_caveat(conf_repro *r, const char *text);

/* The targets (conformance/repro_memory.c, conformance/repro_accounting.c): each returns
 * DP_OK having filled r, or an error status with dp_error set. */
dp_status conf_repro_dpzo_tables(conf_repro *r, FILE *txt);
dp_status conf_repro_longshield_table2(conf_repro *r, FILE *txt);
dp_status conf_repro_longshield_memory(conf_repro *r, FILE *txt);
dp_status conf_repro_dp_zero_memory(conf_repro *r, FILE *txt);
dp_status conf_repro_flashdp_memory(conf_repro *r, FILE *txt);
dp_status conf_repro_dp_zero_losscale(conf_repro *r, FILE *txt); /* conformance/repro_losscale.c */

#endif

/* conformance/compare/compare_json.c — the JSON form of a comparison (docs/conformance.md
 * "report.json"): the per-tensor results of one case, as report.json and `compare --json`
 * write them. */
#include <jansson.h>
#include <math.h>

#include "conformance/compare/compare.h"

json_t *conf_json_num(double v) { return isfinite(v) ? json_real(v) : json_null(); }


static json_t *tensor_json(const conf_tensor_result *t) {
    json_t *o = json_object();
    json_object_set_new(o, "tensor", json_string(t->name));
    json_object_set_new(o, "status", json_string(conf_status_name(t->status)));
    json_object_set_new(o, "fraction", conf_json_num(t->worst_frac));
    json_object_set_new(o, "max_abs_err", conf_json_num(t->max_abs_err));
    json_object_set_new(o, "numel", json_integer(t->numel));
    json_object_set_new(o, "worst_index", json_integer(t->worst_index));
    json_object_set_new(o, "reference", conf_json_num(t->ref_val));
    json_object_set_new(o, "candidate", conf_json_num(t->cand_val));
    json_object_set_new(o, "bound", conf_json_num(t->bound));
    json_object_set_new(o, "message", json_string(t->msg));
    return o;
}

json_t *conf_cmp_json(const conf_cmp_result *r) {
    json_t *o = json_object(), *a = json_array();
    json_object_set_new(o, "status", json_string(conf_status_name(r->status)));
    json_object_set_new(o, "fraction", conf_json_num(r->worst_frac));
    json_object_set_new(o, "first_fail", json_string(r->first_fail));
    json_object_set_new(o, "arithmetic", json_string(r->arith)); /* the declaration it was judged under */
    for (size_t i = 0; i < r->n; i++) json_array_append_new(a, tensor_json(&r->items[i]));
    json_object_set_new(o, "tensors", a);
    return o;
}


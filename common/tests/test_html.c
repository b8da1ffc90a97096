/* common/tests/test_html.c — the HTML page blocks (common/html.h): each plot kind of the
 * JSON specification renders one <svg>, bad specifications are rejected by name (never
 * drawn half), tables class verdict cells and escape text, the page has no script and its
 * CSP, and report.html is written atomically (no temporary file left, abort leaves nothing). */
#include <string.h>
#include <unistd.h>

#include "common/html.h"
#include "common/test.h"

static char *buf;
static size_t len;

static FILE *open_buf(void) { return t_memstream(&buf, &len); }
#define count t_count

/* renders spec text; returns the status, buf holds the output */
static dp_status render(const char *spec) {
    json_error_t je;
    json_t *j = json_loads(spec, 0, &je);
    T_CHECK(j != NULL, "spec parses: %s", je.text);
    FILE *f = open_buf();
    dp_status st = dp_html_plot(f, j);
    fclose(f);
    json_decref(j);
    return st;
}

int main(void) {
    /* every kind */
    T_OK(render("{\"kind\":\"line\",\"title\":\"t\",\"series\":[{\"name\":\"a\",\"x\":[1,2],\"y\":[3,null]}]}"));
    T_CHECK(count(buf, "<svg") == 1 && count(buf, "class=\"plot\"") == 1, "line: one svg in a plot div");
    T_OK(render("{\"kind\":\"bars\",\"title\":\"b\",\"labels\":[\"x\",\"y\"],\"values\":[0.5,2],\"ref\":1}"));
    T_CHECK(count(buf, "<svg") == 1, "bars: one svg");
    T_OK(render("{\"kind\":\"histogram\",\"title\":\"h\",\"edges\":[0,1,2,3],\"heights\":[1,4,2],"
                "\"series\":[{\"name\":\"density\",\"x\":[0,1.5,3],\"y\":[1,4,1]}]}"));
    T_CHECK(count(buf, "<svg") == 1 && count(buf, "<rect") >= 3 && strstr(buf, "density"), "histogram: bins and overlay");
    T_OK(render("{\"kind\":\"roc\",\"title\":\"r\",\"epsilon\":1,\"delta\":1e-5,"
                "\"series\":[{\"name\":\"attack\",\"x\":[0,0.5,1],\"y\":[0,0.7,1]},"
                "{\"name\":\"trade-off\",\"x\":[0,1],\"y\":[0,1],\"dashed\":true}]}"));
    T_CHECK(count(buf, "<svg") == 1 && strstr(buf, "DP bound") && strstr(buf, "stroke-dasharray=\"7 4\""),
            "roc: bound and a dashed curve");
    T_OK(render("{\"kind\":\"roc\",\"title\":\"r\",\"epsilon\":null,\"series\":[{\"name\":\"a\",\"x\":[0,1],\"y\":[0,1]}]}"));
    T_CHECK(!strstr(buf, "DP bound"), "roc: no bound without epsilon");
    /* bad specifications: an error naming the problem */
    T_CHECK(render("{\"kind\":\"pie\"}") == DP_ERR_INVALID && strstr(dp_last_error(), "pie"), "unknown kind: %s",
            dp_last_error());
    T_CHECK(render("{\"kind\":\"histogram\",\"title\":\"h\",\"edges\":[0,1],\"heights\":[1,2]}") == DP_ERR_INVALID &&
                strstr(dp_last_error(), "edges"), "edges count: %s", dp_last_error());
    T_CHECK(render("{\"kind\":\"line\",\"title\":\"t\",\"series\":[{\"x\":[1,2],\"y\":[1]}]}") == DP_ERR_INVALID,
            "x/y lengths differ");
    T_CHECK(render("{\"kind\":\"roc\",\"title\":\"t\",\"series\":[{\"x\":[0,2],\"y\":[0,1]}]}") == DP_ERR_INVALID,
            "ROC point outside the unit square");
    /* page and table */
    FILE *f = open_buf();
    dp_html_begin(f, "<title>", "PASS: all", 1);
    json_t *cols = json_pack("[ss]", "case", "verdict"), *rows = json_pack("[{ss ss ss}{ss ss}]", "case", "a&b",
                                                                          "verdict", "differs (x)", "reason", "why<",
                                                                          "case", "c", "verdict", "match");
    dp_html_table(f, cols, rows);
    json_t *li = json_pack("[s]", "item <1>");
    dp_html_list(f, li);
    dp_html_end(f);
    fclose(f);
    json_decref(cols); json_decref(rows); json_decref(li);
    T_CHECK(strstr(buf, "default-src 'none'") && !strstr(buf, "<script"), "CSP and no script");
    T_CHECK(strstr(buf, "&lt;title&gt;") && strstr(buf, "a&amp;b") && strstr(buf, "why&lt;") && strstr(buf, "item &lt;1&gt;"),
            "escaping");
    T_CHECK(strstr(buf, "<td class=\"differs\">differs (x): why&lt;</td>") && strstr(buf, "<td class=\"match\">"),
            "verdict cells classed, reason shown");
    T_CHECK(strstr(buf, "class=\"verdict ok\"") != NULL, "verdict ok");
    /* atomic files */
    char dir[] = "/tmp/dpcert-html-XXXXXX";
    T_CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    dp_afile af;
    T_OK(dp_html_open_in(&af, dir));
    dp_html_begin(af.f, "x", "FAIL", 0);
    dp_html_end(af.f);
    T_CHECK(dp_html_commit(&af, DP_ERR_INVALID) == DP_ERR_INVALID, "commit passes an error through");
    char p[64];
    snprintf(p, sizeof p, "%s/report.html", dir);
    T_CHECK(access(p, F_OK) != 0, "aborted page not written");
    T_OK(dp_html_open_in(&af, dir));
    dp_html_begin(af.f, "x", "PASS", 1);
    dp_html_end(af.f);
    T_OK(dp_html_commit(&af, DP_OK));
    T_CHECK(access(p, F_OK) == 0, "committed page written");
    remove(p);
    rmdir(dir);
    T_CHECK(access(dir, F_OK) != 0, "no temporary file left in the directory");
    free(buf);
    return t_finish();
}

/* common/tests/test_html.c — the HTML page blocks (common/html.h): each plot kind of the
 * JSON specification renders one <svg>; a bad specification or degenerate data (one point,
 * all zeros, NaN, infinities, 10,000 bars, 0 on a log axis: issue 29 item 14) never fails the
 * page and is never drawn half: it becomes a note naming the plot and the reason (DP_OK);
 * tables class verdict cells and escape text, the page has no script and its CSP, and
 * report.html is written atomically (no temporary file left, abort leaves nothing). */
#include <math.h>
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
    /* bad specifications: a note naming the plot and the problem, no <svg>, DP_OK */
#define NOTE_ONLY(spec, pat, what)                                                                                     \
    do {                                                                                                               \
        T_CHECK(render(spec) == DP_OK, "%s: status", what);                                                            \
        T_CHECK(count(buf, "<svg") == 0 && strstr(buf, "class=\"note\"") && strstr(buf, pat), "%s: %s", what, buf);   \
    } while (0)
    NOTE_ONLY("{\"kind\":\"pie\",\"title\":\"P\"}", "plot 'P': not drawn: plot kind &#39;pie&#39;", "unknown kind");
    NOTE_ONLY("{\"kind\":\"histogram\",\"title\":\"h\",\"edges\":[0,1],\"heights\":[1,2]}", "edges", "edges count");
    NOTE_ONLY("{\"kind\":\"line\",\"title\":\"t\",\"series\":[{\"x\":[1,2],\"y\":[1]}]}", "x values", "x/y lengths differ");
    NOTE_ONLY("{\"kind\":\"roc\",\"title\":\"t\",\"series\":[{\"x\":[0,2],\"y\":[0,1]}]}", "outside", "ROC point outside");
    /* degenerate data */
    NOTE_ONLY("{\"kind\":\"line\",\"title\":\"n\",\"series\":[{\"x\":[1,2],\"y\":[null,null]}]}", "no finite y",
              "all NaN");
    NOTE_ONLY("{\"kind\":\"line\",\"title\":\"e\",\"series\":[]}", "series", "no series");
    T_OK(render("{\"kind\":\"line\",\"title\":\"one\",\"series\":[{\"x\":[1],\"y\":[1]}]}"));
    T_CHECK(count(buf, "<svg") == 1, "one point: drawn");
    T_OK(render("{\"kind\":\"bars\",\"title\":\"z\",\"labels\":[\"a\",\"b\"],\"values\":[0,0],\"ref\":1}"));
    T_CHECK(count(buf, "<svg") == 1, "all zeros: drawn");
    T_OK(render("{\"kind\":\"bars\",\"title\":\"z\",\"labels\":[\"a\"],\"values\":[0]}"));
    T_CHECK(count(buf, "<svg") == 1, "one zero bar, no reference: drawn");
    /* epsilon 0 on a log axis (issue 27: certify of a candidate with 1000x the noise): the points
     * are left out, the rest drawn, and the page says how many */
    T_OK(render("{\"kind\":\"line\",\"title\":\"eps\",\"xlog\":10,\"ylog\":10,\"series\":[{\"x\":[1,10,100],"
                "\"y\":[0.5,0,2]},{\"x\":[1,10],\"y\":[0,0]}]}"));
    T_CHECK(count(buf, "<svg") == 1 && strstr(buf, "3 values &lt;= 0 not drawn on the logarithmic axis"), "log zeros: %s",
            buf);
    NOTE_ONLY("{\"kind\":\"line\",\"title\":\"eps0\",\"ylog\":10,\"series\":[{\"x\":[1,10],\"y\":[0,0]}]}",
              "no finite y", "every value 0 on a log axis");
    /* 10,000 bars: more than a bar chart shows; a note, the page goes on */
    {
        json_t *v = json_array(), *l = json_array();
        for (int i = 0; i < 10000; i++) {
            json_array_append_new(v, i % 3 ? json_real(i * 1e-4) : i % 7 ? json_null() : json_real(INFINITY));
            json_array_append_new(l, json_string("c"));
        }
        json_t *j = json_pack("{ss ss so so}", "kind", "bars", "title", "big", "values", v, "labels", l);
        FILE *f = open_buf();
        T_OK(dp_html_plot(f, j));
        fclose(f);
        json_decref(j);
        T_CHECK(j && count(buf, "<svg") == 0 && strstr(buf, "1..512 bars, got "), "10,000 bars: a note: %.300s", buf);
    }
    /* a note specification */
    {
        json_t *plots = json_array();
        T_CHECK(dp_html_note_new(plots, "batch sizes of v", "out of memory") != NULL, "note spec");
        FILE *f = open_buf();
        T_OK(dp_html_plots(f, "Plots", plots));
        fclose(f);
        json_decref(plots);
        T_CHECK(strstr(buf, "plot 'batch sizes of v': out of memory") != NULL, "note rendered: %s", buf);
    }
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

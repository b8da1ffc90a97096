/* common/tests/test_status_escape.c — how common/status.c writes a message (docs/development.md:
 * messages name the value and the reason, no fixed buffer cuts a value silently): valid UTF-8 of
 * 2, 3 and 4 bytes is kept as is; control bytes, DEL and every byte outside valid UTF-8 (overlong
 * forms, surrogates, code points past U+10FFFF, lone continuation bytes, a sequence cut by the
 * end) become \xHH; a message longer than DP_ERR_MAX keeps its head and tail around
 * "[... N bytes ...]" with N the escaped bytes left out, never splitting a character or an escape;
 * a context prefix over an empty message names the status; every status has a name and an exit
 * code; errno values map to 2 (the user's path) or 3 (the system). Each check compares exact
 * strings: a wrong rule (a byte kept that must be escaped, a split character, a wrong count)
 * fails it. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/status.h"
#include "common/test.h"

/* message of dp_error("%s", in) equals want */
static void escaped(const char *in, const char *want, const char *what) {
    dp_error(DP_ERR_INVALID, "%s", in);
    T_CHECK(strcmp(dp_last_error(), want) == 0, "%s: got '%s', want '%s'", what, dp_last_error(), want);
}

/* the escaped message minus the marker is made of whole copies of unit (a character or an
 * escape), and the marker reports the bytes left out */
static void cut_whole(const char *unit, size_t copies, const char *what) {
    static char in[3 * DP_ERR_MAX];
    const size_t ul = strlen(unit);
    size_t n = 0;
    for (size_t i = 0; i < copies; i++, n += ul) memcpy(in + n, unit, ul);
    in[n] = 0;
    dp_error(DP_ERR_INVALID, "%s", in);
    const char *m = dp_last_error(), *mk = strstr(m, "[... ");
    const size_t ml = strlen(m);
    T_CHECK(ml <= DP_ERR_MAX && mk != NULL, "%s: %zu bytes with a marker", what, ml);
    if (!mk) return;
    size_t left = 0;
    const char *end = strstr(mk, " bytes ...]");
    T_CHECK(end && sscanf(mk, "[... %zu bytes ...]", &left) == 1, "%s: marker '%.30s'", what, mk);
    if (!end) return;
    end += strlen(" bytes ...]");
    const size_t head = (size_t)(mk - m), tail = strlen(end);
    /* the escaped length of one unit: the unit itself, or 4 per byte when it is escaped */
    dp_error(DP_ERR_INVALID, "%s", unit);
    const size_t uw = strlen(dp_last_error());
    T_CHECK(head % uw == 0 && tail % uw == 0, "%s: head %zu and tail %zu are whole units of %zu", what, head, tail, uw);
    T_CHECK(head + left + tail == copies * uw, "%s: head %zu + left out %zu + tail %zu = %zu escaped bytes", what, head,
            left, tail, copies * uw);
}

int main(void) {
    escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9d\x84\x9e", "2-, 3- and 4-byte UTF-8 kept");
    escaped("a\nb\tc\x7f" "d\x1b[31m", "a\\x0ab\\x09c\\x7fd\\x1b[31m", "control bytes and DEL escaped");
    escaped("x\xe0\x80\x80y", "x\\xe0\\x80\\x80y", "overlong 3-byte form escaped");
    escaped("\xed\xa0\x80", "\\xed\\xa0\\x80", "UTF-16 surrogate escaped");
    escaped("\xf0\x80\x80\x80", "\\xf0\\x80\\x80\\x80", "overlong 4-byte form escaped");
    escaped("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80", "past U+10FFFF escaped");
    escaped("\xf4\x8f\xbf\xbf", "\xf4\x8f\xbf\xbf", "U+10FFFF kept");
    escaped("\xf5\x80\x80\x80", "\\xf5\\x80\\x80\\x80", "lead byte 0xf5 escaped");
    escaped("\xc0\xaf\xc1\xbf", "\\xc0\\xaf\\xc1\\xbf", "overlong 2-byte lead bytes 0xc0, 0xc1 escaped");
    escaped("\x80z", "\\x80z", "lone continuation byte escaped");
    escaped("\xc3(", "\\xc3(", "a lead byte without its continuation escaped");
    escaped("end \xe2\x82", "end \\xe2\\x82", "a sequence cut by the end escaped");
    escaped("\xf0\x9d\x84", "\\xf0\\x9d\\x84", "a 4-byte sequence cut by the end escaped");

    /* long messages: head and tail of whole units around the marker */
    cut_whole("a", 20000, "ASCII");
    cut_whole("\xc3\xa9", 6001, "2-byte characters");
    cut_whole("\xe2\x82\xac", 4001, "3-byte characters");
    cut_whole("\xff", 5003, "escapes (\\xff)");
    {   /* exact: 20000 'a' then "END": room 8192 - 1 - 40, head 4075, tail 4076 */
        static char in[20004];
        memset(in, 'a', 20000);
        memcpy(in + 20000, "END", 4);
        dp_error(DP_ERR_INVALID, "%s", in);
        const char *m = dp_last_error();
        const size_t room = DP_ERR_MAX - 40, head = room / 2, tail = room - head;
        char marker[64];
        snprintf(marker, sizeof marker, "[... %zu bytes ...]", (size_t)20003 - head - tail);
        T_CHECK(strlen(m) == head + strlen(marker) + tail && strncmp(m + head, marker, strlen(marker)) == 0 &&
                    strcmp(m + strlen(m) - 3, "END") == 0,
                "20003 bytes: %zu kept, marker at %zu ('%.24s'), tail '%s'", strlen(m), head, m + head,
                m + strlen(m) - 3);
    }
    escaped("short", "short", "a short message is unchanged");

    /* a context prefix over no message names the status; over one, prefixes it (escaped) */
    dp_clear_error();
    T_CHECK(dp_error_context(DP_ERR_IO, "f.txt") == DP_ERR_IO && strcmp(dp_last_error(), "f.txt: i/o error") == 0,
            "context over an empty message: %s", dp_last_error());
    dp_error(DP_ERR_FORMAT, "bad line");
    dp_error_context(DP_ERR_FORMAT, "dir\n/f.txt");
    T_CHECK(strcmp(dp_last_error(), "dir\\x0a/f.txt: bad line") == 0, "context escaped: %s", dp_last_error());

    /* every status: a name and its exit code */
    static const struct { dp_status st; const char *name; int code; } all[] = {
        {DP_OK, "ok", 0}, {DP_ERR_USAGE, "usage error", 2}, {DP_ERR_INVALID, "invalid input", 2},
        {DP_ERR_FORMAT, "malformed input", 2}, {DP_ERR_IO, "i/o error", 2}, {DP_ERR_CHECK_FAILED, "check failed", 1},
        {DP_ERR_NOT_SUPPORTED, "not supported", 3}, {DP_ERR_NOMEM, "out of memory", 3},
        {DP_ERR_NUMERIC, "numerical error", 3}, {DP_ERR_INTERNAL, "internal error", 3},
        {DP_ERR_DEVICE, "device error", 3}, {DP_ERR_SYSIO, "system i/o failure", 3},
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        T_CHECK(strcmp(dp_status_name(all[i].st), all[i].name) == 0 && dp_status_exit_code(all[i].st) == all[i].code,
                "%s -> '%s' exit %d", all[i].name, dp_status_name(all[i].st), dp_status_exit_code(all[i].st));
    T_CHECK(strcmp(dp_status_name((dp_status)999), "unknown status") == 0, "an unknown status is named so");

    /* errno: the user's path (exit 2) or the system (exit 3) */
    static const int user[] = {ENOENT, EACCES, EPERM, ENOTDIR, EISDIR, ENAMETOOLONG, ELOOP, EROFS, EEXIST, ENXIO, ETXTBSY, EINVAL};
    for (size_t i = 0; i < sizeof user / sizeof user[0]; i++)
        T_CHECK(dp_errno_status(user[i]) == DP_ERR_IO, "%s -> i/o error (exit 2)", strerror(user[i]));
    static const int sys[] = {EIO, ENOSPC, EDQUOT, ENOMEM, EMFILE, 0};
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++)
        T_CHECK(dp_errno_status(sys[i]) == DP_ERR_SYSIO, "%s -> system i/o failure (exit 3)", strerror(sys[i]));

    /* DP_GROW: a count whose bytes overflow size_t is refused before any allocation */
    {
        struct big { char b[64]; } *a = NULL;
        size_t cap = 0;
        T_CHECK(DP_GROW(a, cap, SIZE_MAX / 32, 1, "bigs") == DP_ERR_NOMEM && a == NULL && cap == 0,
                "element count x size overflow refused: %s", dp_last_error());
        T_CHECK(strstr(dp_last_error(), "bigs") != NULL, "the message names the array: %s", dp_last_error());
    }
    return t_finish();
}

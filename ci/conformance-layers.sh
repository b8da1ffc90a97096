#!/usr/bin/env bash
# ci/conformance-layers.sh — conformance/ is separate products (docs/architecture.md
# "conformance/: the products"): no circle among its subfolders, and none among the files of
# any one product (issue 26 item 4).
#
#   ci/conformance-layers.sh [--root DIR] [--build DIR]
#
# Edges between subfolders of DIR/conformance (compare, conform, certify, losscale,
# reproduce, plan, ...; tests, fuzz, adapters and cases are not products):
#   include  a file of A includes "conformance/B/..." (A != B);
#   call     an object of A (DIR-of-build/obj/conformance/A/*.o) has an undefined symbol
#            that an object of B defines (functions and data: a table is an arrow too).
# Edges between the files of one product (e.g. conformance/certify/): the call edges between
# its objects (a driver that also provides its helpers' helpers is a circle).
# The one file allowed at the top of conformance/ is commands.c, the module's command table
# (above every product; nothing calls it but main).
# A circle among the subfolders (include or call graph) or among one product's files is
# printed with tsort's loop and fails. Without --build (or when the build has no objects
# of conformance/) only the include graph is checked and the call check is reported as
# not run (exit 77 if nothing could be checked at all, never a pass by omission).
# Exit 0 no circle, 1 a circle, 2 bad usage, 77 nothing to check.
set -u -o pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=
while [ $# -gt 0 ]; do
    case $1 in
    --root) ROOT=${2:?--root needs a value}; shift 2 ;;
    --build) BUILD=${2:?--build needs a value}; shift 2 ;;
    *) echo "conformance-layers: unknown option '$1'" >&2; sed -n '2,20p' "$0" >&2; exit 2 ;;
    esac
done
CONF=$ROOT/conformance
[ -d "$CONF" ] || { echo "conformance-layers: no $CONF" >&2; exit 2; }
NOTPRODUCT='^(tests|fuzz|adapters|cases)$'
TMP=$(mktemp -d "${TMPDIR:-/tmp}/conf-layers-XXXXXX") || exit 2
trap 'rm -rf "$TMP"' EXIT

products=()
for d in "$CONF"/*/; do
    p=$(basename "$d")
    [[ $p =~ $NOTPRODUCT ]] || products+=("$p")
done
[ ${#products[@]} -gt 0 ] || { echo "conformance-layers: no product subfolders in $CONF"; exit 77; }
stray=$(find "$CONF" -maxdepth 1 -type f \( -name '*.c' -o -name '*.h' \) ! -name commands.c | sort)
if [ -n "$stray" ]; then
    echo "conformance-layers: files at the top of conformance/ (each belongs to a product subfolder):"
    echo "$stray"
    exit 1
fi

fail=0
# tsort on "a b" edge lines: a loop is reported on stderr
check_graph() { # $1 what, $2 edge file
    local n; n=$(wc -l < "$2")
    if ! tsort "$2" > /dev/null 2> "$TMP/tsort.err"; then
        echo "FAIL  $1: a circle ($n edges)"
        sed 's/^/      /' "$TMP/tsort.err"
        echo "      edges:"; sed 's/^/        /' "$2"
        fail=1
    else
        echo "ok    $1: no circle ($n edges)"
    fi
}

# ---- include graph between products ----
: > "$TMP/inc"
for p in "${products[@]}"; do
    grep -ho '#include "conformance/[a-z_]*/' -r "$CONF/$p" --include='*.c' --include='*.h' 2>/dev/null |
        sed 's|#include "conformance/||; s|/$||' | sort -u | while read -r q; do
            [ "$q" != "$p" ] && ! [[ $q =~ $NOTPRODUCT ]] && echo "$p $q"
        done
done | sort -u > "$TMP/inc"
check_graph "includes between conformance/ products" "$TMP/inc"

# ---- call graphs (objects) ----
OBJ=${BUILD:+$BUILD/obj/conformance}
if [ -z "$OBJ" ] || ! ls "$OBJ"/*/*.o > /dev/null 2>&1; then
    echo "NOT RUN calls: no objects (pass --build DIR of a build of this tree)"
    exit $([ $fail = 1 ] && echo 1 || echo 0)
fi
: > "$TMP/def"; : > "$TMP/und"
for p in "${products[@]}"; do
    for src in "$CONF/$p"/*.c; do
        [ -f "$src" ] || continue
        o=$OBJ/$p/$(basename "${src%.c}").o
        [ -f "$o" ] || { echo "NOT RUN calls: $o missing (build the tree first)"; exit 77; }
        nm --defined-only "$o" | awk -v f="$p/$(basename "$o")" '$2 ~ /^[TDRBGSV]$/ {print $3, f}' >> "$TMP/def"
        nm -u "$o" | awk -v f="$p/$(basename "$o")" '{print $2, f}' >> "$TMP/und"
    done
done
# file edges: user -> definer
awk 'NR == FNR {def[$1] = $2; next} ($1 in def) && def[$1] != $2 {print $2, def[$1]}' "$TMP/def" "$TMP/und" |
    sort -u > "$TMP/fcalls"
awk '{split($1, a, "/"); split($2, b, "/"); if (a[1] != b[1]) print a[1], b[1]}' "$TMP/fcalls" | sort -u > "$TMP/calls"
check_graph "calls between conformance/ products" "$TMP/calls"
for p in "${products[@]}"; do
    awk -v p="$p/" 'index($1, p) == 1 && index($2, p) == 1' "$TMP/fcalls" > "$TMP/calls-$p"
    check_graph "calls between the files of conformance/$p" "$TMP/calls-$p"
done
exit $fail

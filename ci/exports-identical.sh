#!/usr/bin/env bash
# ci/exports-identical.sh — are the exports of every conformance case byte-identical
# between a base revision and the working tree? (issue 26: a refactoring of the engine
# must not change one bit of what it exports.)
#
#   ci/exports-identical.sh BASE_REV [--suite all] [--filter REGEX] [--cache DIR] [--jobs N]
#
# 1. builds BASE_REV (git archive into a temporary folder) and the working tree (its own
#    build folder, build-exports/), each `build/dpcert` only, without the CUDA plugin
#    (HAVE_CUDA=0 for both: the conformance runs use the host backend);
# 2. runs `dpcert conform --suite S --keep` with each binary on its own revision's case
#    files (the reference and the candidate of every run: both directories are exports);
# 3. compares, for every run (CASE@rR) present in both, every file under its ref/ and
#    cand/ byte for byte (cmp), and the run's status in report.json.
# Runs that exist on one side only (cases added or removed) are listed, not compared.
# Exit 0 when every compared file and status is identical and at least one file was
# compared, 1 when something differs, 2 on bad usage, 3 when a build or a run failed.
# --cache DIR keeps the base build and its exports there (DIR/base-<rev>), so later calls
# with the same revision, suite and filter only rerun the working tree.
set -u -o pipefail

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
BASE=$1; shift
SUITE=all; FILTER=; CACHE=; JOBS=2
while [ $# -gt 0 ]; do
    case $1 in
    --suite) SUITE=${2:?--suite needs a value}; shift 2 ;;
    --filter) FILTER=${2:?--filter needs a value}; shift 2 ;;
    --cache) CACHE=${2:?--cache needs a value}; shift 2 ;;
    --jobs) JOBS=${2:?--jobs needs a value}; shift 2 ;;
    *) echo "exports-identical: unknown option '$1'" >&2; usage ;;
    esac
done
ROOT=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel) || exit 2
REV=$(git -C "$ROOT" rev-parse --verify "$BASE^{commit}" 2>/dev/null) || {
    echo "exports-identical: '$BASE' is not a commit of $ROOT" >&2; exit 2; }
SHORT=${REV:0:12}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dpcert-exports-XXXXXX") || exit 3
[ -n "$CACHE" ] || CACHE=$TMP
mkdir -p "$CACHE" || exit 3
KEY=$(printf '%s|%s' "$SUITE" "$FILTER" | sha256sum | cut -c1-12)
BDIR=$CACHE/base-$SHORT
trap 'rm -rf "$TMP"' EXIT

build() { # $1 source tree, $2 build folder (relative to the tree)
    if ! make -C "$1" -j"$JOBS" BUILD="$2" HAVE_CUDA=0 "$2/dpcert" >"$TMP/build-$(basename "$2").log" 2>&1; then
        echo "exports-identical: build of $1 failed (log below)" >&2
        tail -30 "$TMP/build-$(basename "$2").log" >&2
        exit 3
    fi
}

run_suite() { # $1 tree, $2 binary, $3 work folder; writes $3/report.json
    rm -rf "$3"
    mkdir -p "$3"
    local args=(conform --suite "$SUITE" --keep --work "$3/runs" --report "$3/report" --cases "$1/conformance/cases"
                --dpcert "$2")
    [ -n "$FILTER" ] && args+=(--filter "$FILTER")
    "$2" "${args[@]}" >"$3/conform.log" 2>&1
    local rc=$?
    if [ ! -f "$3/report/report.json" ]; then
        echo "exports-identical: conform with $2 wrote no report (exit $rc); log tail:" >&2
        tail -20 "$3/conform.log" >&2
        exit 3
    fi
    echo "  $(grep -E '^[0-9]+ runs: ' "$3/conform.log" | tail -1)"
}

# ---- base revision (cached) ----
if [ ! -x "$BDIR/src/build/dpcert" ]; then
    echo "exports-identical: building $SHORT"
    rm -rf "$BDIR/src"
    mkdir -p "$BDIR/src"
    git -C "$ROOT" archive "$REV" | tar -x -C "$BDIR/src" || exit 3
    build "$BDIR/src" build
fi
if [ ! -f "$BDIR/out-$KEY/report/report.json" ]; then
    echo "exports-identical: running suite '$SUITE'${FILTER:+ filter '$FILTER'} on $SHORT"
    run_suite "$BDIR/src" "$BDIR/src/build/dpcert" "$BDIR/out-$KEY"
fi

# ---- working tree ----
echo "exports-identical: building the working tree ($ROOT, build-exports/)"
build "$ROOT" build-exports
echo "exports-identical: running suite '$SUITE'${FILTER:+ filter '$FILTER'} on the working tree"
run_suite "$ROOT" "$ROOT/build-exports/dpcert" "$TMP/tree"

# ---- compare ----
B=$BDIR/out-$KEY; W=$TMP/tree
jq -r '.cases[] | "\(.case) \(.status)"' "$B/report/report.json" | sort >"$TMP/st-base"
jq -r '.cases[] | "\(.case) \(.status)"' "$W/report/report.json" | sort >"$TMP/st-tree"
# a run whose status differs is run once more on both sides (an MPI start-up can fail on a
# loaded machine: "orte_session_dir failed"); the retry's exports and status replace the first
retry=$(join "$TMP/st-base" "$TMP/st-tree" | awk '$2 != $3 {print $1}' | sed 's/@r[0-9]*$//' | sort -u)
if [ -n "$retry" ]; then
    re="^($(echo "$retry" | sed 's/[.]/[.]/g' | paste -sd'|'))\$"
    echo "exports-identical: statuses differ; running again: $(echo "$retry" | paste -sd' ')"
    FILTER_SAVE=$FILTER; FILTER=$re
    run_suite "$BDIR/src" "$BDIR/src/build/dpcert" "$TMP/retry-base"
    run_suite "$ROOT" "$ROOT/build-exports/dpcert" "$TMP/retry-tree"
    FILTER=$FILTER_SAVE
    for side in base tree; do
        [ $side = base ] && dst=$TMP/b-merged || dst=$TMP/w-merged
        [ $side = base ] && src=$BDIR/out-$KEY || src=$TMP/tree
        mkdir -p "$dst/runs"
        cp -r "$src/runs/." "$dst/runs/"
        for d in "$TMP/retry-$side/runs/"*; do rm -rf "$dst/runs/$(basename "$d")"; cp -r "$d" "$dst/runs/"; done
        jq -r '.cases[] | "\(.case) \(.status)"' "$TMP/retry-$side/report/report.json" | sort >"$TMP/st-retry"
        join -v1 "$TMP/st-$side" "$TMP/st-retry" | cat - "$TMP/st-retry" | sort >"$TMP/st-$side.new"
        mv "$TMP/st-$side.new" "$TMP/st-$side"
    done
    B=$TMP/b-merged; W=$TMP/w-merged
fi
cut -d' ' -f1 "$TMP/st-base" >"$TMP/runs-base"
cut -d' ' -f1 "$TMP/st-tree" >"$TMP/runs-tree"
comm -12 "$TMP/runs-base" "$TMP/runs-tree" >"$TMP/runs-both"
nfiles=0; ndiff=0; nstat=0
while read -r run; do
    sb=$(grep -F "$run " "$TMP/st-base" | head -1 | cut -d' ' -f2)
    sw=$(grep -F "$run " "$TMP/st-tree" | head -1 | cut -d' ' -f2)
    if [ "$sb" != "$sw" ]; then
        echo "STATUS  $run: base $sb, tree $sw"
        nstat=$((nstat + 1))
    fi
    for side in ref cand; do
        (cd "$B/runs/$run" 2>/dev/null && find "$side" -type f 2>/dev/null) | sort >"$TMP/fb"
        (cd "$W/runs/$run" 2>/dev/null && find "$side" -type f 2>/dev/null) | sort >"$TMP/fw"
        if ! cmp -s "$TMP/fb" "$TMP/fw"; then
            echo "FILES   $run/$side: the file lists differ"
            diff "$TMP/fb" "$TMP/fw" | sed 's/^/        /' | head -10
            ndiff=$((ndiff + 1))
        fi
        while read -r f; do
            [ -f "$W/runs/$run/$f" ] || continue
            nfiles=$((nfiles + 1))
            if ! cmp -s "$B/runs/$run/$f" "$W/runs/$run/$f"; then
                echo "DIFFER  $run/$f"
                ndiff=$((ndiff + 1))
            fi
        done <"$TMP/fb"
    done
done <"$TMP/runs-both"
only_base=$(comm -23 "$TMP/runs-base" "$TMP/runs-tree" | wc -l)
only_tree=$(comm -13 "$TMP/runs-base" "$TMP/runs-tree" | wc -l)
comm -23 "$TMP/runs-base" "$TMP/runs-tree" | sed 's/^/only in base (not compared): /'
comm -13 "$TMP/runs-base" "$TMP/runs-tree" | sed 's/^/only in the tree (not compared): /'
nruns=$(wc -l <"$TMP/runs-both")
echo "exports-identical: base $SHORT vs working tree, suite '$SUITE'${FILTER:+ filter '$FILTER'}: $nruns runs" \
     "compared, $nfiles export files compared byte for byte, $ndiff differ, $nstat statuses differ;" \
     "$only_base runs only in base, $only_tree only in the tree"
[ "$nfiles" -gt 0 ] || { echo "exports-identical: nothing was compared" >&2; exit 3; }
[ "$ndiff" -eq 0 ] && [ "$nstat" -eq 0 ]

#!/usr/bin/env bash
# common/tests/fault_io.sh — I/O-error injection (issue 29) in the one atomic writer (dp_afile) and
# the readers (dp_fopen_read), DPCERT_FAIL_IO=KIND:N (common/fsutil.h):
# - writers: for short-write (half a write, then ENOSPC), enospc, eio-fsync, eio-close and rename,
#   and the N-th file each run writes, the output directory is first filled with a "previous"
#   version of every file the run writes; the run must exit 3 naming the file and the operation
#   ("out/...: write failed: ..."), leave no temporary file, and every file must be its previous
#   version or the whole new one (byte-identical to the undisturbed run's): never half, never
#   empty. Runs: reference dpsgd (2 step exports), reference dpzo --log, keygen (2 keys, random:
#   checked as whole PEM files), certify of one vector (16 files; N = 1, the last, 3 drawn).
# - readers: read-eio (EIO after half the first read) on the N-th file read: compare (2 exports),
#   audit-accounting (claims), reference dpzo --replay (update log), inspect, certify (vectors and
#   outputs), verify-report (every file of a bundle): exit 3 and "read error" naming the file.
# Controls: N past the last file fails nothing (the undisturbed exit code). Deterministic except
# the drawn certify N (seed printed; DPCERT_TEST_SEED sets it).
. "${DPCERT_ROOT:?}/common/tests/fault_lib.bash"
seed=${DPCERT_TEST_SEED:-$(( $(date +%s) % 100000 ))}
echo "fault_io: seed $seed (DPCERT_TEST_SEED=$seed reproduces)"
RANDOM=$seed
fault_prepare || { echo "FAIL: preparing the inputs"; exit 1; }
CAND="sh -c 'cp \"\$1\" \"\$2\"' x"
DZ="--model mlp --in 4 --hidden 8 --classes 3 --dataset-size 8 --q 0.5 --steps 2 --clip 1 --sigma 1 --phi 1e-3 --lr 1e-3 --seed 1 --noise-key 2"
"$D" reference dpzo $DZ --log "$WORK/dz.log" >/dev/null 2>&1 || bad "preparing the update log"
"$D" keygen --private "$WORK/k.pem" --public "$WORK/k.pub" >/dev/null 2>&1 &&
  "$D" certify --candidate "$CAND" --suite ci --filter '^step-mlp-batch1$' --repeats 2 --report "$WORK/bundle" \
    --sign "$WORK/k.pem" >/dev/null 2>&1
[ -s "$WORK/bundle/report.json.sig" ] || bad "preparing the signed bundle"

# io_cmd NAME: CMD for a writer (W*) or reader (R*) run
io_cmd() {
  case $1 in
    Wref) CMD=("$D" reference dpsgd ${M/--steps 1/--steps 2} --export out) ;;
    Wdzlog) CMD=("$D" reference dpzo $DZ --log out/run.log) ;;
    Wkeygen) CMD=("$D" keygen --private out/k.pem --public out/k.pub --force) ;;
    Wcertify) CMD=("$D" certify --candidate "$CAND" --suite ci --filter '^step-mlp-batch1$' --repeats 2 --report out) ;;
    Rcompare) CMD=("$D" compare "$WORK/cmp-ref" "$WORK/cmp-cand") ;;
    Raudit) CMD=("$D" audit-accounting "$WORK/claims.csv") ;;
    Rreplay) CMD=("$D" reference dpzo --model mlp --in 4 --hidden 8 --classes 3 --replay "$WORK/dz.log") ;;
    Rinspect) CMD=("$D" inspect "$WORK/cmp-ref/step-000001.safetensors") ;;
    Rcertify) CMD=("$D" certify --candidate "$CAND" --suite ci --filter '^step-mlp-batch1$' --repeats 2 --report out) ;;
    Rverify) CMD=("$D" verify-report "$WORK/bundle" --pubkey "$WORK/k.pub") ;;
  esac
}
# io_run NAME DIR ENV...: in DIR (kept: the previous files are there), RC, DIR/err.txt
io_run() {
  local name=$1 dir=$2; shift 2
  io_cmd "$name"
  mkdir -p "$dir/out"
  (cd "$dir" && env "$@" timeout 300 "${CMD[@]}" >out.txt 2>err.txt); RC=$?
}
# whole PEM file (keys are random: not comparable to the undisturbed run's)
pem_whole() { head -1 "$1" | grep -q '^-----BEGIN ' && tail -1 "$1" | grep -q '^-----END '; }

# writer judge: "" or the reason
io_judge_write() {
  local name=$1 dir=$2 f
  if grep -Eq 'Sanitizer|runtime error:|Segmentation fault' "$dir/err.txt"; then echo "sanitizer report or crash"; return; fi
  [ "$RC" = 3 ] || { echo "exit $RC (want 3): $(head -c 300 "$dir/err.txt" | tr '\n' ' ')"; return; }
  grep -Eq '/[^ :]*: (write|fsync|close|rename) failed: ' "$dir/err.txt" ||
    { echo "exit 3 without naming the file and the failed operation: $(head -c 300 "$dir/err.txt" | tr '\n' ' ')"; return; }
  while IFS= read -r f; do
    case $f in *.tmp.*) echo "temporary file left: $f"; return ;; esac
    if cmp -s "$dir/out/$f" "$dir/prev/$f"; then continue; fi                # the previous version
    if [ "$name" = Wkeygen ] && pem_whole "$dir/out/$f"; then continue; fi   # a whole new key
    local want="$WORK/base-$name/out/$f"; [ -e "$want" ] || want="$WORK/base-$name/extra/$f"
    cmp -s "$dir/out/$f" "$want" || { echo "out/$f is neither its previous version nor the whole new file"; return; }
  done < <(cd "$dir/out" && find . -type f | sed 's|^\./||')
  echo ""
}

t0=$SECONDS
for w in Wref Wdzlog Wkeygen Wcertify; do
  rm -rf "$WORK/base-$w"; io_run "$w" "$WORK/base-$w" DPCERT_IO_COUNT=1; RC0=$RC
  [ "$w" = Wcertify ] && "$D" vectors --suite ci --out "$WORK/base-$w/extra/vectors" >/dev/null 2>&1
  W=$(sed -n 's/^dpcert: \([0-9]*\) files written.*/\1/p' "$WORK/base-$w/err.txt" | tail -1)
  check "$w: the undisturbed run writes files (W=${W:-?}, exit $RC0)" [ "${W:-0}" -gt 0 ]
  [ "${W:-0}" -gt 0 ] || continue
  ns=$(seq 1 "$W"); [ "$w" = Wcertify ] && ns="1 $W $((RANDOM % W + 1)) $((RANDOM % W + 1)) $((RANDOM % W + 1))"
  n_bad=0; n_runs=0
  for kind in short-write enospc eio-fsync eio-close rename; do
    for n in $ns; do
      d="$WORK/w"; rm -rf "$d"; mkdir -p "$d/prev"
      (cd "$WORK/base-$w/out" && find . -type f) | while IFS= read -r f; do   # the previous versions
        mkdir -p "$d/prev/$(dirname "$f")"; printf 'previous version of %s\n' "$f" > "$d/prev/$f"; done
      cp -a "$d/prev" "$d/out"
      io_run "$w" "$d" DPCERT_FAIL_IO="$kind:$n"
      why=$(io_judge_write "$w" "$d"); n_runs=$((n_runs + 1))
      [ -n "$why" ] && { bad "$w: DPCERT_FAIL_IO=$kind:$n: $why"; n_bad=$((n_bad + 1)); }
    done
  done
  [ "$n_bad" = 0 ] && ok "$w: $n_runs injected write faults, each exit 3 naming the file, previous or whole files only"
  d="$WORK/w"; rm -rf "$d"; io_run "$w" "$d" DPCERT_FAIL_IO="enospc:$((W + 1))"
  check "$w: control enospc:$((W + 1)) fails nothing (exit $RC, want $RC0)" [ "$RC" = "$RC0" ]
done
for r in Rcompare Raudit Rreplay Rinspect Rcertify Rverify; do
  rm -rf "$WORK/base-$r"; io_run "$r" "$WORK/base-$r" DPCERT_IO_COUNT=1; RC0=$RC
  R=$(sed -n 's/^dpcert: .* files written, \([0-9]*\) files read$/\1/p' "$WORK/base-$r/err.txt" | tail -1)
  check "$r: the undisturbed run reads files (R=${R:-?}, exit $RC0)" [ "${R:-0}" -gt 0 ]
  [ "${R:-0}" -gt 0 ] || continue
  ns=$(seq 1 "$R"); [ "$R" -gt 8 ] && ns="1 $R $((RANDOM % R + 1)) $((RANDOM % R + 1)) $((RANDOM % R + 1)) $((RANDOM % R + 1))"
  n_bad=0; n_runs=0
  for n in $ns; do
    d="$WORK/r"; rm -rf "$d"; io_run "$r" "$d" DPCERT_FAIL_IO="read-eio:$n"; n_runs=$((n_runs + 1))
    if [ "$RC" != 3 ] || ! grep -q 'read error: Input/output error' "$d/err.txt" || grep -Eq 'Sanitizer|runtime error:' "$d/err.txt"; then
      bad "$r: DPCERT_FAIL_IO=read-eio:$n: exit $RC: $(head -c 300 "$d/err.txt" | tr '\n' ' ')"; n_bad=$((n_bad + 1))
    fi
  done
  [ "$n_bad" = 0 ] && ok "$r: $n_runs injected read faults, each exit 3 with 'read error' naming the file"
  d="$WORK/r"; rm -rf "$d"; io_run "$r" "$d" DPCERT_FAIL_IO="read-eio:$((R + 1))"
  check "$r: control read-eio:$((R + 1)) fails nothing (exit $RC, want $RC0)" [ "$RC" = "$RC0" ]
done
echo "fault_io: $((SECONDS - t0)) s; $checks checks, $fails failed (seed $seed)"
[ "$checks" -gt 0 ] && [ "$fails" = 0 ]

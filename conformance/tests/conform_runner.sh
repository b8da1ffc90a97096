#!/usr/bin/env bash
# conformance/tests/conform_runner.sh — the runner's verdicts on a fake candidate
# (--dpcert points at a wrapper script): the real reference answers `reference`; `train`
# is faked per case: an exact copy of the reference export (PASS), exit 3 "not supported"
# (NOT_SUPPORTED, exit 0), a crash (FAIL), a bad option (FAIL), a missing step file
# (FAIL naming it), a perturbed noise tensor (FAIL naming step.noise). Also --filter,
# --ranks, --list and the table/summary lines.
set -u
D=${DPCERT:?}
for c in "conform --help" "reference dpsgd --help"; do
  out=$($D $c 2>&1); rc=$?
  if [ $rc -ne 0 ]; then echo "SKIP: 'dpcert $c' is not available in $D (exit $rc: $out)"; exit 77; fi
done
command -v python3 >/dev/null || { echo "SKIP: python3 needed to perturb an export"; exit 77; }
W=$(pwd)
cat > fake.sh <<FAKE
#!/usr/bin/env bash
# argv: reference ALG ... --export DIR | train ALG ... --export DIR
real=$D
if [ "\$1" = reference ]; then exec "\$real" "\$@"; fi
args=("\$@"); out=""; name=""
for ((i=0; i<\${#args[@]}; i++)); do
  [ "\${args[i]}" = --export ] && out=\${args[i+1]}
  [ "\${args[i]}" = --seed ] && name=\${args[i+1]}
done
ref=\$(dirname "\$out")/ref
case \$name in
  1|12|13) cp -r "\$ref" "\$out" ;;                                # exact copy
  2) echo "dpcert train: not supported: backend 'host' does not support operation 'fused_clip_accum'" >&2; exit 3 ;;
  3) kill -SEGV \$\$ ;;                                            # crash
  4) echo "dpcert train: unknown option '--frobnicate'" >&2; exit 2 ;;
  5) cp -r "\$ref" "\$out"; rm "\$out/step-000002.safetensors" ;;
  6) cp -r "\$ref" "\$out"; python3 "$W/perturb.py" "\$out/step-000001.safetensors" ;;
  7) echo "dpcert train: internal error: NOT_SUPPORTED path reached, no CUDA context, op not supported" >&2; exit 3 ;;
  8) echo "dpcert train dpsgd: not supported: backend 'cuda' does not support operation 'noise_add'" >&2; exit 3 ;;
  9) echo "dpcert train: not supported: backend 'host' does not support operation 'x'" >&2; exit 1 ;;
  10) [ -n "\${DPCERT_TEST_INJECT:-}" ] && { echo "dpcert train: DPCERT_TEST_INJECT leaked into a normal case" >&2; exit 2; }
      cp -r "\$ref" "\$out" ;;
  14) echo \$\$ > "$W/child.pid"; sleep 120 ;;                     # a candidate that hangs (signal test)
  11) [ "\${DPCERT_TEST_INJECT:-}" = 1 ] || { echo "dpcert train: --inject-bug needs DPCERT_TEST_INJECT=1" >&2; exit 2; }
      cp -r "\$ref" "\$out"; python3 "$W/perturb.py" "\$out/step-000001.safetensors" ;;
esac
FAKE
chmod +x fake.sh
cat > perturb.py <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
s, e = h["step.noise.layers.0.bias"]["data_offsets"]
off = 8 + n + s
v = struct.unpack("<d", b[off:off + 8])[0]
b[off:off + 8] = struct.pack("<d", v * (1 + 1e-9))   # a relative 1e-9 change: far outside the f64 bound
open(p, "wb").write(bytes(b))
PY
mkdir -p cases
# cases 1-11: the tiny mlp never clips (every norm is below C = 1), so they opt out of the
# clip-coverage check ("clip_mix": false); fake-12 is the same exact copy without the opt-out
# and must FAIL "does not exercise clipping"; fake-13 (a tiny llama, C = 1.8 between its
# per-example norms) is its positive control and must PASS with the check on
for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
  ex=', "clip_mix": false'; [ $i -eq 11 ] && ex=', "expect": {"status": "FAIL", "tensor": "step.noise"}'
  [ $i -eq 12 ] && ex=""
  cat > cases/c$i.json <<J
{"name": "fake-$i", "suites": ["fake"], "algorithm": "dpsgd", "ranks": [1], "dataset_size": 8, "q": 0.5, "steps": 2,
 "args": {"model": "mlp", "in": 3, "hidden": "2", "classes": 2, "seed": $i, "noise-key": 5}$ex}
J
done
cat > cases/c13.json <<J
{"name": "fake-13", "suites": ["fake"], "algorithm": "dpsgd", "ranks": [1], "dataset_size": 16, "q": 0.25, "steps": 2, "clip": 1.8,
 "args": {"model": "llama", "vocab": 11, "dim": 8, "layers": 1, "heads": 2, "ffn": 12, "seq": 5, "seed": 13, "noise-key": 12345}}
J
cat > cases/c14.json <<J
{"name": "fake-14", "suites": ["sleepy"], "algorithm": "dpsgd", "ranks": [1], "dataset_size": 8, "q": 0.5, "steps": 2, "clip_mix": false,
 "args": {"model": "mlp", "in": 3, "hidden": "2", "classes": 2, "seed": 14, "noise-key": 5}}
J
fail=0
expect() { # case status [detail-regex]
  local line; line=$(grep -E "fake-$1@r1 " run.out)
  if ! echo "$line" | grep -Eq " $2 "; then echo "FAIL: fake-$1 expected $2: $line"; fail=1; return; fi
  if [ -n "${3:-}" ] && ! echo "$line" | grep -Eq "$3"; then echo "FAIL: fake-$1 detail does not match '$3': $line"; fail=1; return; fi
  echo "ok: fake-$1 $2"
}
# DPCERT_TEST_INJECT=1 here: the runner must remove it for normal cases (fake-10) and set
# it for negative controls only (fake-11)
DPCERT_TEST_INJECT=1 $D conform --suite fake --cases cases --dpcert "$W/fake.sh" --report rep > run.out 2>&1; rc=$?
cat run.out
[ $rc -eq 1 ] || { echo "FAIL: conform exited $rc with failing cases, expected 1"; fail=1; }
expect 1 PASS
expect 2 NOT_SUPPORTED "not supported: backend 'host' does not support"
expect 3 FAIL "candidate exited 139"
expect 4 FAIL "candidate exited 2"
expect 5 FAIL "step-000002.safetensors missing"
expect 6 FAIL "step-000001/step.noise.layers.0.bias"
expect 7 FAIL "candidate exited 3: .*internal error"   # exit 3 without the 'not supported: ' line
expect 8 NOT_SUPPORTED "candidate exited 3"            # 'dpcert CMD SUB: not supported: '
expect 9 FAIL "candidate exited 1"                     # the message alone is not enough: exit 1
expect 10 PASS
expect 11 PASS "negative control failed as expected"
expect 12 FAIL "case does not exercise clipping: the reference never has clipped"
expect 13 PASS
grep -q "13 runs: 4 PASS, 0 MARGINAL, 7 FAIL, 2 NOT_SUPPORTED, 0 SKIPPED" run.out || { echo "FAIL: summary line"; fail=1; }
grep -q "\[13/13\]" run.out || { echo "FAIL: no progress counter"; fail=1; }
# only PASS and NOT_SUPPORTED: exit 0
$D conform --suite fake --cases cases --dpcert "$W/fake.sh" --filter 'fake-(1|2)$' > ok.out 2>&1; rc=$?
[ $rc -eq 0 ] || { echo "FAIL: PASS + NOT_SUPPORTED exited $rc, expected 0"; cat ok.out; fail=1; }
[ "$($D conform --suite fake --cases cases --list --filter 'fake-[12]$' | tr '\n' ' ')" = "fake-1@r1 fake-2@r1 " ] || { echo "FAIL: --list/--filter"; fail=1; }
# --ranks replaces the rank list of cases that allow any rank count (compare cases) ...
[ "$($D conform --suite fake --cases cases --list --ranks 2,4 --filter 'fake-1$' | tr '\n' ' ')" = "fake-1@r2 fake-1@r4 " ] || { echo "FAIL: --ranks 2,4 does not force the rank counts"; fail=1; }
# ... and only intersects for the others (a negative control keeps its own [1])
$D conform --suite fake --cases cases --ranks 2 --list --filter 'fake-11$' > /dev/null 2>&1; rc=$?
[ $rc -eq 2 ] || { echo "FAIL: --ranks 2 on a fixed-rank case selects nothing: exit $rc, expected 2"; fail=1; }
[ "$($D conform --suite fake --cases cases --list --ranks 1,2 --filter 'fake-1[01]$' | tr '\n' ' ')" = "fake-10@r1 fake-10@r2 fake-11@r1 " ] || { echo "FAIL: --ranks 1,2 mixed selection"; fail=1; }
grep -q '"NOT_SUPPORTED": 2' rep/report.json || { echo "FAIL: report.json summary"; fail=1; }
grep -q '<skipped message="NOT_SUPPORTED' rep/junit.xml || { echo "FAIL: junit skipped element"; fail=1; }
# issue 15 class 11: a run in which nothing was compared is not a pass (77), --require-all gates
$D conform --suite fake --cases cases --dpcert "$W/fake.sh" --filter 'fake-(2|8)$' > ns.out 2>&1; rc=$?
[ $rc -eq 77 ] && grep -q 'no run was compared' ns.out || { echo "FAIL: only NOT_SUPPORTED exited $rc, expected 77"; cat ns.out; fail=1; }
$D conform --suite fake --cases cases --dpcert "$W/fake.sh" --filter 'fake-(1|2)$' --require-all > ra.out 2>&1; rc=$?
[ $rc -eq 1 ] && grep -q 'NOT_SUPPORTED and --require-all' ra.out || { echo "FAIL: --require-all with NOT_SUPPORTED exited $rc, expected 1"; fail=1; }
# class 6: conform under mpirun is refused; SIGTERM/SIGINT stop the children's groups, remove
# the temporary directory and exit 128 + signal
OMPI_COMM_WORLD_SIZE=2 $D conform --suite fake --cases cases --dpcert "$W/fake.sh" > mpi.out 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q 'do not run conform under mpirun' mpi.out || { echo "FAIL: conform under mpirun exited $rc"; fail=1; }
for sig in TERM INT; do
  rm -f child.pid; rm -rf tmp; mkdir tmp
  TMPDIR=$W/tmp setsid $D conform --suite sleepy --cases cases --dpcert "$W/fake.sh" > sig.out 2>&1 &
  cpid=$!
  for _ in $(seq 1 600); do [ -s child.pid ] && break; sleep 0.1; done
  t0=$(date +%s); kill -$sig $cpid; wait $cpid; rc=$?; t1=$(date +%s)
  want=$([ $sig = TERM ] && echo 143 || echo 130)
  child=$(cat child.pid 2>/dev/null)
  [ -n "$child" ] && [ $rc -eq $want ] && [ $((t1 - t0)) -le 10 ] || { echo "FAIL: SIG$sig: conform exited $rc (want $want) after $((t1 - t0)) s"; cat sig.out; fail=1; }
  sleep 0.2
  if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then echo "FAIL: SIG$sig: the candidate $child is still running"; kill -KILL "$child"; fail=1; fi
  [ -z "$(ls -A tmp)" ] || { echo "FAIL: SIG$sig: temporary directory left behind: $(ls -A tmp)"; fail=1; }
  grep -q 'interrupted by signal' sig.out || { echo "FAIL: SIG$sig: no message"; fail=1; }
  echo "ok: SIG$sig -> exit $rc, children stopped, temporary directory removed"
done
[ $fail -eq 0 ] && echo "PASS: runner verdicts"
exit $fail

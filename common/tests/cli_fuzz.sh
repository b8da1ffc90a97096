#!/usr/bin/env bash
# common/tests/cli_fuzz.sh — the command-line fuzzer of issue 29, bounded for `make test` (and
# its sanitizer pass, where the same runs go through the ASan+UBSan build: a sanitizer report
# or a leak is a finding). Runs common/tests/cli_fuzz.py: first every command's `--help` (exit
# 0; to /dev/full exit 3 with a message) and the options its help calls required, then the
# corpus of past findings (common/tests/data/cli_fuzz_corpus.txt, each with its expected exit
# code), then generated combinations of every subcommand's options for CLI_FUZZ_SECONDS
# (default 60) with the seed printed (DPCERT_TEST_SEED sets it), or CLI_FUZZ_MAX_RUNS runs if
# fewer (`make coverage` sets a fixed seed and run count: the same runs every time). Each run must exit 0, 1, 2, 3
# or 77 within its limit (CLI_FUZZ_TIMEOUT, default 30 s, a hang confirmed with 3 times that),
# print a "dpcert ..." message on 2 and 3, show no sanitizer report, and write nothing outside
# its directory. A finding fails the test; its line for the corpus is printed (add it, with the
# exit code the fixed command gives, once fixed).
# Negative controls: a wrapper that crashes on one option, and one that exits 2 silently, must
# each be reported (the fuzzer can fail).
set -u
ROOT=${DPCERT_ROOT:?run through ci/run-tests.sh}
D=${DPCERT:?run through ci/run-tests.sh}
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found"; exit 77; }
seed=${DPCERT_TEST_SEED:-$(( $(date +%s) % 100000 ))}
secs=${CLI_FUZZ_SECONDS:-60}
echo "cli_fuzz: seed $seed (DPCERT_TEST_SEED=$seed reproduces), $secs s of generated runs"
fail=0

# negative controls: a wrapper around the real binary that crashes when --sigma is given, and
# one whose exit 2 has no message; replaying a two-line corpus, each must make the fuzzer report
# (exit 1), and the real binary must not (exit 0)
mkdir -p ctl
cat > ctl/crash <<EOF
#!/bin/sh
for a in "\$@"; do [ "\$a" = --sigma ] && kill -SEGV \$\$; done
exec "$D" "\$@"
EOF
cat > ctl/silent <<EOF
#!/bin/sh
"$D" "\$@" 2>/dev/null
EOF
chmod +x ctl/crash ctl/silent
printf '0\t["account", "--sigma", "1", "--q", "0.01", "--steps", "10", "--delta", "1e-5"]\n' > ctl/corpus.txt
printf '2\t["account", "--sigma", "nan", "--q", "0.01", "--steps", "10", "--delta", "1e-5"]\n' >> ctl/corpus.txt
for c in crash silent real; do
  bin="$PWD/ctl/$c"; want=1; [ $c = real ] && { bin=$D; want=0; }
  mkdir -p "ctl-$c"
  python3 "$ROOT/common/tests/cli_fuzz.py" --dpcert "$bin" --root "$ROOT" --seed 1 --replay-only \
    --work "ctl-$c" --corpus ctl/corpus.txt >"ctl-$c.log" 2>&1
  rc=$?
  if [ $rc = $want ] && { [ $want = 0 ] || grep -q "FINDING" "ctl-$c.log"; }; then echo "ok: control ($c): fuzzer exit $rc"
  else echo "FAIL: control ($c): fuzzer exit $rc (want $want): $(tail -4 "ctl-$c.log")"; fail=1; fi
done

mkdir -p work
python3 "$ROOT/common/tests/cli_fuzz.py" --dpcert "$D" --root "$ROOT" --seconds "$secs" --seed "$seed" \
  --max-runs "${CLI_FUZZ_MAX_RUNS:-0}" --timeout "${CLI_FUZZ_TIMEOUT:-30}" --corpus "$ROOT/common/tests/data/cli_fuzz_corpus.txt" --work work
rc=$?
if [ $rc = 0 ]; then echo "ok: no finding (seed $seed)"
else
  echo "FAIL: the fuzzer exited $rc (seed $seed); corpus lines for its findings:"
  cat work/findings.txt 2>/dev/null
  fail=1
fi
exit $fail

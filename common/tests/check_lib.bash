# common/tests/check_lib.bash — the prelude of the check-counting test scripts (sourced by
# common/tests/cli.sh and conformance/tests/hostile_inputs.sh; run through ci/run-tests.sh,
# which sets $DPCERT and $DPCERT_ROOT and runs each script in a fresh temporary folder):
# D, ROOT, the counters, and ok / bad / check (check WHAT CMD...: ok when CMD succeeds).
set -u
D=${DPCERT:?run through ci/run-tests.sh}
ROOT=${DPCERT_ROOT:?run through ci/run-tests.sh}
fails=0; checks=0
ok()  { checks=$((checks+1)); echo "ok   $*"; }
bad() { checks=$((checks+1)); fails=$((fails+1)); echo "FAIL $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
# expect_exit CODE PATTERN ARGS...: `dpcert ARGS` exits CODE with stderr matching PATTERN (grep -E;
# "" matches anything); stdout in out.txt, stderr in err.txt; one check
expect_exit() {
  local want=$1 pat=$2; shift 2
  "$D" "$@" >out.txt 2>err.txt; local rc=$?
  if [ "$rc" = "$want" ] && { [ -z "$pat" ] || grep -Eq -- "$pat" err.txt; }; then ok "exit $want: dpcert $*"
  else bad "dpcert $* -> exit $rc (want $want), stderr: $(head -c 300 err.txt)"; fi
}

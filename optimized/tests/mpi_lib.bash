# optimized/tests/mpi_lib.bash — the prelude the mpirun test scripts share (sourced; not a
# test itself: the runner takes tests/*.sh only). Skips (77) without mpirun; sets the Open
# MPI environment for root and oversubscription; TRAIN = the `dpcert train` command (the
# binary, or the test driver standing in for it); LeakSanitizer off in the ranks (Open MPI
# components leak at exit by design); pass/bad record the result in $fail.
DRV="${DPCERT_BUILD:?}/tests/optimized_test_train_cli"
command -v mpirun >/dev/null 2>&1 || { echo "SKIP: mpirun not found"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
if [ -n "${DPCERT:-}" ] && "$DPCERT" train --help >/dev/null 2>&1; then TRAIN=("$DPCERT" train)
else TRAIN=("$DRV" --as-dpcert train); fi
export ASAN_OPTIONS="${ASAN_OPTIONS:-}${ASAN_OPTIONS:+:}detect_leaks=0"
fail=0
pass() { echo "PASS  $*"; }
bad() { echo "FAIL  $*"; fail=1; }

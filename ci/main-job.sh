#!/usr/bin/env bash
# ci/main-job.sh BUILD — the main job run by `make run`.
# Runs the `default` conformance suite on the host backend with 1 and 2 MPI ranks
# when the conformance runner is built; until then, a tour of what is built.
set -u
BUILD=${1:?usage: ci/main-job.sh BUILD}
D=$BUILD/dpcert
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
# More ranks than cores (4 ranks on a 2-core CI machine): ranks waiting in MPI yield the
# core instead of spinning, or an oversubscribed run can take minutes instead of seconds.
export OMPI_MCA_mpi_yield_when_idle=1
rc=0
step() { echo; echo "==> dpcert $*"; "$D" "$@" || rc=$?; }
step version
step rng philox --key 0,0 --counter 0,0,0,0
step rng sample --dist gaussian --key 42 --stream 0 --purpose test --count 4
if "$D" conform --help >/dev/null 2>&1; then
  mkdir -p "$BUILD/report"
  step conform --suite default --backend host --ranks 1,2 --report "$BUILD/report"
fi
if "$D" account --help >/dev/null 2>&1; then
  step account --mechanism gaussian --q 0.004 --sigma 2.0 --steps 75000 --delta 1e-5 --accountant all
fi
echo
[ "$rc" = 0 ] && echo "main job: OK" || echo "main job: FAILED (exit $rc)"
exit "$rc"

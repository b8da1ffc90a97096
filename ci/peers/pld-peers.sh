#!/usr/bin/env bash
# ci/peers/pld-peers.sh BUILD — the PLD accountant per call against dp_accounting and
# prv_accountant on the fixed grid of issue 30 goal 6 (not part of make test; docs/accounting.md
# §10 "PLD grid against the peers"). Installs dp_accounting 0.6.0 and prv_accountant 0.2.0 from
# PyPI into BUILD/acct-peers-venv on first use, builds accountant/bench/bench_pld_grid.c and runs
# ci/peers/pld_peers.py (CPU time per call, medians, the fastest peer over dpcert; the checks of the
# peers' estimates against dpcert's interval). Writes BUILD/pld-peers.md and BUILD/pld-peers.json.
# Knobs (environment): REPS (dpcert's calls per query, 5), PEER_REPS (1).
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=$BUILD/acct-peers-venv
if ! "$VENV/bin/python" -c 'import dp_accounting, prv_accountant' 2>/dev/null; then
  echo "pld-peers: installing dp_accounting and prv_accountant from PyPI into $VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q dp_accounting==0.6.0 prv_accountant==0.2.0
fi
make -C "$ROOT" -s BUILD="$BUILD" "$BUILD/bench/accountant_bench_pld_grid"
"$VENV/bin/python" "$ROOT/ci/peers/pld_peers.py" --bench "$BUILD/bench/accountant_bench_pld_grid" \
  --reps "${REPS:-5}" --peer-reps "${PEER_REPS:-1}" --out "$BUILD/pld-peers.md" --json-out "$BUILD/pld-peers.json"

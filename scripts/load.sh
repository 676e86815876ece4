#!/usr/bin/env bash
# Load (issue 5): GET /v1/leader at full rate on every node of the bundled cluster for 60 s
# while watching for leader changes; exits 1 on any. Brings the cluster up if it is not, and
# takes it down again afterwards only in that case.
#   scripts/load.sh [--seconds 60] [--connections 64]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ctl=("$root/target/release/electd" ctl --cluster-dir "$root/cluster")
(cd "$root" && cargo build --release --quiet --bin electd)
if ! "${ctl[@]}" leader >/dev/null 2>&1; then
  "$root/scripts/cluster.sh" up
  trap '"${ctl[@]}" down' EXIT
fi
"${ctl[@]}" bench load "$@"

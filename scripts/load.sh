#!/usr/bin/env bash
# Load (docs/benchmarks.md): GET /v1/leader at full rate on every node of the bundled cluster for 60 s
# while watching for leader changes; exits 1 on any. Brings the cluster up if it is not (with
# the profile's timings), and takes it down again afterwards only in that case.
#   scripts/load.sh [--profile default|fast] [--seconds 60] [--connections 64]
# --profile fast: heartbeat 10 ms, follower lease 50 ms. --connections 0: an idle soak (no
# requests; any leader change in the window fails it).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/lib/build.sh"
ctl=("$(release_dir)/electd-lab" ctl --cluster-dir "$root/cluster")
timing=()
if [ "${1:-}" = "--profile" ]; then
  case "${2:-}" in
    default) ;;
    fast) timing=(--heartbeat-ms 10 --follower-lease-ms 50) ;;
    *) echo "load.sh: --profile default|fast" >&2; exit 2 ;;
  esac
  shift 2
fi
. "$root/scripts/lib/build.sh"
build_release
if ! "${ctl[@]}" leader >/dev/null 2>&1; then
  "${ctl[@]}" up "${timing[@]}"
  trap '"${ctl[@]}" down' EXIT
elif [ "${#timing[@]}" -gt 0 ]; then
  echo "load.sh: the bundled cluster is already running; stop it (scripts/cluster.sh down) to use --profile" >&2
  exit 2
fi
"${ctl[@]}" bench load "$@"

#!/usr/bin/env bash
# Crash soak (docs/security.md, "Hardening"): SIGKILL the bundled cluster's nodes at random moments, 1000 times by
# default, restarting each on its own data; then check one agreed leader and (quorum mode) that no
# term was led twice. The suite runs the same loop for 50 cycles (lab/tests/crash.rs).
#   scripts/crash-soak.sh [--cycles 1000] [--mode quorum|bully|ring|invitation] [--seed N]
# Brings the bundled cluster up (scripts/cluster.sh up) and takes it down again at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cycles=1000 mode=quorum seed=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cycles) cycles="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    --seed) seed=(--seed "$2"); shift 2 ;;
    *) echo "usage: $0 [--cycles N] [--mode quorum|bully|ring|invitation] [--seed N]" >&2; exit 2 ;;
  esac
done
"$root/scripts/cluster.sh" up --mode "$mode"
. "$root/scripts/lib/build.sh"
ctl=("$(release_dir)/electd-lab" ctl --cluster-dir "$root/cluster")
trap '"${ctl[@]}" down' EXIT
"${ctl[@]}" crash-loop --cycles "$cycles" "${seed[@]}"

#!/usr/bin/env bash
# Timing profiles on CPU-limited hosts (lab/src/throttle.rs): the bundled 5-node cluster at each
# timing profile (lan, shared; docs/configuration.md, "Timing profiles"), every node in a cgroup
# of its own limited to 50% then 20% of one core beside a busy neighbour (the application of a
# CPU-limited pod, spending the same quota): leader changes over an idle stretch (and an hour's
# worth), then failover after SIGKILL of the leader, p50/p99. The figures go to
# docs/benchmarks.md, "Timing profiles".
#   scripts/bench-timing.sh [--idle-seconds 120] [--trials 20]
# Root (cgroups: v2 cpu.max, or v1 cpu.cfs_quota_us). The bundled cluster must be down
# (scripts/cluster.sh down); it is started at each profile and stopped again (its data kept).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
idle=120
trials=20
while [ $# -gt 0 ]; do
  case "$1" in
    --idle-seconds) idle="$2"; shift 2 ;;
    --trials) trials="$2"; shift 2 ;;
    *) echo "bench-timing: unknown argument $1 (--idle-seconds N, --trials N)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" != 0 ]; then
  echo "bench-timing: needs root (it makes cgroups)" >&2
  exit 2
fi
. "$root/scripts/lib/build.sh"
build_release
ctl=("$lab" ctl --cluster-dir "$root/cluster")
for f in "$root"/cluster/run/node*.pid; do
  if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
    echo "bench-timing: the bundled cluster runs; scripts/cluster.sh down first" >&2
    exit 2
  fi
done
trap '"${ctl[@]}" down >/dev/null 2>&1 || true' EXIT
echo "bench-timing: electd $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores, $(uname -r), idle ${idle} s, ${trials} trials"
for profile in lan shared; do
  for cpu in 50 20; do
    echo "== profile $profile, ${cpu}% of a core"
    "${ctl[@]}" up --timing-profile "$profile" --wait 60 >/dev/null
    "${ctl[@]}" bench throttled --cpu-percent "$cpu" --idle-seconds "$idle" --trials "$trials" \
      | grep -v '^trial '
    "${ctl[@]}" down >/dev/null
  done
done

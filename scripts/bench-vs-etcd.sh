#!/usr/bin/env bash
# Failover after SIGKILL of the leader: electd's bundled 5-node cluster against a 5-member
# etcd at the same timings, measured by one poller (every survivor asked every 10 ms until all
# name one new leader). Prints p50/p90/p99 of each, the ratios, and electd's time with two
# claimants (from its event logs; the run fails if it is not 0). Then the same nodes in mutex
# mode, with a PostgreSQL of their own on 127.0.0.1:7009, by the same poller: failover, the
# ratio mutex/quorum, and the statements per second the store serves (skipped, saying why,
# without PostgreSQL). Then failover where the application runs (lab/src/app_failover.rs): host
# crashes (node, `electd run` and its child at once) until another host's child runs, against
# `etcdctl lock --ttl 1` on the same etcd timings, with the same trials, profile and seed. Last,
# the cost side (lab/src/cost.rs): both idle side by side (CPU, peer packets and bytes),
# `GET /v1/leader` against a bare axum handler, failover at 5, 15 and 31 nodes.
#   scripts/bench-vs-etcd.sh [--trials 30] [--profile default|fast] [--idle-seconds 0] [--seed S]
# --idle-seconds N: after the failovers, leave both clusters idle N s side by side and count
# their elections.
# default: heartbeat 30 ms, follower lease = etcd election timeout 150 ms; fast: 10 / 50 ms.
# Installs Debian's etcd-server and etcd-client when etcd or etcdctl is missing (as root). The bundled cluster must be
# down (scripts/cluster.sh down); it is started with the profile's timings and stopped again.
# etcd's data (about 600 MB) goes to a temp dir that is removed at the end.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
etcd="$(command -v etcd || true)"
etcdctl="$(command -v etcdctl || true)"
if [ -z "$etcd" ] || [ -z "$etcdctl" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench-vs-etcd: installing etcd-server and etcd-client"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server etcd-client >/dev/null
    etcd="$(command -v etcd)"
    etcdctl="$(command -v etcdctl)"
  else
    echo "bench-vs-etcd: etcd or etcdctl is not installed and this is not root: cannot compare" >&2
    exit 2
  fi
fi
echo "bench-vs-etcd: $("$etcd" --version | head -1), electd $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
. "$root/scripts/lib/build.sh"
. "$root/scripts/lib/postgres.sh"
need_postgres bench-vs-etcd.sh
build_release
work="$(mktemp -d "${TMPDIR:-/tmp}/electd-vs-etcd.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# The application benchmark takes the same trials, profile and seed (not --idle-seconds).
args=("$@")
app_args=()
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --trials|--profile|--seed) app_args+=("${args[i]}" "${args[i + 1]:-}"); i=$((i + 1)) ;;
  esac
done
"$lab" ctl --cluster-dir "$root/cluster" bench vs-etcd --etcd "$etcd" --work "$work/nodes" "$@"
"$lab" ctl --cluster-dir "$root/cluster" bench app-failover --etcd "$etcd" --etcdctl "$etcdctl" \
  --work "$work/app" "${app_args[@]}"
"$lab" ctl --cluster-dir "$root/cluster" bench cost --etcd "$etcd" --work "$work/cost" "${app_args[@]}"

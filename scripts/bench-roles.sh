#!/usr/bin/env bash
# Named roles measured (lab/src/roles_bench.rs; figures in docs/benchmarks.md, "Named roles"):
# a holder's crash with 1 and with 1,000 roles (four candidates each; the candidate that claims
# the most is SIGKILLed until the others claim every role again), side by side with etcd's
# election recipe at the same timings (lab/src/etcd_election.rs), measured by one poller, with
# p50/p99 and the ratios; then 5-node clusters with 0, 1, 1,000 and 10,000 roles idle side by
# side: CPU, peer packets and bytes, memory, and each one's ratio to one role.
#   scripts/bench-roles.sh [--trials 20] [--profile default|fast] [--idle-seconds 30] [--seed S]
#                          [--crash-roles 1,1000] [--idle-roles 0,1,1000,10000]
# Installs Debian's etcd-server when etcd is missing (as root). Clusters of their own are
# started on their own loopback addresses and stopped at the end; the bundled cluster must be
# down. Peer traffic is counted by iptables rules in a chain of the run's own (root only).
# About 15 minutes on 2 cores (setting up 10,000 roles takes about 3 of them).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
etcd="$(command -v etcd || true)"
if [ -z "$etcd" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bench-roles: installing etcd-server"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null
    etcd="$(command -v etcd)"
  else
    echo "bench-roles: etcd is not installed and this is not root: cannot compare" >&2
    exit 2
  fi
fi
echo "bench-roles: $("$etcd" --version | head -1), electd $(cd "$root" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $(nproc) cores"
. "$root/scripts/lib/build.sh"
build_release
work="$(mktemp -d "${TMPDIR:-/tmp}/electd-roles.XXXXXX")"
trap 'rm -rf "$work"' EXIT
"$lab" ctl --cluster-dir "$root/cluster" bench roles --etcd "$etcd" --work "$work" "$@"

#!/usr/bin/env bash
# The bundled 5-node local cluster: up [--mode quorum|mutex|bully|ring|invitation], down [--wipe]
# (--wipe: delete every node's data, to start over), status,
# leader, kill N, stop N, start N, pause N, resume N, partition 1,2 3,4,5, heal.
# Works from any directory; runtime files (data, logs, pid files, tokens) go to cluster/run/.
# `up --mode mutex` also starts a PostgreSQL server of the cluster's own on 127.0.0.1:7009
# (installed here as root when missing), stopped by `down`.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/lib/build.sh"
release="$(release_dir)"
lab="$release/electd-lab"
if [ "${1:-}" = "up" ] || [ ! -x "$lab" ] || [ ! -x "$release/electd" ]; then
  build_release
fi
case " $* " in
  *" --mode mutex "*) . "$root/scripts/lib/postgres.sh"; need_postgres cluster.sh ;;
esac
# The lab runs the nodes: from $ELECTD_BIN when set, else the electd beside it.
exec "$lab" ctl --cluster-dir "$root/cluster" "$@"

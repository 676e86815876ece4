#!/usr/bin/env bash
# The bundled 5-node local cluster: up [--mode quorum|bully|ring], down, status, leader,
# kill N, stop N, start N, pause N, resume N, partition 1,2 3,4,5, heal.
# Works from any directory; runtime files (data, logs, pid files, tokens) go to cluster/run/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${ELECTD_BIN:-$root/target/release/electd}"
if [ "${1:-}" = "up" ] || [ ! -x "$bin" ]; then
  # Builds only what changed; a no-op when the binary is up to date.
  (cd "$root" && cargo build --release --quiet --bin electd)
fi
exec "$bin" ctl --cluster-dir "$root/cluster" "$@"

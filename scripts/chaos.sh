#!/usr/bin/env bash
# The partition chaos suite: every mode under the same faults (docs/design/chaos.md).
#   scripts/chaos.sh --quick                 each scenario once per mode and layer
#   scripts/chaos.sh                         the default run: 3 seeds each
#   scripts/chaos.sh --scenario S5 --mode bully --layer kernel --seed 7   replay one run
#   --out DIR                                output folder (default target/chaos)
#   --lab-flaw NAME                          on the lab's flawed node (its broken variants)
# Kernel-layer runs need root and iptables (installed here as root when missing); without them
# they are reported as skipped, and a skip makes the run exit 1 (a skip is no pass).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/lib/iptables.sh"
need_iptables chaos.sh
. "$root/scripts/lib/postgres.sh"
need_postgres chaos.sh
. "$root/scripts/lib/faketime.sh"
need_faketime chaos.sh
. "$root/scripts/lib/build.sh"
build_release
# --lab-flaw NAME runs the nodes from the flawed binary beside the lab (lab/src/chaos/runner.rs,
# `Matrix::flaws`), which only the feature `flaws` builds.
for arg in "$@"; do
  if [ "$arg" = "--lab-flaw" ]; then
    (cd "$root" && cargo build --release --quiet -p electd --features flaws --bin electd-flawed)
    break
  fi
done
cd "$root"
exec "$lab" chaos "$@"

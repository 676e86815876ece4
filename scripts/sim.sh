#!/usr/bin/env bash
# The quorum simulator (docs/testing.md, "Simulation"): the real quorum node, N of them in one process
# on simulated time, through seeded schedules of partitions, one-way cuts, loss, delay,
# crashes and restarts, resignations and heals; every schedule judged as it runs.
#   scripts/sim.sh [--seeds N] [--first S] [--nodes K] [--steps N]   N schedules (default 200)
#   scripts/sim.sh --seed S [--nodes K] [--steps N]                  replay one, print its timeline
#   scripts/sim.sh --unsafe …                                        a broken node: must fail
#   scripts/sim.sh --membership …                                    members added, removed,
#                                                                    replaced, disks wiped
#   scripts/sim.sh --nonvoters N …                                   N members that don't vote join;
#                                                                    none may claim (--count-learner-ack: must fail)
# Prints one line per failing schedule with its replay command, and ends with
# "sim: N schedules, V violations"; exits 1 when V > 0.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/lib/build.sh"
build_release
exec "$lab" sim "$@"

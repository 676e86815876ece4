#!/usr/bin/env bash
# The model checker on the quorum core (docs/testing.md, "Model checking"): the node's own
# QuorumCore, 3 of them by default, with openraft's vote and log as a small Raft, every
# interleaving of messages delivered, delayed, reordered and duplicated, crashes, restarts,
# wiped disks and clock steps. The core as built is checked breadth first to a depth, then
# along seeded random walks, then for liveness (every state of the walks healed: a node must
# claim within three follower leases); each broken variant walks until its first
# counterexample, which is then made short. Prints states explored, depth and time for each,
# and each property's verdict with its path length.
#   scripts/model.sh                               depth 10, 60 s of walks, 30 s of heals,
#                                                  then each broken variant until its
#                                                  counterexample (600 s at most)
#   scripts/model.sh --depth 11 --walk-s 600       the deep run
#   scripts/model.sh --nodes 5 …                   five nodes
#   scripts/model.sh --variant long-lease --paths  one variant, with its counterexample
#   scripts/model.sh --seed S                      replay the walks of seed S
#   scripts/model.sh --roles [--roles-states N]    named roles' rules (lab/src/model/roles.rs):
#                                                  walks of the sound rules, then of each
#                                                  broken rule until caught (20M states each)
# Ends with "model: as expected" (exit 0) or "model: NOT as expected" (exit 1).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
. "$root/scripts/lib/build.sh"
build_release
exec "$lab" model "$@"

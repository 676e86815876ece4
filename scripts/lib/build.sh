# Sourced by the scripts: builds the node (`electd`) and the lab (`electd-lab`, which runs
# nodes from the `electd` beside it, or from $ELECTD_BIN) in release mode. Cargo builds only
# what changed: a no-op when both are up to date.
#   build_release   # sets $lab to the lab binary
#   release_dir     # prints where cargo puts release binaries (CARGO_TARGET_DIR and
#                   # cargo's config files honoured: cargo metadata says)

release_dir() {
  local dir
  dir="$(cd "$root" && cargo metadata --format-version 1 --no-deps 2>/dev/null \
    | grep -o '"target_directory":"[^"]*"' | head -1 | cut -d'"' -f4)"
  echo "${dir:-$root/target}/release"
}

build_release() {
  # Two builds: the lab enables electd's feature `flaws` (its broken variants), and one build
  # of both would compile the node with it; the node the scripts run is built alone, as users
  # build it.
  (cd "$root" && cargo build --release --quiet -p electd --bin electd \
    && cargo build --release --quiet -p electd-lab)
  lab="$(release_dir)/electd-lab"
}

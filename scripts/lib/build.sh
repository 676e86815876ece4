# Sourced by the scripts: builds the node (`electd`) and the lab (`electd-lab`, which runs
# nodes from the `electd` beside it, or from $ELECTD_BIN) in release mode. Cargo builds only
# what changed: a no-op when both are up to date.
#   build_release   # sets $lab to the lab binary
build_release() {
  (cd "$root" && cargo build --release --quiet -p electd -p electd-lab)
  lab="$root/target/release/electd-lab"
}

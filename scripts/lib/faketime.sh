# Sourced by scripts/test.sh and scripts/chaos.sh: makes sure libfaketime is there, installing
# Debian's package as root. The lab runs nodes under it to give each a wall clock of its own
# (lab/src/cluster/wallclock.rs: skewed and jumping clocks, the monotonic clock untouched).
# Without it the wall-clock tests and scenario print why and count as skipped.
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"
need_faketime() {
  local lib
  for lib in /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1; do
    [ -e "$lib" ] && return 0
  done
  apt_install "$1" libfaketime "a wall clock of its own for each test node" \
    "the wall-clock tests and chaos scenario S19"
}

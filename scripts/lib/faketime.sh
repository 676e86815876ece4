# Sourced by scripts/test.sh and scripts/chaos.sh: makes sure libfaketime is there, installing
# Debian's package as root. The lab runs nodes under it to give each a wall clock of its own
# (lab/src/cluster/wallclock.rs: skewed and jumping clocks, the monotonic clock untouched).
# Without it the wall-clock tests and scenario print why and count as skipped.
need_faketime() {
  if ls /usr/lib/*/faketime/libfaketime.so.1 /usr/lib/faketime/libfaketime.so.1 >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "$1: installing libfaketime (a wall clock of its own for each test node)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libfaketime >/dev/null) \
      || echo "$1: could not install libfaketime; the wall-clock tests will be skipped"
  else
    echo "$1: no libfaketime and not root; the wall-clock tests will be skipped"
  fi
}

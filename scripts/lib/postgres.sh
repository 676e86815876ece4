# Sourced by scripts/test.sh, scripts/chaos.sh and scripts/cluster.sh: makes sure PostgreSQL's
# programs (initdb, postgres; mutex mode's store) are there, installing Debian's package as
# root without creating or starting the system's own database cluster (the lab starts servers
# of its own, on its own addresses). Without it (or without root) the mutex tests and runs
# print why and count as skipped.
need_postgres() {
  if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "$1: installing PostgreSQL (mutex mode's store; no system cluster is created)"
    mkdir -p /etc/postgresql-common
    [ -f /etc/postgresql-common/createcluster.conf ] \
      || echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.conf
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) \
      || echo "$1: could not install PostgreSQL; mutex mode's tests will be skipped"
  else
    echo "$1: no PostgreSQL and not root; mutex mode's tests will be skipped"
  fi
}
